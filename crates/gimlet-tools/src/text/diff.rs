//! Unified diffs with line numbers, for the results of the file tools.
//!
//! Only the part that changed is diffed: common leading and trailing lines are skipped first
//! (an edit of a 10 MB file diffs a few lines), and a middle too large to show line by line is
//! summarized instead of spending seconds on a diff nobody reads.

use std::fmt::Write as _;

use similar::{ChangeTag, TextDiff};

/// Lines of context around each change.
const CONTEXT: usize = 3;
/// Changed lines (both sides) beyond which the diff is summarized.
const MAX_DIFF_LINES: usize = 20_000;

/// Lines added and removed by a change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub(crate) struct DiffStats {
    /// Lines added.
    pub added: usize,
    /// Lines removed.
    pub removed: usize,
}

/// Byte offsets of line starts, plus the end.
fn line_starts(text: &str) -> Vec<usize> {
    let mut starts = vec![0];
    starts.extend(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1));
    if *starts.last().unwrap_or(&0) != text.len() {
        starts.push(text.len());
    }
    starts
}

/// Line `i` of `text`, its newline included.
fn line<'a>(text: &'a str, starts: &[usize], i: usize) -> &'a str {
    &text[starts[i]..starts[i + 1]]
}

/// A unified diff of two texts (`\n` breaks), 3 lines of context, each line numbered: context
/// and added lines by their new number, removed lines by their old one.
///
/// The equal runs at both ends are cut away first, byte-wise and at line starts, down to the
/// lines of context around the change: only what is left is split into lines (an edit of one
/// line in a 60 KB file looks at a few lines, not 1,800).
pub(crate) fn render_diff(before: &str, after: &str) -> (String, DiffStats) {
    let (old, new) = (before.as_bytes(), after.as_bytes());
    let head = crate::util::common_prefix(old, new);
    // The start of the line with the first difference, then of the context lines before it.
    let line_start = |at: usize| memchr::memrchr(b'\n', &old[..at]).map_or(0, |i| i + 1);
    let changed = line_start(head);
    let mut start = changed;
    for _ in 0..CONTEXT {
        if start == 0 {
            break;
        }
        start = line_start(start - 1);
    }
    let skipped = memchr::memchr_iter(b'\n', &old[..start]).count();
    // The equal tail after the changed line's start: whole lines beyond the context go. The
    // tail's first line may be part of a changed one; the lines after its first break are
    // equal lines, the same distance from the end in both texts.
    let tail = crate::util::common_suffix(&old[changed..], &new[changed..]);
    let cut = memchr::memchr_iter(b'\n', &old[old.len() - tail..])
        .nth(CONTEXT)
        .map_or(0, |i| tail - (i + 1));
    render_lines(
        &before[start..before.len() - cut],
        &after[start..after.len() - cut],
        skipped,
    )
}

/// [`render_diff`] of two texts whose first line is line `offset + 1` of both files.
fn render_lines(before: &str, after: &str, offset: usize) -> (String, DiffStats) {
    let (old, new) = (line_starts(before), line_starts(after));
    let (old_lines, new_lines) = (old.len() - 1, new.len() - 1);
    let mut prefix = 0;
    while prefix < old_lines.min(new_lines)
        && line(before, &old, prefix) == line(after, &new, prefix)
    {
        prefix += 1;
    }
    let mut suffix = 0;
    while suffix < (old_lines - prefix).min(new_lines - prefix)
        && line(before, &old, old_lines - 1 - suffix) == line(after, &new, new_lines - 1 - suffix)
    {
        suffix += 1;
    }
    let (old_mid, new_mid) = (old_lines - prefix - suffix, new_lines - prefix - suffix);
    if old_mid == 0 && new_mid == 0 {
        return (String::new(), DiffStats::default());
    }
    if old_mid + new_mid > MAX_DIFF_LINES {
        let text = format!(
            "@@ -{},{old_mid} +{},{new_mid} @@\n({old_mid} lines replaced by {new_mid} lines; too many to show line by line)\n",
            offset + prefix + 1,
            offset + prefix + 1
        );
        return (
            text,
            DiffStats {
                added: new_mid,
                removed: old_mid,
            },
        );
    }
    // Diff the changed middle with its context around it.
    let first = prefix.saturating_sub(CONTEXT);
    let old_end = (old_lines - suffix + CONTEXT).min(old_lines);
    let new_end = (new_lines - suffix + CONTEXT).min(new_lines);
    let before_part = &before[old[first]..old[old_end]];
    let after_part = &after[new[first]..new[new_end]];
    render_part(before_part, after_part, offset + first)
}

/// Diffs two slices whose first line is line `offset + 1` of both files.
fn render_part(before: &str, after: &str, offset: usize) -> (String, DiffStats) {
    let diff = TextDiff::configure()
        .algorithm(similar::Algorithm::Myers)
        .timeout(std::time::Duration::from_millis(500))
        .diff_lines(before, after);
    let mut out = String::new();
    let mut stats = DiffStats::default();
    for group in diff.grouped_ops(CONTEXT) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let old = first.old_range().start..last.old_range().end;
        let new = first.new_range().start..last.new_range().end;
        let _ = writeln!(
            out,
            "@@ -{},{} +{},{} @@",
            offset + old.start + 1,
            old.len(),
            offset + new.start + 1,
            new.len()
        );
        for op in &group {
            for change in diff.iter_changes(op) {
                let (sign, number) = match change.tag() {
                    ChangeTag::Equal => (' ', change.new_index()),
                    ChangeTag::Delete => {
                        stats.removed += 1;
                        ('-', change.old_index())
                    }
                    ChangeTag::Insert => {
                        stats.added += 1;
                        ('+', change.new_index())
                    }
                };
                let number = number.map_or(0, |n| offset + n + 1);
                let text = change.value().strip_suffix('\n').unwrap_or(change.value());
                let _ = writeln!(out, "{sign}{number:>6}  {text}");
            }
        }
    }
    (out, stats)
}

#[cfg(test)]
mod tests {
    use insta::assert_snapshot;
    use pretty_assertions::assert_eq;

    use super::*;

    proptest::proptest! {
        /// Cutting the equal ends first changes nothing: the diff is the one of the whole texts
        /// line by line.
        #[test]
        fn cutting_the_equal_ends_gives_the_whole_texts_diff(
            before in proptest::collection::vec(0u8..4, 0..40),
            edits in proptest::collection::vec((0usize..40, 0usize..4, proptest::collection::vec(0u8..4, 0..6)), 0..4),
            end_newline in proptest::bool::ANY,
        ) {
            // Texts of few distinct lines (repeats make the ends ambiguous), edited in places.
            let word = |w: &u8| ["x\n", "y\n", "x", "\n"][usize::from(*w)];
            let mut after = before.clone();
            for (at, remove, insert) in &edits {
                let at = (*at).min(after.len());
                let remove = (*remove).min(after.len() - at);
                after.splice(at..at + remove, insert.iter().copied());
            }
            let text = |words: &[u8]| {
                let mut text: String = words.iter().map(word).collect();
                if end_newline && !text.ends_with('\n') {
                    text.push('\n');
                }
                text
            };
            let (before, after) = (text(&before), text(&after));
            proptest::prop_assert_eq!(render_diff(&before, &after), render_lines(&before, &after, 0));
        }
    }

    #[test]
    fn numbered_unified_diff() {
        let before = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let after = "a\nb\nc\nD\nd2\ne\nf\ng\nh\n";
        let (diff, stats) = render_diff(before, after);
        assert_eq!(
            stats,
            DiffStats {
                added: 2,
                removed: 1
            }
        );
        assert_snapshot!(diff, @r"
        @@ -1,7 +1,8 @@
              1  a
              2  b
              3  c
        -     4  d
        +     4  D
        +     5  d2
              6  e
              7  f
              8  g
        ");
    }

    #[test]
    fn line_numbers_stay_right_far_into_a_big_file() {
        let before: String = (1..=100_000).map(|i| format!("{i}\n")).collect();
        let after = before.replace("\n50000\n", "\nfifty thousand\n");
        let (diff, stats) = render_diff(&before, &after);
        assert_eq!(
            stats,
            DiffStats {
                added: 1,
                removed: 1
            }
        );
        assert!(
            diff.starts_with("@@ -49997,7 +49997,7 @@\n  49997  49997\n"),
            "{diff}"
        );
        assert!(
            diff.contains("- 50000  50000\n+ 50000  fifty thousand\n"),
            "{diff}"
        );
    }

    #[test]
    fn huge_rewrites_are_summarized() {
        let before = "a\n".repeat(30_000);
        let after = "b\n".repeat(30_000);
        let (diff, stats) = render_diff(&before, &after);
        assert_eq!(
            stats,
            DiffStats {
                added: 30_000,
                removed: 30_000
            }
        );
        assert!(diff.contains("too many to show line by line"), "{diff}");
    }

    #[test]
    fn no_change_no_diff_and_edges() {
        assert_eq!(
            render_diff("same\n", "same\n"),
            (String::new(), DiffStats::default())
        );
        assert_eq!(
            render_diff("", "new\n").1,
            DiffStats {
                added: 1,
                removed: 0
            }
        );
        assert_eq!(
            render_diff("a\nb", "a\nb\n").1,
            DiffStats {
                added: 1,
                removed: 1
            }
        );
    }
}
