//! Stage 6: truncation. One module, three modes, dual limits (lines and bytes).
//!
//! [`truncate_text`] is pure: it keeps the head, the tail, or both ends of a text so that the
//! kept text *plus the notice that [`apply`] adds* fits the limits, cuts only at line ends
//! (or, for a single overlong line, at a character boundary), and reports a [`Cut`] exactly
//! when it removed something. [`apply`] saves the full text to a spill file and writes the
//! notice: how much was cut, where the full output is, and what to do next.

use crate::output::{LongText, count_lines};
use crate::spill::{SpillFile, SpillStore};
use crate::vocab::{
    Content, Cut, CutBy, FilePage, OutputLimits, ToolOutput, Truncation, TruncationMode,
};

/// Lines kept free for the notice (a blank line and the notice) and the middle marker.
const NOTICE_LINES: usize = 4;
/// Bytes kept free for the notice and the middle marker.
const NOTICE_BYTES: usize = 640;

/// Keeps what fits. Returns the kept text (with a marker in the middle for head+tail) and the
/// cut, or the text unchanged and `None` when it fits.
pub fn truncate_text(text: &str, limits: OutputLimits) -> (String, Option<Cut>) {
    if fits(text, limits) {
        return (text.to_owned(), None);
    }
    let total_bytes = text.len();
    let total_lines = count_lines(text);
    let line_budget = limits.max_lines.saturating_sub(NOTICE_LINES).max(1);
    let byte_budget = limits
        .max_bytes
        .saturating_sub(NOTICE_BYTES.min(limits.max_bytes / 2));
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let (head, tail) = match limits.mode {
        TruncationMode::Head => (take_head(&lines, line_budget, byte_budget), Kept::default()),
        TruncationMode::Tail => (Kept::default(), take_tail(&lines, line_budget, byte_budget)),
        TruncationMode::HeadTail => {
            let head = take_head(&lines, line_budget.div_ceil(2), byte_budget.div_ceil(2));
            let rest = &lines[head.lines.min(lines.len())..];
            let tail = take_tail(rest, line_budget / 2, byte_budget / 2);
            (head, tail)
        }
    };
    let by = if head.by == Some(CutBy::Bytes) || tail.by == Some(CutBy::Bytes) {
        CutBy::Bytes
    } else {
        CutBy::Lines
    };
    let cut = Cut {
        total_lines,
        total_bytes,
        head_lines: head.lines,
        tail_lines: tail.lines,
        kept_bytes: head.bytes + tail.bytes,
        partial_line: head.partial,
        by,
    };
    let mut kept = String::with_capacity(cut.kept_bytes + 80);
    kept.push_str(&text[..head.bytes]);
    if limits.mode == TruncationMode::HeadTail {
        let omitted_lines = total_lines - head.lines - tail.lines;
        let omitted_bytes = total_bytes - cut.kept_bytes;
        if !kept.is_empty() && !kept.ends_with('\n') {
            kept.push('\n');
        }
        kept.push_str(&format!(
            "[... {omitted_lines} lines ({omitted_bytes} bytes) cut ...]\n"
        ));
    }
    kept.push_str(&text[total_bytes - tail.bytes..]);
    (kept, Some(cut))
}

#[derive(Debug, Default, Clone, Copy)]
struct Kept {
    lines: usize,
    bytes: usize,
    partial: bool,
    /// The budget that stopped the taking, if one did.
    by: Option<CutBy>,
}

/// Takes lines while both budgets allow; says which one stopped it.
fn take<'a>(lines: impl Iterator<Item = &'a &'a str>, max_lines: usize, max_bytes: usize) -> Kept {
    let mut kept = Kept::default();
    for line in lines {
        if kept.lines == max_lines {
            kept.by = Some(CutBy::Lines);
            break;
        }
        if kept.bytes + line.len() > max_bytes {
            kept.by = Some(CutBy::Bytes);
            break;
        }
        kept.lines += 1;
        kept.bytes += line.len();
    }
    kept
}

fn take_head(lines: &[&str], max_lines: usize, max_bytes: usize) -> Kept {
    let mut kept = take(lines.iter(), max_lines, max_bytes);
    if kept.lines == 0
        && max_lines > 0
        && let Some(first) = lines.first()
    {
        // One line longer than the whole budget: keep its start, cut at a char boundary.
        kept = Kept {
            lines: 1,
            bytes: floor_char_boundary(first, max_bytes),
            partial: true,
            by: Some(CutBy::Bytes),
        };
    }
    kept
}

fn take_tail(lines: &[&str], max_lines: usize, max_bytes: usize) -> Kept {
    let mut kept = take(lines.iter().rev(), max_lines, max_bytes);
    if kept.lines == 0
        && max_lines > 0
        && let Some(last) = lines.last()
    {
        // One line longer than the whole budget: keep its end, cut at a char boundary.
        let start = ceil_char_boundary(last, last.len().saturating_sub(max_bytes));
        kept = Kept {
            lines: 1,
            bytes: last.len() - start,
            partial: false,
            by: Some(CutBy::Bytes),
        };
    }
    kept
}

fn ceil_char_boundary(s: &str, index: usize) -> usize {
    let mut i = index.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

fn floor_char_boundary(s: &str, index: usize) -> usize {
    let mut i = index.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Whether `text` is within the limits (and is kept whole).
fn fits(text: &str, limits: OutputLimits) -> bool {
    text.len() <= limits.max_bytes && count_lines(text) <= limits.max_lines
}

/// Whether a long output fitted in memory. One with a spill file or a tail outgrew memory and
/// was saved as it came.
fn in_memory(long: &LongText) -> bool {
    long.spill.is_none() && long.tail.is_empty()
}

/// Whether [`apply`] will save a spill file for this output: whether it is file work.
pub(super) fn saves(output: &ToolOutput, limits: OutputLimits) -> bool {
    output.content.iter().any(|block| match block {
        Content::Text(text) => !fits(text, limits),
        Content::Long(long) => in_memory(long) && !fits(&long.head, limits),
        Content::Image { .. } | Content::ResourceLink { .. } => false,
    })
}

/// Truncates every text block of an output, saving the full text and adding a notice and a
/// resource link when anything was cut. A [`Content::Long`] already has its spill file; its
/// kept ends are cut to the limits the same way.
pub(super) fn apply(
    mut output: ToolOutput,
    limits: OutputLimits,
    spill: &SpillStore,
) -> ToolOutput {
    let mut links = Vec::new();
    for block in &mut output.content {
        let (shown, truncation) = match block {
            // Most outputs fit: no copy made to find that out.
            Content::Text(text) if fits(text, limits) => continue,
            Content::Text(text) => {
                let (kept, Some(cut)) = truncate_text(text, limits) else {
                    continue;
                };
                let saved = spill.save(text);
                if let Err(err) = &saved {
                    tracing::warn!("could not save the full output: {err}");
                }
                (
                    kept,
                    Truncation {
                        mode: limits.mode,
                        cut,
                        spill: saved.ok(),
                    },
                )
            }
            Content::Long(long) => match cut_long(long, limits, spill) {
                Some(cut) => cut,
                None => {
                    *block = Content::Text(std::mem::take(&mut long.head));
                    continue;
                }
            },
            Content::Image { .. } | Content::ResourceLink { .. } => continue,
        };
        let notice = notice(
            limits,
            &truncation.cut,
            truncation.spill.as_ref(),
            output.page,
        );
        *block = Content::Text(match limits.mode {
            TruncationMode::Tail => format!("{notice}\n\n{shown}"),
            TruncationMode::Head | TruncationMode::HeadTail => {
                let separator = if shown.ends_with('\n') { "\n" } else { "\n\n" };
                format!("{shown}{separator}{notice}")
            }
        });
        if let Some(file) = &truncation.spill {
            links.push(Content::ResourceLink {
                uri: file.uri(),
                name: format!("full output ({} bytes)", file.size),
                size: Some(file.size),
            });
        }
        output.truncated = Some(truncation);
    }
    output.content.extend(links);
    output
}

/// The shown part of a large output, or `None` when it fits whole.
fn cut_long(
    long: &mut LongText,
    limits: OutputLimits,
    spill: &SpillStore,
) -> Option<(String, Truncation)> {
    if in_memory(long) {
        // It fitted in memory but not in the limits: save it now, like any text.
        let (kept, cut) = truncate_text(&long.head, limits);
        let cut = cut?;
        let saved = spill.save(&long.head);
        if let Err(err) = &saved {
            tracing::warn!("could not save the full output: {err}");
        }
        return Some((
            kept,
            Truncation {
                mode: limits.mode,
                cut,
                spill: saved.ok(),
            },
        ));
    }
    let total_lines = usize::try_from(long.total_lines).unwrap_or(usize::MAX);
    let total_bytes = usize::try_from(long.total_bytes).unwrap_or(usize::MAX);
    // Cut each kept end as if it were the whole text, then report the real totals. An end
    // that fits the limits whole was cut by what was kept in memory: it is shown up to its
    // last whole line (the kept head of a large output may end inside a line).
    let force = |text: &str, mode| {
        let limits = OutputLimits { mode, ..limits };
        let (kept, cut) = truncate_text(text, limits);
        match cut {
            Some(cut) => (kept, cut),
            None => {
                let whole = match mode {
                    TruncationMode::Head => &text[..text.rfind('\n').map_or(0, |i| i + 1)],
                    TruncationMode::Tail | TruncationMode::HeadTail => text,
                };
                let lines = whole.split_inclusive('\n').count();
                (
                    whole.to_owned(),
                    Cut {
                        total_lines: 0,
                        total_bytes: 0,
                        head_lines: lines,
                        tail_lines: lines,
                        kept_bytes: whole.len(),
                        partial_line: false,
                        by: CutBy::Memory,
                    },
                )
            }
        }
    };
    let (shown, cut) = match limits.mode {
        TruncationMode::Head => {
            let (kept, cut) = force(&long.head, TruncationMode::Head);
            (
                kept,
                Cut {
                    tail_lines: 0,
                    ..cut
                },
            )
        }
        TruncationMode::Tail => {
            let (kept, cut) = force(&long.tail, TruncationMode::Tail);
            (
                kept,
                Cut {
                    head_lines: 0,
                    ..cut
                },
            )
        }
        TruncationMode::HeadTail => head_and_tail(long, limits, total_lines, total_bytes),
    };
    let cut = Cut {
        total_lines,
        total_bytes,
        ..cut
    };
    Some((
        shown,
        Truncation {
            mode: limits.mode,
            cut,
            spill: long.spill.take(),
        },
    ))
}

/// The kept head and tail of a large output with a marker between, for head+tail mode.
fn head_and_tail(
    long: &LongText,
    limits: OutputLimits,
    total_lines: usize,
    total_bytes: usize,
) -> (String, Cut) {
    let half = OutputLimits {
        max_lines: limits.max_lines / 2,
        max_bytes: limits.max_bytes / 2,
        ..limits
    };
    let (head, head_cut) = truncate_text(
        &long.head,
        OutputLimits {
            mode: TruncationMode::Head,
            ..half
        },
    );
    let (tail, tail_cut) = truncate_text(
        &long.tail,
        OutputLimits {
            mode: TruncationMode::Tail,
            ..half
        },
    );
    let head_lines =
        head_cut.map_or_else(|| long.head.split_inclusive('\n').count(), |c| c.head_lines);
    let tail_lines =
        tail_cut.map_or_else(|| long.tail.split_inclusive('\n').count(), |c| c.tail_lines);
    let omitted = total_lines.saturating_sub(head_lines + tail_lines);
    let omitted_bytes = total_bytes.saturating_sub(head.len() + tail.len());
    let mut text = head;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&format!(
        "[... {omitted} lines ({omitted_bytes} bytes) cut ...]\n"
    ));
    text.push_str(&tail);
    let kept_bytes = text.len();
    let by = match (head_cut, tail_cut) {
        (
            Some(Cut {
                by: CutBy::Bytes, ..
            }),
            _,
        )
        | (
            _,
            Some(Cut {
                by: CutBy::Bytes, ..
            }),
        ) => CutBy::Bytes,
        (Some(_), _) | (_, Some(_)) => CutBy::Lines,
        (None, None) => CutBy::Memory,
    };
    (
        text,
        Cut {
            total_lines,
            total_bytes,
            head_lines,
            tail_lines,
            kept_bytes,
            partial_line: false,
            by,
        },
    )
}

/// The notice: what was cut, where the full output is, what to do next. One line.
fn notice(
    limits: OutputLimits,
    cut: &Cut,
    spill: Option<&SpillFile>,
    page: Option<FilePage>,
) -> String {
    // A page of a file counts in the file's lines: the lines kept whole, up to the page's
    // last (the footer after it is no line of the file), and where to go on.
    let page = page
        .filter(|_| limits.mode == TruncationMode::Head)
        .map(|page| {
            let whole = cut.head_lines - usize::from(cut.partial_line);
            let last = (page.first + whole).saturating_sub(1).min(page.last);
            (page, last)
        });
    let shown = match (limits.mode, page) {
        (_, Some((page, last))) if last >= page.first => {
            format!("showing lines {}-{last} of {}", page.first, page.total)
        }
        (_, Some((page, _))) => {
            format!("showing part of line {} of {}", page.first, page.total)
        }
        (TruncationMode::Head, None) => {
            format!("showing lines 1-{} of {}", cut.head_lines, cut.total_lines)
        }
        (TruncationMode::Tail, None) => {
            format!(
                "showing the last {} of {} lines",
                cut.tail_lines, cut.total_lines
            )
        }
        (TruncationMode::HeadTail, None) => format!(
            "showing the first {} and the last {} of {} lines",
            cut.head_lines, cut.tail_lines, cut.total_lines
        ),
    };
    let limit = match cut.by {
        CutBy::Bytes if limits.max_bytes.is_multiple_of(1024) => {
            format!("{} KiB limit", limits.max_bytes / 1024)
        }
        CutBy::Bytes => format!("{} byte limit", limits.max_bytes),
        CutBy::Lines => format!("{} line limit", limits.max_lines),
        CutBy::Memory if cut.kept_bytes < 1024 => {
            format!("only {} bytes of it were kept in memory", cut.kept_bytes)
        }
        CutBy::Memory => format!(
            "only {} KiB of it were kept in memory",
            cut.kept_bytes / 1024
        ),
    };
    let mut where_full = match spill {
        // Keep the notice inside its reserve even for an absurdly long data directory.
        Some(file) if file.path.as_os_str().len() < NOTICE_BYTES / 4 => {
            format!(
                "Full output ({} bytes): {} ({})",
                cut.total_bytes,
                file.path.display(),
                file.uri()
            )
        }
        Some(file) => format!("Full output ({} bytes): {}", cut.total_bytes, file.uri()),
        None => String::from("The full output could not be saved"),
    };
    where_full.push('.');
    let next = match page {
        Some((page, last)) if last < page.total => {
            // With no whole line shown, the line cut inside is shown again from its start.
            let continue_at = if last >= page.first {
                last + 1
            } else {
                page.first
            };
            format!(" Use offset={continue_at} to continue.")
        }
        // Only the footer was cut: the file was shown to its end.
        Some(_) => String::new(),
        None if spill.is_some() => {
            String::from(" Read that file with an offset to see the rest, or narrow the call.")
        }
        _ => String::from(" Narrow the call to see the rest."),
    };
    format!("[Output truncated: {shown} ({limit}). {where_full}{next}]")
}

#[cfg(test)]
#[path = "truncate_tests.rs"]
mod tests;
