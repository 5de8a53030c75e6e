//! The built binary itself.

#![cfg_attr(
    all(target_os = "linux", target_env = "gnu", target_arch = "x86_64"),
    expect(
        clippy::unwrap_used,
        reason = "a malformed binary fails the test loudly"
    )
)]

/// The names of an ELF64 little-endian file's sections.
#[cfg(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]
fn section_names(elf: &[u8]) -> Vec<String> {
    let u16_at = |at: usize| u16::from_le_bytes([elf[at], elf[at + 1]]);
    let u32_at = |at: usize| u32::from_le_bytes(elf[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_le_bytes(elf[at..at + 8].try_into().unwrap());
    assert_eq!(
        &elf[..6],
        b"\x7fELF\x02\x01",
        "not a 64-bit little-endian ELF file"
    );
    let table = usize::try_from(u64_at(0x28)).unwrap();
    let entry = usize::from(u16_at(0x3a));
    let count = usize::from(u16_at(0x3c));
    let names_index = usize::from(u16_at(0x3e));
    let names_at = usize::try_from(u64_at(table + names_index * entry + 0x18)).unwrap();
    (0..count)
        .map(|i| {
            let name = names_at + usize::try_from(u32_at(table + i * entry)).unwrap();
            let end = elf[name..].iter().position(|b| *b == 0).unwrap();
            String::from_utf8_lossy(&elf[name..name + end]).into_owned()
        })
        .collect()
}

/// The loader reads packed relative relocations (`DT_RELR`) instead of 750 KiB of `.rela.dyn`
/// at every start, pages that then stayed resident (build.rs asks the linker for them).
#[test]
#[cfg(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]
fn relative_relocations_are_packed() {
    let elf = std::fs::read(env!("CARGO_BIN_EXE_gimlet")).unwrap();
    let names = section_names(&elf);
    assert!(names.iter().any(|n| n == ".text"), "{names:?}");
    assert!(
        names.iter().any(|n| n == ".relr.dyn"),
        "no packed relocations: {names:?}"
    );
}

/// The function order release builds hand the linker (`build.rs`, `link/functions.order`):
/// symbol names only, and among them the start-up path and the everyday calls, so that they
/// share the few pages of code that stay resident (`scripts/link-order.sh` rewrites it).
#[test]
fn the_function_order_lists_a_sessions_path() {
    let order =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/link/functions.order"))
            .unwrap();
    let names: Vec<&str> = order.lines().collect();
    assert!(names.len() > 1000, "{} names", names.len());
    let odd: Vec<&&str> = names
        .iter()
        .filter(|n| !(n.starts_with("_ZN") || n.starts_with("_R") || **n == "main"))
        .collect();
    assert!(odd.is_empty(), "not symbol names: {odd:?}");
    for part in [
        "6gimlet4main",
        "10gimlet_mcp9transport5stdio",
        "12gimlet_tools5tools4read",
        "12gimlet_tools5tools4grep",
        "12gimlet_tools6change4edit",
        "12gimlet_tools3run",
    ] {
        assert!(names.iter().any(|n| n.contains(part)), "{part} not listed");
    }
}
