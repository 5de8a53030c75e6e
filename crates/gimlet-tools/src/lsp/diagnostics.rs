//! The diagnostics block after a change: which diagnostics are new, which were there before,
//! which come first, and how they read.
//!
//! Pure functions over texts and diagnostics, so the rules are tested without a server.

use std::fmt::Write as _;

use lsp_types::{Diagnostic, DiagnosticSeverity, NumberOrString};

use super::position::human;

/// The lines a change touched: in the old text `[start, old_end)`, in the new one
/// `[start, new_end)` (0-based). Lines before `start` and after the ends are the same text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChangedLines {
    pub(crate) start: usize,
    pub(crate) old_end: usize,
    pub(crate) new_end: usize,
}

impl ChangedLines {
    /// The changed region: the lines between the common head and the common tail.
    pub(crate) fn between(old: &str, new: &str) -> Self {
        let old: Vec<&str> = old.split('\n').collect();
        let new: Vec<&str> = new.split('\n').collect();
        let start = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
        let max_tail = old.len().min(new.len()) - start;
        let tail = old
            .iter()
            .rev()
            .zip(new.iter().rev())
            .take(max_tail)
            .take_while(|(a, b)| a == b)
            .count();
        Self {
            start,
            old_end: old.len() - tail,
            new_end: new.len() - tail,
        }
    }

    /// Where an old line is in the new text: `None` inside the changed region.
    fn map_old(self, line: usize) -> Option<usize> {
        if line < self.start {
            Some(line)
        } else if line >= self.old_end {
            Some(line + self.new_end - self.old_end)
        } else {
            None
        }
    }

    /// How far a new line is from the changed region (0 inside it).
    fn distance(self, line: usize) -> usize {
        if line < self.start {
            self.start - line
        } else if line >= self.new_end.max(self.start + 1) {
            line + 1 - self.new_end.max(self.start + 1)
        } else {
            0
        }
    }
}

/// How a report is known to belong to the text gimlet sent (see `client/fresh.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Basis {
    /// The answer to a request sent after the change: pull diagnostics
    /// (`textDocument/diagnostic`), or tsserver asked directly. The server answers for the
    /// text it has when the request arrives, which is the text sent before it.
    Asked,
    /// Published for the version gimlet sent.
    Versioned,
    /// For a later version: another call changed the file meanwhile.
    Later,
    /// Published without a version, after the change: it may be for an older text.
    Unversioned,
    /// Published for an older version than the server has now (a list of every file's last
    /// report, not a wait for one).
    Older,
}

/// What a publication for `published` (its version, if the server said) is worth to a wait
/// for the version `sent`: `None` for an older version (not the report awaited).
pub(crate) fn basis_of(published: Option<i32>, sent: i32) -> Option<Basis> {
    match published {
        None => Some(Basis::Unversioned),
        Some(version) if version == sent => Some(Basis::Versioned),
        Some(version) if version > sent => Some(Basis::Later),
        Some(_) => None,
    }
}

/// Whether a server was done when it answered, and how its report is tied to the text: what
/// a diagnostics block and an `lsp` answer say after the server's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Status {
    /// What the server said it is still doing (`$/progress` under way): empty when done.
    pub(crate) busy: Vec<String>,
    /// How the report is tied to the text, for diagnostics.
    pub(crate) basis: Option<Basis>,
}

impl Status {
    /// Whether the server was still loading or indexing.
    pub(crate) fn partial(&self) -> bool {
        !self.busy.is_empty()
    }

    /// The marker after a server's name: `[complete]`, or `[partial: still busy: …]`, and a
    /// warning when the report may not be for the current text.
    pub(crate) fn marker(&self) -> String {
        let mut text = if self.busy.is_empty() {
            String::from("[complete")
        } else {
            format!("[partial: still busy: {}", self.busy.join("; "))
        };
        match self.basis {
            Some(Basis::Unversioned) => text.push_str(
                "; may be stale: the server did not say which version of the file it checked",
            ),
            Some(Basis::Older) => {
                text.push_str("; may be stale: for an older text of the file");
            }
            Some(Basis::Later) => {
                text.push_str("; for a newer text of the file, changed meanwhile by another call");
            }
            Some(Basis::Asked | Basis::Versioned) | None => {}
        }
        text.push(']');
        text
    }

    /// The word for the metadata: `complete` or `partial`.
    pub(crate) fn word(&self) -> &'static str {
        if self.partial() {
            "partial"
        } else {
            "complete"
        }
    }
}

/// Which diagnostics to show.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Filter {
    /// Warnings too, not only errors.
    pub(crate) warnings: bool,
    /// At most this many lines.
    pub(crate) max: usize,
}

impl Filter {
    fn keeps(self, diagnostic: &Diagnostic) -> bool {
        match diagnostic.severity {
            // No severity: the client decides; we count it as an error, as VS Code does.
            Some(DiagnosticSeverity::ERROR) | None => true,
            Some(DiagnosticSeverity::WARNING) => self.warnings,
            Some(_) => false,
        }
    }
}

/// One diagnostic to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shown {
    pub(crate) line: usize,
    pub(crate) col: usize,
    pub(crate) severity: &'static str,
    pub(crate) code: Option<String>,
    pub(crate) message: String,
    pub(crate) pre_existing: bool,
}

impl Shown {
    /// The line as the block shows it: `display:line:col severity code message`.
    pub(crate) fn render(&self, display: &str) -> String {
        let mut text = format!("{display}:{}:{} {}", self.line, self.col, self.severity);
        if let Some(code) = &self.code {
            let _ = write!(text, " {code}");
        }
        let _ = write!(text, " {}", self.message);
        if self.pre_existing {
            text.push_str(" (pre-existing)");
        }
        text
    }
}

/// A file's diagnostics after a change, sorted: new ones first, each group by distance from
/// the changed lines, then by place; and how many of the old ones are gone. `before` is what
/// the server reported for the old text, when that is known; without it nothing is marked
/// pre-existing.
pub(crate) fn classify(
    new_text: &str,
    after: &[Diagnostic],
    before: Option<(&str, &[Diagnostic])>,
    filter: Filter,
) -> (Vec<Shown>, usize) {
    let changed = before.map(|(old_text, _)| ChangedLines::between(old_text, new_text));
    // What was there before, placed in the new text, each usable once.
    let mut old: Vec<(Option<usize>, &Diagnostic, bool)> = before
        .map(|(_, diags)| {
            diags
                .iter()
                .filter(|d| filter.keeps(d))
                .map(|d| {
                    let line = d.range.start.line as usize;
                    (changed.and_then(|c| c.map_old(line)), d, false)
                })
                .collect()
        })
        .unwrap_or_default();
    let mut shown: Vec<(usize, Shown)> = Vec::new();
    for diagnostic in after.iter().filter(|d| filter.keeps(d)) {
        let line = diagnostic.range.start.line as usize;
        let inside = changed.is_some_and(|c| c.distance(line) == 0);
        let matched = old.iter_mut().find(|(mapped, was, used)| {
            !*used
                && same_problem(was, diagnostic)
                && match mapped {
                    Some(mapped) => *mapped == line,
                    // Both inside the changed region: the same problem, moved with the edit.
                    None => inside,
                }
        });
        let pre_existing = match matched {
            Some(entry) => {
                entry.2 = true;
                true
            }
            None => false,
        };
        let (line_no, col) = human(Some(new_text), diagnostic.range.start);
        let distance = changed.map_or(0, |c| c.distance(line));
        shown.push((
            distance,
            Shown {
                line: line_no,
                col,
                severity: severity_name(diagnostic.severity),
                code: diagnostic.code.as_ref().map(|c| match c {
                    NumberOrString::Number(n) => n.to_string(),
                    NumberOrString::String(s) => s.clone(),
                }),
                message: one_line(&diagnostic.message),
                pre_existing,
            },
        ));
    }
    shown.sort_by(|(da, a), (db, b)| {
        (a.pre_existing, *da, a.line, a.col).cmp(&(b.pre_existing, *db, b.line, b.col))
    });
    let fixed = old.iter().filter(|(_, _, used)| !used).count();
    (shown.into_iter().map(|(_, s)| s).collect(), fixed)
}

fn same_problem(a: &Diagnostic, b: &Diagnostic) -> bool {
    a.message == b.message && a.code == b.code && a.severity == b.severity
}

/// The severity's name, as the block shows it.
pub(crate) fn severity_name(severity: Option<DiagnosticSeverity>) -> &'static str {
    match severity {
        Some(DiagnosticSeverity::WARNING) => "warning",
        Some(DiagnosticSeverity::INFORMATION) => "info",
        Some(DiagnosticSeverity::HINT) => "hint",
        _ => "error",
    }
}

/// A message on one line, at most 300 characters.
pub(crate) fn one_line(message: &str) -> String {
    let joined = message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    super::client::clip(&joined, 300)
}

/// The block for one file: a header line, then at most `filter.max` diagnostics and a count
/// of the rest. `server` names the server, `display` the file.
pub(crate) fn render(
    server: &str,
    status: &Status,
    display: &str,
    shown: &[Shown],
    fixed: usize,
    filter: Filter,
) -> String {
    let what = if filter.warnings {
        ("problem", "problems")
    } else {
        ("error", "errors")
    };
    let server = format!("{server} {}", status.marker());
    if shown.is_empty() {
        // A server still loading has not said "none": it has said nothing yet.
        let mut text = if status.partial() {
            format!("{server}: no {} in {display} so far", what.1)
        } else {
            format!("{server}: no {} in {display}", what.1)
        };
        if fixed > 0 {
            let _ = write!(
                text,
                " ({} fixed by this change)",
                crate::text::counted(fixed, what.0, what.1)
            );
        }
        if status.partial() {
            text.push_str(
                "; it may report more when it is done: ask the `lsp` tool for `diagnostics` then",
            );
        }
        text.push('.');
        return text;
    }
    let new = shown.iter().filter(|s| !s.pre_existing).count();
    let mut text = format!(
        "{server} reports {} in {display}",
        crate::text::counted(shown.len(), what.0, what.1)
    );
    let fixed = if fixed > 0 {
        format!(" (this change fixed {fixed})")
    } else {
        String::new()
    };
    match (new, shown.len() - new) {
        (_, 0) => {
            let _ = write!(text, ", caused by this change{fixed}; please fix:");
        }
        (0, _) => {
            let _ = write!(text, ", all there before this change{fixed}:");
        }
        (new, _) => {
            let _ = write!(text, ", {new} new with this change{fixed}; please fix:");
        }
    }
    for one in shown.iter().take(filter.max) {
        text.push('\n');
        text.push_str(&one.render(display));
    }
    if shown.len() > filter.max {
        let rest = shown.len() - filter.max;
        let noun = if rest == 1 { what.0 } else { what.1 };
        let _ = write!(
            text,
            "\n… and {rest} more {noun} (the `lsp` tool's `diagnostics` lists them all)"
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use lsp_types::{Position, Range};
    use pretty_assertions::assert_eq;

    use super::*;

    fn diag(line: u32, col: u32, message: &str, severity: DiagnosticSeverity) -> Diagnostic {
        Diagnostic {
            range: Range::new(Position::new(line, col), Position::new(line, col + 1)),
            severity: Some(severity),
            code: Some(NumberOrString::String(String::from("rule"))),
            message: message.to_owned(),
            ..Diagnostic::default()
        }
    }

    const ERR: DiagnosticSeverity = DiagnosticSeverity::ERROR;
    const DONE: Status = Status {
        busy: Vec::new(),
        basis: Some(Basis::Versioned),
    };
    const FILTER: Filter = Filter {
        warnings: false,
        max: 20,
    };

    #[test]
    fn the_changed_lines_are_between_the_common_head_and_tail() {
        let c = ChangedLines::between("a\nb\nc\nd", "a\nB\nB2\nc\nd");
        assert_eq!(
            c,
            ChangedLines {
                start: 1,
                old_end: 2,
                new_end: 3
            }
        );
        assert_eq!(c.map_old(0), Some(0));
        assert_eq!(c.map_old(1), None);
        assert_eq!(c.map_old(2), Some(3), "c moved down one line");
        let same = ChangedLines::between("a\nb", "a\nb");
        assert_eq!(same.start, 2);
        assert_eq!(same.old_end, 2);
        let appended = ChangedLines::between("a\n", "a\nb\n");
        assert_eq!(
            appended,
            ChangedLines {
                start: 1,
                old_end: 1,
                new_end: 2
            }
        );
    }

    #[test]
    fn problems_that_moved_with_the_text_are_pre_existing() {
        let old = "import x\nbad_old()\nok()\n";
        let new = "import x\nnew_line()\nbad_new()\nbad_old()\nok()\n";
        let before = [diag(1, 0, "old problem", ERR)];
        let after = [
            diag(3, 0, "old problem", ERR),
            diag(2, 0, "new problem", ERR),
            diag(4, 0, "a warning", DiagnosticSeverity::WARNING),
        ];
        let (shown, fixed) = classify(new, &after, Some((old, &before)), FILTER);
        assert_eq!(fixed, 0);
        let lines: Vec<_> = shown.iter().map(|s| s.render("m.py")).collect();
        assert_eq!(
            lines,
            vec![
                "m.py:3:1 error rule new problem",
                "m.py:4:1 error rule old problem (pre-existing)",
            ]
        );
        // The same message on a line the change did not move is new (and the old one gone).
        let after = [diag(0, 0, "old problem", ERR)];
        let (shown, fixed) = classify(new, &after, Some((old, &before)), FILTER);
        assert!(!shown[0].pre_existing);
        assert_eq!(fixed, 1);
        // Without the old report nothing is marked.
        let (shown, _) = classify(new, &[diag(3, 0, "old problem", ERR)], None, FILTER);
        assert!(!shown[0].pre_existing);
    }

    #[test]
    fn the_ones_nearest_the_change_come_first_and_the_rest_are_counted() {
        let old = (0..100).map(|i| format!("line{i}\n")).collect::<String>();
        let new = old.replace("line50\n", "changed\n");
        let after: Vec<_> = (0..30)
            .map(|i| diag(i * 3, 0, &format!("p{i}"), ERR))
            .collect();
        let (shown, _) = classify(&new, &after, Some((&old, &[])), FILTER);
        assert_eq!(
            shown[0].line, 52,
            "line index 51 is the nearest to the change"
        );
        let text = render("srv", &DONE, "m.py", &shown, 0, FILTER);
        assert_eq!(text.lines().count(), 1 + 20 + 1);
        assert!(
            text.ends_with("… and 10 more errors (the `lsp` tool's `diagnostics` lists them all)"),
            "{text}"
        );
        assert!(
            text.starts_with("srv [complete] reports 30 errors in m.py, caused by this change")
        );
    }

    #[test]
    fn what_a_change_fixed_is_counted_when_errors_remain() {
        let old = Shown {
            line: 7,
            col: 1,
            severity: "error",
            code: None,
            message: String::from("old"),
            pre_existing: true,
        };
        assert_eq!(
            render("srv", &DONE, "a.py", &[old], 1, FILTER),
            "srv [complete] reports 1 error in a.py, all there before this change (this change fixed \
             1):\n\
             a.py:7:1 error old (pre-existing)"
        );
    }

    #[test]
    fn a_clean_file_says_so_and_counts_what_was_fixed() {
        assert_eq!(
            render("srv", &DONE, "a.py", &[], 0, FILTER),
            "srv [complete]: no errors in a.py."
        );
        assert_eq!(
            render("srv", &DONE, "a.py", &[], 2, FILTER),
            "srv [complete]: no errors in a.py (2 errors fixed by this change)."
        );
    }

    #[test]
    fn messages_are_one_line_and_warnings_only_on_request() {
        let after = [
            diag(0, 4, "first\n  second detail", ERR),
            diag(1, 0, "careful", DiagnosticSeverity::WARNING),
            diag(1, 0, "fyi", DiagnosticSeverity::HINT),
        ];
        let (shown, _) = classify("a = 1\nb = 2\n", &after, None, FILTER);
        assert_eq!(shown.len(), 1);
        assert_eq!(
            shown[0].render("a.py"),
            "a.py:1:5 error rule first; second detail"
        );
        let warn = Filter {
            warnings: true,
            max: 20,
        };
        let (shown, _) = classify("a = 1\nb = 2\n", &after, None, warn);
        assert_eq!(shown.len(), 2);
        assert!(
            render("s", &DONE, "a.py", &shown, 0, warn)
                .starts_with("s [complete] reports 2 problems")
        );
    }

    #[test]
    fn a_report_counts_only_for_the_version_sent_or_a_later_one() {
        assert_eq!(basis_of(Some(4), 4), Some(Basis::Versioned));
        assert_eq!(basis_of(Some(5), 4), Some(Basis::Later));
        assert_eq!(
            basis_of(Some(3), 4),
            None,
            "a report for an older text is not awaited"
        );
        assert_eq!(basis_of(None, 4), Some(Basis::Unversioned));
    }

    #[test]
    fn the_marker_says_complete_partial_and_possibly_stale() {
        assert_eq!(DONE.marker(), "[complete]");
        assert_eq!(DONE.word(), "complete");
        let asked = Status {
            busy: Vec::new(),
            basis: Some(Basis::Asked),
        };
        assert_eq!(asked.marker(), "[complete]");
        let loading = Status {
            busy: vec![String::from("Initializing JS/TS language features…")],
            basis: Some(Basis::Unversioned),
        };
        assert_eq!(
            loading.marker(),
            "[partial: still busy: Initializing JS/TS language features…; may be stale: the \
             server did not say which version of the file it checked]"
        );
        assert_eq!(loading.word(), "partial");
        let later = Status {
            busy: Vec::new(),
            basis: Some(Basis::Later),
        };
        assert!(later.marker().contains("changed meanwhile by another call"));
        let older = Status {
            busy: Vec::new(),
            basis: Some(Basis::Older),
        };
        assert_eq!(
            older.marker(),
            "[complete; may be stale: for an older text of the file]"
        );
    }

    #[test]
    fn an_empty_list_from_a_busy_server_is_not_none() {
        let busy = Status {
            busy: vec![String::from("Indexing: 3/40 files (7%)")],
            basis: Some(Basis::Versioned),
        };
        assert_eq!(
            render("srv", &busy, "a.py", &[], 0, FILTER),
            "srv [partial: still busy: Indexing: 3/40 files (7%)]: no errors in a.py so far; it \
             may report more when it is done: ask the `lsp` tool for `diagnostics` then."
        );
        let (shown, _) = classify("x\n", &[diag(0, 0, "bad", ERR)], None, FILTER);
        assert!(
            render("srv", &busy, "a.py", &shown, 0, FILTER).starts_with(
                "srv [partial: still busy: Indexing: 3/40 files (7%)] reports 1 error"
            )
        );
    }
}
