//! Stage 7: diagnostics. When a call changed files that a language server serves, each change
//! goes to its server ([`crate::lsp`]) and the diagnostics it reports (waited for up to
//! `[lsp] wait_ms`) are appended to the output, errors new to the change first; then, within
//! the same wait, the errors the change newly caused in other files (`lsp/impact.rs`).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::{Value, json};

use crate::context::ToolContext;
use crate::lsp::{
    Changed, Client, LanguageServers, MAX_FILES_PER_CALL, Plan, Readable, Unavailable, Waited,
    diagnostics, impact, read_text,
};
use crate::util::MutexExt as _;
use crate::vocab::{Content, OutputLimits, ToolOutput};

use super::truncate::{Reserve, Shown};

/// What the session was already told about its servers ("not installed" is said once).
#[derive(Default)]
struct Notices(Mutex<HashSet<String>>);

impl Notices {
    /// True the first time `key` is seen in the session.
    fn first(ctx: &ToolContext, key: String) -> bool {
        ctx.session().state::<Notices>().0.locked().insert(key)
    }
}

/// Room the truncation stage keeps free for the diagnostics of a call that changed files: a
/// quarter of the limits, at most 60 lines and 6 KiB (some 40 diagnostics).
pub(super) fn reserve(limits: OutputLimits) -> Reserve {
    Reserve {
        lines: (limits.max_lines / 4).min(60),
        bytes: (limits.max_bytes / 4).min(6 * 1024),
    }
}

/// The pipeline's step after a call that changed files: each changed file whose language has
/// a server is sent to it, and its diagnostics (waited for up to the configured time) are
/// appended to the output, within what `limits` leave beside it (the truncation stage kept
/// [`reserve`] free): lines that do not fit are left out, and a last line says so. The wait
/// is in the output's metadata (`diagnostics`).
pub(crate) async fn after_change(
    ctx: &ToolContext,
    changes: Vec<Changed>,
    mut output: ToolOutput,
    limits: OutputLimits,
) -> ToolOutput {
    let lsp = Arc::clone(ctx.env().lsp());
    let mut files: Vec<Changed> = Vec::new();
    for change in changes {
        if !files.iter().any(|f| f.path == change.path) {
            files.push(change);
        }
    }
    let skipped = files.len().saturating_sub(MAX_FILES_PER_CALL);
    files.truncate(MAX_FILES_PER_CALL);
    let in_call: Vec<std::path::PathBuf> = files.iter().map(|f| f.path.clone()).collect();
    let mut blocks = Vec::new();
    let mut report = Vec::new();
    for file in files {
        let started = Instant::now();
        let (block, mut meta) = check_file(ctx, &lsp, &file, &in_call).await;
        if let Value::Object(meta) = &mut meta {
            meta.insert(
                String::from("wait_ms"),
                json!(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)),
            );
        }
        report.push(meta);
        blocks.extend(block);
        if ctx.is_cancelled() {
            break;
        }
    }
    if skipped > 0 {
        blocks.push(format!(
            "(diagnostics of {skipped} more changed files were not awaited; the `lsp` tool's \
             `diagnostics` has them)"
        ));
    }
    if !blocks.is_empty() {
        let room = Shown::of(&output.content).room_left(limits, Reserve::default());
        output
            .content
            .extend(within(&format!("\n{}", blocks.join("\n")), room).map(Content::Text));
    }
    if !report.is_empty() {
        output
            .metadata
            .insert(String::from("diagnostics"), Value::Array(report));
    }
    output
}

/// The diagnostics block, cut to whole lines that fit `room` as one more block of an output
/// (a line break joins it to the output's text, and may open a blank line): the lines left
/// out are counted in a last line. `None` when not even that line fits.
fn within(block: &str, room: Shown) -> Option<String> {
    // The joining line break: a byte, and a line when the output's text ends a line.
    let max_lines = room.lines.checked_sub(1)?;
    let max_bytes = room.bytes.checked_sub(1)?;
    let all: Vec<&str> = block.lines().collect();
    if all.len() <= max_lines && block.len() <= max_bytes {
        return Some(block.to_owned());
    }
    let note = |left: usize| {
        format!("(… {left} more lines of diagnostics; the `lsp` tool's `diagnostics` has them)")
    };
    // Whole lines while the note for the rest still fits after them.
    let mut kept = 0;
    let mut bytes = 0;
    while let Some(line) = all.get(kept) {
        let after = bytes + line.len() + 1;
        if kept + 2 > max_lines || after + note(all.len() - kept - 1).len() > max_bytes {
            break;
        }
        bytes = after;
        kept += 1;
    }
    let note = note(all.len() - kept);
    if kept + 1 > max_lines || bytes + note.len() > max_bytes {
        return None;
    }
    let mut text: String = all[..kept].iter().map(|line| format!("{line}\n")).collect();
    text.push_str(&note);
    Some(text)
}

/// One changed file: the block to append (if any) and its metadata. `changed` are all the
/// files the call changed (not "other files" for one another).
async fn check_file(
    ctx: &ToolContext,
    lsp: &LanguageServers,
    file: &Changed,
    changed: &[std::path::PathBuf],
) -> (Option<String>, Value) {
    let display = ctx.roots().display(&file.path);
    let mut meta = json!({"path": display});
    let path = file.path.clone();
    let Ok(Some(text)) = ctx.blocking(move |_| Ok(read_text(&path))).await else {
        // Removed (or not text): nothing to check, and nothing the servers should keep.
        for client in lsp.running() {
            client.close(&file.path).await;
        }
        meta["outcome"] = json!("skipped");
        return (None, meta);
    };
    let cancel = ctx.cancellation();
    let mut notes: Vec<String> = Vec::new();
    let mut first_try = true;
    let (client, before, waited, plan, deadline) = loop {
        let start_deadline = tokio::time::Instant::now() + lsp.wait();
        let (client, note) = match lsp
            .client_for(&file.path, ctx.roots(), start_deadline)
            .await
        {
            Ok(found) => found,
            Err(unavailable) => {
                meta["outcome"] = json!(unavailable.outcome());
                let said_before = match &unavailable {
                    Unavailable::NoServer | Unavailable::OutsideRoots => true,
                    Unavailable::Missing { language, .. } => {
                        !Notices::first(ctx, format!("missing:{language}"))
                    }
                    Unavailable::Failed(message) => {
                        !Notices::first(ctx, format!("failed:{message}"))
                    }
                    Unavailable::Starting(_) => false,
                };
                if !said_before {
                    notes.push(format!("{display}: {}.", unavailable.message()));
                }
                return ((!notes.is_empty()).then(|| notes.join("\n")), meta);
            }
        };
        notes.extend(note.map(|n| format!("note: {n}.")));
        meta["server"] = json!(client.name);
        meta["sandboxed"] = json!(client.sandboxed);
        let before = before_change(&client, file, &text, start_deadline, cancel).await;
        let plan = plan_other_files(
            lsp,
            &client,
            file,
            (before.as_ref(), &text),
            (changed, readable(ctx)),
            start_deadline,
            cancel,
        )
        .await;
        let synced = client.sync(&file.path, text.clone()).await;
        let changed_at = Instant::now();
        let deadline = tokio::time::Instant::now() + lsp.wait();
        let waited = client.report(&file.path, &synced, deadline, cancel).await;
        meta["report_ms"] =
            json!(u64::try_from(changed_at.elapsed().as_millis()).unwrap_or(u64::MAX));
        if matches!(waited, Waited::Exited(_)) && std::mem::take(&mut first_try) {
            // It had crashed before the change reached it: the restarted server gets it.
            continue;
        }
        break (client, before, waited, plan, deadline);
    };
    let mut lines = notes;
    meta["freshness"] = json!(client.freshness().name());
    lines.push(file_block(
        lsp,
        &client,
        waited,
        (&text, before.as_ref()),
        &display,
        &mut meta,
    ));
    if (!plan.files.is_empty() || plan.unknown > 0) && client.alive() {
        let started = Instant::now();
        let (block, elsewhere) = other_files(ctx, lsp, &client, &plan, deadline).await;
        lines.extend(block);
        meta["elsewhere"] = elsewhere;
        meta["elsewhere"]["wait_ms"] =
            json!(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
    }
    (Some(lines.join("\n")), meta)
}

/// The changed file's own block: what `waited` brought, classified against `before` (the
/// text and report before the change), with its metadata in `meta`.
fn file_block(
    lsp: &LanguageServers,
    client: &Client,
    waited: Waited,
    (text, before): (&str, Option<&(String, Vec<lsp_types::Diagnostic>)>),
    display: &str,
    meta: &mut Value,
) -> String {
    let filter = lsp.filter();
    match waited {
        Waited::Reported(report) => {
            let old = before.map(|(text, diags)| (text.as_str(), diags.as_slice()));
            let (shown, fixed) = diagnostics::classify(text, &report.published.items, old, filter);
            let status = client.status_of(&report);
            meta["outcome"] = json!("reported");
            meta["completeness"] = json!(status.word());
            meta["fresh"] = json!(matches!(
                report.basis,
                diagnostics::Basis::Asked | diagnostics::Basis::Versioned
            ));
            meta["errors"] = json!(shown.len());
            meta["new"] = json!(shown.iter().filter(|s| !s.pre_existing).count());
            diagnostics::render(&client.name, &status, display, &shown, fixed, filter)
        }
        Waited::TimedOut => {
            meta["outcome"] = json!("timed_out");
            let status = client.status(None);
            meta["completeness"] = json!(status.word());
            format!(
                "{} {}: no diagnostics for {display} within {:.1} s; ask the `lsp` tool for \
                 `diagnostics` later.",
                client.name,
                status.marker(),
                lsp.wait().as_secs_f64()
            )
        }
        Waited::Exited(reason) => {
            meta["outcome"] = json!("exited");
            format!("{reason} before it reported on {display}.")
        }
    }
}

/// Before a change is sent: the other files it may break, and their diagnostics now (see
/// `lsp/client/impact.rs`), within the bound; none when other files are not checked or the
/// text before is unknown.
async fn plan_other_files(
    lsp: &LanguageServers,
    client: &Client,
    file: &Changed,
    (before, text): (Option<&(String, Vec<lsp_types::Diagnostic>)>, &str),
    (changed, readable): (&[std::path::PathBuf], Readable),
    deadline: tokio::time::Instant,
    cancel: &tokio_util::sync::CancellationToken,
) -> Plan {
    let Some((old, _)) = before else {
        return Plan::default();
    };
    if lsp.max_elsewhere() == 0 || old == text {
        return Plan::default();
    }
    // The references get a third of the bound: the change waits for them.
    let lookup = (tokio::time::Instant::now() + lsp.wait() / 3).min(deadline);
    client
        .impact_before(
            &file.path,
            (old, text),
            (changed, readable),
            (lookup, deadline),
            cancel,
        )
        .await
}

/// Whether the call may read a file beneath its roots without asking, as the `lsp` tool
/// decides which places it shows with their lines: other files it may not read are not
/// checked. Judged with a context of the call's session, so the call's own decision stands.
fn readable(ctx: &ToolContext) -> Readable {
    let judge = ctx.session_judge();
    let roots = ctx.roots().clone();
    Arc::new(move |path: &std::path::Path| judge.reads_unasked(&roots, "lsp", path))
}

/// The new errors of the other files in `plan` after the change, asked until `deadline` (the
/// changed file's bound): the block (if there is anything to say) and its metadata.
async fn other_files(
    ctx: &ToolContext,
    lsp: &LanguageServers,
    client: &Client,
    plan: &Plan,
    deadline: tokio::time::Instant,
) -> (Option<String>, Value) {
    let filter = lsp.filter();
    let answers = client
        .impact_after(plan, deadline, ctx.cancellation())
        .await;
    let mut found = impact::Found {
        files: Vec::new(),
        unchecked: plan.unknown,
        wait_secs: lsp.wait().as_secs_f64(),
    };
    for (file, after) in plan.files.iter().zip(answers) {
        let Some(after) = after else {
            found.unchecked += 1;
            continue;
        };
        found.files.push(impact::OtherFile {
            display: ctx.roots().display(&file.path),
            new: impact::new_errors(&file.text, &file.before, &after, filter),
        });
    }
    let status = client.status(None);
    let new: usize = found.files.iter().map(|f| f.new.len()).sum();
    let meta = json!({
        "checked": found.files.len(),
        "unchecked": found.unchecked,
        "new": new,
        "completeness": if status.partial() || found.unchecked > 0 { "partial" } else { "complete" },
    });
    let block = impact::render(&client.name, &status, &found, filter, lsp.max_elsewhere());
    (block, meta)
}

/// What the server reported for the text before a change: from the open document, or, the
/// first time, by showing it the old text first (until `deadline`). `None` when unknown.
async fn before_change(
    client: &Client,
    file: &Changed,
    text: &str,
    deadline: tokio::time::Instant,
    cancel: &tokio_util::sync::CancellationToken,
) -> Option<(String, Vec<lsp_types::Diagnostic>)> {
    if let Some(old) = client.open_text(&file.path).await {
        let stored = client.published(&file.path);
        // A report gimlet asked for carries the version it was for; a publication without one
        // may be a part (typescript-language-server publishes syntax first, types later), so
        // a server that answers when asked is asked about the text it has (nothing is sent).
        if client.answers_when_asked() && stored.as_ref().is_none_or(|p| p.version.is_none()) {
            let synced = client.sync(&file.path, old.clone()).await;
            if let Waited::Reported(report) =
                client.report(&file.path, &synced, deadline, cancel).await
            {
                return Some((old, report.published.items));
            }
        }
        return Some((old, stored.map(|p| p.items).unwrap_or_default()));
    }
    let Some(old) = file.before.as_deref() else {
        // A new file: nothing was there before.
        return Some((String::new(), Vec::new()));
    };
    let old = String::from_utf8_lossy(old).into_owned();
    if old == text {
        return None;
    }
    let synced = client.sync(&file.path, old.clone()).await;
    match client.report(&file.path, &synced, deadline, cancel).await {
        Waited::Reported(report) => Some((old, report.published.items)),
        Waited::TimedOut | Waited::Exited(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    /// The room `lines` and `bytes` leave.
    fn room(lines: usize, bytes: usize) -> Shown {
        let limits = OutputLimits {
            max_lines: lines,
            max_bytes: bytes,
            ..OutputLimits::DEFAULT
        };
        Shown::default().room_left(limits, Reserve::default())
    }

    const BLOCK: &str = "\npyright reports 3 errors in a.py, caused by this change; please fix:\n\
                         a.py:1: one\na.py:2: two\na.py:3: three";

    #[test]
    fn diagnostics_that_fit_are_appended_whole() {
        assert_eq!(within(BLOCK, room(6, 1000)).as_deref(), Some(BLOCK));
    }

    #[test]
    fn diagnostics_are_cut_to_whole_lines_and_say_how_many_are_left_out() {
        let cut = within(BLOCK, room(5, 1000)).unwrap();
        assert_eq!(
            cut,
            "\npyright reports 3 errors in a.py, caused by this change; please fix:\n\
             a.py:1: one\n(… 2 more lines of diagnostics; the `lsp` tool's `diagnostics` has them)"
        );
        // What is appended, with the line break that joins it, stays within the room.
        assert!(cut.lines().count() < 5 && cut.len() < 1000);
        let by_bytes = within(BLOCK, room(100, 100)).unwrap();
        assert!(by_bytes.len() < 100, "{by_bytes}");
        assert!(by_bytes.ends_with("has them)"), "{by_bytes}");
        // No room even for the note: nothing is appended.
        assert_eq!(within(BLOCK, room(1, 1000)), None);
        assert_eq!(within(BLOCK, room(100, 40)), None);
    }

    #[test]
    fn room_is_kept_for_diagnostics_within_the_limits() {
        assert_eq!(
            reserve(OutputLimits::DEFAULT),
            Reserve {
                lines: 60,
                bytes: 6 * 1024
            }
        );
        let small = OutputLimits {
            max_lines: 100,
            max_bytes: 4000,
            ..OutputLimits::DEFAULT
        };
        assert_eq!(
            reserve(small),
            Reserve {
                lines: 25,
                bytes: 1000
            }
        );
    }
}
