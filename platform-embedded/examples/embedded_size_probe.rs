//! A bare-metal binary with a 5-server lock client (`lock`, `extend`,
//! `unlock`) of `redlock-embedded` over a stand-in network, to measure the
//! flash cost of core + resp + redlock-embedded and to prove that none of
//! them needs an allocator (linking fails if anything pulls in `alloc`).
//!
//! ```sh
//! cargo build -p redlock-embedded --example embedded_size_probe --features size-probe \
//!     --target thumbv7em-none-eabihf --profile size
//! llvm-size target/thumbv7em-none-eabihf/size/examples/embedded_size_probe
//! ```

#![no_std]
#![no_main]
// The entry point and panic handler of a bare-metal binary need these.
#![allow(unsafe_code, missing_docs)]

use core::hint::black_box;

use embedded_io::{ErrorKind, ErrorType, Read, ReadReady, Write};
use redlock_embedded::{Buffers, Client, Config, Credentials, Duration, Instant, Link, Network};

mod probe;

use probe::{ProbeClock, ProbeRng};

/// Sockets whose bytes come from wherever `black_box` says.
struct ProbeNet;

struct ProbeSocket;

impl ErrorType for ProbeSocket {
    type Error = ErrorKind;
}

impl Read for ProbeSocket {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, ErrorKind> {
        let reply = black_box(b"+OK\r\n");
        let n = reply.len().min(buf.len());
        buf[..n].copy_from_slice(&reply[..n]);
        Ok(n)
    }
}

impl ReadReady for ProbeSocket {
    fn read_ready(&mut self) -> Result<bool, ErrorKind> {
        Ok(black_box(true))
    }
}

impl Write for ProbeSocket {
    fn write(&mut self, buf: &[u8]) -> Result<usize, ErrorKind> {
        Ok(black_box(buf).len())
    }
    fn flush(&mut self) -> Result<(), ErrorKind> {
        Ok(())
    }
}

impl Network for ProbeNet {
    type Socket<'s> = ProbeSocket;
    fn connect(&mut self, server: usize) -> Result<(), ErrorKind> {
        black_box(server);
        Ok(())
    }
    fn link(&mut self, server: usize) -> Link {
        black_box(server);
        black_box(Link::Up)
    }
    fn socket(&mut self, server: usize) -> Option<ProbeSocket> {
        black_box(server);
        Some(ProbeSocket)
    }
    fn close(&mut self, server: usize) {
        black_box(server);
    }
    fn wait(&mut self, until: Instant) {
        black_box(until);
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn _start() -> ! {
    let creds = [Credentials::NONE; 5];
    // In a static, as the README recommends: all zero, so it lands in
    // `.bss` and needs no code to set up.
    static mut BUFFERS: Buffers<5> = Buffers::new();
    // SAFETY: `_start` runs once, so this is the only reference to it.
    let buffers = unsafe { &mut *(&raw mut BUFFERS) };
    let Ok(mut client) = Client::new(
        ProbeNet,
        ProbeClock,
        ProbeRng(7),
        Config::DEFAULT,
        creds,
        buffers,
    ) else {
        loop {}
    };
    let ttl = Duration::from_millis(black_box(10_000));
    if let Ok(mut lock) = client.lock(b"resource", ttl) {
        black_box(client.extend(&mut lock, ttl).is_ok());
        black_box(client.unlock(&lock).is_ok());
    }
    loop {}
}
