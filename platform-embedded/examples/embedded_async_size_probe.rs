//! A bare-metal binary with a 5-server **async** lock client (`lock`,
//! `extend`, `unlock`) of `redlock-embedded` (`AsyncClient`, feature
//! `async`) over stand-in streams, driven by a minimal executor, to
//! measure the flash cost of core + resp + the async client, next to
//! `embedded_size_probe` (the blocking one); linking fails if anything
//! pulls in `alloc`.
//!
//! ```sh
//! cargo build -p redlock-embedded --example embedded_async_size_probe \
//!     --features size-probe,async --target thumbv7em-none-eabihf --profile size
//! llvm-size target/thumbv7em-none-eabihf/size/examples/embedded_async_size_probe
//! ```

#![no_std]
#![no_main]
// The entry point and panic handler of a bare-metal binary need these.
#![allow(unsafe_code, missing_docs)]

use core::future::Future;
use core::hint::black_box;
use core::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use core::pin::pin;
use core::task::{Context, Poll, Waker};

use embedded_io_async::{ErrorKind, ErrorType, Read, Write};
use redlock_embedded::{AsyncClient, Buffers, Config, Connector, Credentials, Duration, Links};

mod probe;

use probe::{ProbeClock, ProbeRng};

/// Streams whose bytes come from wherever `black_box` says.
struct ProbeStream;

impl ErrorType for ProbeStream {
    type Error = ErrorKind;
}

impl Read for ProbeStream {
    async fn read(&mut self, buf: &mut [u8]) -> Result<usize, ErrorKind> {
        let reply = black_box(b"+OK\r\n");
        let n = reply.len().min(buf.len());
        buf[..n].copy_from_slice(&reply[..n]);
        Ok(n)
    }
}

impl Write for ProbeStream {
    async fn write(&mut self, buf: &[u8]) -> Result<usize, ErrorKind> {
        Ok(black_box(buf.len()))
    }
    async fn flush(&mut self) -> Result<(), ErrorKind> {
        Ok(())
    }
}

/// A stack that connects at once.
struct ProbeStack;

impl embedded_nal_async::TcpConnect for ProbeStack {
    type Error = ErrorKind;
    type Connection<'a> = ProbeStream;
    async fn connect<'a>(&'a self, remote: SocketAddr) -> Result<ProbeStream, ErrorKind> {
        black_box(remote);
        Ok(ProbeStream)
    }
}

/// A delay that returns at once.
struct ProbeDelay;

impl embedded_hal_async::delay::DelayNs for ProbeDelay {
    async fn delay_ns(&mut self, ns: u32) {
        black_box(ns);
    }
}

/// The smallest executor: polls `fut` until it is ready.
fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn _start() -> ! {
    static STACK: ProbeStack = ProbeStack;
    // Not `Sync` (its `Cell`s are the two tasks' on one thread): here on
    // the stack; an embassy firmware keeps it in a `StaticCell`.
    let mut links: Links<ProbeStream, 5> = Links::new();
    let (client_links, connector_links) = links.split();
    let creds = [Credentials::NONE; 5];
    // In a static, as the README recommends: all zero, so it lands in
    // `.bss` and needs no code to set up.
    static mut BUFFERS: Buffers<5> = Buffers::new();
    // SAFETY: `_start` runs once, so this is the only reference to it.
    let buffers = unsafe { &mut *(&raw mut BUFFERS) };
    let addrs = core::array::from_fn(|i| {
        SocketAddr::V4(SocketAddrV4::new(
            Ipv4Addr::new(10, 0, 2, 2),
            6379 + i as u16,
        ))
    });
    let mut connector = Connector::new(&STACK, black_box(addrs), connector_links);
    let Ok(mut client) = AsyncClient::new(
        client_links,
        ProbeClock,
        ProbeDelay,
        ProbeRng(7),
        Config::DEFAULT,
        creds,
        buffers,
    ) else {
        loop {}
    };
    let ttl = Duration::from_millis(black_box(10_000));
    let calls = async {
        if let Ok(mut lock) = client.lock(b"resource", ttl).await {
            black_box(client.extend(&mut lock, ttl).await.is_ok());
            black_box(client.unlock(&lock).await.is_ok());
        }
    };
    block_on(embassy_futures::select::select(connector.run(), calls));
    loop {}
}
