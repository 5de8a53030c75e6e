//! Confining a process and everything it starts: a seccomp filter, Landlock, and no
//! capabilities. Each applies to the calling process and is inherited across `fork` and
//! `exec`; none can be undone.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::{Enforcement, SandboxPlan};

/// What [`confine`] put in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Confined {
    /// How much Landlock the kernel enforced.
    pub(super) landlock: Enforcement,
    /// The kernel's Landlock ABI.
    pub(super) abi: u8,
}

/// Confines this process: no network (unless the plan allows it), Landlock, no capabilities.
/// Fails when Landlock cannot be enforced at all.
pub(super) fn confine(plan: &SandboxPlan) -> Result<Confined, String> {
    if !plan.network {
        no_network()?;
    }
    let mut writable = plan.writable.clone();
    if plan.private_tmp.is_some() && plan.support.mounts {
        // The session's temp directory, mounted there (`mounts.rs`); its own path may be
        // hidden under it.
        writable.push(PathBuf::from(super::TMP));
    }
    let confined = landlock(&writable, &plan.unix_sockets, plan.network)?;
    if confined.landlock == Enforcement::None {
        return Err(String::from("Landlock is not available in this kernel"));
    }
    drop_capabilities()?;
    Ok(confined)
}

/// Landlock: read and execute anywhere; write, create, remove and truncate only beneath
/// `writable` and `/dev/null`; without `network`, no TCP bind or connect (ABI 4). Where the
/// kernel has them: no signals to processes outside the sandbox and no abstract Unix sockets
/// created outside it (ABI 6), no pathname Unix sockets outside `writable` but `sockets`
/// (ABI 9).
pub(super) fn landlock(
    writable: &[PathBuf],
    sockets: &[PathBuf],
    network: bool,
) -> Result<Confined, String> {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, LandlockStatus, Ruleset, RulesetAttr, RulesetCreatedAttr,
        RulesetStatus, Scope, path_beneath_rules,
    };
    // The newest rights this code was written for; an older kernel enforces what it has.
    let abi = ABI::V9;
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .map_err(|e| e.to_string())?
        .scope(Scope::from_all(abi))
        .map_err(|e| e.to_string())?;
    if !network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(|e| e.to_string())?;
    }
    let status = ruleset
        .create()
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(["/"], AccessFs::from_read(abi)))
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(writable, AccessFs::from_all(abi)))
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(["/dev/null"], AccessFs::from_all(abi)))
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(sockets, AccessFs::ResolveUnix))
        .map_err(|e| e.to_string())?
        .restrict_self()
        .map_err(|e| e.to_string())?;
    let landlock = match status.ruleset {
        RulesetStatus::FullyEnforced => Enforcement::Full,
        RulesetStatus::PartiallyEnforced => Enforcement::Partial,
        RulesetStatus::NotEnforced => Enforcement::None,
    };
    let abi = match status.landlock {
        LandlockStatus::Available { effective_abi, .. } => abi_number(effective_abi),
        _ => 0,
    };
    Ok(Confined { landlock, abi })
}

fn abi_number(abi: landlock::ABI) -> u8 {
    use landlock::ABI;
    match abi {
        ABI::V1 => 1,
        ABI::V2 => 2,
        ABI::V3 => 3,
        ABI::V4 => 4,
        ABI::V5 => 5,
        ABI::V6 => 6,
        ABI::V7 => 7,
        ABI::V8 => 8,
        ABI::V9 => 9,
        // `Unsupported`, and any ABI a newer crate adds (counted as the newest known).
        _ => u8::from(abi > ABI::V9) * 9,
    }
}

/// seccomp: `socket()` fails with EPERM for every family but `AF_UNIX`; `io_uring` (which can
/// open sockets around the filter) is off.
pub(super) fn no_network() -> Result<(), String> {
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule,
    };
    let not_unix = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Ne,
        libc::AF_UNIX as u64,
    )
    .map_err(|e| e.to_string())?;
    let mut rules = BTreeMap::new();
    rules.insert(
        libc::SYS_socket,
        vec![SeccompRule::new(vec![not_unix]).map_err(|e| e.to_string())?],
    );
    rules.insert(libc::SYS_io_uring_setup, Vec::new());
    let arch =
        seccompiler::TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    let program: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    seccompiler::apply_filter(&program).map_err(|e| e.to_string())
}

/// Drops every capability: the ambient set, the bounding set (so that no `exec`, not even of a
/// setuid-root or file-capability program, brings one back), and the effective, permitted and
/// inheritable sets. Even root is then an ordinary user: no `chattr +i`, `setcap`, `chown`,
/// `kill` of other users' processes, `mount`. `no_new_privs` is set too.
pub(super) fn drop_capabilities() -> Result<(), String> {
    use rustix::thread::{CapabilitySet, CapabilitySets};
    rustix::thread::set_no_new_privs(true).map_err(|e| format!("no_new_privs: {e}"))?;
    let _ = rustix::thread::clear_ambient_capability_set();
    let held = rustix::thread::capabilities(None).map_err(|e| format!("capget: {e}"))?;
    if !held.permitted.is_empty() {
        for bit in 0..64 {
            match rustix::thread::remove_capability_from_bounding_set(
                CapabilitySet::from_bits_retain(1 << bit),
            ) {
                // Past the kernel's last capability.
                Ok(()) | Err(rustix::io::Errno::INVAL) => {}
                Err(err) => return Err(format!("dropping capability {bit}: {err}")),
            }
        }
    }
    let none = CapabilitySet::empty();
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: none,
            permitted: none,
            inheritable: none,
        },
    )
    .map_err(|e| format!("capset: {e}"))
}

/// Hands `capabilities` on to the next program this process executes (as ambient
/// capabilities): in a user namespace a process that is not uid 0 there loses them all at
/// `exec` otherwise. Used to let the init mount its `/proc` and drop its bounding set.
pub(super) fn pass_on(capabilities: rustix::thread::CapabilitySet) -> Result<(), String> {
    let mut sets = rustix::thread::capabilities(None).map_err(|e| format!("capget: {e}"))?;
    sets.inheritable |= capabilities;
    rustix::thread::set_capabilities(None, sets).map_err(|e| format!("capset: {e}"))?;
    for capability in capabilities.iter() {
        rustix::thread::configure_capability_in_ambient_set(capability, true)
            .map_err(|e| format!("ambient capability: {e}"))?;
    }
    Ok(())
}
