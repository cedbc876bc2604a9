//! Board support for QEMU's `mps2-an386` (Cortex-M4F), shared by the
//! firmware's binaries: the semihosting console and exit.

#![no_std]

pub mod console;
