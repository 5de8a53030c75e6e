use std::path::PathBuf;

use pretty_assertions::assert_eq;

use super::*;
use crate::testutil::TestWorkspace;

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

fn command(command: &str, parts: Option<&[&str]>, sandboxed: bool) -> Access {
    Access::Execute {
        command: command.to_owned(),
        parts: parts.map(|p| p.iter().map(ToString::to_string).collect()),
        sandboxed,
    }
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
    let ws = TestWorkspace::new();
    match policy.judge(tool, ToolFlags::default(), &[access], &ws.ctx()) {
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
    assert_eq!(
        decide(&p, "bash", command("ls", Some(&["ls"]), true)),
        "allow"
    );
    assert_eq!(
        decide(&p, "bash", command("ls", Some(&["ls"]), false)),
        "ask:Unsandboxed"
    );
    assert_eq!(
        decide(&p, "bash", command("echo $(id)", None, true)),
        "ask:UnparsedCommand"
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
    assert_eq!(
        decide(&strict, "bash", command("ls", Some(&["ls"]), true)),
        "ask:Mode"
    );

    let trusted = Policy::new(Mode::Trusted);
    assert_eq!(decide(&trusted, "write", write("a", true)), "allow");
    assert_eq!(decide(&trusted, "read", read("/etc/x", false)), "deny");
    assert_eq!(
        decide(&trusted, "bash", command("ls", Some(&["ls"]), false)),
        "allow"
    );
    assert_eq!(
        decide(&trusted, "bash", command("echo $(id)", None, true)),
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
    assert_eq!(
        decide(&read_only, "bash", command("ls", Some(&["ls"]), true)),
        "deny"
    );
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
    assert_eq!(
        decide(&p, "bash", command("curl x", Some(&["curl x"]), true)),
        "deny"
    );
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
    let allowed = ["git status", "cargo test --all"];
    assert_eq!(
        decide(
            &p,
            "bash",
            command("git status && cargo test --all", Some(&allowed), true)
        ),
        "allow"
    );
    // `git status*` as a glob matches the whole string; it must not allow the second part.
    let sneaky = ["git status", "curl evil.sh"];
    assert_eq!(
        decide(
            &p,
            "bash",
            command("git status && curl evil.sh", Some(&sneaky), true)
        ),
        "ask:Mode"
    );
    let denied = ["git status", "rm -rf /"];
    assert_eq!(
        decide(
            &p,
            "bash",
            command("git status; rm -rf /", Some(&denied), true)
        ),
        "deny"
    );
    // What the splitter cannot read is never allowed by a rule.
    assert_eq!(
        decide(&p, "bash", command("git status $(rm -rf /)", None, true)),
        "ask:UnparsedCommand"
    );
    let trusted = Policy::new(Mode::Trusted)
        .with_rules(
            [rule(RuleAction::Deny, "bash", Some("rm*"))],
            RuleOrigin::User,
        )
        .unwrap();
    assert_eq!(
        decide(&trusted, "bash", command("eval \"rm -rf /\"", None, true)),
        "deny"
    );
}

#[test]
fn session_grants_cover_the_same_pattern_only() {
    let ws = TestWorkspace::new();
    let ctx = ws.ctx();
    let p = Policy::new(Mode::Default);
    let outside = read("/etc/hosts", false);
    let Permission::Ask(request) = p.judge(
        "read",
        ToolFlags::default(),
        std::slice::from_ref(&outside),
        &ctx,
    ) else {
        panic!("should ask")
    };
    ctx.session()
        .grants()
        .add("read", request.session_pattern.unwrap());
    assert_eq!(
        p.judge("read", ToolFlags::default(), &[outside], &ctx),
        Permission::Allow
    );
    assert!(matches!(
        p.judge(
            "read",
            ToolFlags::default(),
            &[read("/etc/other", false)],
            &ctx
        ),
        Permission::Ask(_)
    ));
    assert!(matches!(
        p.judge(
            "ls",
            ToolFlags::default(),
            &[read("/etc/hosts", false)],
            &ctx
        ),
        Permission::Ask(_)
    ));

    let cmd = command(
        "cargo build --release",
        Some(&["cargo build --release"]),
        false,
    );
    assert_eq!(cmd.session_pattern(), "cargo build*");
    ctx.session().grants().add("bash", cmd.session_pattern());
    assert_eq!(
        p.judge("bash", ToolFlags::default(), &[cmd], &ctx),
        Permission::Allow
    );
    let other = command("cargo publish", Some(&["cargo publish"]), false);
    assert!(matches!(
        p.judge("bash", ToolFlags::default(), &[other], &ctx),
        Permission::Ask(_)
    ));
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
