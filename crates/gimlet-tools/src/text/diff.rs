//! Unified diffs with line numbers, for the results of the file tools.

use std::fmt::Write as _;

use similar::{ChangeTag, TextDiff};

/// Lines added and removed by a change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct DiffStats {
    /// Lines added.
    pub added: usize,
    /// Lines removed.
    pub removed: usize,
}

/// A unified diff of two texts (`\n` breaks), 3 lines of context, each line numbered: context
/// and added lines by their new number, removed lines by their old one.
pub fn render_diff(before: &str, after: &str) -> (String, DiffStats) {
    let diff = TextDiff::configure()
        .algorithm(similar::Algorithm::Myers)
        .timeout(std::time::Duration::from_secs(2))
        .diff_lines(before, after);
    let mut out = String::new();
    let mut stats = DiffStats::default();
    for group in diff.grouped_ops(3) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let old = first.old_range().start..last.old_range().end;
        let new = first.new_range().start..last.new_range().end;
        let _ = writeln!(
            out,
            "@@ -{},{} +{},{} @@",
            old.start + 1,
            old.len(),
            new.start + 1,
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
                let number = number.map_or(0, |n| n + 1);
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

    use super::*;

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
    fn no_change_no_diff() {
        assert_eq!(
            render_diff("same\n", "same\n"),
            (String::new(), DiffStats::default())
        );
    }
}
