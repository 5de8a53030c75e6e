use pretty_assertions::assert_eq;
use proptest::prelude::*;

use super::{MAX_LINE_CHARS, Screen, render};

/// What a screen shows for `chunks` fed one after another.
fn fed(chunks: &[&[u8]]) -> String {
    let mut screen = Screen::new();
    let mut out = String::new();
    for chunk in chunks {
        screen.feed(chunk, &mut out);
    }
    screen.finish(&mut out);
    out
}

fn shown(bytes: &str) -> String {
    render(bytes.as_bytes())
}

// See: issue 38, item 5.
#[test]
fn colour_codes_are_removed() {
    assert_eq!(shown("red \x1b[31mRED\x1b[0m"), "red RED");
    assert_eq!(
        shown("\x1b[1;38;5;196mbold\x1b[m \x1b[38:2:0:255:0:0mtrue\x1b[39m\n"),
        "bold true\n"
    );
}

#[test]
fn a_carriage_return_overwrites_the_start_of_the_line() {
    assert_eq!(shown("10%\r100%"), "100%");
    // Shorter text overwrites only the start: what a terminal shows.
    assert_eq!(shown("abcdef\rXY"), "XYcdef");
    assert_eq!(shown("abcdef\rXY\n"), "XYcdef\n");
    // Erase to the end of the line, as progress bars do before redrawing.
    assert_eq!(shown("abcdef\r\x1b[KXY\n"), "XY\n");
    assert_eq!(shown("abcdef\x1b[2K\rXY\n"), "XY\n");
}

#[test]
fn a_progress_bar_of_a_thousand_updates_is_one_line() {
    let mut bytes = String::from("Downloading\n");
    for i in 0..=1000 {
        bytes.push_str(&format!("\r[{:<50}] {:>3}%", "#".repeat(i / 20), i / 10));
    }
    bytes.push_str("\ndone\n");
    assert_eq!(
        shown(&bytes),
        format!("Downloading\n[{}] 100%\ndone\n", "#".repeat(50))
    );
}

#[test]
fn crlf_ends_lines() {
    assert_eq!(shown("one\r\ntwo\r\n"), "one\ntwo\n");
    // Split between the two bytes.
    assert_eq!(fed(&[b"one\r", b"\ntwo\r", b"\n"]), "one\ntwo\n");
    assert_eq!(shown("a\n\n\r\nb"), "a\n\n\nb");
}

#[test]
fn cursor_moves_along_the_line_are_applied_and_others_removed() {
    // Column, forward, back, erase characters, delete, insert.
    assert_eq!(shown("abcdef\x1b[3GX\n"), "abXdef\n");
    assert_eq!(shown("ab\x1b[3Cc\n"), "ab   c\n");
    assert_eq!(shown("abcdef\x1b[2DX\n"), "abcdXf\n");
    assert_eq!(shown("abcdef\r\x1b[2X\n"), "  cdef\n");
    assert_eq!(shown("abcdef\r\x1b[2P\n"), "cdef\n");
    assert_eq!(shown("abcdef\r\x1b[2@\n"), "  abcdef\n");
    assert_eq!(shown("abcdef\x1b[3D\x1b[1K\n"), "    ef\n");
    // Moves to other lines, screen erases, cursor saves and modes: removed.
    assert_eq!(
        shown("a\x1b[1Ab\x1b[2Jc\x1b[H\x1b7d\x1b8\x1b[?25le\x1b[?25h\n"),
        "abcde\n"
    );
    // Backspace moves back one; overstrike shows the letter once.
    assert_eq!(shown("ab\x08c\n_\x08H_\x08i\n"), "ac\nHi\n");
    assert_eq!(shown("\x08\x08x"), "x");
}

#[test]
fn osc_titles_and_hyperlinks_are_removed() {
    assert_eq!(shown("\x1b]0;my title\x07after\n"), "after\n");
    assert_eq!(
        shown("see \x1b]8;;https://example.com\x1b\\the link\x1b]8;;\x1b\\ here\n"),
        "see the link here\n"
    );
    // DCS and APC strings too.
    assert_eq!(shown("a\x1bPq#0;2;0;0;0\x1b\\b\x1b_apc\x1b\\c\n"), "abc\n");
}

#[test]
fn other_control_characters_are_removed_and_tabs_kept() {
    assert_eq!(shown("a\x07b\x00c\x7fd\te\u{85}f\n"), "abcd\tef\n");
    // Vertical tab and form feed end lines, as a terminal moves down a line.
    assert_eq!(shown("a\x0bb\x0cc"), "a\nb\nc");
}

#[test]
fn sequences_and_characters_split_across_reads_are_put_together() {
    assert_eq!(fed(&[b"red \x1b", b"[31mRED\x1b[", b"0m\n"]), "red RED\n");
    assert_eq!(fed(&[b"\x1b]0;ti", b"tle\x07x\n"]), "x\n");
    // A split after the CSI parameters, then a plain line: the parser still holds the sequence.
    assert_eq!(
        fed(&[b"\x1b[31", b"m plain\n", b"next\n"]),
        " plain\nnext\n"
    );
    let e = "é".as_bytes();
    assert_eq!(fed(&[b"caf", &e[..1], &e[1..], b"\n"]), "café\n");
    // A character split across reads, then one more and an incomplete one: vte on its own
    // drops the `a` (its window of four bytes holds `é`, `a` and the start of `€`).
    let text = "éa€ b\n".as_bytes();
    assert_eq!(fed(&[&text[..1], &text[1..]]), "éa€ b\n");
    assert_eq!(fed(&[&text[..1], &text[1..5], &text[5..]]), "éa€ b\n");
    // A character cut off by the end of the output.
    assert_eq!(fed(&[b"ab\xe2", b"\x82"]), "ab\u{fffd}");
    // Every split point of a mixed line gives the same text.
    let whole = "\x1b[1mgr\u{fc}n \x1b]0;t\x07\u{1F600}\r\x1b[Kok\x1b[0m\r\n".as_bytes();
    let expected = render(whole);
    assert_eq!(expected, "ok\n");
    for at in 0..whole.len() {
        assert_eq!(
            fed(&[&whole[..at], &whole[at..]]),
            expected,
            "split at {at}"
        );
    }
}

#[test]
fn an_unterminated_sequence_hides_at_most_the_rest_of_its_line() {
    // An OSC title without its terminator would swallow everything after it in a terminal.
    assert_eq!(shown("before \x1b]0;title\nafter\n"), "before \nafter\n");
    assert_eq!(shown("a \x1b[31\nb\n"), "a \nb\n");
    assert_eq!(shown("end \x1b["), "end ");
    // Bytes that are no sequence: an ESC alone, a CSI with an unknown final byte.
    assert_eq!(shown("x\x1b[5~y\x1bcz\n"), "xyz\n");
}

#[test]
fn utf8_around_sequences_is_kept_and_invalid_bytes_are_marked() {
    assert_eq!(
        shown("\x1b[32m✓\x1b[0m grün 日本\x1b[0m 😀\n"),
        "✓ grün 日本 😀\n"
    );
    assert_eq!(shown("caf\u{e9}\n"), "café\n");
    assert_eq!(render(b"caf\xe9\n"), "caf\u{fffd}\n");
    assert_eq!(render(b"a\xff\x1b[31mb\n"), "a\u{fffd}b\n");
    // A character cut off by the end of a line.
    assert_eq!(render(b"ab\xe2\x82\ncd\n"), "ab\u{fffd}\ncd\n");
}

#[test]
fn a_line_in_progress_is_passed_on_once_and_again_only_if_it_changed() {
    let mut screen = Screen::new();
    let mut out = String::new();
    screen.feed(b"done: 1\nDownloading...", &mut out);
    assert_eq!(out, "done: 1\n");
    screen.flush_partial(&mut out);
    assert_eq!(out, "done: 1\nDownloading...");
    out.clear();
    // Appended to: only the new part.
    screen.feed(b" 50%", &mut out);
    screen.flush_partial(&mut out);
    assert_eq!(out, " 50%");
    out.clear();
    // Rewritten: the whole line again.
    screen.feed(b"\rDownloading... 100%\n", &mut out);
    assert_eq!(out, "Downloading... 100%\n");
    out.clear();
    screen.flush_partial(&mut out);
    assert_eq!(out, "");
}

#[test]
fn a_very_long_line_is_passed_on_in_pieces_in_bounded_memory() {
    let long = "x".repeat(MAX_LINE_CHARS * 3 + 5);
    let mut screen = Screen::new();
    let mut out = String::new();
    screen.feed(long.as_bytes(), &mut out);
    assert_eq!(out.len(), MAX_LINE_CHARS * 3, "whole pieces are passed on");
    screen.feed(b"\n", &mut out);
    assert_eq!(out, format!("{long}\n"));
    // A cursor sent far right cannot make the line grow without bound.
    let mut hostile = Vec::new();
    for _ in 0..1000 {
        hostile.extend_from_slice(b"\x1b[65535Cx");
    }
    let text = render(&hostile);
    assert_eq!(text.matches('x').count(), 1000);
    assert!(text.len() <= 1000 * (MAX_LINE_CHARS + 1), "{}", text.len());
}

#[test]
fn plain_lines_take_the_fast_path_and_come_out_the_same() {
    let text = "line one\n\tindented\nünïcödé\n\nlast";
    assert_eq!(shown(text), text);
    assert_eq!(
        fed(&[b"par", b"tial\nwhole\n", b"end"]),
        "partial\nwhole\nend"
    );
}

proptest! {
    /// Feeding in pieces gives what feeding at once gives, whatever the bytes and the cuts.
    #[test]
    fn chunking_never_changes_the_text(
        bytes in proptest::collection::vec(
            prop_oneof![
                Just(0x1b_u8), Just(b'['), Just(b']'), Just(b'\r'), Just(b'\n'), Just(0x07),
                Just(b'3'), Just(b';'), Just(b'm'), Just(b'K'), Just(0x08), Just(0xc3),
                Just(0xa9), any::<u8>(), Just(b'a'),
            ],
            0..200,
        ),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let whole = render(&bytes);
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
        points.sort_unstable();
        let mut chunks = Vec::new();
        let mut from = 0;
        for at in points {
            chunks.push(&bytes[from..at]);
            from = at;
        }
        chunks.push(&bytes[from..]);
        prop_assert_eq!(fed(&chunks), whole.clone());
        prop_assert!(!whole.contains('\x1b') && !whole.contains('\r'));
    }
}
