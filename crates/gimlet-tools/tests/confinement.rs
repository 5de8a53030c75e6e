//! Confinement under attack: a directory swapped for a symlink while calls run, and property
//! tests of the path resolver and the shell parser. `confinement_portable.rs` runs the path
//! cases again with paths opened as macOS opens them.

#![expect(clippy::unwrap_used, reason = "tests fail loudly")]

#[path = "confinement/paths.rs"]
mod paths;

use gimlet_tools::shell;
use proptest::prelude::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_directory_swapped_for_a_symlink_never_lets_a_call_out() {
    paths::a_directory_swapped_for_a_symlink_never_lets_a_call_out().await;
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Whatever the path, a resolution inside the root names a place inside the root, and
    /// opening it reaches only what lies inside; nothing ever opens the outside file.
    #[test]
    fn the_resolver_never_places_outside_paths_inside(
        parts in prop::collection::vec(paths::component(), 1..7),
        absolute in prop_oneof![Just(0u8), Just(1u8), Just(2u8)],
    ) {
        paths::resolver_case(&parts, absolute)?;
    }

    /// Commands joined by operators split back into exactly those commands.
    #[test]
    fn simple_commands_split_back_exactly(
        commands in prop::collection::vec(
            prop::collection::vec("[a-z][a-z0-9_.=-]{0,8}", 1..4), 1..5),
        operators in prop::collection::vec(
            prop_oneof![Just("&&"), Just("||"), Just(";"), Just("|"), Just("\n")], 4),
    ) {
        // Reserved words and programs that run their arguments (`env x`, `eval x`) are not
        // plain simple commands.
        const SPECIAL: &[&str] = &[
            "if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while", "until",
            "for", "in", "function", "select", "time", "coproc", "eval", "source", ".", "sh",
            "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "posh", "fish", "rbash", "env",
            "command", "builtin", "exec", "nohup", "timeout", "nice", "stdbuf", "setsid", "sudo",
            "doas", "xargs", "find", "trap", "watch", "su",
        ];
        prop_assume!(commands.iter().flatten().all(|w| !SPECIAL.contains(&w.as_str())));
        let words: Vec<String> = commands.iter().map(|c| c.join(" ")).collect();
        let mut line = words[0].clone();
        for (i, command) in words.iter().enumerate().skip(1) {
            line.push_str(&format!(" {} ", operators[i - 1]));
            line.push_str(command);
        }
        // Leading `NAME=value` words are assignments, which do not name the command.
        let assignment = |w: &str| {
            w.split_once('=').is_some_and(|(name, _)| {
                !name.is_empty()
                    && !name.starts_with(|c: char| c.is_ascii_digit())
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            })
        };
        let expected: Vec<String> = commands
            .iter()
            .map(|c| c.iter().skip_while(|w| assignment(w)).cloned().collect::<Vec<_>>().join(" "))
            .filter(|c| !c.is_empty())
            .collect();
        let script = shell::parse(&line);
        let found: Vec<String> = script.commands.into_iter().map(|c| c.text).collect();
        prop_assert_eq!(found, expected, "{}", line);
        prop_assert!(script.unknowns.is_empty(), "{}", line);
    }

    /// A command hidden in a substitution, a process substitution, `eval`, `bash -c`, a pipe
    /// into `xargs` or a here-document fed to a shell is found: a rule on it applies.
    #[test]
    fn hidden_commands_are_found(
        before in "[a-z ]{0,10}",
        hidden in prop_oneof![
            Just("$(rm -rf x)"), Just("`rm -rf x`"), Just("<(rm -rf x)"), Just("; eval 'rm -rf x'"),
            Just("\"$(rm -rf x)\""), Just("&& bash -c 'rm -rf x'"), Just("| xargs rm -rf x"),
            Just("; sh <<EOF\nrm -rf x\nEOF\n"),
        ],
        after in "[a-z ]{0,10}",
    ) {
        let line = format!("echo {before} {hidden}\necho {after}");
        let script = shell::parse(&line);
        prop_assert!(
            script.commands.iter().any(|c| c.name == "rm" && c.text.starts_with("rm -rf x")),
            "{} -> {:?}", line, script
        );
    }

    /// Any input at all: no panic.
    #[test]
    fn the_splitter_takes_anything(line in any::<String>()) {
        let _ = shell::parse(&line);
    }
}
