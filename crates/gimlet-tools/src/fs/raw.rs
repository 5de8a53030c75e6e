//! The raw numbers of `stat` and `open`, whose types differ between Unix systems: `mode_t` is
//! 32 bits on Linux and 16 on macOS, `nlink_t` 64 and 16, `dev_t` unsigned 64 and signed 32.
//! Everything above this module speaks `u32` modes, `u64` link counts and devices.

#![allow(
    clippy::useless_conversion,
    clippy::unnecessary_fallible_conversions,
    reason = "a conversion that is needed on one system is the identity on another"
)]

use rustix::fs::{FileType, Mode, RawMode, Stat};

/// The mode bits (type and permissions) of a `stat`.
pub(crate) fn mode(stat: &Stat) -> u32 {
    u32::from(stat.st_mode)
}

/// The file type of a `stat`.
pub(crate) fn file_type(stat: &Stat) -> FileType {
    FileType::from_raw_mode(stat.st_mode)
}

/// The number of hard links of a `stat`.
pub(crate) fn links(stat: &Stat) -> u64 {
    u64::from(stat.st_nlink)
}

/// The device of a `stat`.
pub(crate) fn device(stat: &Stat) -> u64 {
    #[cfg(target_os = "linux")]
    return u64::from(stat.st_dev);
    #[cfg(not(target_os = "linux"))]
    return u64::from(stat.st_dev.cast_unsigned());
}

/// Permission bits (the low 12 of `bits`) as a [`Mode`].
pub(crate) fn permissions(bits: u32) -> Mode {
    Mode::from_raw_mode(RawMode::try_from(bits & 0o7777).unwrap_or(0o600))
}

/// The modification time of a `stat`: seconds and nanoseconds.
pub(crate) fn mtime(stat: &Stat) -> (i64, i64) {
    (
        i64::try_from(stat.st_mtime).unwrap_or(0),
        i64::try_from(stat.st_mtime_nsec).unwrap_or(0),
    )
}

/// The file type of `st_mode` bits read through the standard library (`MetadataExt::mode`).
pub(crate) fn file_type_of_mode(mode: u32) -> FileType {
    FileType::from_raw_mode(RawMode::try_from(mode).unwrap_or(0))
}
