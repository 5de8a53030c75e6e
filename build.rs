//! Link flags for the `gimlet` binary.
//!
//! Two kinds of build link it, and this file decides which flags each gets:
//! - the default (`cargo build --release`, `cargo install`): the toolchain's linker (the bundled
//!   `rust-lld` on `x86_64-unknown-linux-gnu`) against the build machine's C library. It gets
//!   packed relative relocations and the function order (`--symbol-ordering-file`);
//! - the portable build (`scripts/dist.sh`, through `cargo zigbuild --target
//!   x86_64-unknown-linux-gnu.2.17`): zig links it against glibc 2.17's symbols, so it runs on
//!   any Linux from 2014 on. Packed relocations need glibc 2.36 (an older loader would not apply
//!   them, so linkers mark such a binary as needing `GLIBC_ABI_DT_RELR`), and `zig cc` refuses
//!   `-z pack-relative-relocs` and `--symbol-ordering-file` alike: it gets no packed
//!   relocations, and the function order as a linker script instead (`OVERWRITE_SECTIONS`,
//!   which zig's lld takes).

use std::path::Path;

/// The functions a session runs, in the order they first run (`scripts/link-order.sh` writes
/// it): laid out together, they share the few pages of code that stay resident.
const ORDER_FILE: &str = "link/functions.order";

/// Who links the binary, as far as its flags are concerned.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Linker {
    /// `cargo zigbuild` (it sets `CARGO_ZIGBUILD_TARGET`): `zig cc` and the glibc version the
    /// target names.
    Zig,
    /// The toolchain's default, or a linker the build names.
    Default,
}

fn main() {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let linker = if std::env::var_os("CARGO_ZIGBUILD_TARGET").is_some() {
        Linker::Zig
    } else {
        Linker::Default
    };
    // Relative relocations packed (`DT_RELR`, glibc 2.36 and later): the loader reads a few KiB
    // at start instead of 750 KiB of `.rela.dyn`, and those pages are not kept resident. The
    // binary stays position-independent. A linker without the option ignores it with a warning.
    if var("CARGO_CFG_TARGET_OS") == "linux"
        && var("CARGO_CFG_TARGET_ENV") == "gnu"
        && linker == Linker::Default
    {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    let order = Path::new(&var("CARGO_MANIFEST_DIR")).join(ORDER_FILE);
    if orders_functions(linker) && order.is_file() {
        // The kernel maps code 64 KiB around each page a process first runs; spread over the
        // binary, a session's functions made 7 of its 12 MiB of code resident. Ordered, they
        // take about 3. Symbols the list names that this build lacks are skipped silently.
        match linker {
            Linker::Default => {
                println!(
                    "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
                    order.display()
                );
                println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
            }
            Linker::Zig => {
                let names = std::fs::read_to_string(&order).unwrap_or_default();
                let script = Path::new(&var("OUT_DIR")).join("functions.ld");
                if std::fs::write(&script, linker_script(&names)).is_ok() {
                    println!("cargo:rustc-link-arg-bins=-Wl,-T,{}", script.display());
                }
            }
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={ORDER_FILE}");
    println!("cargo:rerun-if-env-changed=GIMLET_LINK_ORDER");
    println!("cargo:rerun-if-env-changed=CARGO_ZIGBUILD_TARGET");
}

/// Whether the function order is passed to the linker: optimised builds for
/// `x86_64-unknown-linux-gnu` (the list names that target's symbols), not with
/// `GIMLET_LINK_ORDER=0`. With the default linker, only where it is the bundled `rust-lld` (the
/// default since Rust 1.90; GNU ld does not know `--symbol-ordering-file` and would fail): not
/// when the build names a linker of its own.
fn orders_functions(linker: Linker) -> bool {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("GIMLET_LINK_ORDER") == "0" || var("PROFILE") != "release" {
        return false;
    }
    if var("TARGET") != "x86_64-unknown-linux-gnu" {
        return false;
    }
    if linker == Linker::Zig {
        return true;
    }
    let flags = var("CARGO_ENCODED_RUSTFLAGS");
    let own_linker = flags
        .split('\x1f')
        .any(|flag| flag.contains("linker") || flag.contains("link-self-contained"))
        || std::env::var_os("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER").is_some()
        || std::env::var_os("RUSTC_LINKER").is_some();
    !own_linker && rustc_minor().is_some_and(|minor| minor >= 90)
}

/// The function order as lld's `OVERWRITE_SECTIONS`: `.text` takes each listed function's
/// section (rustc puts every function in a section of its own, `.text.<symbol>`) in the list's
/// order, then the rest as usual; every other output section keeps lld's default layout. Quoted names match exactly;
/// names this build lacks match nothing.
fn linker_script(order: &str) -> String {
    let mut script = String::from("OVERWRITE_SECTIONS {\n  .text : {\n");
    for name in order.lines().map(str::trim).filter(|name| {
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_$.".contains(c))
    }) {
        // LLVM names a cold function's section `.text.unlikely.<symbol>` (and a hot one's
        // `.text.hot.`); `--symbol-ordering-file` went by symbol, so this takes each of them.
        script.push_str("    *(");
        for prefix in [".text.", ".text.unlikely.", ".text.hot.", ".text.startup."] {
            script.push_str(&format!("\"{prefix}{name}\" "));
        }
        script.push_str(")\n");
    }
    script.push_str("    *(.text .text.*)\n  }\n}\n");
    script
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
