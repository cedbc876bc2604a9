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

/// The longest command line taken (QEMU puts the kernel's path first).
const CMDLINE: usize = 512;
/// The longest resource name taken.
pub const RESOURCE: usize = 64;

/// The run-time arguments of the binaries that take a lock:
/// `PORT PORT PORT RESOURCE HOLD_MS TTL_MS SEED [CYCLES]`.
pub struct Args<const SERVERS: usize> {
    /// The servers' ports on the host (10.0.2.2 under QEMU's user network).
    pub ports: [u16; SERVERS],
    /// The lock's name.
    pub resource: heapless::String<RESOURCE>,
    /// How long to hold it, in ms.
    pub hold_ms: u64,
    /// Its ttl, in ms.
    pub ttl_ms: u64,
    /// The RNG's seed (no seed, no tokens).
    pub seed: [u8; 32],
    /// Latency cycles to measure (0: none).
    pub cycles: usize,
}

impl<const SERVERS: usize> Args<SERVERS> {
    /// How long to hold the lock.
    pub fn hold(&self) -> redlock_embedded::Duration {
        redlock_embedded::Duration::from_millis(self.hold_ms)
    }

    /// The lock's ttl.
    pub fn ttl(&self) -> redlock_embedded::Duration {
        redlock_embedded::Duration::from_millis(self.ttl_ms)
    }
}

/// Reads and parses the command line; at most `max_cycles` latency cycles
/// (0: the binary takes no `CYCLES`).
#[inline(never)]
pub fn args<const SERVERS: usize>(max_cycles: usize) -> Result<Args<SERVERS>, &'static str> {
    let mut line = [0u8; CMDLINE];
    let line = read(&mut line).ok_or("no command line (run with -semihosting-config enable=on)")?;
    parse(line, max_cycles)
}

/// Parses `PORT.. RESOURCE HOLD_MS TTL_MS SEED [CYCLES]`, after the kernel
/// file name QEMU puts first.
pub fn parse<const SERVERS: usize>(
    line: &str,
    max_cycles: usize,
) -> Result<Args<SERVERS>, &'static str> {
    let mut words = line.split_ascii_whitespace().peekable();
    // QEMU's SYS_GET_CMDLINE starts with the kernel's file name.
    if words.peek().is_some_and(|w| w.parse::<u16>().is_err()) {
        words.next();
    }
    let mut ports = [0u16; SERVERS];
    for port in &mut ports {
        *port = words
            .next()
            .and_then(|w| w.parse().ok())
            .filter(|&p| p != 0)
            .ok_or("expected a port per server")?;
    }
    let resource = words
        .next()
        .ok_or("expected a resource name")?
        .try_into()
        .map_err(|_| "the resource name is too long")?;
    let mut ms = |what| words.next().and_then(|w| w.parse::<u64>().ok()).ok_or(what);
    let hold_ms = ms("expected the hold time in ms")?;
    let ttl_ms = ms("expected the ttl in ms")?;
    let seed = words
        .next()
        .and_then(seed_of)
        .ok_or("expected an RNG seed of 64 hex digits (no seed, no tokens)")?;
    let cycles = match words.next() {
        None => 0,
        Some(_) if max_cycles == 0 => return Err("too many arguments"),
        Some(w) => w
            .parse::<usize>()
            .ok()
            .filter(|&n| n <= max_cycles)
            .ok_or("cycles: a number up to the binary's most")?,
    };
    if words.next().is_some() {
        return Err("too many arguments");
    }
    Ok(Args {
        ports,
        resource,
        hold_ms,
        ttl_ms,
        seed,
        cycles,
    })
}

/// 32 bytes from 64 hex digits.
fn seed_of(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.as_bytes();
    if hex.len() != 64 {
        return None;
    }
    let digit = |c: u8| char::from(c).to_digit(16).map(|d| d as u8);
    let mut seed = [0u8; 32];
    for (byte, pair) in seed.iter_mut().zip(hex.chunks_exact(2)) {
        *byte = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(seed)
}
