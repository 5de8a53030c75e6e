//! The walk over `brush-parser`'s syntax tree that collects every simple command.

use brush_parser::ParserOptions;
use brush_parser::ast::{
    self, Command, CommandPrefixOrSuffixItem, CompoundCommand, CompoundList, ExtendedTestExpr,
    IoFileRedirectKind, IoFileRedirectTarget, IoRedirect, Pipeline, ProcessSubstitutionKind,
    SubshellCommand,
};

use super::words::{self, Expansion, Word};
use super::wrappers::{self, Runs};
use super::{Script, SimpleCommand, Unknown, Why};

/// How deep code may nest in code (`$(...)` in `sh -c` in `eval` ...) before it is not read.
const MAX_DEPTH: usize = 32;

/// What a shell's standard input is, where a command reads it.
#[derive(Debug, Clone)]
pub(super) enum Stdin {
    /// The tool's own: nothing (`/dev/null`).
    Inherited,
    /// The output of the command before it in a pipeline.
    Pipe,
    /// A file.
    File,
    /// A here-document or here-string: text written in the command line.
    Text {
        /// The text.
        text: String,
        /// It holds expansions, so what is read is only known when it runs.
        dynamic: bool,
    },
}

/// Collects simple commands and unknowable parts into a [`Script`].
pub(super) struct Walker {
    pub(super) script: Script,
    options: ParserOptions,
    depth: usize,
    /// Reading code whose expansions were read already and which is unknown as a whole
    /// (`eval "$x; git push"`): only its literal commands are of use.
    shadow: bool,
    /// Nested code with more openers than this is not parsed (the stack it would need was not
    /// planned for).
    pub(super) budget: usize,
}

/// The parts of one simple command, gathered before it is recorded.
#[derive(Default)]
struct Gathered<'a> {
    words: Vec<Word>,
    redirects: Vec<String>,
    stdin: Option<Stdin>,
    expansions: Vec<Expansion>,
    subshells: Vec<&'a SubshellCommand>,
}

impl Walker {
    pub(super) fn new(budget: usize) -> Self {
        Self {
            script: Script::default(),
            options: ParserOptions::default(),
            depth: 0,
            shadow: false,
            budget,
        }
    }

    fn unknown(&mut self, part: &str, why: Why) {
        if self.shadow {
            return;
        }
        self.script.unknowns.push(Unknown {
            part: part.to_owned(),
            why,
        });
    }

    /// Parses `code` and walks it; what does not parse is unknown.
    pub(super) fn code(&mut self, code: &str, stdin: &Stdin) {
        if self.depth >= MAX_DEPTH || super::openers(code) > self.budget {
            self.unknown(code, Why::TooDeep);
            return;
        }
        let mut parser = brush_parser::Parser::new(code.as_bytes(), &self.options);
        let program = match parser.parse_program() {
            Ok(program) => program,
            Err(err) => {
                self.unknown(code, Why::Unparsed(err.to_string()));
                return;
            }
        };
        self.depth += 1;
        for list in &program.complete_commands {
            self.list(list, stdin);
        }
        self.depth -= 1;
    }

    fn list(&mut self, list: &CompoundList, stdin: &Stdin) {
        for item in &list.0 {
            self.pipeline(&item.0.first, stdin);
            for next in &item.0.additional {
                let (ast::AndOr::And(pipeline) | ast::AndOr::Or(pipeline)) = next;
                self.pipeline(pipeline, stdin);
            }
        }
    }

    fn pipeline(&mut self, pipeline: &Pipeline, stdin: &Stdin) {
        for (i, command) in pipeline.seq.iter().enumerate() {
            let stdin = if i == 0 { stdin.clone() } else { Stdin::Pipe };
            self.command(command, &stdin);
        }
    }

    fn command(&mut self, command: &Command, stdin: &Stdin) {
        match command {
            Command::Simple(simple) => self.simple(simple, stdin),
            Command::Compound(compound, redirects) => {
                let stdin = self.redirect_list(redirects.as_ref(), stdin);
                self.compound(compound, &stdin);
            }
            Command::Function(function) => {
                let stdin = self.redirect_list(function.body.1.as_ref(), stdin);
                self.compound(&function.body.0, &stdin);
            }
            Command::ExtendedTest(test, redirects) => {
                let stdin = self.redirect_list(redirects.as_ref(), stdin);
                self.test(&test.expr, &stdin);
            }
        }
    }

    /// The redirections of a compound command: their substitutions run, and they may give it
    /// a new standard input.
    fn redirect_list(&mut self, redirects: Option<&ast::RedirectList>, stdin: &Stdin) -> Stdin {
        let mut gathered = Gathered::default();
        for redirect in redirects.map(|r| r.0.as_slice()).unwrap_or_default() {
            self.redirect(redirect, &mut gathered);
        }
        let new = gathered.stdin.take().unwrap_or_else(|| stdin.clone());
        self.nested(&gathered, &new);
        new
    }

    fn compound(&mut self, compound: &CompoundCommand, stdin: &Stdin) {
        match compound {
            CompoundCommand::Arithmetic(arithmetic) => self.arithmetic(&arithmetic.expr, stdin),
            CompoundCommand::ArithmeticForClause(clause) => {
                for expr in [&clause.initializer, &clause.condition, &clause.updater]
                    .into_iter()
                    .flatten()
                {
                    self.arithmetic(expr, stdin);
                }
                self.list(&clause.body.list, stdin);
            }
            CompoundCommand::BraceGroup(group) => self.list(&group.list, stdin),
            CompoundCommand::Subshell(subshell) => self.list(&subshell.list, stdin),
            CompoundCommand::ForClause(clause) => {
                for value in clause.values.iter().flatten() {
                    self.loose_word(&value.value, stdin);
                }
                self.list(&clause.body.list, stdin);
            }
            CompoundCommand::CaseClause(clause) => {
                self.loose_word(&clause.value.value, stdin);
                for case in &clause.cases {
                    for pattern in &case.patterns {
                        self.loose_word(&pattern.value, stdin);
                    }
                    if let Some(list) = &case.cmd {
                        self.list(list, stdin);
                    }
                }
            }
            CompoundCommand::IfClause(clause) => {
                self.list(&clause.condition, stdin);
                self.list(&clause.then, stdin);
                for other in clause.elses.iter().flatten() {
                    if let Some(condition) = &other.condition {
                        self.list(condition, stdin);
                    }
                    self.list(&other.body, stdin);
                }
            }
            CompoundCommand::WhileClause(clause) | CompoundCommand::UntilClause(clause) => {
                self.list(&clause.0, stdin);
                self.list(&clause.1.list, stdin);
            }
            CompoundCommand::Coprocess(coprocess) => self.command(&coprocess.body, stdin),
        }
    }

    fn test(&mut self, expr: &ExtendedTestExpr, stdin: &Stdin) {
        match expr {
            ExtendedTestExpr::And(left, right) | ExtendedTestExpr::Or(left, right) => {
                self.test(left, stdin);
                self.test(right, stdin);
            }
            ExtendedTestExpr::Not(inner) | ExtendedTestExpr::Parenthesized(inner) => {
                self.test(inner, stdin);
            }
            ExtendedTestExpr::UnaryTest(_, word) => self.loose_word(&word.value, stdin),
            ExtendedTestExpr::BinaryTest(_, left, right) => {
                self.loose_word(&left.value, stdin);
                self.loose_word(&right.value, stdin);
            }
        }
    }

    fn arithmetic(&mut self, expr: &ast::UnexpandedArithmeticExpr, stdin: &Stdin) {
        // Written as `$((...))`, the word parser finds the substitutions inside.
        self.loose_word(&format!("$(({}))", expr.value), stdin);
    }

    /// A word that is not part of a simple command (a `for` list, a `case` pattern, a test):
    /// only what it runs matters.
    fn loose_word(&mut self, raw: &str, stdin: &Stdin) {
        let mut gathered = Gathered::default();
        self.word(raw, &mut gathered);
        self.nested(&gathered, stdin);
    }

    /// Quote removal for one word; what it runs is kept for later.
    fn word(&mut self, raw: &str, gathered: &mut Gathered<'_>) -> Word {
        match words::word(raw, &self.options) {
            Ok((word, expansion)) => {
                gathered.expansions.push(expansion);
                word
            }
            Err(err) => {
                self.unknown(raw, Why::Unparsed(err.to_string()));
                Word::opaque(raw)
            }
        }
    }

    fn simple(&mut self, simple: &ast::SimpleCommand, stdin: &Stdin) {
        let mut gathered = Gathered::default();
        let prefix = simple.prefix.iter().flat_map(|p| &p.0).map(Item::Prefix);
        let name = simple.word_or_name.iter().map(Item::Name);
        let suffix = simple.suffix.iter().flat_map(|s| &s.0).map(Item::Suffix);
        for item in prefix.chain(name).chain(suffix) {
            let (item, in_prefix) = match item {
                Item::Name(name) => {
                    let word = self.word(&name.value, &mut gathered);
                    gathered.words.push(word);
                    continue;
                }
                Item::Prefix(item) => (item, true),
                Item::Suffix(item) => (item, false),
            };
            match item {
                CommandPrefixOrSuffixItem::IoRedirect(redirect) => {
                    let text = self.redirect(redirect, &mut gathered);
                    gathered.redirects.push(text);
                }
                CommandPrefixOrSuffixItem::Word(word) => {
                    let word = self.word(&word.value, &mut gathered);
                    gathered.words.push(word);
                }
                CommandPrefixOrSuffixItem::AssignmentWord(_, word) => {
                    // `NAME=value cmd`: the assignment does not name the command, but its
                    // substitutions run. After the name (`export X=1`) it is an argument.
                    let word = self.word(&word.value, &mut gathered);
                    if !in_prefix {
                        gathered.words.push(word);
                    }
                }
                CommandPrefixOrSuffixItem::ProcessSubstitution(kind, subshell) => {
                    gathered
                        .words
                        .push(Word::opaque(&process_substitution(kind, subshell)));
                    gathered.subshells.push(subshell);
                }
            }
        }
        let stdin = gathered.stdin.clone().unwrap_or_else(|| stdin.clone());
        if !gathered.words.is_empty() {
            self.record(&gathered.words, &gathered.redirects);
        }
        self.nested(&gathered, &stdin);
        if !gathered.words.is_empty() {
            self.follow(&gathered.words, &gathered.redirects, &stdin);
        }
    }

    /// Records a simple command; a name that is only known when it runs is unknown.
    fn record(&mut self, words: &[Word], redirects: &[String]) {
        let Some(name) = words.first() else {
            return;
        };
        if name.dynamic || name.braces {
            if self.shadow {
                return;
            }
            self.unknown(&name.raw, Why::CommandName);
        }
        let join = |first: &str| {
            let mut text = first.to_owned();
            for part in words[1..]
                .iter()
                .map(|w| w.text.as_str())
                .chain(redirects.iter().map(String::as_str))
            {
                text.push(' ');
                text.push_str(part);
            }
            text
        };
        let base = super::base_name(&name.text);
        self.script.commands.push(SimpleCommand {
            name: base.to_owned(),
            text: join(base),
            written: join(&name.text),
        });
    }

    /// What a recorded command runs besides itself: the command it wraps, the code it
    /// evaluates, what its shell reads.
    fn follow(&mut self, words: &[Word], redirects: &[String], stdin: &Stdin) {
        let written = || {
            words
                .iter()
                .map(|w| w.raw.as_str())
                .chain(redirects.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" ")
        };
        match wrappers::runs(words) {
            Runs::Nothing => {}
            Runs::Commands(commands) => {
                for inner in commands {
                    self.record(inner, &[]);
                    self.follow(inner, &[], stdin);
                }
            }
            Runs::Input(inner) => {
                // `xargs cmd` adds the words it reads as arguments: `cmd {}`.
                let mut with_input = inner.to_vec();
                with_input.push(Word {
                    text: String::from("{}"),
                    raw: String::from("{}"),
                    dynamic: true,
                    braces: false,
                });
                self.record(&with_input, &[]);
                self.follow(inner, &[], stdin);
            }
            Runs::Code { code, dynamic } => {
                if dynamic {
                    self.unknown(&written(), Why::Code);
                }
                self.code_of(&code, dynamic, stdin);
            }
            Runs::File => self.unknown(&written(), Why::File),
            Runs::Stdin => match stdin {
                Stdin::Inherited | Stdin::File => {}
                Stdin::Pipe => self.unknown(&written(), Why::Stdin),
                Stdin::Text { text, dynamic } => {
                    if *dynamic {
                        self.unknown(&written(), Why::HereDoc);
                    }
                    self.code_of(&text.clone(), *dynamic, &Stdin::Inherited);
                }
            },
        }
    }

    /// Code a command evaluates. With expansions in it, it is unknown as a whole, and read
    /// only for the commands written in it literally.
    fn code_of(&mut self, code: &str, dynamic: bool, stdin: &Stdin) {
        let shadow = self.shadow;
        self.shadow |= dynamic;
        self.code(code, stdin);
        self.shadow = shadow;
    }

    /// Walks what the words and redirections of one command run.
    fn nested(&mut self, gathered: &Gathered<'_>, stdin: &Stdin) {
        // In code read again, the expansions were read the first time.
        let expansions = if self.shadow {
            &[][..]
        } else {
            &gathered.expansions[..]
        };
        for expansion in expansions {
            for hidden in &expansion.hidden {
                self.unknown(hidden, Why::Hidden);
            }
            for code in &expansion.code {
                self.code(code, stdin);
            }
        }
        for subshell in &gathered.subshells {
            self.list(&subshell.list, &Stdin::Inherited);
        }
    }

    /// Renders one redirection (`2>&1`, `> out.txt`, `<<EOF`) and notes what it runs and what
    /// it gives as standard input.
    fn redirect<'a>(&mut self, redirect: &'a IoRedirect, gathered: &mut Gathered<'a>) -> String {
        match redirect {
            IoRedirect::File(fd, kind, target) => {
                let op = match kind {
                    IoFileRedirectKind::Read => "<",
                    IoFileRedirectKind::Write => ">",
                    IoFileRedirectKind::Append => ">>",
                    IoFileRedirectKind::ReadAndWrite => "<>",
                    IoFileRedirectKind::Clobber => ">|",
                    IoFileRedirectKind::DuplicateInput => "<&",
                    IoFileRedirectKind::DuplicateOutput => ">&",
                };
                let fd = fd.map(|fd| fd.to_string()).unwrap_or_default();
                let reads_stdin = matches!(
                    kind,
                    IoFileRedirectKind::Read | IoFileRedirectKind::ReadAndWrite
                ) && (fd.is_empty() || fd == "0");
                let target = match target {
                    IoFileRedirectTarget::Filename(word) => {
                        format!(" {}", self.word(&word.value, gathered).text)
                    }
                    IoFileRedirectTarget::Fd(n) => n.to_string(),
                    IoFileRedirectTarget::Duplicate(word) => self.word(&word.value, gathered).text,
                    IoFileRedirectTarget::ProcessSubstitution(kind, subshell) => {
                        gathered.subshells.push(subshell);
                        if reads_stdin {
                            // `sh < <(curl ...)`: what it reads is the output of a command.
                            gathered.stdin = Some(Stdin::Pipe);
                        }
                        format!(" {}", process_substitution(kind, subshell))
                    }
                };
                if reads_stdin && gathered.stdin.is_none() {
                    gathered.stdin = Some(Stdin::File);
                }
                format!("{fd}{op}{target}")
            }
            IoRedirect::HereDocument(fd, doc) => {
                let end = self.word(&doc.here_end.value, gathered).text;
                let body = &doc.doc.value;
                let dynamic = if doc.requires_expansion {
                    match words::heredoc(body, &self.options) {
                        Ok((dynamic, expansion)) => {
                            gathered.expansions.push(expansion);
                            dynamic
                        }
                        Err(err) => {
                            self.unknown(body, Why::Unparsed(err.to_string()));
                            true
                        }
                    }
                } else {
                    false
                };
                if fd.is_none_or(|fd| fd == 0) {
                    gathered.stdin = Some(Stdin::Text {
                        text: body.clone(),
                        dynamic,
                    });
                }
                let dash = if doc.remove_tabs { "-" } else { "" };
                format!(
                    "{}<<{dash}{end}",
                    fd.map(|fd| fd.to_string()).unwrap_or_default()
                )
            }
            IoRedirect::HereString(fd, word) => {
                let word = self.word(&word.value, gathered);
                if fd.is_none_or(|fd| fd == 0) {
                    gathered.stdin = Some(Stdin::Text {
                        text: word.text.clone(),
                        dynamic: word.dynamic,
                    });
                }
                format!(
                    "{}<<< {}",
                    fd.map(|fd| fd.to_string()).unwrap_or_default(),
                    word.text
                )
            }
            IoRedirect::OutputAndError(word, append) => {
                let op = if *append { "&>>" } else { "&>" };
                format!("{op} {}", self.word(&word.value, gathered).text)
            }
        }
    }
}

/// One item of a simple command, in the order written.
enum Item<'a> {
    Prefix(&'a CommandPrefixOrSuffixItem),
    Name(&'a ast::Word),
    Suffix(&'a CommandPrefixOrSuffixItem),
}

/// `<(cmd)` or `>(cmd)`, as text.
fn process_substitution(kind: &ProcessSubstitutionKind, subshell: &SubshellCommand) -> String {
    let op = match kind {
        ProcessSubstitutionKind::Read => '<',
        ProcessSubstitutionKind::Write => '>',
    };
    let list = subshell.list.to_string();
    format!("{op}({})", list.trim().trim_end_matches(';').trim_end())
}
