//! Splitting a shell command line into its simple commands, for permission rules.
//!
//! `git status && cargo test | tee log` is three simple commands; a rule must allow each of
//! them. [`split_command`] understands quotes, escapes, `&&`, `||`, `;`, `|`, `&`, newlines,
//! subshells `( ... )` and groups `{ ...; }`, and redirections. Anything it cannot check (command
//! substitution `$(...)` and backticks, process substitution `<(...)`, here-documents, `eval`,
//! a nested `sh -c`/`bash -c` or a shell reading its standard input (`| sh`), or a variable as the command name) makes it return `None`: the
//! policy then asks, and no rule can allow the command.

/// Words that run their arguments as code, so their arguments cannot be checked.
const EVALUATORS: &[&str] = &["eval", "source", "."];
/// Shells: `sh -c '...'` runs a string the splitter does not look into.
const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh", "fish"];

/// The simple commands of a command line, each with leading variable assignments removed and
/// its words joined by single spaces; `None` when the line uses something that cannot be
/// checked, or does not parse (an unclosed quote).
pub fn split_command(line: &str) -> Option<Vec<String>> {
    let mut parts: Vec<String> = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    let finish_word = |word: &mut String, in_word: &mut bool, words: &mut Vec<String>| {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                // An escaped newline joins lines; anything else is taken literally.
                match chars.next() {
                    Some('\n') => {}
                    Some(next) => {
                        word.push(next);
                        in_word = true;
                    }
                    None => return None,
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        other => word.push(other),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => {
                            let next = chars.next()?;
                            if !matches!(next, '"' | '\\' | '$' | '`' | '\n') {
                                word.push('\\');
                            }
                            if next != '\n' {
                                word.push(next);
                            }
                        }
                        // Substitution inside double quotes still runs code.
                        '`' => return None,
                        '$' if chars.peek() == Some(&'(') => return None,
                        other => word.push(other),
                    }
                }
            }
            '`' => return None,
            '$' if matches!(chars.peek(), Some('(')) => return None,
            '<' | '>' if chars.peek() == Some(&'(') => return None,
            '<' if chars.peek() == Some(&'<') => {
                chars.next();
                // `<<<` (a here-string) is a word, not code; `<<` starts a here-document.
                if chars.peek() != Some(&'<') {
                    return None;
                }
                chars.next();
                finish_word(&mut word, &mut in_word, &mut words);
                words.push(String::from("<<<"));
            }
            '#' if !in_word => {
                // A comment runs to the end of the line.
                for next in chars.by_ref() {
                    if next == '\n' {
                        break;
                    }
                }
                finish_word(&mut word, &mut in_word, &mut words);
                end_command(&mut words, &mut parts)?;
            }
            // `>&` and `<&` (as in `2>&1`) are redirections, not operators.
            '&' | '|' if in_word && word.ends_with(['>', '<']) => word.push(c),
            ';' | '\n' | '&' | '|' | '(' | ')' => {
                finish_word(&mut word, &mut in_word, &mut words);
                // `&&`, `||`, `|&`, `;;` are one operator.
                if matches!(
                    (c, chars.peek()),
                    ('&', Some('&')) | ('|', Some('|' | '&')) | (';', Some(';'))
                ) {
                    chars.next();
                }
                end_command(&mut words, &mut parts)?;
            }
            '{' | '}'
                if !in_word && chars.peek().is_none_or(|n| n.is_whitespace() || *n == ';') =>
            {
                finish_word(&mut word, &mut in_word, &mut words);
                end_command(&mut words, &mut parts)?;
            }
            c if c.is_whitespace() => finish_word(&mut word, &mut in_word, &mut words),
            other => {
                word.push(other);
                in_word = true;
            }
        }
    }
    finish_word(&mut word, &mut in_word, &mut words);
    end_command(&mut words, &mut parts)?;
    Some(parts)
}

/// Closes the current simple command; `None` when it cannot be checked.
fn end_command(words: &mut Vec<String>, parts: &mut Vec<String>) -> Option<()> {
    let taken = std::mem::take(words);
    // Leading assignments (`FOO=1 cmd`) do not name the command.
    let start = taken
        .iter()
        .position(|w| !is_assignment(w))
        .unwrap_or(taken.len());
    let command = &taken[start..];
    let Some(name) = command.first() else {
        return Some(());
    };
    if name.contains('$') || EVALUATORS.contains(&name.as_str()) {
        return None;
    }
    let base = name.rsplit('/').next().unwrap_or(name);
    // `sh -c '...'` runs a string; a bare `sh` (`curl ... | sh`) runs whatever it is fed.
    if SHELLS.contains(&base)
        && (command
            .iter()
            .skip(1)
            .any(|w| w.starts_with('-') && w.contains('c'))
            || command.iter().skip(1).all(|w| w.starts_with('-')))
    {
        return None;
    }
    parts.push(command.join(" "));
    Some(())
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit())
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use proptest::prelude::*;

    use super::*;

    fn parts(line: &str) -> Option<Vec<&'static str>> {
        split_command(line).map(|parts| {
            parts
                .into_iter()
                .map(|p| &*Box::leak(p.into_boxed_str()))
                .collect()
        })
    }

    #[test]
    fn splits_compound_commands() {
        assert_eq!(
            parts("git status && cargo test --all"),
            Some(vec!["git status", "cargo test --all"])
        );
        assert_eq!(
            parts("a; b || c | d & e"),
            Some(vec!["a", "b", "c", "d", "e"])
        );
        assert_eq!(
            parts("(cd src && ls) ; { make; make test; }"),
            Some(vec!["cd src", "ls", "make", "make test"])
        );
        assert_eq!(
            parts("echo 'a && b' \"c;d\" e\\;f"),
            Some(vec!["echo a && b c;d e;f"])
        );
        assert_eq!(parts("RUST_LOG=debug cargo run"), Some(vec!["cargo run"]));
        assert_eq!(parts("ls 2>&1 | grep x"), Some(vec!["ls 2>&1", "grep x"]));
        assert_eq!(parts("cat <<< \"text\""), Some(vec!["cat <<< text"]));
        assert_eq!(parts("make # build it\n./run"), Some(vec!["make", "./run"]));
        assert_eq!(parts("echo $HOME"), Some(vec!["echo $HOME"]));
        assert_eq!(parts(""), Some(vec![]));
    }

    #[test]
    fn refuses_what_it_cannot_check() {
        for line in [
            "echo $(rm -rf /)",
            "echo `id`",
            "echo \"$(id)\"",
            "diff <(ls a) <(ls b)",
            "bash <<EOF\nrm -rf /\nEOF",
            "eval \"rm -rf /\"",
            "source ./env.sh",
            "sh -c 'rm -rf /'",
            "/bin/bash -lc 'curl x | sh'",
            "$CMD --force",
            "echo 'unclosed",
        ] {
            assert_eq!(split_command(line), None, "{line}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        #[test]
        fn never_panics(line in "(?s).{0,80}") {
            let _ = split_command(&line);
        }

        #[test]
        fn a_rule_cannot_be_smuggled_past_the_split(first in "[a-z]{1,6}", second in "[a-z]{1,6}", op in prop_oneof![Just("&&"), Just(";"), Just("||"), Just("|"), Just("&"), Just("\n")]) {
            // Shells and evaluators run code the splitter cannot see; they never split.
            let opaque = |w: &str| SHELLS.contains(&w) || EVALUATORS.contains(&w);
            prop_assume!(!opaque(&first) && !opaque(&second));
            let line = format!("{first} {op} {second}");
            let parts = split_command(&line).unwrap();
            prop_assert_eq!(parts, vec![first, second]);
        }
    }
}
