//! "Did you mean": names beside a missing path that look like what was meant, for the
//! not-found error. Apart from confinement (`paths.rs`), which it uses and never changes: it
//! lists only directories inside a root, through the same confined open.

use super::confine::names_beneath;
use super::paths::{Location, PathError, ResolvedPath};

impl ResolvedPath {
    /// `err` with names that look like what was meant when it says this path does not exist:
    /// up to three entries of the same directory with the same name in another case, the
    /// same stem with another extension, or a name a typo or two away. Only inside a root
    /// (nothing outside the roots is ever listed); any other error comes back as it was.
    #[must_use]
    pub fn with_similar_names(&self, err: PathError) -> PathError {
        let PathError::NotFound { path, hint } = err else {
            return err;
        };
        if super::nowait::active() {
            // The attempt is retried where waiting is allowed; the names are looked up there.
            return PathError::NotFound { path, hint };
        }
        let names = if hint.is_empty() {
            self.similar_names()
        } else {
            Vec::new()
        };
        let hint = match names.as_slice() {
            [] => hint,
            [one] => format!("; did you mean `{}`?", self.sibling_display(one)),
            many => {
                let list: Vec<String> = many
                    .iter()
                    .map(|n| format!("`{}`", self.sibling_display(n)))
                    .collect();
                format!("; similar names beside it: {}", list.join(", "))
            }
        };
        PathError::NotFound { path, hint }
    }

    fn similar_names(&self) -> Vec<String> {
        let Location::Inside { root, relative, .. } = &self.location else {
            return Vec::new();
        };
        let (Some(parent), Some(wanted)) = (relative.parent(), relative.file_name()) else {
            return Vec::new();
        };
        let Ok(names) = names_beneath(root, parent, MAX_SIBLINGS_SCANNED) else {
            return Vec::new();
        };
        let wanted = wanted.to_string_lossy();
        let mut close: Vec<(usize, String)> = names
            .into_iter()
            .filter_map(|name| {
                let name = name.into_string().ok()?;
                let score = likeness(&wanted, &name)?;
                Some((score, name))
            })
            .collect();
        close.sort();
        close.into_iter().take(3).map(|(_, name)| name).collect()
    }

    /// A sibling's name as the caller would write it: the missing path's display with the
    /// last component replaced.
    fn sibling_display(&self, name: &str) -> String {
        let display = self.display();
        match display.rfind(['/', std::path::MAIN_SEPARATOR]) {
            Some(at) => format!("{}{name}", &display[..=at]),
            None => name.to_owned(),
        }
    }
}

/// Directory entries looked at for [`ResolvedPath::with_similar_names`], at most.
const MAX_SIBLINGS_SCANNED: usize = 10_000;

/// How much `name` looks like `wanted` (lower is closer), or `None` when it does not: the
/// same name in another case, the same stem, or (for names of four characters and more)
/// at least 80% of the characters in common, as `similar` counts them.
pub(super) fn likeness(wanted: &str, name: &str) -> Option<usize> {
    if name == wanted || name == "." || name == ".." {
        return None;
    }
    let (w, n) = (wanted.to_lowercase(), name.to_lowercase());
    if w == n {
        return Some(0);
    }
    let stem = |s: &str| s.split_once('.').map_or(s, |(stem, _)| stem).to_owned();
    if !stem(&w).is_empty() && stem(&w) == stem(&n) {
        return Some(1);
    }
    if w.chars().count() < 4 {
        return None;
    }
    let ratio = similar::TextDiff::from_chars(w.as_str(), n.as_str()).ratio();
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a ratio in 0..=1 times 100"
    )]
    (ratio >= 0.8).then(|| 2 + ((1.0 - ratio) * 100.0) as usize)
}
