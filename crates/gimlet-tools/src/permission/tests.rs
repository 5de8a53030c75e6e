use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;

use super::*;
use crate::fs::NameMatching;
use crate::sandbox::protected::Protected;
use crate::vocab::ToolFlags;

fn path(display: &str, inside: bool, protected: bool) -> PathAccess {
    PathAccess {
        path: PathBuf::from("/ws").join(display),
        display: display.to_owned(),
        inside_roots: inside,
        protected,
    }
}

fn read(display: &str, inside: bool) -> Access {
    Access::Read(path(display, inside, false))
}

fn write(display: &str, inside: bool) -> Access {
    Access::Write(path(display, inside, false))
}

fn command(line: &str, sandboxed: bool) -> Access {
    Access::command(line, sandboxed)
}

fn rule(action: RuleAction, tool: &str, pattern: Option<&str>) -> Rule {
    Rule {
        action,
        tool: tool.to_owned(),
        pattern: pattern.map(ToOwned::to_owned),
    }
}

/// The decision as a short word, with the ask reason.
fn decide(policy: &Policy, tool: &str, access: Access) -> String {
    match policy
        .judge(tool, ToolFlags::default(), &[access], &Grants::default())
        .permission
    {
        Permission::Allow => "allow".into(),
        Permission::Deny(_) => "deny".into(),
        Permission::Ask(request) => format!("ask:{:?}", request.reason),
    }
}

#[test]
fn default_mode() {
    let p = Policy::new(Mode::Default);
    assert_eq!(decide(&p, "read", read("a", true)), "allow");
    assert_eq!(
        decide(&p, "read", read("/etc/x", false)),
        "ask:OutsideRoots"
    );
    assert_eq!(decide(&p, "write", write("a", true)), "allow");
    assert_eq!(
        decide(&p, "write", write("/etc/x", false)),
        "ask:OutsideRoots"
    );
    assert_eq!(
        decide(&p, "write", Access::Write(path(".git/config", true, true))),
        "ask:ProtectedPath"
    );
    assert_eq!(decide(&p, "bash", command("ls", true)), "allow");
    assert_eq!(decide(&p, "bash", command("ls", false)), "ask:Unsandboxed");
    // Shell syntax alone never asks where the sandbox holds ...
    for line in [
        "echo $(id)",
        "echo $((1+2))",
        "eval \"$CMD\"",
        "$CC x",
        "source env.sh",
    ] {
        assert_eq!(decide(&p, "bash", command(line, true)), "allow", "{line}");
    }
    // ... but what cannot be seen asks where it does not.
    assert_eq!(
        decide(&p, "bash", command("eval \"$CMD\"", false)),
        "ask:UnparsedCommand"
    );
    assert_eq!(
        decide(&p, "bash", command("echo $(id)", false)),
        "ask:Unsandboxed"
    );
    assert_eq!(
        decide(
            &p,
            "web_fetch",
            Access::Network {
                host: "example.com".into()
            }
        ),
        "ask:Network"
    );
}

#[test]
fn strict_trusted_and_read_only_modes() {
    let strict = Policy::new(Mode::Strict);
    assert_eq!(decide(&strict, "read", read("a", true)), "allow");
    assert_eq!(decide(&strict, "write", write("a", true)), "ask:Mode");
    assert_eq!(decide(&strict, "bash", command("ls", true)), "ask:Mode");

    let trusted = Policy::new(Mode::Trusted);
    assert_eq!(decide(&trusted, "write", write("a", true)), "allow");
    assert_eq!(decide(&trusted, "read", read("/etc/x", false)), "deny");
    assert_eq!(decide(&trusted, "bash", command("ls", false)), "allow");
    assert_eq!(
        decide(&trusted, "bash", command("echo $(id)", true)),
        "allow"
    );
    assert_eq!(
        decide(
            &trusted,
            "write",
            Access::Write(path(".mcp.json", true, true))
        ),
        "ask:ProtectedPath"
    );

    let read_only = Policy::new(Mode::ReadOnly);
    assert_eq!(decide(&read_only, "read", read("a", true)), "allow");
    assert_eq!(decide(&read_only, "write", write("a", true)), "deny");
    assert_eq!(decide(&read_only, "bash", command("ls", true)), "deny");
}

#[test]
fn deny_beats_ask_beats_allow() {
    let p = Policy::new(Mode::Default)
        .with_rules(
            [
                rule(RuleAction::Allow, "*", None),
                rule(RuleAction::Ask, "write", Some("secrets/**")),
                rule(RuleAction::Deny, "write", Some("secrets/keys/**")),
            ],
            RuleOrigin::User,
        )
        .unwrap();
    assert_eq!(decide(&p, "write", write("src/a.rs", true)), "allow");
    assert_eq!(decide(&p, "write", write("secrets/a", true)), "ask:Rule");
    assert_eq!(decide(&p, "write", write("secrets/keys/id", true)), "deny");
    // An allow rule can open a path outside the roots ...
    let p = Policy::new(Mode::Default)
        .with_rules(
            [rule(RuleAction::Allow, "read", Some("/usr/share/**"))],
            RuleOrigin::User,
        )
        .unwrap();
    let outside = Access::Read(PathAccess {
        path: "/usr/share/dict/words".into(),
        display: "/usr/share/dict/words".into(),
        inside_roots: false,
        protected: false,
    });
    assert_eq!(decide(&p, "read", outside), "allow");
    // ... but never a protected path.
    let p = Policy::new(Mode::Default)
        .with_rules([rule(RuleAction::Allow, "*", None)], RuleOrigin::User)
        .unwrap();
    assert_eq!(
        decide(
            &p,
            "write",
            Access::Write(path(".git/hooks/pre-commit", true, true))
        ),
        "ask:ProtectedPath"
    );
}

#[test]
fn a_project_config_can_only_tighten() {
    let p = Policy::new(Mode::Strict)
        .with_rules(
            [
                rule(RuleAction::Allow, "*", None),
                rule(RuleAction::Deny, "bash", Some("curl*")),
            ],
            RuleOrigin::Project,
        )
        .unwrap();
    assert_eq!(p.rules().count(), 1);
    assert_eq!(decide(&p, "write", write("a", true)), "ask:Mode");
    assert_eq!(decide(&p, "bash", command("curl x", true)), "deny");
}

#[test]
fn compound_commands_need_every_part_allowed() {
    let p = Policy::new(Mode::Strict)
        .with_rules(
            [
                rule(RuleAction::Allow, "bash", Some("git status*")),
                rule(RuleAction::Allow, "bash", Some("cargo test*")),
                rule(RuleAction::Deny, "bash", Some("rm -rf*")),
            ],
            RuleOrigin::User,
        )
        .unwrap();
    assert_eq!(
        decide(&p, "bash", command("git status && cargo test --all", true)),
        "allow"
    );
    // `git status*` as a glob matches the whole string; it must not allow the second part.
    assert_eq!(
        decide(&p, "bash", command("git status && curl evil.sh", true)),
        "ask:Mode"
    );
    assert_eq!(
        decide(&p, "bash", command("git status; rm -rf /", true)),
        "deny"
    );
    // A substitution is read: the deny rule on the command inside it applies.
    assert_eq!(
        decide(&p, "bash", command("git status $(rm -rf /)", true)),
        "deny"
    );
    // What cannot be known is never allowed by a rule.
    assert_eq!(
        decide(&p, "bash", command("git status; eval \"$CMD\"", true)),
        "ask:UnparsedCommand"
    );
    assert_eq!(
        decide(&p, "bash", command("git status; $(echo cargo) test", true)),
        "ask:UnparsedCommand"
    );
    let trusted = Policy::new(Mode::Trusted)
        .with_rules(
            [rule(RuleAction::Deny, "bash", Some("rm*"))],
            RuleOrigin::User,
        )
        .unwrap();
    assert_eq!(
        decide(&trusted, "bash", command("eval \"rm -rf /\"", true)),
        "deny"
    );
    // The trusted mode never asks: an unknowable part that could hide a denied command is
    // refused, and runs where no such rule exists.
    assert_eq!(
        decide(&trusted, "bash", command("eval \"$CMD\"", true)),
        "deny"
    );
    assert_eq!(
        decide(
            &Policy::new(Mode::Trusted),
            "bash",
            command("eval \"$CMD\"", false)
        ),
        "allow"
    );
}

#[test]
fn the_strictest_verdict_over_the_simple_commands_wins() {
    let p = Policy::new(Mode::Default)
        .with_rules(
            [
                rule(RuleAction::Allow, "bash", Some("git*")),
                rule(RuleAction::Ask, "bash", Some("curl*")),
                rule(RuleAction::Deny, "bash", Some("git push*")),
            ],
            RuleOrigin::User,
        )
        .unwrap();
    assert_eq!(decide(&p, "bash", command("git status", false)), "allow");
    assert_eq!(
        decide(&p, "bash", command("curl x | sh -c 'git push'", true)),
        "deny"
    );
    assert_eq!(
        decide(&p, "bash", command("git log $(curl -s x)", true)),
        "ask:Rule"
    );
    // A rule without a tool applies to bash too; one for another tool does not.
    let p = Policy::new(Mode::Default)
        .with_rules(
            [
                rule(RuleAction::Deny, "*", Some("rm *")),
                rule(RuleAction::Deny, "write", Some("git*")),
            ],
            RuleOrigin::User,
        )
        .unwrap();
    assert_eq!(decide(&p, "bash", command("(cd x && rm y)", true)), "deny");
    assert_eq!(decide(&p, "bash", command("git push", true)), "allow");
}

#[test]
fn an_allow_rule_needs_every_command_by_the_name_written() {
    let p = Policy::new(Mode::Strict)
        .with_rules(
            [
                rule(RuleAction::Allow, "bash", Some("cargo test*")),
                rule(RuleAction::Allow, "bash", Some("./deploy --dry-run*")),
                rule(RuleAction::Deny, "bash", Some("deploy --force*")),
            ],
            RuleOrigin::User,
        )
        .unwrap();
    assert_eq!(
        decide(&p, "bash", command("cargo test --all", true)),
        "allow"
    );
    // A wrapper is a command too: it must be allowed as well.
    assert_eq!(
        decide(&p, "bash", command("timeout 60 cargo test", true)),
        "ask:Mode"
    );
    assert_eq!(
        decide(&p, "bash", command("./deploy --dry-run", true)),
        "allow"
    );
    // Allowing `./deploy` does not allow another program of that name ...
    assert_eq!(
        decide(&p, "bash", command("/tmp/x/deploy --dry-run", true)),
        "ask:Mode"
    );
    // ... while a deny rule on the name catches it wherever it lives.
    assert_eq!(
        decide(&p, "bash", command("/tmp/x/deploy --force", true)),
        "deny"
    );
}

#[test]
fn questions_and_refusals_name_what_they_are_about() {
    let p = Policy::new(Mode::Default)
        .with_rules(
            [rule(RuleAction::Deny, "bash", Some("git push*"))],
            RuleOrigin::User,
        )
        .unwrap();
    let judge = |line: &str| {
        p.judge(
            "bash",
            ToolFlags::default(),
            &[command(line, true)],
            &Grants::default(),
        )
        .permission
    };
    let Permission::Ask(request) = judge("$CC -o main main.c") else {
        panic!("should ask")
    };
    assert_eq!(request.reason, AskReason::UnparsedCommand);
    assert_eq!(
        request.summary,
        "run $CC -o main main.c (gimlet cannot see which command `$CC` is)"
    );
    let Permission::Deny(why) = judge("bash -c \"git push\"") else {
        panic!("should deny")
    };
    assert!(
        why.contains("denies `git push`, which `bash -c \"git push\"` runs"),
        "{why}"
    );
}

/// The judgement whole, as a table: the verdict, who decided, and the outside paths it opens.
/// No context, no session: the policy is a function of its inputs.
#[test]
fn judgements_say_who_decided_and_what_they_open() {
    // (tool, access, grants, (verdict, who decided, outside paths opened))
    type Row<'a> = (&'a str, Access, &'a Grants, (&'a str, &'a str, &'a str));
    let p = Policy::new(Mode::Default)
        .with_rules(
            [
                rule(RuleAction::Allow, "read", Some("/etc/hostname")),
                rule(RuleAction::Deny, "bash", Some("rm *")),
            ],
            RuleOrigin::User,
        )
        .unwrap();
    let granted = Grants::default();
    granted.add("read", String::from("/ws/etc/motd"));
    let none = Grants::default();
    let short = |j: Judgement| {
        let verdict = match j.permission {
            Permission::Allow => String::from("allow"),
            Permission::Deny(_) => String::from("deny"),
            Permission::Ask(r) => format!("ask:{:?}", r.reason),
        };
        let outside: Vec<String> = j.outside.iter().map(|p| p.display().to_string()).collect();
        (verdict, j.by.unwrap_or_default(), outside.join(","))
    };
    let table: [Row<'_>; 6] = [
        (
            "read",
            read("a", true),
            &none,
            ("allow", "mode default", ""),
        ),
        (
            "read",
            read("/etc/hostname", false),
            &none,
            (
                "allow",
                "rule allow read `/etc/hostname` (user config)",
                "/etc/hostname",
            ),
        ),
        (
            "read",
            read("/etc/x", false),
            &none,
            ("ask:OutsideRoots", "", ""),
        ),
        (
            "read",
            read("etc/motd", false),
            &granted,
            ("allow", "session grant", "/ws/etc/motd"),
        ),
        (
            "ls",
            read("etc/motd", false),
            &granted,
            ("ask:OutsideRoots", "", ""),
        ),
        (
            "bash",
            command("rm -rf x", true),
            &none,
            ("deny", "rule deny bash `rm *` (user config)", ""),
        ),
    ];
    for (tool, access, grants, (verdict, by, outside)) in table {
        let judged = short(p.judge(
            tool,
            ToolFlags::default(),
            std::slice::from_ref(&access),
            grants,
        ));
        assert_eq!(
            judged,
            (verdict.to_owned(), by.to_owned(), outside.to_owned()),
            "{tool} {access:?}"
        );
    }
}

#[test]
fn session_grants_cover_the_same_pattern_only() {
    let grants = Grants::default();
    let p = Policy::new(Mode::Default);
    let outside = read("/etc/hosts", false);
    let Permission::Ask(request) = p
        .judge(
            "read",
            ToolFlags::default(),
            std::slice::from_ref(&outside),
            &grants,
        )
        .permission
    else {
        panic!("should ask")
    };
    grants.add("read", request.session_pattern.unwrap());
    assert_eq!(
        p.judge("read", ToolFlags::default(), &[outside], &grants)
            .permission,
        Permission::Allow
    );
    assert!(matches!(
        p.judge(
            "read",
            ToolFlags::default(),
            &[read("/etc/other", false)],
            &grants
        )
        .permission,
        Permission::Ask(_)
    ));
    assert!(matches!(
        p.judge(
            "ls",
            ToolFlags::default(),
            &[read("/etc/hosts", false)],
            &grants
        )
        .permission,
        Permission::Ask(_)
    ));

    let cmd = command("cargo build --release", false);
    assert_eq!(cmd.session_pattern(), "cargo build*");
    grants.add("bash", cmd.session_pattern());
    assert_eq!(
        p.judge("bash", ToolFlags::default(), &[cmd], &grants)
            .permission,
        Permission::Allow
    );
    let other = command("cargo publish", false);
    assert!(matches!(
        p.judge("bash", ToolFlags::default(), &[other], &grants)
            .permission,
        Permission::Ask(_)
    ));
    // The grant covers a line whose every command it matches, and no other.
    let both = command("cargo build && cargo build --release", false);
    assert_eq!(
        p.judge("bash", ToolFlags::default(), &[both], &grants)
            .permission,
        Permission::Allow
    );
    let sneaky = command("cargo build; rm -rf ~", false);
    assert!(matches!(
        p.judge("bash", ToolFlags::default(), &[sneaky], &grants)
            .permission,
        Permission::Ask(_)
    ));
}

#[test]
fn a_session_grant_on_a_compound_line_covers_that_line() {
    let grants = Grants::default();
    let p = Policy::new(Mode::Default);
    let line = "cd sub && cargo test 2>&1 | tail -n [0-9]*";
    let cmd = command(line, false);
    assert_eq!(
        cmd.session_pattern(),
        "cd sub && cargo test 2>&1 | tail -n \\[0-9\\]\\*"
    );
    grants.add("bash", cmd.session_pattern());
    assert_eq!(
        p.judge("bash", ToolFlags::default(), &[cmd], &grants)
            .permission,
        Permission::Allow
    );
    for other in [
        "cd sub && cargo test 2>&1 | tail -n 5",
        "cd sub && cargo test 2>&1 | tail -n [0-9]*; rm -rf ~",
        "cd sub",
    ] {
        assert!(
            matches!(
                p.judge(
                    "bash",
                    ToolFlags::default(),
                    &[command(other, false)],
                    &grants
                )
                .permission,
                Permission::Ask(_)
            ),
            "{other}"
        );
    }
    // A line with a part that cannot be seen is granted as it is, too.
    let unknown = command("eval \"$SETUP\"", false);
    assert_eq!(unknown.session_pattern(), "eval \"$SETUP\"");
}

#[test]
fn protected_patterns() {
    let p = Policy::default();
    for protected in [
        ".git/hooks/pre-commit",
        ".git/config",
        ".mcp.json",
        ".vscode/settings.json",
        ".claude/x",
        ".gimlet.toml",
        "sub/.bashrc",
    ] {
        assert!(
            p.is_protected(std::path::Path::new(protected)),
            "{protected}"
        );
    }
    for plain in ["src/main.rs", ".gitignore", ".git/HEAD", "mcp.json"] {
        assert!(!p.is_protected(std::path::Path::new(plain)), "{plain}");
    }
}

#[test]
fn invalid_rule_patterns_are_reported() {
    let err = Policy::default()
        .with_rules(
            [rule(RuleAction::Deny, "bash", Some("a[b"))],
            RuleOrigin::User,
        )
        .unwrap_err();
    assert!(err.to_string().contains("invalid pattern `a[b`"), "{err}");
}

#[test]
fn questions_show_hidden_characters_as_escapes() {
    assert_eq!(visible("plain\n\ttext"), "plain\n\ttext");
    assert_eq!(
        visible("echo ok \u{1b}[2K\u{1b}[1Aharmless; rm -rf x"),
        "echo ok \\x1b[2K\\x1b[1Aharmless; rm -rf x"
    );
    assert_eq!(visible("a\rb\r\nc"), "a\\rb\\r\nc");
    assert_eq!(visible("x\u{202e}cod.exe"), "x\\u{202e}cod.exe");
    assert_eq!(
        visible("\u{2066}a\u{2069}\u{200b}\u{feff}"),
        "\\u{2066}a\\u{2069}\\u{200b}\\u{feff}"
    );
    assert_eq!(visible("\u{7f}\u{9b}\u{0}"), "\\x7f\\x9b\\x00");
    let request = AskRequest {
        tool: String::from("bash"),
        summary: String::from("run echo \u{1b}[31mred"),
        detail: Some(String::from("line\rover")),
        reason: AskReason::Mode,
        session_pattern: None,
        accesses: Vec::new(),
    };
    let message = request.message();
    assert!(
        !message.contains('\u{1b}') && !message.contains('\r'),
        "{message:?}"
    );
    assert!(message.contains("\\x1b[31mred") && message.contains("line\\rover"));
}

#[test]
fn outside_grants_match_every_part() {
    let grants = OutsideGrants::default();
    grants.add("bash", String::from("npm install*"));
    let access = |command: &str| Access::command(command, false);
    assert!(grants.covers("bash", &access("npm install left-pad")));
    assert!(!grants.covers("bash", &access("npm install x && rm -rf ~")));
    assert!(!grants.covers("other", &access("npm install")));
    assert!(!grants.covers("bash", &access("npm publish")));
}

/// A policy with one rule, its names compared as `matching` says.
fn one_rule(matching: NameMatching, action: RuleAction, pattern: &str) -> Policy {
    Policy::new(Mode::Default)
        .with_rules([rule(action, "*", Some(pattern))], RuleOrigin::User)
        .unwrap()
        .with_name_matching(matching)
}

#[test]
fn where_names_ignore_case_a_path_rule_matches_every_spelling() {
    for matching in [NameMatching::MacOs, NameMatching::Windows] {
        let p = one_rule(matching, RuleAction::Deny, "secrets/**");
        for path in ["secrets/x", "SECRETS/x", "Secrets/Key.pem", "SeCrEtS/a/B"] {
            assert_eq!(decide(&p, "write", write(path, true)), "deny", "{path}");
            assert_eq!(decide(&p, "read", read(path, true)), "deny", "{path}");
        }
        assert_eq!(decide(&p, "write", write("src/secrets.rs", true)), "allow");
        // The absolute path is matched too, folded alike.
        let p = one_rule(matching, RuleAction::Ask, "/WS/Secrets/**");
        assert_eq!(decide(&p, "read", read("secrets/x", true)), "ask:Rule");
        // A rule added after the matching is set folds as well.
        let p = Policy::new(Mode::Default)
            .with_name_matching(matching)
            .with_rules(
                [rule(RuleAction::Deny, "write", Some("SECRETS/**"))],
                RuleOrigin::Project,
            )
            .unwrap();
        assert_eq!(decide(&p, "write", write("secrets/x", true)), "deny");
    }
    // Linux: `SECRETS` is another folder; today's behaviour stays.
    let p = one_rule(NameMatching::Exact, RuleAction::Deny, "secrets/**");
    assert_eq!(decide(&p, "write", write("SECRETS/x", true)), "allow");
    assert_eq!(decide(&p, "write", write("secrets/x", true)), "deny");
}

#[test]
fn on_macos_a_rule_matches_a_name_in_either_normalisation() {
    let nfc = "caf\u{e9}";
    let nfd = "cafe\u{301}";
    for (pattern, path) in [(nfc, nfd), (nfd, nfc)] {
        let pattern = format!("{pattern}/**");
        let path = format!("{path}/menu.txt");
        let macos = one_rule(NameMatching::MacOs, RuleAction::Deny, &pattern);
        assert_eq!(
            decide(&macos, "write", write(&path, true)),
            "deny",
            "{path:?}"
        );
        assert_eq!(
            decide(&macos, "write", write(&path.to_uppercase(), true)),
            "deny"
        );
        // NTFS and Linux keep the forms apart: two names, two files.
        for other in [NameMatching::Windows, NameMatching::Exact] {
            let p = one_rule(other, RuleAction::Deny, &pattern);
            assert_eq!(
                decide(&p, "write", write(&path, true)),
                "allow",
                "{other:?}"
            );
        }
    }
}

#[test]
fn a_pattern_that_folding_would_break_still_matches_ignoring_ascii_case() {
    // `[Z-a]` is a range from `Z` to `a`; lower-cased it would run backwards (`[z-a]`).
    let p = one_rule(NameMatching::MacOs, RuleAction::Deny, "[Z-a]x/**");
    assert_eq!(decide(&p, "write", write("_X/y", true)), "deny");
    assert_eq!(decide(&p, "write", write("bx/y", true)), "allow");
}

#[test]
fn the_protected_list_follows_the_policys_name_matching() {
    let protected = || Protected::new([String::from("Deploy")]);
    for policy in [
        Policy::new(Mode::Default)
            .with_protected(protected())
            .with_name_matching(NameMatching::Windows),
        Policy::new(Mode::Default)
            .with_name_matching(NameMatching::Windows)
            .with_protected(protected()),
    ] {
        for path in [".GIT/HOOKS/pre-commit", ".Vscode/settings.json", "DEPLOY/x"] {
            assert!(policy.is_protected(Path::new(path)), "{path}");
        }
    }
    let exact = Policy::new(Mode::Default)
        .with_protected(protected())
        .with_name_matching(NameMatching::Exact);
    assert!(!exact.is_protected(Path::new(".GIT/HOOKS/pre-commit")));
    assert!(exact.is_protected(Path::new("Deploy/x")));
}
