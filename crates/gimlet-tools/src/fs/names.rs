//! How the file system compares names: [`NameMatching`], the one notion of "this system's
//! names ignore case (and Unicode normalisation)" that the protected list, the permission
//! rules and root containment all follow.
//!
//! On Linux a name is its bytes: `.GIT` is not `.git` (git itself looks for `.git` only), so
//! nothing is folded. The default volumes of macOS (APFS, HFS+) and of Windows (NTFS) ignore
//! case, so there `.GIT/HOOKS/pre-commit` *is* `.git/hooks/pre-commit`, and a name that does
//! not exist yet (`.Vscode/settings.json`) creates what the lower-case name names. The
//! resolver already spells each existing component as stored (`confine::as_stored`); what is
//! typed past the last existing one is compared here, folded:
//!
//! - case: each character's upper case, then its lower case (`ſ`, U+017F, and `s` both fold to
//!   `s`; `ı`, U+0131, and `i` to `i`; the Kelvin sign to `k`). ASCII folding alone is not
//!   enough even for the all-ASCII protected list: NTFS compares names by upper case, where `ſ`
//!   is `S` and `ı` is `I`, so `.huſky` is `.husky` there. Folding through both cases
//!   makes equal at least what NTFS and APFS make equal (a few more: `ß` and `ss`), which for
//!   the protected list and for deny and ask rules errs on the side of asking;
//! - macOS: canonically equivalent names are one name (APFS is normalisation-insensitive, HFS+
//!   stores NFD): compared in NFC, so `café` typed as `e` + U+0301 matches a rule written with
//!   `é`; and the code points HFS+ ignores in names (zero-width joiners, direction marks,
//!   U+FEFF) are dropped, as git's `core.protectHFS` does (`.g\u{200c}it` is `.git` there);
//! - Windows: NTFS keeps normalisation forms apart (no NFC), but the Win32 layer drops
//!   trailing dots and spaces from a name (`.vscode.` opens `.vscode`), and `name:stream`
//!   names a stream of `name` (`.gimlet.toml::$DATA` is the file's content), so both are cut
//!   off, as git's `core.protectNTFS` does.
//!
//! Normalisation uses ICU4X's `icu_normalizer`, which the URL parser already builds for IDNA
//! (same version and features): no new crate. The binary gains its NFD trie (35 KiB by ICU's
//! own count; the composition tables are IDNA's already) and the normaliser's code.

use std::borrow::Cow;
use std::path::{Component, Path, PathBuf};

/// How the file system compares file names. [`NameMatching::native`] is this system's; tests
/// pick another to run macOS's and Windows's rules on Linux.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameMatching {
    /// Byte for byte (Linux: ext4, btrfs, xfs, tmpfs...): `.GIT` is another name than `.git`.
    Exact,
    /// As NTFS through the Win32 layer: case ignored, trailing dots and spaces and a
    /// `:stream` suffix cut off; `é` and `e` + U+0301 stay different names.
    Windows,
    /// As APFS and HFS+: case ignored, canonically equivalent names equal (compared in NFC),
    /// HFS+'s ignorable code points dropped.
    MacOs,
}

impl Default for NameMatching {
    fn default() -> Self {
        Self::native()
    }
}

impl NameMatching {
    /// This system's default volumes: [`Self::MacOs`] on macOS, [`Self::Windows`] on
    /// Windows, [`Self::Exact`] elsewhere.
    pub const fn native() -> Self {
        if cfg!(target_os = "macos") {
            Self::MacOs
        } else if cfg!(windows) {
            Self::Windows
        } else {
            Self::Exact
        }
    }

    /// Whether two different spellings can name one file.
    pub fn folds(self) -> bool {
        self != Self::Exact
    }

    /// One name (a path component) as it compares: equal folded names name the same file.
    pub fn fold_name(self, name: &str) -> Cow<'_, str> {
        match self {
            Self::Exact => Cow::Borrowed(name),
            Self::Windows => {
                let name = win32_name(name);
                fold_case(name)
            }
            Self::MacOs => {
                let kept = if name.chars().any(hfs_ignorable) {
                    Cow::Owned(name.chars().filter(|c| !hfs_ignorable(*c)).collect())
                } else {
                    Cow::Borrowed(name)
                };
                then(then(kept, fold_case), nfc)
            }
        }
    }

    /// A path with each name folded ([`Self::fold_name`]), for matching against patterns
    /// folded by [`Self::fold_pattern`]. A name that is not Unicode is folded as its lossy
    /// form (only more paths match).
    pub fn fold_path(self, path: &Path) -> Cow<'_, Path> {
        if self == Self::Exact {
            return Cow::Borrowed(path);
        }
        let mut folded = PathBuf::with_capacity(path.as_os_str().len());
        for component in path.components() {
            match component {
                Component::Normal(name) => {
                    let name = name.to_string_lossy();
                    folded.push(self.fold_name(&name).as_ref());
                }
                // A drive (`C:`) or share folds its case too; `/`, `.` and `..` stay.
                other => folded.push(fold_case(&other.as_os_str().to_string_lossy()).as_ref()),
            }
        }
        Cow::Owned(folded)
    }

    /// A glob pattern folded as names are (its wildcards are ASCII punctuation and stay):
    /// case, and on macOS NFC. The Windows cuts are left out: a pattern is not a name.
    pub fn fold_pattern(self, pattern: &str) -> Cow<'_, str> {
        match self {
            Self::Exact => Cow::Borrowed(pattern),
            Self::Windows => fold_case(pattern),
            Self::MacOs => then(fold_case(pattern), nfc),
        }
    }

    /// `path` below `base`, their names compared as this system compares them: the part of
    /// `path` after `base`'s components, as `path` spells it. `None` when `base` is not a
    /// prefix of `path` by whole components.
    pub fn strip_prefix<'a>(self, path: &'a Path, base: &Path) -> Option<&'a Path> {
        if let Ok(rest) = path.strip_prefix(base) {
            return Some(rest);
        }
        if self == Self::Exact {
            return None;
        }
        let mut rest = path.components();
        for expected in base.components() {
            let given = rest.next()?;
            if !self.same_component(given, expected) {
                return None;
            }
        }
        Some(rest.as_path())
    }

    fn same_component(self, a: Component<'_>, b: Component<'_>) -> bool {
        match (a, b) {
            (Component::Normal(a), Component::Normal(b)) => {
                self.fold_name(&a.to_string_lossy()) == self.fold_name(&b.to_string_lossy())
            }
            // Drive letters already compare without case (`c:` is `C:`); a share's name
            // ignores case as the rest of the path does.
            (Component::Prefix(a), Component::Prefix(b)) => {
                a == b
                    || a.as_os_str()
                        .to_string_lossy()
                        .eq_ignore_ascii_case(&b.as_os_str().to_string_lossy())
            }
            (a, b) => a == b,
        }
    }
}

/// `text` after `step`, borrowed as long as no step changed it.
fn then(text: Cow<'_, str>, step: fn(&str) -> Cow<'_, str>) -> Cow<'_, str> {
    let changed = match step(&text) {
        Cow::Owned(changed) => Some(changed),
        Cow::Borrowed(_) => None,
    };
    changed.map_or(text, Cow::Owned)
}

/// Each character through its upper case to its lower case; ASCII by the fast path.
fn fold_case(text: &str) -> Cow<'_, str> {
    if text.is_ascii() {
        if text.bytes().any(|b| b.is_ascii_uppercase()) {
            return Cow::Owned(text.to_ascii_lowercase());
        }
        return Cow::Borrowed(text);
    }
    let mut folded = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            folded.push(c.to_ascii_lowercase());
        } else {
            folded.extend(c.to_uppercase().flat_map(char::to_lowercase));
        }
    }
    if folded == text {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(folded)
    }
}

/// Canonical composition (NFC).
fn nfc(text: &str) -> Cow<'_, str> {
    if text.is_ascii() {
        return Cow::Borrowed(text);
    }
    icu_normalizer::ComposingNormalizerBorrowed::new_nfc().normalize(text)
}

/// The name the Win32 layer opens for `name`: a `:stream` suffix and trailing dots and
/// spaces cut off (a name of dots and spaces only is kept: it names no file).
fn win32_name(name: &str) -> &str {
    let file = name.split_once(':').map_or(name, |(file, _)| file);
    let trimmed = file.trim_end_matches(['.', ' ']);
    if trimmed.is_empty() { name } else { trimmed }
}

/// The code points HFS+ ignores in names (Apple's TN1150, and git's `next_hfs_char`).
fn hfs_ignorable(c: char) -> bool {
    matches!(
        c,
        '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{206a}'..='\u{206f}' | '\u{feff}'
    )
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn names_fold_as_each_system_compares_them() {
        use NameMatching::{Exact, MacOs, Windows};
        let nfd = "cafe\u{301}";
        for (matching, name, folded) in [
            (Exact, ".GIT", ".GIT"),
            (Exact, nfd, nfd),
            (Exact, ".vscode.", ".vscode."),
            (MacOs, ".GIT", ".git"),
            (MacOs, "Café", "café"),
            (MacOs, nfd, "café"),
            (MacOs, "CAFE\u{301}", "café"),
            (MacOs, ".g\u{200c}it", ".git"),
            (MacOs, ".gi\u{feff}T", ".git"),
            (MacOs, ".vscode.", ".vscode."),
            (Windows, ".GIT", ".git"),
            (Windows, nfd, nfd),
            (Windows, ".Vscode. .", ".vscode"),
            (Windows, ".gimlet.toml::$DATA", ".gimlet.toml"),
            (Windows, ".git::$INDEX_ALLOCATION", ".git"),
            (Windows, "...", "..."),
        ] {
            assert_eq!(matching.fold_name(name), folded, "{matching:?} {name:?}");
        }
        // What ASCII folding misses: NTFS upper-cases `ſ` to `S` and `ı` to `I`; APFS folds the
        // Kelvin sign to `k`.
        for matching in [Windows, MacOs] {
            assert_eq!(matching.fold_name(".huſky"), ".husky");
            assert_eq!(matching.fold_name(".gıt"), ".git");
            assert_eq!(matching.fold_name(".hus\u{212a}y"), ".husky");
        }
    }

    #[test]
    fn patterns_fold_their_names_and_keep_their_wildcards() {
        assert_eq!(NameMatching::Exact.fold_pattern("SECRETS/**"), "SECRETS/**");
        assert_eq!(
            NameMatching::Windows.fold_pattern("SECRETS/[A-Z]*.{Env,X}"),
            "secrets/[a-z]*.{env,x}"
        );
        assert_eq!(
            NameMatching::MacOs.fold_pattern("Cafe\u{301}/**"),
            "café/**"
        );
        assert_eq!(
            NameMatching::Windows.fold_pattern("cafe\u{301}/**"),
            "cafe\u{301}/**"
        );
        assert!(matches!(
            NameMatching::MacOs.fold_pattern("a/**"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn paths_fold_name_by_name() {
        let path = Path::new("SRC/.Git/Hooks./x");
        assert_eq!(NameMatching::Exact.fold_path(path), path);
        assert_eq!(
            NameMatching::MacOs.fold_path(path),
            Path::new("src/.git/hooks./x")
        );
        assert_eq!(
            NameMatching::Windows.fold_path(path),
            Path::new("src/.git/hooks/x")
        );
    }

    #[test]
    fn a_prefix_is_stripped_by_whole_names_compared_as_the_system_does() {
        let root = Path::new("/Users/me/Proj");
        for matching in [
            NameMatching::Exact,
            NameMatching::MacOs,
            NameMatching::Windows,
        ] {
            assert_eq!(
                matching.strip_prefix(Path::new("/Users/me/Proj/a/B"), root),
                Some(Path::new("a/B"))
            );
            assert_eq!(
                matching.strip_prefix(Path::new("/Users/me/Proj-evil/a"), root),
                None
            );
            assert_eq!(matching.strip_prefix(Path::new("/Users/me"), root), None);
        }
        assert_eq!(
            NameMatching::Exact.strip_prefix(Path::new("/users/ME/proj/a/B"), root),
            None
        );
        for matching in [NameMatching::MacOs, NameMatching::Windows] {
            assert_eq!(
                matching.strip_prefix(Path::new("/users/ME/proj/a/B"), root),
                Some(Path::new("a/B")),
                "{matching:?}"
            );
            assert_eq!(
                matching.strip_prefix(Path::new("/users/ME/proj-evil/a"), root),
                None
            );
        }
        let nfd = Path::new("/Users/me/Cafe\u{301}/x");
        let nfc = Path::new("/Users/me/café");
        assert_eq!(
            NameMatching::MacOs.strip_prefix(nfd, nfc),
            Some(Path::new("x"))
        );
        assert_eq!(NameMatching::Windows.strip_prefix(nfd, nfc), None);
    }
}
