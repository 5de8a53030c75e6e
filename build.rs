//! Link flags for the `gimlet` binary.

use std::path::Path;

/// The functions a session runs, in the order they first run (`scripts/link-order.sh` writes
/// it): laid out together, they share the few pages of code that stay resident.
const ORDER_FILE: &str = "link/functions.order";

fn main() {
    // Relative relocations packed (`DT_RELR`, glibc 2.36 and later): the loader reads a few KiB
    // at start instead of 750 KiB of `.rela.dyn`, and those pages are not kept resident. The
    // binary stays position-independent. A linker without the option ignores it with a warning.
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    if orders_functions() {
        // The kernel maps code 64 KiB around each page a process first runs; spread over the
        // binary, a session's functions made 7 of its 12 MiB of code resident. Ordered, they
        // take about 3. Symbols the list names that this build lacks are skipped silently.
        let order =
            Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default()).join(ORDER_FILE);
        if order.is_file() {
            println!(
                "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
                order.display()
            );
            println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={ORDER_FILE}");
    println!("cargo:rerun-if-env-changed=GIMLET_LINK_ORDER");
}

/// Whether the function order is passed to the linker: optimised builds for
/// `x86_64-unknown-linux-gnu`, whose default linker since Rust 1.90 is the bundled `rust-lld`
/// (GNU ld does not know `--symbol-ordering-file` and would fail). Not when the build names a
/// linker of its own, and not with `GIMLET_LINK_ORDER=0`.
fn orders_functions() -> bool {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("GIMLET_LINK_ORDER") == "0" || var("PROFILE") != "release" {
        return false;
    }
    if var("TARGET") != "x86_64-unknown-linux-gnu" {
        return false;
    }
    let flags = var("CARGO_ENCODED_RUSTFLAGS");
    let own_linker = flags
        .split('\x1f')
        .any(|flag| flag.contains("linker") || flag.contains("link-self-contained"))
        || std::env::var_os("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER").is_some()
        || std::env::var_os("RUSTC_LINKER").is_some();
    !own_linker && rustc_minor().is_some_and(|minor| minor >= 90)
}

/// The minor version of the compiler building this (`rustc 1.95.0 (...)` gives 95).
fn rustc_minor() -> Option<u32> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let output = std::process::Command::new(rustc)
        .arg("--version")
        .output()
        .ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    let version = text.split_whitespace().nth(1)?;
    let mut parts = version.split('.');
    if parts.next()? != "1" {
        return None;
    }
    parts.next()?.parse().ok()
}
