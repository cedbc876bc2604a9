//! Board support for QEMU's `mps2-an386` (Cortex-M4F), shared by the
//! firmware's binaries: the semihosting console and exit, the command line,
//! the clock, the LAN9118 Ethernet controller, the smoltcp network, and the
//! stack high-water mark; with feature `embassy`, an embassy-time driver on
//! the clock and the LAN9118 as an embassy-net driver.

#![no_std]

pub mod clock;
pub mod cmdline;
pub mod console;
pub mod lan9118;
pub mod net;
#[cfg(feature = "embassy")]
pub mod net_driver;
pub mod stack;
#[cfg(feature = "embassy")]
pub mod time_driver;
