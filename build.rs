//! Link flags for the `gimlet` binary.

fn main() {
    // Relative relocations packed (`DT_RELR`, glibc 2.36 and later): the loader reads a few KiB
    // at start instead of 750 KiB of `.rela.dyn`, and those pages are not kept resident. The
    // binary stays position-independent. A linker without the option ignores it with a warning.
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
