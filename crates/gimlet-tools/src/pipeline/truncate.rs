//! Stage 6: truncation. One module, three modes, dual limits (lines and bytes).
//!
//! [`truncate_text`] is pure: it keeps the head, the tail, or both ends of a text so that the
//! kept text *plus the notice that [`apply`] adds* fits the limits, cuts only at line ends
//! (or, for a single overlong line, at a character boundary), and reports a [`Cut`] exactly
//! when it removed something. [`apply`] fits the whole output, as a client shows it to the
//! model ([`Shown`]: every text block, a command's status footer and notes, the error marker,
//! the link to the full output), within the limits: it cuts the largest text to the room the
//! rest leaves, saves the full text to a spill file and writes the notice: how much was cut,
//! where the full output is, and what to do next. A host that keeps only the first 2000
//! lines of a result then still shows the footer and the notice (issue 38).

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
    let (kept, cut) = cut_to(text, limits);
    (kept, Some(cut))
}

/// What the kept text of a cut may take of `limits`: the rest is for the notice and the
/// middle marker.
fn kept_room(limits: OutputLimits) -> OutputLimits {
    OutputLimits {
        max_lines: limits.max_lines.saturating_sub(NOTICE_LINES).max(1),
        max_bytes: limits
            .max_bytes
            .saturating_sub(NOTICE_BYTES.min(limits.max_bytes / 2)),
        mode: limits.mode,
    }
}

/// Cuts `text` to what [`kept_room`] leaves of `limits`, whether or not it fits them.
fn cut_to(text: &str, limits: OutputLimits) -> (String, Cut) {
    let total_bytes = text.len();
    let total_lines = count_lines(text);
    let OutputLimits {
        max_lines: line_budget,
        max_bytes: byte_budget,
        ..
    } = kept_room(limits);
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
    (kept, cut)
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

/// Room kept free by the truncation stage for what a later stage appends (the diagnostics of
/// a call that changed files).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Reserve {
    /// Lines kept free.
    pub(crate) lines: usize,
    /// Bytes kept free.
    pub(crate) bytes: usize,
}

/// The size of an output as a client shows it to the model: its text blocks joined by line
/// breaks, and a line of text for each resource link (hosts that cannot follow a link show
/// its name and URI). The joined text is at least as long, in lines and in bytes, as the
/// blocks put end to end, so it bounds both ways a host may join them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Shown {
    /// Lines, as `str::lines` counts them in the joined text.
    pub(crate) lines: usize,
    /// Bytes.
    pub(crate) bytes: usize,
    pieces: usize,
    newlines: usize,
    ends_with_newline: bool,
}

/// Bytes a resource link is counted as beyond its name and URI (a host's words around them).
const LINK_FRAMING: usize = 32;
/// Room kept for the link to a spill file that a cut adds (its name, URI and framing).
const LINK_RESERVE: Shown = Shown {
    // A line of its own, and a blank one before it when the text before ends a line.
    lines: 2,
    bytes: 160,
    pieces: 1,
    newlines: 0,
    ends_with_newline: false,
};

impl Shown {
    /// The size of the output's content as shown.
    pub(crate) fn of(content: &[Content]) -> Self {
        let mut shown = Self::default();
        for block in content {
            shown.push_block(block);
        }
        shown
    }

    fn push_block(&mut self, block: &Content) {
        match block {
            Content::Text(text) => self.push(text),
            // A long output is shown as its head (and tail): both count.
            Content::Long(long) if in_memory(long) => self.push(&long.head),
            Content::Long(long) => {
                self.push(&long.head);
                self.extend(
                    long.tail.len(),
                    count_newlines(&long.tail),
                    long.tail.ends_with('\n'),
                );
            }
            Content::ResourceLink { uri, name, .. } => {
                self.push_piece(name.len() + uri.len() + LINK_FRAMING, 0, false);
            }
            Content::Image { .. } => {}
        }
    }

    fn push(&mut self, text: &str) {
        self.push_piece(text.len(), count_newlines(text), text.ends_with('\n'));
    }

    /// One more block, joined to the others by a line break.
    fn push_piece(&mut self, bytes: usize, newlines: usize, ends_with_newline: bool) {
        if self.pieces > 0 {
            self.bytes += 1;
            self.newlines += 1;
            self.ends_with_newline = true;
        }
        self.pieces += 1;
        self.extend(bytes, newlines, ends_with_newline);
    }

    /// More text at the end of the last block.
    fn extend(&mut self, bytes: usize, newlines: usize, ends_with_newline: bool) {
        self.bytes += bytes;
        self.newlines += newlines;
        if bytes > 0 {
            self.ends_with_newline = ends_with_newline;
        }
        self.lines = self.newlines + usize::from(self.bytes > 0 && !self.ends_with_newline);
    }

    /// Whether it fits within `room`.
    pub(crate) fn within(self, room: Shown) -> bool {
        self.lines <= room.lines && self.bytes <= room.bytes
    }

    /// The room left in `limits` after this, less `reserve`.
    pub(crate) fn room_left(self, limits: OutputLimits, reserve: Reserve) -> Shown {
        Shown {
            lines: limits
                .max_lines
                .saturating_sub(reserve.lines)
                .saturating_sub(self.lines),
            bytes: limits
                .max_bytes
                .saturating_sub(reserve.bytes)
                .saturating_sub(self.bytes),
            ..Shown::default()
        }
    }
}

fn count_newlines(text: &str) -> usize {
    memchr::memchr_iter(b'\n', text.as_bytes()).count()
}

/// The room the limits leave for the output, less `reserve`.
fn room(limits: OutputLimits, reserve: Reserve) -> Shown {
    Shown::default().room_left(limits, reserve)
}

/// Whether [`apply`] may save a spill file for this output: whether it is file work. A text
/// in memory is saved when it is cut: when the output does not fit, or when a long output
/// that outgrew memory (always cut, its notice added) might push it over.
pub(super) fn saves(output: &ToolOutput, limits: OutputLimits, reserve: Reserve) -> bool {
    let (mut in_memory_text, mut spilled) = (false, false);
    for block in &output.content {
        match block {
            Content::Text(_) => in_memory_text = true,
            Content::Long(long) if in_memory(long) => in_memory_text = true,
            Content::Long(_) => spilled = true,
            Content::Image { .. } | Content::ResourceLink { .. } => {}
        }
    }
    in_memory_text && (spilled || !Shown::of(&output.content).within(room(limits, reserve)))
}

/// Truncates an output so that all of it as a client shows it (its text blocks joined, a
/// line per resource link: [`Shown`]) fits the limits, less `reserve`: the truncation notice,
/// a command's status footer and notes, the link to the full output and the marker of a
/// failed output all count. The largest text block is cut (a [`Content::Long`] that outgrew
/// memory always is, and first), to the room the other blocks leave it; should that not be
/// enough, the next largest, and so on. A cut saves the full text to a spill file (a
/// `Content::Long` already has its own), adds a notice saying what was cut and how to go on,
/// and a resource link to the full text.
///
/// The result fits whenever the limits leave room for a notice (about 8 lines and 1,300
/// bytes beside the other blocks); below that, the notice still comes whole.
pub(super) fn apply(
    mut output: ToolOutput,
    limits: OutputLimits,
    spill: &SpillStore,
    reserve: Reserve,
) -> ToolOutput {
    let room = room(limits, reserve);
    let mut done = vec![false; output.content.len()];
    let mut links = Vec::new();
    loop {
        let mut shown = Shown::of(&output.content);
        for link in &links {
            shown.push_block(link);
        }
        let Some(index) = next_to_cut(&output.content, &done, shown.within(room)) else {
            break;
        };
        done[index] = true;
        let budget = budget_for(&output.content, &links, index, room, limits.mode);
        let Some((text, truncation)) = cut_block(
            &mut output.content[index],
            budget,
            spill,
            limits,
            output.page,
        ) else {
            continue;
        };
        output.content[index] = Content::Text(text);
        if let Some(file) = &truncation.spill {
            links.push(Content::ResourceLink {
                uri: file.uri(),
                name: format!("full output ({} bytes)", file.size),
                size: Some(file.size),
            });
        }
        output.truncated = Some(truncation);
    }
    // What fitted in memory and was not cut is shown whole.
    for block in &mut output.content {
        if let Content::Long(long) = block
            && in_memory(long)
        {
            *block = Content::Text(std::mem::take(&mut long.head));
        }
    }
    output.content.extend(links);
    output
}

/// The block to cut next, if any: a long output that outgrew memory (always cut), else,
/// when the output does not `fit`, the largest text not cut yet.
fn next_to_cut(content: &[Content], done: &[bool], fit: bool) -> Option<usize> {
    let left = || content.iter().enumerate().filter(|(i, _)| !done[*i]);
    if let Some((i, _)) =
        left().find(|(_, block)| matches!(block, Content::Long(long) if !in_memory(long)))
    {
        return Some(i);
    }
    if fit {
        return None;
    }
    left()
        .filter_map(|(i, block)| match block {
            Content::Text(text) => Some((i, text.len())),
            Content::Long(long) => Some((i, long.head.len())),
            Content::Image { .. } | Content::ResourceLink { .. } => None,
        })
        .max_by_key(|&(i, bytes)| (bytes, std::cmp::Reverse(i)))
        .map(|(i, _)| i)
}

/// The limits for block `index`: the room the other blocks (this one empty), the links so
/// far and one more link leave it.
fn budget_for(
    content: &[Content],
    links: &[Content],
    index: usize,
    room: Shown,
    mode: TruncationMode,
) -> OutputLimits {
    let mut others = Shown::default();
    for (i, block) in content.iter().enumerate() {
        if i == index {
            others.push("");
        } else {
            others.push_block(block);
        }
    }
    for link in links {
        others.push_block(link);
    }
    OutputLimits {
        max_lines: room
            .lines
            .saturating_sub(others.lines + LINK_RESERVE.lines)
            .max(1),
        max_bytes: room
            .bytes
            .saturating_sub(others.bytes + 1 + LINK_RESERVE.bytes)
            .max(1),
        mode,
    }
}

/// Cuts one block to `budget`: the kept text with its notice, and what was cut; `None` when
/// it fits whole. A text is saved to a spill file first.
fn cut_block(
    block: &mut Content,
    budget: OutputLimits,
    spill: &SpillStore,
    limits: OutputLimits,
    page: Option<FilePage>,
) -> Option<(String, Truncation)> {
    let (shown, truncation) = match block {
        Content::Text(text) => {
            let (kept, cut) = truncate_text(text, budget);
            let cut = cut?;
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
        Content::Long(long) => cut_long(long, budget, spill)?,
        Content::Image { .. } | Content::ResourceLink { .. } => return None,
    };
    let notice = notice(limits, &truncation.cut, truncation.spill.as_ref(), page);
    let text = match limits.mode {
        TruncationMode::Tail => format!("{notice}\n\n{shown}"),
        TruncationMode::Head | TruncationMode::HeadTail => {
            let separator = if shown.ends_with('\n') { "\n" } else { "\n\n" };
            format!("{shown}{separator}{notice}")
        }
    };
    Some((text, truncation))
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
                if !fits(whole, kept_room(limits)) {
                    // It fits, but not with the notice.
                    return cut_to(whole, limits);
                }
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
    // Each end gets half of what the notice and the middle marker leave, cut or not.
    let kept = kept_room(limits);
    let half = OutputLimits {
        max_lines: kept.max_lines / 2,
        max_bytes: kept.max_bytes / 2,
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
