//! The command line QEMU was given (`-append "..."`), read with the
//! semihosting call `SYS_GET_CMDLINE`.

use cortex_m_semihosting::{nr, syscall1};

/// Reads the command line into `buf` and returns it (without the trailing
/// NUL); `None` if the debugger refused or it is not UTF-8. QEMU answers
/// with the kernel's file name, a space, then the `-append` text.
pub fn read(buf: &mut [u8]) -> Option<&str> {
    let mut block = [buf.as_mut_ptr() as usize, buf.len()];
    // SAFETY: SYS_GET_CMDLINE takes a pointer to a two-word block {buffer,
    // length}; the host writes at most `length` bytes into `buffer` (which
    // `buf` owns for the call) and the used length into the block. Both
    // stay borrowed mutably across the call, and the asm in `syscall1` is
    // not `nomem`, so the compiler sees the writes.
    let status = unsafe { syscall1(nr::GET_CMDLINE, block.as_mut_ptr() as usize) };
    if status != 0 {
        return None;
    }
    let len = block[1].min(buf.len());
    let text = &buf[..len];
    let text = text.split(|&b| b == 0).next().unwrap_or_default();
    core::str::from_utf8(text).ok()
}
