#![doc = include_str!("../README.md")]
#![no_std]
#![forbid(unsafe_code)]
// Input comes from the network: no index or arithmetic that can panic.
#![warn(clippy::indexing_slicing, clippy::arithmetic_side_effects)]

#[macro_use]
mod logging;
mod acquire;
mod config;
mod extend;
mod fence;
pub mod handshake;
mod inspect;
mod lock;
mod operation;
mod release;
mod report;
mod round;
pub mod session;
mod time;
mod token;
mod watchdog;

pub use acquire::{Acquire, AcquireError};
#[cfg(feature = "mutants")]
pub use config::Mutants;
pub use config::{Config, Drift, Retry, majority};
pub use extend::{Extend, ExtendError};
pub use fence::{FenceRepair, FenceRepairError, FenceRepaired};
pub use handshake::{Commands, Dialect, SetupError};
pub use inspect::{HOLDER_CAPACITY, Holding, Inspect, Inspection};
pub use lock::{ArgumentError, FailureKind, Lock, Renewal};
pub use operation::Operation;
pub use redlock_resp;
pub use release::{Release, Released, TOKEN_CAPACITY};
pub use report::{MAX_SERVERS, Report, ServerCountError, ServerId, ServerOutcome, Servers};
pub use round::{Transmit, Unsolicited};
pub use time::{Duration, Instant};
pub use token::{TOKEN_LEN, Token};
pub use watchdog::{Extension, Loss, WatchAction, Watchdog};

// ALIGNMENT (see `time.rs`): on a 32-bit MCU the operations and `Lock` are
// 4-byte aligned, so that they are copied with the 4-byte-aligned `memcpy`
// only (an 8-byte-aligned one is a second copy of it in flash).
const _: () = {
    use core::mem::align_of;
    let word = align_of::<usize>();
    assert!(align_of::<Acquire<&[u8]>>() <= word);
    assert!(align_of::<Extend<&[u8]>>() <= word);
    assert!(align_of::<Release<&[u8]>>() <= word);
    assert!(align_of::<FenceRepair<&[u8]>>() <= word);
    assert!(align_of::<Lock>() <= word);
};

/// Whether the native commands are built in (the `native` feature).
pub(crate) const NATIVE: bool = cfg!(feature = "native");

/// Whether the scripts are built in: the `scripts` feature, or a build
/// without the native commands (the scripts are then all there is).
pub(crate) const SCRIPTS: bool = cfg!(feature = "scripts") || !NATIVE;

/// The suffix of the fence counter key: the counter of `resource` lives in
/// the key `resource` + `FENCE_SUFFIX` on every server (F1).
pub const FENCE_SUFFIX: &[u8] = round::FENCE_SUFFIX;
