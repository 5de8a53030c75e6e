//! The file tools where names ignore case (macOS, Windows), run on Linux: the environment's
//! name matching is switched ([`ToolEnvBuilder::name_matching`]), so a protected path or a
//! rule's folder typed with other cases (or on macOS in another Unicode normalisation) asks
//! or is denied as its usual spelling is; with the switch off, Linux's behaviour stays.

use std::sync::Arc;

use serde_json::json;

use crate::context::ToolEnvBuilder;
use crate::context::ask::ScriptedAsker;
use crate::fs::NameMatching;
use crate::permission::{AskReason, Mode, Policy, Rule, RuleAction, RuleOrigin};
use crate::sandbox::protected::Protected;
use crate::testutil::TestWorkspace;

/// Protected paths as the issue names them, in other cases than their own.
const CASED: &[&str] = &[
    ".GIT/HOOKS/pre-commit",
    ".Git/config",
    ".VSCODE/settings.json",
    ".Husky/pre-commit",
    ".GITMODULES",
    ".Gimlet.toml",
];

fn workspace(matching: NameMatching, policy: Policy) -> TestWorkspace {
    TestWorkspace::custom(move |b: ToolEnvBuilder| b.policy(policy).name_matching(matching))
}

/// What writing `path` (with `write`, then with `apply_patch`) comes to: the reasons asked,
/// whether it succeeded, and whether the file is there after.
async fn write(ws: &TestWorkspace, path: &str) -> Vec<(Vec<AskReason>, bool, bool)> {
    let calls = [
        ("write", json!({"path": path, "content": "evil\n"})),
        (
            "apply_patch",
            json!({"patch": format!("*** Begin Patch\n*** Add File: {path}\n+evil\n*** End Patch\n")}),
        ),
    ];
    let mut outcomes = Vec::new();
    for (tool, args) in calls {
        let asker = Arc::new(ScriptedAsker::default());
        let result = ws.call_with(&ws.ctx_with(asker.clone()), tool, args).await;
        let reasons = asker.asked().iter().map(|r| r.reason).collect();
        outcomes.push((reasons, result.is_ok(), ws.root().join(path).exists()));
    }
    outcomes
}

#[tokio::test]
async fn where_names_ignore_case_every_spelling_of_a_protected_path_asks() {
    for matching in [NameMatching::MacOs, NameMatching::Windows] {
        let ws = workspace(matching, Policy::new(Mode::Default));
        ws.mkdir(".git/hooks");
        for path in CASED {
            let lower = path.to_lowercase();
            let asked = vec![(vec![AskReason::ProtectedPath], false, false); 2];
            assert_eq!(write(&ws, &lower).await, asked, "{matching:?} {lower}");
            assert_eq!(write(&ws, path).await, asked, "{matching:?} {path}");
        }
    }
}

#[tokio::test]
async fn on_linux_a_name_in_other_cases_is_another_name() {
    // `.GIT` is not `.git` for git on a case-sensitive volume: not protected, as before.
    let ws = workspace(NameMatching::Exact, Policy::new(Mode::Default));
    for path in CASED {
        let lower = path.to_lowercase();
        let asked = vec![(vec![AskReason::ProtectedPath], false, false); 2];
        assert_eq!(write(&ws, &lower).await, asked, "{lower}");
        let written = write(&ws, path).await;
        assert_eq!(written[0], (vec![], true, true), "{path}");
        std::fs::remove_file(ws.root().join(path)).unwrap();
    }
}

#[tokio::test]
async fn a_rule_on_a_folder_holds_for_every_spelling_of_it() {
    let deny = Rule {
        action: RuleAction::Deny,
        tool: String::from("*"),
        pattern: Some(String::from("secrets/**")),
    };
    let policy = || {
        Policy::new(Mode::Default)
            .with_rules([deny.clone()], RuleOrigin::User)
            .unwrap()
    };
    for matching in [NameMatching::MacOs, NameMatching::Windows] {
        let ws = workspace(matching, policy());
        for path in ["secrets/x", "SECRETS/x", "Secrets/Key.pem"] {
            let error = ws
                .error("write", json!({"path": path, "content": "x"}))
                .await;
            assert!(
                error.contains("permission rule denies"),
                "{matching:?} {path}: {error}"
            );
            assert!(!ws.root().join(path).exists());
        }
    }
    let ws = workspace(NameMatching::Exact, policy());
    ws.text("write", json!({"path": "SECRETS/x", "content": "x"}))
        .await;
    assert!(ws.root().join("SECRETS/x").exists());
}

#[tokio::test]
async fn on_macos_a_protected_name_matches_in_either_normalisation() {
    let nfc = "caf\u{e9}";
    let nfd = "cafe\u{301}";
    for (entry, typed) in [(nfc, nfd), (nfd, nfc)] {
        let policy = Policy::new(Mode::Default).with_protected(Protected::new([entry.to_owned()]));
        let path = format!("{typed}/menu.txt");
        let macos = workspace(NameMatching::MacOs, policy);
        let asked = vec![(vec![AskReason::ProtectedPath], false, false); 2];
        assert_eq!(write(&macos, &path).await, asked, "{entry:?} {typed:?}");
        // NTFS keeps the two forms apart: another name, not protected.
        let policy = Policy::new(Mode::Default).with_protected(Protected::new([entry.to_owned()]));
        let windows = workspace(NameMatching::Windows, policy);
        assert_eq!(write(&windows, &path).await[0], (vec![], true, true));
    }
}
