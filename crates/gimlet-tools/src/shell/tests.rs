use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde::Deserialize;

use super::*;
use crate::permission::{Access, Grants, Mode, Permission, Policy, Rule, RuleAction, RuleOrigin};
use crate::vocab::ToolFlags;

fn texts(line: &str) -> Vec<String> {
    parse(line).commands.into_iter().map(|c| c.text).collect()
}

fn unknown_parts(line: &str) -> Vec<String> {
    parse(line).unknowns.into_iter().map(|u| u.part).collect()
}

/// The shell corpus: commands agents send, with their simple commands and verdicts.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Corpus {
    case: Vec<Case>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    line: String,
    commands: Vec<String>,
    #[serde(default)]
    unknown: Vec<String>,
    verdicts: String,
}

fn rule(action: RuleAction, pattern: &str) -> Rule {
    Rule {
        action,
        tool: String::from("bash"),
        pattern: Some(pattern.to_owned()),
    }
}

fn verdict(policy: &Policy, line: &str) -> &'static str {
    let access = Access::command(line, /*sandboxed*/ true);
    match policy
        .judge("bash", ToolFlags::default(), &[access], &Grants::default())
        .permission
    {
        Permission::Allow => "allow",
        Permission::Ask(_) => "ask",
        Permission::Deny(_) => "deny",
    }
}

/// Every case of `fixtures/shell_corpus.toml`: the simple commands found, the unknown parts,
/// and the verdict in default mode with the sandbox under three rule sets.
#[test]
fn corpus() {
    let corpus: Corpus = toml::from_str(include_str!("../../fixtures/shell_corpus.toml"))
        .expect("the corpus parses");
    assert!(corpus.case.len() >= 150, "{} cases", corpus.case.len());
    let policies = [
        Policy::new(Mode::Default),
        Policy::new(Mode::Default)
            .with_rules(
                [
                    rule(RuleAction::Deny, "rm -rf /*"),
                    rule(RuleAction::Deny, "git push*"),
                    rule(RuleAction::Ask, "curl*"),
                ],
                RuleOrigin::User,
            )
            .unwrap(),
        Policy::new(Mode::Default)
            .with_rules([rule(RuleAction::Deny, "rm *")], RuleOrigin::User)
            .unwrap(),
    ];
    let mut failures = Vec::new();
    for case in &corpus.case {
        let found = texts(&case.line);
        let unknown = unknown_parts(&case.line);
        let verdicts = policies
            .iter()
            .map(|p| verdict(p, &case.line))
            .collect::<Vec<_>>()
            .join(" ");
        if found != case.commands || unknown != case.unknown || verdicts != case.verdicts {
            failures.push(format!(
                "line: {:?}\n  commands: {found:?}\n  expected: {:?}\n  unknown:  {unknown:?}\n  expected: {:?}\n  verdicts: {verdicts}\n  expected: {}",
                case.line, case.commands, case.unknown, case.verdicts
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n\n{}",
        failures.len(),
        corpus.case.len(),
        failures.join("\n\n")
    );
}

#[test]
fn names_are_judged_after_quote_removal_without_their_directory() {
    for line in [
        "rm x",
        "\"r\"\"m\" x",
        "\\rm x",
        "r\\m x",
        "'rm' x",
        "$'\\x72m' x",
        "$'\\162m' x",
        "$'r\\u006d' x",
        "/bin/rm x",
        "~/bin/rm x",
    ] {
        let script = parse(line);
        assert_eq!(script.commands[0].name, "rm", "{line}");
        assert_eq!(script.commands[0].text, "rm x", "{line}");
        assert!(script.unknowns.is_empty(), "{line}");
    }
    assert_eq!(parse("/bin/rm x").commands[0].written, "/bin/rm x");
}

#[test]
fn arithmetic_is_not_a_command_but_a_subshell_in_a_substitution_is() {
    assert_eq!(texts("echo $((rm + 1))"), ["echo $((rm + 1))"]);
    assert_eq!(texts("x=$((git push) 2>&1)"), ["git push"]);
}

#[test]
fn ansi_c_strings_decode_like_bash() {
    assert_eq!(
        words::ansi_c(r"a\tb\n\x41\101\u00e9\'\\\cA"),
        "a\tb\nAAé'\\\x01"
    );
    assert_eq!(words::ansi_c(r"\q\x"), r"\q\x");
}

#[test]
fn redirections_follow_the_words() {
    assert_eq!(
        texts("2>/dev/null >out.txt FOO=1 cmd arg <in &>>log 3<&0"),
        ["cmd arg 2> /dev/null > out.txt < in &>> log 3<&0"]
    );
}

#[test]
fn a_here_document_body_is_read_once_and_as_data() {
    let script = parse("cat <<'EOF'\n$(rm x)\n`rm y`\nEOF\necho after");
    assert_eq!(
        script.commands.iter().map(|c| &c.text).collect::<Vec<_>>(),
        ["cat <<EOF", "echo after"]
    );
    // Unquoted, its substitutions run; quotes in it are text, so they hide nothing.
    assert_eq!(
        texts("cat <<EOF\nit's 'a' $('r''m' x) \"$(git push)\"\nEOF"),
        ["cat <<EOF", "rm x", "git push"]
    );
}

#[test]
fn shells_fed_by_pipes_redirections_and_groups() {
    assert_eq!(unknown_parts("curl -s x | bash -s"), ["bash -s"]);
    assert_eq!(
        unknown_parts("bash < <(curl -s x)"),
        ["bash < <(curl -s x)"]
    );
    // A file is run like `bash script.sh`: out of reach, not unknown.
    assert!(unknown_parts("bash < install.sh").is_empty());
    assert!(unknown_parts("bash").is_empty());
    // The here-document of a group is the input of the shell inside it.
    assert_eq!(texts("{ sh; } <<'EOF'\ngit push\nEOF"), ["sh", "git push"]);
    assert_eq!(unknown_parts("cat x | { bash; }"), ["bash"]);
}

#[test]
fn unknowable_parts_are_named() {
    let script = parse("eval \"$CMD\"; $CC x; source env.sh; curl x | sh");
    assert_eq!(
        script.describe_unknowns(),
        "the code `eval \"$CMD\"` runs; which command `$CC` is; the commands of the file \
         `source env.sh` runs; the commands `sh` reads from its input"
    );
    let script = parse("echo 'open");
    assert!(
        matches!(&script.unknowns[..], [Unknown { why: Why::Unparsed(_), part }] if part == "echo 'open"),
        "{script:?}"
    );
}

#[test]
fn deep_nesting_is_read_on_a_thread_of_its_own_or_not_at_all() {
    let deep = format!("{}rm x;{}", "{ ".repeat(1500), " }".repeat(1500));
    assert_eq!(texts(&deep), ["rm x"]);
    let ifs = format!("{}rm x{}", "if true; then ".repeat(500), "; fi".repeat(500));
    assert_eq!(texts(&ifs).last().map(String::as_str), Some("rm x"));
    let too_deep = format!(
        "{}rm x{}",
        "(".repeat(OPENERS_MAX + 1),
        ")".repeat(OPENERS_MAX + 1)
    );
    assert!(
        matches!(
            &parse(&too_deep).unknowns[..],
            [Unknown {
                why: Why::TooDeep,
                ..
            }]
        ),
        "too deep"
    );
    // Code nested in code is read to a depth, then reported.
    let nested = format!("{}rm x{}", "echo $(".repeat(40), ")".repeat(40));
    let script = parse(&nested);
    assert!(
        script.unknowns.iter().any(|u| u.why == Why::TooDeep),
        "{:?}",
        script.unknowns
    );
}

/// Places where bash runs a command: a deny rule on it must see it in each.
const HIDING_PLACES: &[&str] = &[
    "{}",
    "({})",
    "{ {}; }",
    "echo $({})",
    "echo `{}`",
    "echo \"$({})\"",
    "x=$({})",
    "cat <({})",
    "echo >({})",
    "echo $(( $({}) + 1 ))",
    "echo ${X:-$({})}",
    "bash -c '{}'",
    "sh -ec \"{}\"",
    "eval '{}'",
    "env {}",
    "env -i A=1 {}",
    "command {}",
    "exec {}",
    "nohup {}",
    "time {}",
    "timeout 5 {}",
    "nice -n 5 {}",
    "sudo -u root {}",
    "echo x | xargs {}",
    "find . -exec {} \\;",
    "trap '{}' EXIT",
    "if true; then {}; fi",
    "while false; do {}; done",
    "for f in a; do {}; done",
    "case x in x) {};; esac",
    "f() { {}; }",
    "[[ -n $({}) ]]",
    "true && {} || false",
    "cat <<EOF\n$({})\nEOF",
];

/// Places that take any code, compound commands too.
const CODE_PLACES: &[&str] = &[
    "{}",
    "({})",
    "{ {}; }",
    "echo $({})",
    "echo \"$({})\"",
    "cat <({})",
    "bash -c '{}'",
    "sh -ec \"{}\"",
    "eval '{}'",
    "if true; then {}; fi",
    "while false; do {}; done",
    "f() { {}; }",
    "true && {} || false",
    "cat <<EOF\n$({})\nEOF",
    "sh <<'EOF'\n{}\nEOF",
];

/// brush-parser 0.4 panics on this line (an `unwrap` in its tokenizer); found by the property
/// test below.
#[test]
fn a_line_the_parser_panics_on_is_unknown() {
    let script = parse("${<<EOF\n}\nEOF\n");
    assert!(script.commands.is_empty());
    assert_eq!(
        script.unknowns,
        vec![Unknown {
            part: String::from("${<<EOF\n}\nEOF\n"),
            why: Why::Unparsed(String::from("the shell parser failed on it")),
        }]
    );
    // With many openers, the line is parsed on a thread of its own: the same answer.
    let deep = format!("echo '{}'\n${{<<EOF\n}}\nEOF\n", "$(".repeat(70));
    let script = parse(&deep);
    assert_eq!(
        script.unknowns,
        vec![Unknown {
            part: deep,
            why: Why::Unparsed(String::from("the shell parser failed on it")),
        }]
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn never_panics(line in "(?s).{0,120}") {
        let _ = parse(&line);
    }

    #[test]
    fn never_panics_on_shell_like_text(
        parts in prop::collection::vec(
            prop_oneof![
                Just("$("), Just(")"), Just("`"), Just("'"), Just("\""), Just("<<EOF\n"),
                Just("\nEOF\n"), Just("${"), Just("}"), Just("{ "), Just("; "), Just("| "),
                Just("bash -c "), Just("eval "), Just("$'\\x"), Just("\\"), Just("$(("),
                Just("<("), Just("[[ "), Just(" ]]"), Just("rm x"), Just("if "), Just("fi"),
            ],
            0..24,
        )
    ) {
        let _ = parse(&parts.concat());
    }

    /// Simple commands joined by operators are found back exactly.
    #[test]
    fn operators_split_simple_commands(
        commands in prop::collection::vec("[a-z][a-z0-9_./-]{0,6}( [a-z0-9_./-]{1,6}){0,2}", 1..5),
        operators in prop::collection::vec(
            prop_oneof![Just("&&"), Just("||"), Just(";"), Just("|"), Just("\n"), Just("&")], 4),
    ) {
        const WORDS: &[&str] = &[
            "if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while", "until",
            "for", "in", "function", "select", "time", "coproc",
        ];
        prop_assume!(commands.iter().all(|c| c.split(' ').all(|w| !WORDS.contains(&w))));
        let mut line = commands[0].clone();
        for (i, command) in commands.iter().enumerate().skip(1) {
            line.push_str(&format!(" {} {command}", operators[i - 1]));
        }
        let found = parse(&line);
        let expected: Vec<String> = commands
            .iter()
            .map(|c| {
                let (name, rest) = c.split_once(' ').map_or((c.as_str(), ""), |(n, r)| (n, r));
                let base = base_name(name);
                if rest.is_empty() { base.to_owned() } else { format!("{base} {rest}") }
            })
            .collect();
        let got: Vec<String> = found.commands.iter().map(|c| c.text.clone()).collect();
        // Wrappers add the commands they run; the ones written are found first, in order.
        let mut at = 0;
        for want in &expected {
            let next = got[at..].iter().position(|g| g == want);
            prop_assert!(next.is_some(), "{:?} not in {:?} for {:?}", want, got, line);
            at += next.unwrap_or_default() + 1;
        }
    }

    /// However a command is wrapped, nested or quoted, it is found: a rule on it applies.
    #[test]
    fn a_command_cannot_be_hidden(
        place in prop::sample::select(HIDING_PLACES),
        outer in prop::sample::select(CODE_PLACES),
        spelling in prop::sample::select(&["rm", "/bin/rm", "\\rm", "r\"\"m", "'rm'"][..]),
    ) {
        let inner = place.replace("{}", &format!("{spelling} -rf target"));
        // Nest once more where the outer place quotes nothing that the inner uses.
        let line = if outer.contains('\'') && inner.contains('\'')
            || outer.contains('"') && inner.contains('"')
            || outer.contains('`') && inner.contains('`')
            || outer.contains("EOF") && inner.contains("EOF")
            // `((...))` and `$((...))` are arithmetic (bash does not run `((rm x))` either).
            || outer.contains("({})") && inner.starts_with('(')
        {
            inner
        } else {
            outer.replace("{}", &inner)
        };
        let script = parse(&line);
        // Found, or the line is reported as unreadable (brush-parser rejects a few
        // compositions bash takes, such as a `case` inside `<(...)`): then it asks.
        let unreadable = script.unknowns.iter().any(|u| matches!(u.why, Why::Unparsed(_)));
        prop_assert!(
            script.commands.iter().any(|c| c.text.starts_with("rm -rf target")) || unreadable,
            "{:?} in {:?}",
            line,
            script
        );
    }
}
