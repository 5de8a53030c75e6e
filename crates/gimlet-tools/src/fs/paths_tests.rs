use std::os::unix::fs::symlink;
use std::path::Path;

use pretty_assertions::assert_eq;
use rustix::fs::{Mode, OFlags};

use super::*;
use crate::fs::confine_unix::open_beneath_walk;
use crate::fs::suggest::likeness;
use crate::testutil::TestWorkspace;

fn roots(ws: &TestWorkspace) -> RootSet {
    RootSet::open([ws.root()]).unwrap()
}

#[track_caller]
fn assert_outside(resolved: &ResolvedPath) {
    assert!(
        !resolved.is_inside(),
        "{} should be outside",
        resolved.path.display()
    );
}

#[test]
fn relative_paths_start_at_the_first_root_and_display_relative() {
    let ws = TestWorkspace::new();
    ws.write("src/main.rs", "fn main() {}");
    let resolved = roots(&ws).resolve("src/main.rs").unwrap();
    assert!(resolved.is_inside());
    assert!(resolved.exists);
    assert_eq!(resolved.path, ws.root().join("src/main.rs"));
    assert_eq!(resolved.display(), "src/main.rs");
    assert_eq!(resolved.relative(), Some(Path::new("src/main.rs")));
    assert_eq!(roots(&ws).resolve(".").unwrap().display(), ".");
}

#[test]
fn dot_dot_cannot_climb_out() {
    let ws = TestWorkspace::new();
    assert_outside(&roots(&ws).resolve("../").unwrap());
    assert_outside(&roots(&ws).resolve("src/../../etc/passwd").unwrap());
    // Climbing out and back in lands inside.
    let name = ws
        .root()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        roots(&ws)
            .resolve(&format!("../{name}/x"))
            .unwrap()
            .is_inside()
    );
}

#[test]
fn absolute_paths_outside_are_outside() {
    let ws = TestWorkspace::new();
    assert_outside(&roots(&ws).resolve("/etc/passwd").unwrap());
    assert_outside(
        &roots(&ws)
            .resolve(&ws.outside().display().to_string())
            .unwrap(),
    );
    let inside = ws.root().join("a.txt").display().to_string();
    assert!(roots(&ws).resolve(&inside).unwrap().is_inside());
}

#[test]
fn a_sibling_with_the_root_as_name_prefix_is_outside() {
    let ws = TestWorkspace::new();
    let evil = std::path::PathBuf::from(format!("{}-evil", ws.root().display()));
    std::fs::create_dir_all(&evil).unwrap();
    std::fs::write(evil.join("secret"), "x").unwrap();
    let resolved = roots(&ws)
        .resolve(&evil.join("secret").display().to_string())
        .unwrap();
    std::fs::remove_dir_all(&evil).unwrap();
    assert_outside(&resolved);
}

#[test]
fn symlinks_out_are_judged_by_where_they_land() {
    let ws = TestWorkspace::new();
    let outside = ws.outside();
    std::fs::write(outside.join("secret.txt"), "secret").unwrap();
    ws.symlink(outside.join("secret.txt"), "to_file");
    ws.symlink(&outside, "to_dir");
    ws.symlink(outside.join("missing"), "dangling");
    ws.symlink("../", "relative_up");
    for path in [
        "to_file",
        "to_dir/secret.txt",
        "dangling",
        "relative_up/x",
        "to_dir",
    ] {
        assert_outside(&roots(&ws).resolve(path).unwrap());
    }
    // A dangling link out of the root is outside even though nothing exists there.
    let dangling = roots(&ws).resolve("dangling").unwrap();
    assert!(!dangling.exists);
}

#[test]
fn dot_dot_over_a_missing_name_follows_links_again() {
    // Found by the property test: `gone/..` returns to the root, where `to_dir` is a link out.
    let ws = TestWorkspace::new();
    ws.symlink(ws.outside(), "to_dir");
    for path in [
        "gone/../to_dir",
        "gone/deeper/../../to_dir/x",
        "a/b/../../to_dir",
    ] {
        assert_outside(&roots(&ws).resolve(path).unwrap());
    }
    let inside = roots(&ws).resolve("gone/../new.txt").unwrap();
    assert_eq!(inside.relative(), Some(Path::new("new.txt")));
    assert!(!inside.exists);
}

#[test]
fn a_symlinked_parent_pointing_outside_is_outside() {
    let ws = TestWorkspace::new();
    ws.mkdir("project");
    symlink(ws.outside(), ws.root().join("project/linked")).unwrap();
    assert_outside(&roots(&ws).resolve("project/linked/new_file.txt").unwrap());
}

#[test]
fn symlinks_that_stay_inside_are_fine() {
    let ws = TestWorkspace::new();
    ws.write("real/file.txt", "x");
    ws.symlink(ws.root().join("real"), "abs_link");
    ws.symlink("real/file.txt", "rel_link");
    let resolved = roots(&ws).resolve("abs_link/file.txt").unwrap();
    assert!(resolved.is_inside());
    assert_eq!(resolved.display(), "real/file.txt");
    assert_eq!(
        roots(&ws).resolve("rel_link").unwrap().display(),
        "real/file.txt"
    );
}

#[test]
fn symlink_loops_are_reported() {
    let ws = TestWorkspace::new();
    ws.symlink("b", "a");
    ws.symlink("a", "b");
    let err = roots(&ws).resolve("a").unwrap_err();
    assert!(matches!(err, PathError::SymlinkLoop { .. }), "{err}");
}

#[test]
fn proc_magic_links_are_never_followed() {
    let ws = TestWorkspace::new();
    for path in [
        "/proc/self/root/etc/passwd",
        "/proc/self/cwd",
        "/proc/thread-self/root",
    ] {
        let err = roots(&ws).resolve(path).unwrap_err();
        assert!(matches!(err, PathError::MagicLink { .. }), "{path}: {err}");
    }
    // The same through a symlink planted inside the root.
    ws.symlink("/proc/self/root", "procroot");
    let err = roots(&ws).resolve("procroot/etc/passwd").unwrap_err();
    assert!(matches!(err, PathError::MagicLink { .. }), "{err}");
}

#[test]
fn gimlets_own_proc_entries_are_never_opened() {
    let ws = TestWorkspace::new();
    let me = std::process::id();
    let thread = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .last()
        .unwrap();
    for path in [
        format!("/proc/{me}/environ"),
        format!("/proc/{me}/task/{thread}/environ"),
        format!("/proc/{thread}/environ"),
        format!("/proc/{me}"),
        format!("/proc/./{me}/mem"),
    ] {
        let err = roots(&ws).resolve(&path).unwrap_err();
        assert!(matches!(err, PathError::OwnProcess { .. }), "{path}: {err}");
    }
    // Opening the directory above and walking into it is refused too.
    let proc = roots(&ws).resolve("/proc").unwrap();
    assert_eq!(
        proc.open_child(Path::new(&format!("{me}/environ")), OFlags::RDONLY)
            .unwrap_err(),
        rustix::io::Errno::ACCESS
    );
    // Another process's entries are ordinary paths outside the roots.
    assert!(roots(&ws).resolve("/proc/1/status").is_ok());
    assert!(roots(&ws).resolve("/proc/cpuinfo").is_ok());
}

#[test]
fn bad_arguments_get_clear_errors() {
    let ws = TestWorkspace::new();
    let roots = roots(&ws);
    assert!(matches!(roots.resolve(""), Err(PathError::Empty)));
    assert!(matches!(roots.resolve("a\0b"), Err(PathError::ContainsNul)));
    assert!(matches!(
        roots.resolve(&"a/".repeat(3000)),
        Err(PathError::TooLong { .. })
    ));
    assert!(matches!(
        roots.resolve(&"x".repeat(300)),
        Err(PathError::ComponentTooLong { .. })
    ));
    ws.write("file", "x");
    assert_eq!(
        roots.resolve("file/child").unwrap_err().to_string(),
        "`file` is not a directory"
    );
    assert!(RootSet::default().resolve("x").is_err());
}

#[test]
fn nested_roots_pick_the_most_specific_and_display_absolute_for_later_roots() {
    let ws = TestWorkspace::new();
    let second = ws.outside();
    std::fs::write(second.join("b.txt"), "b").unwrap();
    let roots = RootSet::open([ws.root(), second.clone()]).unwrap();
    let resolved = roots
        .resolve(&second.join("b.txt").display().to_string())
        .unwrap();
    assert!(resolved.is_inside());
    assert_eq!(
        resolved.display(),
        second.join("b.txt").display().to_string()
    );
}

#[test]
fn open_fails_instead_of_following_a_symlink_swapped_in_after_resolve() {
    let ws = TestWorkspace::new();
    ws.write("dir/file.txt", "inside");
    std::fs::write(ws.outside().join("file.txt"), "outside").unwrap();
    let resolved = roots(&ws).resolve("dir/file.txt").unwrap();
    // The race: between the check and the use, `dir` becomes a symlink to outside.
    std::fs::rename(ws.root().join("dir"), ws.root().join("moved")).unwrap();
    symlink(ws.outside(), ws.root().join("dir")).unwrap();
    let err = resolved.open(OpenKind::ReadFile).unwrap_err();
    assert!(matches!(err, PathError::Changed { .. }), "{err}");
}

#[test]
fn the_portable_walk_refuses_symlinks_and_dot_dot_too() {
    let ws = TestWorkspace::new();
    ws.write("a/b.txt", "x");
    ws.symlink(ws.outside(), "out");
    let root = Root::open(&ws.root()).unwrap();
    let flags = OFlags::RDONLY;
    assert!(open_beneath_walk(root.fd(), Path::new("a/b.txt"), flags, Mode::empty()).is_ok());
    let err = open_beneath_walk(root.fd(), Path::new("out/x"), flags, Mode::empty()).unwrap_err();
    assert!(
        matches!(err, rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP),
        "{err}"
    );
    let err = open_beneath_walk(root.fd(), Path::new("../x"), flags, Mode::empty()).unwrap_err();
    assert_eq!(err, rustix::io::Errno::XDEV);
    let err = open_beneath_walk(root.fd(), Path::new("out"), flags, Mode::empty()).unwrap_err();
    assert_eq!(err, rustix::io::Errno::LOOP);
}

#[test]
fn fifos_sockets_and_directories_are_refused_without_blocking() {
    let ws = TestWorkspace::new();
    let fifo = ws.root().join("pipe");
    crate::testutil::make_fifo(&fifo);
    ws.mkdir("dir");
    let roots = roots(&ws);
    let err = roots
        .resolve("pipe")
        .unwrap()
        .open(OpenKind::ReadFile)
        .unwrap_err();
    assert!(
        matches!(err, PathError::NotRegular { kind: "FIFO", .. }),
        "{err}"
    );
    let err = roots
        .resolve("dir")
        .unwrap()
        .open(OpenKind::ReadFile)
        .unwrap_err();
    assert!(matches!(err, PathError::IsADirectory { .. }), "{err}");
}

#[test]
fn outside_paths_open_only_without_symlinks() {
    let ws = TestWorkspace::new();
    let outside = ws.outside();
    std::fs::write(outside.join("f.txt"), "x").unwrap();
    let roots = roots(&ws);
    let resolved = roots
        .resolve(&outside.join("f.txt").display().to_string())
        .unwrap();
    assert!(resolved.open(OpenKind::ReadFile).is_ok());
    // Swap the parent for a symlink after resolving: the exact open refuses.
    std::fs::rename(&outside, outside.with_extension("moved")).unwrap();
    symlink(outside.with_extension("moved"), &outside).unwrap();
    let err = resolved.open(OpenKind::ReadFile).unwrap_err();
    std::fs::remove_file(&outside).unwrap();
    std::fs::rename(outside.with_extension("moved"), &outside).unwrap();
    assert!(matches!(err, PathError::Changed { .. }), "{err}");
}

#[test]
fn likeness_takes_case_other_extensions_and_small_typos_only() {
    assert_eq!(likeness("readme.md", "README.md"), Some(0));
    assert_eq!(likeness("main.r", "main.rs"), Some(1));
    assert_eq!(likeness("config.yaml", "config.yml"), Some(1));
    assert_eq!(likeness("Cargo.tom", "Cargo.toml"), Some(1));
    assert_eq!(likeness("lib.rs", "lin.rs"), Some(18));
    assert_eq!(likeness("othr.rs", "other.rs"), Some(8));
    assert_eq!(
        likeness("src", "srcs"),
        None,
        "short names: case and stem only"
    );
    assert_eq!(likeness("main.rs", "main.rs"), None, "not itself");
    assert_eq!(likeness("parser.rs", "printer.rs"), None);
}

#[test]
fn a_missing_path_names_similar_entries_beside_it_and_only_inside_the_roots() {
    let ws = TestWorkspace::new();
    ws.write("src/main.rs", "");
    ws.write("src/Main.java", "");
    ws.write("src/other.rs", "");
    let roots = roots(&ws);
    let missing = roots.resolve("src/main.r").unwrap();
    let err = missing.with_similar_names(PathError::NotFound {
        path: missing.display(),
        hint: String::new(),
    });
    assert_eq!(
        err.to_string(),
        "`src/main.r` does not exist; similar names beside it: `src/Main.java`, `src/main.rs`"
    );
    let missing = roots.resolve("src/othr.rs").unwrap();
    let err = missing.with_similar_names(PathError::NotFound {
        path: missing.display(),
        hint: String::new(),
    });
    assert_eq!(
        err.to_string(),
        "`src/othr.rs` does not exist; did you mean `src/other.rs`?"
    );
    // Nothing alike, a missing directory, or another error: unchanged.
    for path in ["src/zzz.txt", "nowhere/main.rs"] {
        let missing = roots.resolve(path).unwrap();
        let err = missing.with_similar_names(PathError::NotFound {
            path: path.to_owned(),
            hint: String::new(),
        });
        assert_eq!(err.to_string(), format!("`{path}` does not exist"));
    }
    // Outside the roots nothing is listed.
    let outside_dir = tempfile::tempdir().unwrap();
    std::fs::write(outside_dir.path().join("secret.txt"), "").unwrap();
    let missing = roots
        .resolve(outside_dir.path().join("secret.tx").to_str().unwrap())
        .unwrap();
    assert_outside(&missing);
    let err = missing.with_similar_names(PathError::NotFound {
        path: String::from("x"),
        hint: String::new(),
    });
    assert_eq!(err.to_string(), "`x` does not exist");
}

#[test]
fn a_root_that_is_missing_or_a_file_says_so() {
    let ws = TestWorkspace::new();
    ws.write("file.txt", "");
    let missing = ws.root().join("missing");
    let err = Root::open(&missing).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("`{}` does not exist", missing.display())
    );
    let err = Root::open(&ws.root().join("file.txt")).unwrap_err();
    assert!(matches!(err, PathError::NotADirectory { .. }), "{err}");
}

#[test]
fn without_waiting_cached_paths_resolve_and_open_and_the_rest_would_block() {
    let ws = TestWorkspace::new();
    ws.write("src/main.rs", "fn main() {}");
    let roots = roots(&ws);
    // Just written: every name is in the kernel's lookup cache.
    let resolved = super::super::nowait::attempt(|| roots.resolve("src/main.rs")).unwrap();
    assert!(resolved.is_inside());
    let opened = super::super::nowait::attempt(|| resolved.open_regular());
    assert!(opened.is_ok(), "{:?}", opened.err());
    // A missing name is not answered without waiting, and no similar names are looked up:
    // the attempt is retried where both may wait.
    ws.write("src/mian.rs", "");
    let err = super::super::nowait::attempt(|| roots.resolve("src/main.rx")).unwrap_err();
    assert!(
        matches!(&err, PathError::Io { source, .. } if source.kind() == io::ErrorKind::WouldBlock),
        "{err}"
    );
    let missing = roots.resolve("src/main.rx").unwrap();
    let err = super::super::nowait::attempt(|| {
        missing.with_similar_names(missing.open_regular().unwrap_err())
    });
    assert!(!err.to_string().contains("mian.rs"), "{err}");
    assert!(
        missing
            .with_similar_names(missing.open_regular().unwrap_err())
            .to_string()
            .contains("main.rs")
    );
    // Under /proc the attempt gives up (procfs revalidates its names, and the probe follows
    // no magic link); the resolution where waiting is allowed refuses the path.
    let err =
        super::super::nowait::attempt(|| roots.resolve("/proc/self/root/etc/passwd")).unwrap_err();
    assert!(
        matches!(&err, PathError::Io { source, .. } if source.kind() == io::ErrorKind::WouldBlock),
        "{err}"
    );
    let err = roots.resolve("/proc/self/root/etc/passwd").unwrap_err();
    assert!(matches!(err, PathError::MagicLink { .. }), "{err}");
}

#[test]
fn plain_paths_are_resolved_by_the_kernel_as_the_walk_would_and_the_rest_left_to_it() {
    let ws = TestWorkspace::new();
    ws.write("src/main.rs", "fn main() {}");
    ws.write("inner/deep/x.txt", "x");
    symlink(ws.root().join("src"), ws.root().join("link")).unwrap();
    symlink(ws.outside(), ws.root().join("out")).unwrap();
    let second = ws.outside();
    std::fs::write(second.join("b.txt"), "b").unwrap();
    let roots = RootSet::open([ws.root(), second.clone()]).unwrap();
    let absolute = ws.root().join("src/main.rs").display().to_string();
    let in_second = second.join("b.txt").display().to_string();
    for plain in [
        "src/main.rs",
        "./src/./main.rs",
        "src",
        ".",
        "inner/deep/x.txt",
        &absolute,
        &in_second,
    ] {
        let kernel = super::super::confine::resolve_plain(&roots, Path::new(plain)).unwrap();
        let first = roots.first().unwrap().path();
        let (walked, missing) = resolve_components(first, Path::new(plain)).unwrap();
        assert_eq!(missing, 0, "{plain} exists");
        assert_eq!(kernel, Some(walked), "{plain}");
        assert!(
            super::super::nowait::attempt(|| super::super::confine::resolve_plain(
                &roots,
                Path::new(plain)
            ))
            .is_ok()
        );
    }
    // A symlink on the way (landing inside or out), `..`, a missing name, a file used as a
    // directory, a path under no root: the walk decides.
    let elsewhere = ws.outside().parent().unwrap().display().to_string();
    for other in [
        "link/main.rs",
        "out/b.txt",
        "out",
        "src/../src/main.rs",
        "src/missing.rs",
        "src/main.rs/x",
        "src/main.rs/",
        &elsewhere,
    ] {
        assert_eq!(
            super::super::confine::resolve_plain(&roots, Path::new(other)).unwrap(),
            None,
            "{other}"
        );
    }
    // What the walk decides for them holds: the link inside resolves to its target, the one
    // out is outside.
    assert_eq!(
        roots.resolve("link/main.rs").unwrap().path,
        ws.root().join("src/main.rs")
    );
    assert_eq!(
        roots.resolve("out/b.txt").unwrap().display(),
        second.join("b.txt").display().to_string()
    );
}

#[test]
fn the_implicit_root_is_never_machine_wide() {
    let top = tempfile::tempdir().unwrap();
    let top = std::fs::canonicalize(top.path()).unwrap();
    let home = top.join("home");
    let project = home.join("project");
    std::fs::create_dir_all(&project).unwrap();
    assert_eq!(implicit_root(Path::new("/"), Some(&home)), None);
    assert_eq!(implicit_root(Path::new("/"), None), None);
    assert_eq!(
        implicit_root(&home, Some(&home)),
        None,
        "the home directory"
    );
    assert_eq!(
        implicit_root(&top, Some(&home)),
        None,
        "above the home directory"
    );
    assert_eq!(implicit_root(&project, Some(&home)), Some(project.clone()));
    // A home given through a symlink is the same home.
    let link = top.join("home-link");
    symlink(&home, &link).unwrap();
    assert_eq!(implicit_root(&home, Some(&link)), None);
    // Outside the home directory, a project folder is fine too.
    assert_eq!(implicit_root(&project, None), Some(project.clone()));
}

#[test]
fn with_no_root_every_path_says_how_to_add_one() {
    let message = RootSet::default()
        .resolve("src/main.rs")
        .unwrap_err()
        .to_string();
    assert!(
        message.starts_with("gimlet has no root folder"),
        "{message}"
    );
    assert!(
        message.contains("\"--root\", \"/path/to/project\""),
        "{message}"
    );
    assert!(RootSet::default().resolve("/etc/hostname").is_err());
}

#[test]
fn where_names_ignore_case_a_root_typed_in_other_cases_holds_what_is_below_it() {
    let ws = TestWorkspace::new();
    let typed_root = ws.root().to_string_lossy().to_uppercase();
    assert!(
        !Path::new(&typed_root).exists(),
        "this test needs a case-sensitive /tmp"
    );
    let typed = format!("{typed_root}/New/File.txt");
    // Linux: another name, outside the root.
    assert_outside(&roots(&ws).resolve(&typed).unwrap());
    for matching in [NameMatching::MacOs, NameMatching::Windows] {
        let resolved = roots(&ws)
            .with_name_matching(matching)
            .resolve(&typed)
            .unwrap();
        assert!(resolved.is_inside(), "{matching:?}");
        assert_eq!(resolved.relative(), Some(Path::new("New/File.txt")));
        assert_eq!(
            resolved.path,
            ws.root().join("New/File.txt"),
            "spelled as the root"
        );
        assert_eq!(resolved.display(), "New/File.txt");
        assert!(!resolved.exists);
    }
}

#[test]
fn what_exists_is_compared_with_a_root_name_for_name() {
    // A case-sensitive volume (a macOS volume may be one) where `Proj` and `PROJ` are two
    // folders: only names that do not exist are compared without case.
    let ws = TestWorkspace::new();
    ws.write("PROJ/a.txt", "other folder");
    ws.mkdir("Proj");
    let set = RootSet::open([ws.root().join("Proj")])
        .unwrap()
        .with_name_matching(NameMatching::MacOs);
    for path in ["PROJ/a.txt", "PROJ/new.txt", "PROJ"] {
        let typed = ws.root().join(path).display().to_string();
        assert_outside(&set.resolve(&typed).unwrap());
    }
    let typed = ws.root().join("PROJ-x/new.txt").display().to_string();
    assert_outside(&set.resolve(&typed).unwrap());
    let inside = ws.root().join("Proj/NEW.txt").display().to_string();
    let resolved = set.resolve(&inside).unwrap();
    assert_eq!(resolved.relative(), Some(Path::new("NEW.txt")));
}
