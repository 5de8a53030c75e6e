//! Commands that run other commands: wrappers (`env`, `timeout`, `xargs`, `find -exec` ...),
//! evaluators (`eval`, `sh -c`, `trap`, `watch`), shells reading their input, and `source`.
//!
//! Each is read the way the program reads its arguments: options (and their values) first,
//! then the command it runs. A program not listed here is judged by its own words only.

use super::words::Word;

/// What a simple command runs besides itself.
#[derive(Debug)]
pub(super) enum Runs<'a> {
    /// Nothing we can know of (or nothing at all).
    Nothing,
    /// The commands made of these words (a wrapper's command; each `-exec` of `find`).
    Commands(Vec<&'a [Word]>),
    /// The command made of these words and of the words read from the input (`xargs`).
    Input(&'a [Word]),
    /// This shell code (`eval`'s arguments, `sh -c`'s string).
    Code {
        /// The code, after quote removal.
        code: String,
        /// It holds expansions: what runs is only known when it runs.
        dynamic: bool,
    },
    /// A shell reading commands from its standard input.
    Stdin,
    /// The commands of a file, run by this shell (`source`, `.`).
    File,
}

/// Shells whose `-c` string and standard input are shell code.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "fish", "rbash",
];

/// How a wrapper takes its options.
struct Options {
    /// Short options that take a value (`-n 10`, `-n10`).
    short_values: &'static str,
    /// Long options that take a value in the next word (`--signal KILL`).
    long_values: &'static [&'static str],
    /// Operands between the options and the command (`timeout`'s duration).
    operands: usize,
    /// `NAME=value` words may come before the command (`env`, `sudo`).
    assignments: bool,
}

const PLAIN: Options = Options {
    short_values: "",
    long_values: &[],
    operands: 0,
    assignments: false,
};

/// What `words` (a simple command, its name first, quotes removed) runs besides itself.
pub(super) fn runs(words: &[Word]) -> Runs<'_> {
    let Some(first) = words.first() else {
        return Runs::Nothing;
    };
    if first.dynamic || first.braces {
        return Runs::Nothing;
    }
    let name = super::base_name(&first.text);
    let args = &words[1..];
    match name {
        "command" => {
            // `command -v x` only looks a name up.
            if has_flag(args, &['v', 'V']) {
                return Runs::Nothing;
            }
            wrapped(words, &PLAIN)
        }
        "builtin" | "nohup" | "setsid" => wrapped(words, &PLAIN),
        "exec" => wrapped(
            words,
            &Options {
                short_values: "a",
                ..PLAIN
            },
        ),
        "env" => env(words),
        "time" => wrapped(
            words,
            &Options {
                short_values: "fo",
                long_values: &["--format", "--output"],
                ..PLAIN
            },
        ),
        "timeout" => wrapped(
            words,
            &Options {
                short_values: "sk",
                long_values: &["--signal", "--kill-after"],
                operands: 1,
                assignments: false,
            },
        ),
        "nice" => wrapped(
            words,
            &Options {
                short_values: "n",
                long_values: &["--adjustment"],
                ..PLAIN
            },
        ),
        "stdbuf" => wrapped(
            words,
            &Options {
                short_values: "ioe",
                long_values: &["--input", "--output", "--error"],
                ..PLAIN
            },
        ),
        "sudo" => {
            // `sudo -e` edits files; `-l`, `-v`, `-k` run nothing.
            if has_flag(args, &['e', 'l', 'v', 'K']) {
                return Runs::Nothing;
            }
            wrapped(
                words,
                &Options {
                    short_values: "ughprtCDTUc",
                    long_values: &[
                        "--user",
                        "--group",
                        "--host",
                        "--prompt",
                        "--role",
                        "--type",
                        "--close-from",
                        "--chdir",
                        "--command-timeout",
                        "--other-user",
                    ],
                    operands: 0,
                    assignments: true,
                },
            )
        }
        "doas" => wrapped(
            words,
            &Options {
                short_values: "uC",
                ..PLAIN
            },
        ),
        "xargs" => xargs(words),
        "find" => find(words),
        "eval" => code(args),
        "source" | "." => Runs::File,
        "trap" => trap(args),
        "watch" => watch(words),
        "su" => su(args),
        shell if SHELLS.contains(&shell) => self::shell(args),
        _ => Runs::Nothing,
    }
}

/// Whether a short-option word among the options holds one of `letters` (`-v`, `-lc`).
fn has_flag(args: &[Word], letters: &[char]) -> bool {
    args.iter()
        .take_while(|w| w.text.starts_with('-') && w.text != "--")
        .any(|w| !w.text.starts_with("--") && w.text[1..].chars().any(|c| letters.contains(&c)))
}

/// The command after a wrapper's options, operands and assignments.
fn wrapped<'a>(words: &'a [Word], options: &Options) -> Runs<'a> {
    let mut i = skip_options(words, 1, options);
    i += options.operands;
    if options.assignments {
        while words.get(i).is_some_and(|w| is_assignment(&w.text)) {
            i += 1;
        }
    }
    match words.get(i..) {
        Some(rest) if !rest.is_empty() => Runs::Commands(vec![rest]),
        _ => Runs::Nothing,
    }
}

/// The index of the first word after the options that start at `start`.
fn skip_options(words: &[Word], start: usize, options: &Options) -> usize {
    let mut i = start;
    while let Some(word) = words.get(i) {
        let text = word.text.as_str();
        if text == "--" {
            return i + 1;
        }
        if !text.starts_with('-') || text == "-" {
            return i;
        }
        i += 1;
        if let Some(long) = text.strip_prefix("--") {
            if !long.contains('=') && options.long_values.contains(&text) {
                i += 1;
            }
            continue;
        }
        // A cluster of short options: the first that takes a value takes the rest of the
        // word, or the next word.
        let cluster = &text[1..];
        if let Some(at) = cluster.find(|c| options.short_values.contains(c))
            && at + 1 == cluster.len()
        {
            i += 1;
        }
    }
    i
}

fn is_assignment(text: &str) -> bool {
    text.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// `env [-i] [-u NAME] [-C DIR] [-S STRING] [NAME=value ...] [command ...]`.
fn env(words: &[Word]) -> Runs<'_> {
    let mut i = 1;
    while let Some(word) = words.get(i) {
        let text = word.text.as_str();
        // `-S 'cmd args'` splits a string into the command.
        let split = text
            .strip_prefix("--split-string=")
            .or_else(|| text.strip_prefix("-S").filter(|s| !s.is_empty()));
        if let Some(split) = split {
            return Runs::Code {
                code: split.to_owned(),
                dynamic: word.dynamic,
            };
        }
        if text == "-S" || text == "--split-string" {
            return match words.get(i + 1) {
                Some(next) => Runs::Code {
                    code: next.text.clone(),
                    dynamic: next.dynamic,
                },
                None => Runs::Nothing,
            };
        }
        if text == "--" {
            i += 1;
            break;
        }
        if text.starts_with('-') && text != "-" {
            i += 1;
            if matches!(text, "-u" | "-C" | "--unset" | "--chdir") {
                i += 1;
            }
            continue;
        }
        if text == "-" || is_assignment(text) {
            i += 1;
            continue;
        }
        break;
    }
    match words.get(i..) {
        Some(rest) if !rest.is_empty() => Runs::Commands(vec![rest]),
        _ => Runs::Nothing,
    }
}

/// `xargs [options] [command [initial-arguments]]`: the words read are added as arguments,
/// unless a replace string (`-I {}`) places them.
fn xargs(words: &[Word]) -> Runs<'_> {
    let options = Options {
        short_values: "adEILnPs",
        long_values: &[
            "--arg-file",
            "--delimiter",
            "--max-lines",
            "--max-args",
            "--max-procs",
            "--max-chars",
            "--process-slot-var",
        ],
        ..PLAIN
    };
    let i = skip_options(words, 1, &options);
    let replaces = words[1..i].iter().any(|w| {
        w.text.starts_with("-I") || w.text.starts_with("-i") || w.text.starts_with("--replace")
    });
    match words.get(i..) {
        Some(rest) if !rest.is_empty() && replaces => Runs::Commands(vec![rest]),
        Some(rest) if !rest.is_empty() => Runs::Input(rest),
        _ => Runs::Nothing,
    }
}

/// `find ... -exec cmd {} ;` (also `-execdir`, `-ok`, `-okdir`, and `+` to end).
fn find(words: &[Word]) -> Runs<'_> {
    let mut commands = Vec::new();
    let mut i = 1;
    while i < words.len() {
        if matches!(
            words[i].text.as_str(),
            "-exec" | "-execdir" | "-ok" | "-okdir"
        ) {
            let start = i + 1;
            let end = words[start..]
                .iter()
                .position(|w| w.text == ";" || w.text == "+")
                .map_or(words.len(), |at| start + at);
            if end > start {
                commands.push(&words[start..end]);
            }
            i = end;
        }
        i += 1;
    }
    if commands.is_empty() {
        Runs::Nothing
    } else {
        Runs::Commands(commands)
    }
}

/// `eval args...`: the arguments joined by spaces, parsed again.
fn code(args: &[Word]) -> Runs<'_> {
    if args.is_empty() {
        return Runs::Nothing;
    }
    Runs::Code {
        code: args
            .iter()
            .map(|w| w.text.as_str())
            .collect::<Vec<_>>()
            .join(" "),
        dynamic: args.iter().any(|w| w.dynamic),
    }
}

/// `trap 'code' SIGNAL...`.
fn trap(args: &[Word]) -> Runs<'_> {
    let args = match args.first() {
        Some(w) if w.text == "--" => &args[1..],
        _ => args,
    };
    match args.first() {
        Some(w) if w.text.starts_with('-') || w.text.is_empty() => Runs::Nothing,
        Some(w) if args.len() > 1 => Runs::Code {
            code: w.text.clone(),
            dynamic: w.dynamic,
        },
        _ => Runs::Nothing,
    }
}

/// `watch [options] command...`: the words joined and run by `sh -c` (or run as they are with
/// `-x`).
fn watch(words: &[Word]) -> Runs<'_> {
    let options = Options {
        short_values: "nq",
        long_values: &["--interval", "--equexit"],
        ..PLAIN
    };
    let exec = has_flag(&words[1..], &['x']) || words.iter().any(|w| w.text == "--exec");
    let i = skip_options(words, 1, &options);
    match words.get(i..) {
        Some(rest) if !rest.is_empty() && exec => Runs::Commands(vec![rest]),
        Some(rest) if !rest.is_empty() => code(rest),
        _ => Runs::Nothing,
    }
}

/// `su [user] -c 'code'`.
fn su(args: &[Word]) -> Runs<'_> {
    for (i, word) in args.iter().enumerate() {
        if let Some(code) = word.text.strip_prefix("--command=") {
            return Runs::Code {
                code: code.to_owned(),
                dynamic: word.dynamic,
            };
        }
        if matches!(word.text.as_str(), "-c" | "--command")
            && let Some(next) = args.get(i + 1)
        {
            return Runs::Code {
                code: next.text.clone(),
                dynamic: next.dynamic,
            };
        }
    }
    Runs::Nothing
}

/// `sh [options] [-c string | -s | file] [args]`.
fn shell(args: &[Word]) -> Runs<'_> {
    let mut command_string = false;
    let mut read_stdin = false;
    let mut i = 0;
    while let Some(word) = args.get(i) {
        let text = word.text.as_str();
        if text == "--" || text == "-" {
            i += 1;
            break;
        }
        if let Some(long) = text.strip_prefix("--") {
            i += 1;
            if matches!(long, "rcfile" | "init-file") {
                i += 1;
            }
            continue;
        }
        let Some(cluster) = text.strip_prefix('-').or_else(|| text.strip_prefix('+')) else {
            break;
        };
        if text.starts_with('-') {
            command_string |= cluster.contains('c');
            read_stdin |= cluster.contains('s');
        }
        i += 1;
        // `-o option` and `-O shopt` take the next word.
        if cluster.contains(['o', 'O']) {
            i += 1;
        }
    }
    if command_string {
        return match args.get(i) {
            Some(code) => Runs::Code {
                code: code.text.clone(),
                dynamic: code.dynamic,
            },
            None => Runs::Nothing,
        };
    }
    if read_stdin || i >= args.len() {
        return Runs::Stdin;
    }
    // `bash script.sh` runs a file, as `python script.py` does: out of reach of the rules.
    Runs::Nothing
}
