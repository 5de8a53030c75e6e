//! Reading a shell command line the way bash will run it, for permission rules.
//!
//! [`parse`] parses a line with `brush-parser` (a bash parser written for a shell) and collects
//! every simple command in it: those joined by `&&`, `||`, `;`, `|`, `&` and newlines, inside
//! subshells, groups, loops, conditionals, functions, `$(...)`, backticks, process
//! substitutions and arithmetic; the command a wrapper runs (`env`, `command`, `exec`,
//! `builtin`, `nohup`, `time`, `timeout`, `nice`, `stdbuf`, `setsid`, `sudo`, `doas`, `xargs`,
//! `find -exec`); and, parsed again, the literal code of `eval`, `sh -c`, `trap`, `watch`,
//! `su -c`, `env -S` and of a here-document or here-string fed to a shell. Command names are
//! taken after quote removal and without their directory (`"r""m"`, `\rm` and `/bin/rm` are
//! all `rm`). Here-document bodies and quoted strings are data; arithmetic is not a command.
//!
//! What cannot be known before the command runs is reported as an [`Unknown`]: a command name
//! that comes from an expansion (`$CC`, `$(which python)`), code that does (`eval "$x"`,
//! `sh -c "$x"`), a file run by `source`, a shell reading a pipe, a line that does not parse.
//!
//! Out of reach, by nature: what programs do with their arguments (`find -delete`, an
//! interpreter running code it reads, `make`, `npm run`), the values of variables, functions
//! called by name. The sandbox, not these rules, is the guarantee (docs/security.md).

mod walk;
mod words;
mod wrappers;

use std::fmt;

/// What the parser found in a command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Script {
    /// Every simple command, in the order found: a command, then those in its substitutions,
    /// then the command it wraps or the code it evaluates.
    pub commands: Vec<SimpleCommand>,
    /// The parts that cannot be known before they run.
    pub unknowns: Vec<Unknown>,
}

/// One simple command: a name and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleCommand {
    /// The command name after quote removal, without its directory: `rm` for `/bin/rm`.
    pub name: String,
    /// The words after quote removal joined by spaces, the name without its directory, then
    /// its redirections: `cargo test 2>&1`. Expansions keep their source text (`$HOME`).
    pub text: String,
    /// As [`text`](Self::text), with the name as written: `./deploy --dry-run`.
    pub written: String,
}

/// A part of a command line that cannot be known before it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unknown {
    /// The part, as written.
    pub part: String,
    /// Why it cannot be known.
    pub why: Why,
}

/// Why a part of a command line cannot be known before it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Why {
    /// The command name comes from an expansion or a brace expansion (`$CC`, `{rm,x}`).
    CommandName,
    /// Code that is evaluated holds expansions (`eval "$x"`, `sh -c "$CMD"`).
    Code,
    /// A file's commands run in this shell (`source`, `.`).
    File,
    /// A shell runs what it reads from a pipe (`curl ... | sh`).
    Stdin,
    /// A here-document or here-string fed to a shell holds expansions.
    HereDoc,
    /// Text that bash would run but the parser read as text.
    Hidden,
    /// It does not parse; the parser's message.
    Unparsed(String),
    /// It is nested too deeply to be read.
    TooDeep,
}

impl fmt::Display for Unknown {
    /// What gimlet cannot see, as a phrase: "which command `$CC` is".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let part = shorten(&self.part);
        match &self.why {
            Why::CommandName => write!(f, "which command `{part}` is"),
            Why::Code => write!(f, "the code `{part}` runs"),
            Why::File => write!(f, "the commands of the file `{part}` runs"),
            Why::Stdin => write!(f, "the commands `{part}` reads from its input"),
            Why::HereDoc => write!(f, "what the input of `{part}` expands to"),
            Why::Hidden => write!(f, "what `{part}` runs"),
            Why::Unparsed(message) => write!(f, "how `{part}` parses ({message})"),
            Why::TooDeep => write!(f, "inside `{part}`, nested too deeply to read"),
        }
    }
}

impl Script {
    /// The unknown parts, as one phrase for a question or a refusal.
    pub fn describe_unknowns(&self) -> String {
        let mut seen: Vec<String> = Vec::new();
        for unknown in &self.unknowns {
            let text = unknown.to_string();
            if !seen.contains(&text) {
                seen.push(text);
            }
        }
        seen.join("; ")
    }
}

/// A part shown in a message: its first line, at most 80 characters.
pub(crate) fn shorten(part: &str) -> String {
    let line = part.lines().next().unwrap_or_default();
    let mut short: String = line.chars().take(80).collect();
    if short.len() < part.len() {
        short.push('…');
    }
    short
}

/// Nesting openers (`(`, `{`, `` ` ``, `[`, `!` and compound-command keywords) at most which a
/// line is parsed on the caller's stack. Each costs a few KiB of stack in the recursive parser.
const OPENERS_INLINE: usize = 64;
/// Openers at most which a line is parsed at all (on a thread with a stack to match).
const OPENERS_MAX: usize = 8192;
/// The stack of that thread: enough for `OPENERS_MAX` nested constructs, parser and walk.
const DEEP_STACK: usize = 256 << 20;

/// Reads a command line: its simple commands and the parts that cannot be known before they
/// run. Never fails; a line that does not parse is one [`Unknown`].
pub fn parse(line: &str) -> Script {
    let openers = openers(line);
    if openers <= OPENERS_INLINE {
        // The parser panics on some input (brush-parser 0.4 on `${<<EOF`, an `unwrap` in its
        // tokenizer): such a line is unknown, so it is asked about, not a failed call.
        return std::panic::catch_unwind(|| walk_line(line, OPENERS_INLINE))
            .unwrap_or_else(|_| parser_failed(line));
    }
    let too_deep = || Script {
        commands: Vec::new(),
        unknowns: vec![Unknown {
            part: line.to_owned(),
            why: Why::TooDeep,
        }],
    };
    if openers > OPENERS_MAX {
        return too_deep();
    }
    // Deeply nested input would overflow a runtime thread's stack (an abort, not an error):
    // such lines are read on a thread of their own.
    let owned = line.to_owned();
    std::thread::Builder::new()
        .name(String::from("gimlet-shell-parse"))
        .stack_size(DEEP_STACK)
        .spawn(move || walk_line(&owned, openers))
        .map_or_else(
            |_| too_deep(),
            |thread| thread.join().unwrap_or_else(|_| parser_failed(line)),
        )
}

/// A line the parser panicked on: unknown as a whole.
fn parser_failed(line: &str) -> Script {
    Script {
        commands: Vec::new(),
        unknowns: vec![Unknown {
            part: line.to_owned(),
            why: Why::Unparsed(String::from("the shell parser failed on it")),
        }],
    }
}

fn walk_line(line: &str, budget: usize) -> Script {
    let mut walker = walk::Walker::new(budget);
    walker.code(line, &walk::Stdin::Inherited);
    let mut script = walker.script;
    script.unknowns.dedup();
    script
}

/// Counts what can open a nesting level in the parser, generously (quotes are not skipped).
fn openers(code: &str) -> usize {
    let symbols = code
        .bytes()
        .filter(|b| matches!(b, b'(' | b'{' | b'`' | b'[' | b'!'))
        .count();
    let keywords = code
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| {
            matches!(
                *w,
                "if" | "then"
                    | "elif"
                    | "else"
                    | "while"
                    | "until"
                    | "for"
                    | "do"
                    | "case"
                    | "select"
                    | "coproc"
                    | "function"
                    | "time"
            )
        })
        .count();
    symbols + keywords
}

/// A command name without its directory: `rm` for `/bin/rm`.
fn base_name(name: &str) -> &str {
    match name.rsplit('/').next() {
        Some(base) if !base.is_empty() => base,
        _ => name,
    }
}

#[cfg(test)]
mod tests;
