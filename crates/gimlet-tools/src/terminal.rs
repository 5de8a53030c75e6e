//! Command output as a terminal would show it: escape sequences removed, each line in the state
//! it was left in.
//!
//! A command's output is meant for a terminal. Passed on as bytes, `printf 'red \033[31mRED'`
//! reaches the model with its ESC bytes, and a progress line `10%\r100%` as `10%100%`: a
//! package manager's progress bar becomes thousands of bytes of noise counted against the output
//! cap. [`Screen`] keeps what a terminal would show instead. The grammar of escape sequences is
//! `vte`'s (the parser of the alacritty terminal); what they do to a line is ours:
//!
//! - Printable characters are written at the cursor, over what is there: `abcdef`, `\r`, `XY`
//!   shows `XYcdef`, as a terminal does (a `\r` moves the cursor, it erases nothing), and
//!   `10%\r100%` shows `100%`. A progress bar of a thousand `\r` updates is one line.
//! - `\n` ends the line (so `\r\n` is a line ending, shown as `\n`); a vertical tab or a form
//!   feed too. Backspace moves the cursor one back, so `a\bb` shows `b` (and the overstrike of
//!   `man` pages shows each letter once). A tab is kept as a tab.
//! - Of the CSI sequences, those that move the cursor along the line or erase in it are applied
//!   (`K` erase in line, `G`/`` ` `` column, `C`/`a` forward, `D` back, `X` erase characters,
//!   `P` delete characters, `@` insert blanks); every other sequence (colours, cursor moves to
//!   other lines, screen erases, modes, OSC titles and hyperlinks, DCS, APC ...) is removed
//!   without effect, as are other control characters (BEL, NUL, ...). Output that redraws lines
//!   above it (cursor up) shows each drawing in turn.
//! - A line end also ends any sequence left open (an OSC title without its terminator, a CSI cut
//!   off), so that a broken sequence hides at most the rest of its line, never the output after
//!   it. Sequences and characters split across reads are put together (the parser keeps its
//!   state from one read to the next).
//! - Invalid UTF-8 is shown as U+FFFD. Every character is one column (wide and combining
//!   characters are not measured).
//! - A line is held until it ends, up to [`MAX_LINE_CHARS`] characters: a longer line is passed on
//!   in pieces of that size, and a `\r` then returns to the start of the current piece.

/// Characters of one line held at most before they are passed on (256 KiB of `char`s).
pub(crate) const MAX_LINE_CHARS: usize = 64 * 1024;

/// The state of a terminal's current line, fed bytes, giving the text of the lines it finished.
pub(crate) struct Screen {
    parser: vte::Parser,
    line: Line,
    /// The parser is at its ground state with nothing held (at the start, and after each
    /// line end): a plain line may skip it.
    idle: bool,
    /// The start of a character cut off by the end of the last read, held back until the
    /// rest comes: `vte` 0.14 and 0.15 drop the characters after one it put together across
    /// two reads when an incomplete one follows within its four-byte window.
    held: Vec<u8>,
}

impl std::fmt::Debug for Screen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Screen")
            .field("line", &self.line.chars.len())
            .finish_non_exhaustive()
    }
}

impl Default for Screen {
    fn default() -> Self {
        Self::new()
    }
}

/// The current line, and the text of finished lines not yet taken.
#[derive(Default)]
struct Line {
    chars: Vec<char>,
    cursor: usize,
    /// Finished text, ready to be taken.
    out: String,
    /// Characters of `chars` already passed on by [`Screen::flush_partial`].
    shown: usize,
    /// The lowest column changed since then.
    changed_from: usize,
}

impl Screen {
    /// A screen at the start of an empty line.
    pub(crate) fn new() -> Self {
        Self {
            parser: vte::Parser::new(),
            line: Line {
                changed_from: usize::MAX,
                ..Line::default()
            },
            idle: true,
            held: Vec::new(),
        }
    }

    /// Feeds bytes as they came; appends the text of every line they finished (with its `\n`)
    /// to `out`.
    pub(crate) fn feed(&mut self, bytes: &[u8], out: &mut String) {
        if self.held.is_empty() {
            self.feed_whole_characters(bytes);
        } else {
            // Rare: a copy, to give the parser the character whole.
            let mut joined = std::mem::take(&mut self.held);
            joined.extend_from_slice(bytes);
            self.feed_whole_characters(&joined);
        }
        out.push_str(&self.line.out);
        self.line.out.clear();
    }

    /// Feeds `bytes` but an incomplete character at their end, which is held.
    fn feed_whole_characters(&mut self, bytes: &[u8]) {
        let whole = bytes.len() - incomplete_tail(bytes);
        self.held.extend_from_slice(&bytes[whole..]);
        let mut rest = &bytes[..whole];
        if self.idle
            && self.line.at_start()
            && let Some(last) = memchr::memrchr(b'\n', rest)
            && is_plain(&rest[..last])
        {
            // Most output: whole lines with nothing to interpret, taken at once.
            let (lines, after) = rest.split_at(last + 1);
            self.line
                .out
                .push_str(std::str::from_utf8(lines).unwrap_or_default());
            rest = after;
        }
        while !rest.is_empty() {
            let Some(newline) = memchr::memchr(b'\n', rest) else {
                self.parser.advance(&mut self.line, rest);
                self.idle = false;
                break;
            };
            let (text, after) = rest.split_at(newline);
            if self.idle && self.line.at_start() && is_plain(text) {
                // Most lines: nothing to interpret, and no line before them to finish.
                self.line
                    .out
                    .push_str(std::str::from_utf8(text).unwrap_or_default());
                self.line.out.push('\n');
            } else {
                self.parser.advance(&mut self.line, text);
                // CAN ends any open sequence (the parser is back at its ground state, and what
                // it held of a character is shown as U+FFFD); then the line feed.
                self.parser.advance(&mut self.line, b"\x18\n");
                self.idle = true;
            }
            rest = &after[1..];
        }
    }

    /// Passes on the current line as it stands, without ending it (for output read while the
    /// command runs): what was added to it since the last time if only that changed, else the
    /// whole line again.
    pub(crate) fn flush_partial(&mut self, out: &mut String) {
        self.line.pass_on();
        out.push_str(&self.line.out);
        self.line.out.clear();
    }

    /// The end of the output: passes on the current line as it stands (without a `\n`); a
    /// sequence still open is dropped.
    pub(crate) fn finish(mut self, out: &mut String) {
        if !self.held.is_empty() {
            // A character cut off by the end: shown as U+FFFD (CAN completes it as invalid).
            let held = std::mem::take(&mut self.held);
            self.parser.advance(&mut self.line, &held);
            self.parser.advance(&mut self.line, b"\x18");
        }
        self.flush_partial(out);
    }
}

/// How many bytes at the end of `bytes` start a UTF-8 character that they cut off (0 to 3).
fn incomplete_tail(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let byte = bytes[bytes.len() - back];
        if byte & 0xC0 == 0x80 {
            // A continuation byte: look further back for the start.
            continue;
        }
        let needs = match byte {
            0xF0.. => 4,
            0xE0.. => 3,
            0xC0.. => 2,
            _ => return 0,
        };
        return if needs > back { back } else { 0 };
    }
    0
}

/// Whether text has nothing a terminal would interpret: valid UTF-8 without control
/// characters but tabs and line feeds (C0, DEL, and C1 as UTF-8 `0xC2 0x80..=0x9F`).
fn is_plain(text: &[u8]) -> bool {
    let controls = text
        .iter()
        .any(|&b| (b < 0x20 && b != b'\t' && b != b'\n') || b == 0x7F || b == 0xC2);
    // 0xC2 starts U+0080..U+00BF: rare enough to send such lines the slow way.
    !controls && std::str::from_utf8(text).is_ok()
}

impl Line {
    /// Whether nothing of the current line is held.
    fn at_start(&self) -> bool {
        self.chars.is_empty() && self.cursor == 0
    }

    /// Notes a change at `column`.
    fn touch(&mut self, column: usize) {
        self.changed_from = self.changed_from.min(column);
    }

    /// Writes a character at the cursor.
    fn put(&mut self, c: char) {
        if self.cursor >= MAX_LINE_CHARS {
            // A very long line: pass on what is held, and go on with a new piece.
            self.pass_on();
            self.chars.clear();
            self.cursor = 0;
            self.shown = 0;
            self.changed_from = usize::MAX;
        }
        self.touch(self.cursor);
        if self.cursor < self.chars.len() {
            self.chars[self.cursor] = c;
        } else {
            self.chars.resize(self.cursor, ' ');
            self.chars.push(c);
        }
        self.cursor += 1;
    }

    /// Passes the current line on to `out`: what was added since the last time, or all of it
    /// if an earlier part changed.
    fn pass_on(&mut self) {
        let from = if self.changed_from >= self.shown {
            self.shown
        } else {
            0
        };
        self.out.extend(&self.chars[from.min(self.chars.len())..]);
        self.shown = self.chars.len();
        self.changed_from = usize::MAX;
    }

    /// Ends the line.
    fn line_feed(&mut self) {
        self.pass_on();
        self.out.push('\n');
        self.chars.clear();
        self.cursor = 0;
        self.shown = 0;
        self.changed_from = usize::MAX;
    }

    /// CSI `K`: erases to the end of the line (0), from its start through the cursor (1), or
    /// all of it (2).
    fn erase_in_line(&mut self, how: u16) {
        match how {
            0 if self.cursor < self.chars.len() => {
                self.touch(self.cursor);
                self.chars.truncate(self.cursor);
            }
            1 => self.blank(0, self.cursor + 1),
            2 => {
                self.touch(0);
                self.chars.clear();
            }
            _ => {}
        }
    }

    /// Blanks the columns from `start` to `end` (spaces in place, the length unchanged).
    fn blank(&mut self, start: usize, end: usize) {
        let end = end.min(self.chars.len());
        if start < end {
            self.touch(start);
            self.chars[start..end].fill(' ');
        }
    }
}

impl vte::Perform for Line {
    fn print(&mut self, c: char) {
        if c != '\u{7f}' {
            self.put(c);
        }
    }

    fn execute(&mut self, byte: u8) {
        match byte {
            b'\n' | 0x0B | 0x0C => self.line_feed(),
            b'\r' => self.cursor = 0,
            0x08 => self.cursor = self.cursor.saturating_sub(1),
            b'\t' => self.put('\t'),
            _ => {}
        }
    }

    fn csi_dispatch(
        &mut self,
        params: &vte::Params,
        intermediates: &[u8],
        _ignore: bool,
        action: char,
    ) {
        if !intermediates.is_empty() {
            return;
        }
        let first = params
            .iter()
            .next()
            .and_then(|p| p.first().copied())
            .unwrap_or(0);
        // A count of 0 means 1 for the sequences that take a count.
        let count = usize::from(first.max(1)).min(MAX_LINE_CHARS);
        match action {
            'K' => self.erase_in_line(first),
            'G' | '`' => self.cursor = count - 1,
            'C' | 'a' => self.cursor = (self.cursor + count).min(MAX_LINE_CHARS),
            'D' => self.cursor = self.cursor.saturating_sub(count),
            'X' => self.blank(self.cursor, self.cursor + count),
            'P' if self.cursor < self.chars.len() => {
                self.touch(self.cursor);
                let end = (self.cursor + count).min(self.chars.len());
                self.chars.drain(self.cursor..end);
            }
            '@' if self.cursor < self.chars.len() => {
                self.touch(self.cursor);
                let room = MAX_LINE_CHARS.saturating_sub(self.chars.len()).min(count);
                self.chars
                    .splice(self.cursor..self.cursor, std::iter::repeat_n(' ', room));
            }
            _ => {}
        }
    }
}

/// The text a terminal would show for a whole output (the same as feeding it in one piece and
/// finishing).
pub(crate) fn render(bytes: &[u8]) -> String {
    let mut screen = Screen::new();
    let mut out = String::with_capacity(bytes.len());
    screen.feed(bytes, &mut out);
    screen.finish(&mut out);
    out
}

#[cfg(test)]
#[path = "terminal_tests.rs"]
mod tests;
