//! The path cases of `confinement.rs` again, with paths opened as macOS opens them: one
//! `openat(O_NOFOLLOW)` per component, no `openat2` (`gimlet_tools::fs::force_portable`, set for
//! this whole test binary). macOS cannot be run here; this runs its code on Linux.

#![cfg(unix)]
#![expect(clippy::unwrap_used, reason = "tests fail loudly")]

#[path = "confinement/paths.rs"]
mod paths;

use proptest::prelude::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_directory_swapped_for_a_symlink_never_lets_a_call_out_of_the_walk() {
    gimlet_tools::fs::force_portable(true);
    paths::a_directory_swapped_for_a_symlink_never_lets_a_call_out().await;
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// The resolver and the walk: nothing placed inside lies outside, nothing outside opens.
    #[test]
    fn the_walk_never_places_outside_paths_inside(
        parts in prop::collection::vec(paths::component(), 1..7),
        absolute in prop_oneof![Just(0u8), Just(1u8), Just(2u8)],
    ) {
        gimlet_tools::fs::force_portable(true);
        paths::resolver_case(&parts, absolute)?;
    }
}
