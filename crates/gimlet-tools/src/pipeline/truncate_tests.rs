use pretty_assertions::assert_eq;
use proptest::prelude::*;

use super::*;
use crate::spill::SpillStore;

/// No room kept for a later stage.
const NONE: Reserve = Reserve { lines: 0, bytes: 0 };

fn limits(max_lines: usize, max_bytes: usize, mode: TruncationMode) -> OutputLimits {
    OutputLimits {
        max_lines,
        max_bytes,
        mode,
    }
}

fn numbered(lines: usize) -> String {
    (1..=lines).map(|i| format!("line {i}\n")).collect()
}

#[test]
fn text_within_limits_is_untouched() {
    let text = numbered(10);
    let (kept, cut) = truncate_text(&text, limits(10, 1000, TruncationMode::Head));
    assert_eq!((kept.as_str(), cut), (text.as_str(), None));
}

#[test]
fn head_keeps_whole_lines_from_the_start() {
    let (kept, cut) = truncate_text(&numbered(100), limits(20, 100_000, TruncationMode::Head));
    let cut = cut.unwrap();
    assert_eq!(kept, numbered(16));
    assert_eq!(
        (cut.head_lines, cut.tail_lines, cut.total_lines),
        (16, 0, 100)
    );
}

#[test]
fn tail_keeps_whole_lines_from_the_end() {
    let (kept, cut) = truncate_text(&numbered(100), limits(20, 100_000, TruncationMode::Tail));
    assert!(
        kept.starts_with("line 85\n") && kept.ends_with("line 100\n"),
        "{kept}"
    );
    assert_eq!(cut.unwrap().tail_lines, 16);
}

#[test]
fn head_tail_cuts_the_middle_and_counts_it() {
    let (kept, cut) = truncate_text(
        &numbered(100),
        limits(20, 100_000, TruncationMode::HeadTail),
    );
    let cut = cut.unwrap();
    assert_eq!((cut.head_lines, cut.tail_lines), (8, 8));
    assert!(kept.starts_with("line 1\n"), "{kept}");
    assert!(kept.contains("line 8\n[... 84 lines ("), "{kept}");
    assert!(
        kept.ends_with("line 93\nline 94\nline 95\nline 96\nline 97\nline 98\nline 99\nline 100\n")
    );
}

#[test]
fn byte_limit_applies_as_well_as_line_limit() {
    let text = "x".repeat(99) + "\n";
    let text = text.repeat(1000);
    let (kept, cut) = truncate_text(&text, limits(2000, 2000, TruncationMode::Head));
    assert!(kept.len() <= 2000 - 640, "{}", kept.len());
    assert_eq!(cut.unwrap().head_lines, 13);
}

#[test]
fn one_huge_line_is_cut_at_a_char_boundary() {
    let text = "é".repeat(10_000);
    let (kept, cut) = truncate_text(&text, limits(100, 1001, TruncationMode::Head));
    assert!(cut.unwrap().partial_line);
    assert!(kept.len() <= 1001 - 500);
    assert!(kept.chars().all(|c| c == 'é'));
    let (kept, _) = truncate_text(&text, limits(100, 1001, TruncationMode::Tail));
    assert!(!kept.is_empty() && kept.chars().all(|c| c == 'é'));
}

#[test]
fn a_page_whose_footer_alone_is_cut_says_the_file_was_shown_to_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let spill = SpillStore::open(dir.path()).unwrap();
    let footer = format!("[f: lines 1-10 of 10, {}]", "a long note ".repeat(100));
    let mut output = ToolOutput::text(format!("{}\n{footer}", numbered(10)));
    output.page = Some(FilePage {
        first: 1,
        last: 10,
        total: 10,
    });
    // The ten lines and the blank line fit; the long footer does not.
    let output = apply(
        output,
        limits(100, 1000, TruncationMode::Head),
        &spill,
        NONE,
    );
    let text = output.joined_text();
    assert!(text.starts_with(&format!("{}\n", numbered(10))), "{text}");
    let notice = text.lines().last().unwrap();
    assert!(
        notice.starts_with("[Output truncated: showing lines 1-10 of 10 (1000 byte limit)."),
        "{notice}"
    );
    assert!(!notice.contains("offset="), "{notice}");
}

#[test]
fn apply_saves_the_full_output_links_it_and_says_how_to_continue() {
    let dir = tempfile::tempdir().unwrap();
    let spill = SpillStore::open(dir.path()).unwrap();
    let full = numbered(3000);
    let mut output = ToolOutput::text(full.clone());
    // Lines 101-3100 of a 5000-line file. 1994 lines are shown: the notice and the link to the
    // full output take the rest of the 2000.
    output.page = Some(FilePage {
        first: 101,
        last: 3100,
        total: 5000,
    });
    let output = apply(
        output,
        limits(2000, 1_000_000, TruncationMode::Head),
        &spill,
        NONE,
    );
    let truncation = output.truncated.clone().unwrap();
    let file = truncation.spill.unwrap();
    assert_eq!(std::fs::read_to_string(&file.path).unwrap(), full);
    let text = output.joined_text();
    let last = text.lines().last().unwrap();
    assert!(
        last.starts_with("[Output truncated: showing lines 101-2094 of 5000 (2000 line limit)."),
        "{last}"
    );
    assert!(last.contains(&file.path.display().to_string()), "{last}");
    assert!(last.ends_with("Use offset=2095 to continue.]"), "{last}");
    assert!(
        output
            .content
            .iter()
            .any(|c| matches!(c, Content::ResourceLink { uri, .. } if *uri == file.uri()))
    );
}

#[test]
fn a_long_output_that_fitted_in_memory_is_saved_when_cut() {
    // Many short lines: under the buffer, over the line limit.
    let dir = tempfile::tempdir().unwrap();
    let spill = SpillStore::open(dir.path()).unwrap();
    let full = numbered(5000);
    let output = ToolOutput {
        content: vec![Content::Long(crate::output::LongText::complete(
            full.clone(),
        ))],
        ..ToolOutput::default()
    };
    let output = apply(
        output,
        limits(2000, 1_000_000, TruncationMode::HeadTail),
        &spill,
        NONE,
    );
    let file = output.truncated.clone().unwrap().spill.expect("saved");
    assert_eq!(std::fs::read_to_string(&file.path).unwrap(), full);
    assert!(
        output
            .content
            .iter()
            .any(|c| matches!(c, Content::ResourceLink { uri, .. } if *uri == file.uri()))
    );
}

#[test]
fn a_spilled_output_within_the_limits_names_memory_and_keeps_whole_lines() {
    // The producer kept less in memory than the limits allow: the notice says so, and the
    // shown head stops at its last whole line.
    let dir = tempfile::tempdir().unwrap();
    let spill = SpillStore::open(dir.path()).unwrap();
    let mut buffer = crate::output::OutputBuffer::new(&spill, 100);
    for i in 0..50 {
        buffer.push_str(&format!("some/path/file{i}.rs:1:text\n"));
    }
    let output = ToolOutput {
        content: vec![Content::Long(buffer.finish())],
        ..ToolOutput::default()
    };
    let output = apply(
        output,
        limits(1_000_000, 1 << 30, TruncationMode::Head),
        &spill,
        NONE,
    );
    let text = output.joined_text();
    let (shown, notice) = text.split_once("\n\n[").unwrap();
    assert_eq!(
        shown,
        "some/path/file0.rs:1:text\nsome/path/file1.rs:1:text\nsome/path/file2.rs:1:text"
    );
    assert!(
        notice.contains("of 50 (only 78 bytes of it were kept in memory)"),
        "{notice}"
    );
    assert_eq!(
        output.truncated.unwrap().cut.by,
        crate::pipeline::CutBy::Memory
    );
}

#[test]
fn apply_leaves_small_outputs_alone() {
    let dir = tempfile::tempdir().unwrap();
    let spill = SpillStore::open(dir.path()).unwrap();
    let output = apply(
        ToolOutput::text("short"),
        OutputLimits::DEFAULT,
        &spill,
        NONE,
    );
    assert_eq!(output.joined_text(), "short");
    assert_eq!(output.truncated, None);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

fn any_mode() -> impl Strategy<Value = TruncationMode> {
    prop_oneof![
        Just(TruncationMode::Head),
        Just(TruncationMode::Tail),
        Just(TruncationMode::HeadTail)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn truncation_keeps_its_promises(
        lines in proptest::collection::vec("[a-zé€😀 ]{0,40}", 0..200),
        trailing_newline in any::<bool>(),
        max_lines in 1usize..120,
        max_bytes in 1usize..4000,
        mode in any_mode(),
    ) {
        let mut text = lines.join("\n");
        if trailing_newline && !text.is_empty() {
            text.push('\n');
        }
        let limits = OutputLimits { max_lines, max_bytes, mode };
        let dir = tempfile::tempdir().unwrap();
        let spill = SpillStore::open(dir.path()).unwrap();
        let (kept, cut) = truncate_text(&text, limits);
        let fits = text.split_inclusive('\n').count() <= max_lines && text.len() <= max_bytes;
        // Reports truncation iff it happened.
        prop_assert_eq!(cut.is_none(), fits);
        if fits {
            prop_assert_eq!(&kept, &text);
        } else {
            // Never splits a character: kept parts are slices of the original at char
            // boundaries (the String would not exist otherwise) and come from its ends.
            let cut = cut.unwrap();
            prop_assert!(cut.kept_bytes < text.len() || cut.head_lines + cut.tail_lines < cut.total_lines);
            if mode == TruncationMode::Head {
                prop_assert!(text.starts_with(&kept));
            }
            if mode == TruncationMode::Tail {
                prop_assert!(text.ends_with(&kept));
            }
            // Whole lines only, unless a single line was too long for the budget.
            if mode == TruncationMode::Head && !cut.partial_line {
                prop_assert!(kept.is_empty() || kept.ends_with('\n') || kept.len() == text.len());
            }
        }
        // With the notice, the result stays within both limits whenever the limits leave
        // room for a notice at all.
        let output = apply(ToolOutput::text(text.clone()), limits, &spill, NONE);
        let shown = match &output.content[0] { Content::Text(t) => t.clone(), _ => unreachable!() };
        prop_assert_eq!(output.truncated.is_some(), !fits);
        if max_bytes >= 1300 && max_lines >= 8 {
            prop_assert!(shown.len() <= max_bytes, "{} > {}", shown.len(), max_bytes);
            prop_assert!(shown.split_inclusive('\n').count() <= max_lines);
        }
    }
}

#[test]
fn lines_are_counted_as_split_inclusive_counts_them() {
    for text in ["", "a", "a\n", "a\nb", "\n\n", "a\r\nb\r\n", "é\nü"] {
        assert_eq!(
            super::count_lines(text),
            text.split_inclusive('\n').count(),
            "{text:?}"
        );
    }
}

/// Asserts that an output, as a client shows it to the model, fits the limits, measured two
/// ways: as the text a client shows and as the stage measures it.
#[track_caller]
fn assert_fits(output: &ToolOutput, limits: OutputLimits) {
    crate::testutil::assert_fits(output, limits);
    let shown = Shown::of(&output.content);
    assert!(
        shown.lines <= limits.max_lines && shown.bytes <= limits.max_bytes,
        "{shown:?} over {limits:?}"
    );
}

/// A command's output and its status footer, as `bash` returns them.
fn command_output(text: String) -> ToolOutput {
    ToolOutput {
        content: vec![
            Content::Long(crate::output::LongText::complete(text)),
            Content::Text("[exit code 0 · 0.1 s · sandboxed]".into()),
        ],
        ..ToolOutput::default()
    }
}

#[test]
fn a_command_at_the_line_limit_keeps_its_footer_within_it() {
    // See: issue 38: `seq 1 2000` came to 2001 lines with the footer, and a host that keeps
    // the first 2000 lines dropped the footer.
    let dir = tempfile::tempdir().unwrap();
    let spill = SpillStore::open(dir.path()).unwrap();
    for mode in [
        TruncationMode::Head,
        TruncationMode::Tail,
        TruncationMode::HeadTail,
    ] {
        let limits = OutputLimits {
            mode,
            ..OutputLimits::DEFAULT
        };
        // 1998 lines, a blank line and the footer: exactly 2000.
        for n in [1998, 1999, 2000, 2001, 5000, 100_000] {
            let seq: String = (1..=n).map(|i| format!("{i}\n")).collect();
            let output = apply(command_output(seq), limits, &spill, NONE);
            assert_fits(&output, limits);
            assert_eq!(output.truncated.is_some(), n > 1998, "{n} lines, {mode:?}");
            let text = output.joined_text();
            assert!(
                text.ends_with("[exit code 0 · 0.1 s · sandboxed]")
                    || text.contains("[exit code 0 · 0.1 s · sandboxed]\n"),
                "{n} lines, {mode:?}: the footer is lost"
            );
        }
        // The byte limit: lines of 100 bytes, the last one shorter to land on the limit
        // with the line break that joins the footer, and the footer.
        let room = limits.max_bytes - 1 - "[exit code 0 · 0.1 s · sandboxed]".len();
        for bytes in [room, room + 1, 10 * room] {
            let mut text = ("x".repeat(99) + "\n").repeat(bytes / 100);
            text.push_str(&"y".repeat(bytes % 100));
            assert_eq!(text.len(), bytes);
            let output = apply(command_output(text), limits, &spill, NONE);
            assert_fits(&output, limits);
            assert_eq!(
                output.truncated.is_some(),
                bytes > room,
                "{bytes} bytes, {mode:?}"
            );
        }
    }
}

#[test]
fn a_large_command_output_that_outgrew_memory_fits_with_its_footer_and_notes() {
    let dir = tempfile::tempdir().unwrap();
    let spill = SpillStore::open(dir.path()).unwrap();
    for mode in [
        TruncationMode::Head,
        TruncationMode::Tail,
        TruncationMode::HeadTail,
    ] {
        let limits = OutputLimits {
            mode,
            ..OutputLimits::DEFAULT
        };
        let mut buffer = crate::output::OutputBuffer::new(&spill, 512 * 1024);
        for i in 0..300_000 {
            buffer.push_str(&format!("line {i}\n"));
        }
        let mut output = ToolOutput {
            content: vec![
                Content::Long(buffer.finish()),
                Content::Text("[exit code 0 · 2.0 s · sandboxed]\n[a note]\n[another note]".into()),
            ],
            is_error: true,
            ..ToolOutput::default()
        };
        output.mark_error("bash");
        let output = apply(output, limits, &spill, NONE);
        assert_fits(&output, limits);
        let text = output.joined_text();
        assert!(text.starts_with("Error (bash):\n"), "{mode:?}");
        assert!(text.contains("[another note]"), "{mode:?}");
        assert!(text.contains("[Output truncated: "), "{mode:?}");
    }
}

#[test]
fn room_is_kept_for_what_a_later_stage_appends() {
    let dir = tempfile::tempdir().unwrap();
    let spill = SpillStore::open(dir.path()).unwrap();
    let reserve = Reserve {
        lines: 60,
        bytes: 6 * 1024,
    };
    // Fits the limits, but not with the room kept.
    let output = apply(
        ToolOutput::text(numbered(1990)),
        OutputLimits::DEFAULT,
        &spill,
        reserve,
    );
    assert!(output.truncated.is_some());
    let room = Shown::of(&output.content).room_left(OutputLimits::DEFAULT, Reserve::default());
    assert!(room.lines >= 60 && room.bytes >= 6 * 1024, "{room:?}");
    let small = apply(
        ToolOutput::text(numbered(10)),
        OutputLimits::DEFAULT,
        &spill,
        reserve,
    );
    assert_eq!(small.truncated, None);
}

#[test]
fn the_joined_size_counts_lines_as_the_joined_text_does() {
    let blocks = [
        vec![],
        vec![Content::Text(String::new())],
        vec![Content::Text("a\n".into()), Content::Text("b".into())],
        vec![Content::Text("a".into()), Content::Text("b\n".into())],
        vec![Content::Text("a\n".into()), Content::Text(String::new())],
        vec![Content::Text(String::new()), Content::Text(String::new())],
        vec![
            Content::Long(crate::output::LongText::complete("x\ny\n".into())),
            Content::Text("[exit]".into()),
        ],
    ];
    for content in blocks {
        let output = ToolOutput {
            content: content.clone(),
            ..ToolOutput::default()
        };
        let text = output.joined_text();
        let shown = Shown::of(&content);
        assert_eq!(
            (shown.lines, shown.bytes),
            (text.lines().count(), text.len()),
            "{text:?}"
        );
    }
    // A link counts as a line of its name, its URI and some words around them.
    let link = Content::ResourceLink {
        uri: "gimlet://output/0123".into(),
        name: "full output (10 bytes)".into(),
        size: Some(10),
    };
    let shown = Shown::of(&[Content::Text("a\n".into()), link]);
    assert_eq!((shown.lines, shown.bytes), (3, 2 + 1 + 20 + 22 + 32));
}

fn any_content() -> impl Strategy<Value = (Vec<String>, u8)> {
    (
        proptest::collection::vec("[a-zé€😀 ]{0,60}", 0..400),
        // 0: a text; 1: a long output in memory; 2: one that outgrew memory.
        0u8..3,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whatever the blocks, the whole output as shown fits the limits once they leave room
    /// for the notice beside the small blocks, and the small blocks stay whole.
    #[test]
    fn whole_outputs_fit_the_limits(
        (lines, kind) in any_content(),
        footers in proptest::collection::vec("[a-z ]{1,30}(\n[a-z ]{1,30}){0,2}", 0..3),
        failed in any::<bool>(),
        max_lines in 30usize..300,
        max_bytes in 2500usize..10_000,
        mode in any_mode(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let spill = SpillStore::open(dir.path()).unwrap();
        let text = lines.join("\n") + "\n";
        let main = match kind {
            0 => Content::Text(text.clone()),
            1 => Content::Long(crate::output::LongText::complete(text.clone())),
            _ => {
                let mut buffer = crate::output::OutputBuffer::new(&spill, 1000);
                buffer.push_str(&text);
                Content::Long(buffer.finish())
            }
        };
        let mut content = vec![main];
        content.extend(footers.iter().cloned().map(Content::Text));
        let mut output = ToolOutput { content, is_error: failed, ..ToolOutput::default() };
        output.mark_error("probe");
        let before = Shown::of(&output.content);
        let limits = OutputLimits { max_lines, max_bytes, mode };
        let output = apply(output, limits, &spill, NONE);
        assert_fits(&output, limits);
        let spilled = kind == 2 && text.len() > 1000;
        prop_assert_eq!(
            output.truncated.is_some(),
            spilled || !before.within(room(limits, NONE))
        );
        let shown = output.joined_text();
        for footer in &footers {
            if footer.len() < text.len() {
                prop_assert!(shown.contains(footer.as_str()), "{footer:?} lost");
            }
        }
        prop_assert_eq!(shown.starts_with("Error (probe):"), failed);
    }
}
