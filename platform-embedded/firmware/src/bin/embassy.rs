//! The embassy skeleton: the same board as the gateway, on embassy's
//! thread-mode executor, embassy-time (the board clock) and embassy-net
//! (the LAN9118 driver of `redlock_firmware::net_driver`). It PINGs each
//! of three Redis servers over its own `TcpSocket` while a second task
//! counts milliseconds, and exits 0 only if every step checked out.
//!
//! Arguments (QEMU `-append`, as the gateway's): `PORT PORT PORT RESOURCE
//! HOLD_MS TTL_MS SEED`; the servers are 10.0.2.2:PORT (the host's
//! 127.0.0.1 under QEMU's user-mode networking). `RESOURCE`, `HOLD_MS` and
//! `TTL_MS` are checked and kept for the async Redlock client that will
//! replace the PINGs; `SEED` seeds embassy-net (TCP initial sequence
//! numbers, local ports). One line per step on the semihosting console:
//!
//! ```text
//! args <resource> <hold_ms> <ttl_ms>
//! nic <id_rev> <mac>
//! connected <server> <port>
//! sent <server> PING
//! pong <server>
//! closed <server>
//! ticks <n> network_ms <ms>    # the ticker's count; how long the PINGs took
//! stack <bytes>                # stack high-water mark
//! ```
//!
//! A failed step prints `error <step> [<server>]: <why>` and exits 1.

#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU32, Ordering};

use cortex_m_rt::exception;
use embassy_executor::Spawner;
use embassy_net::tcp::TcpSocket;
use embassy_net::{Config, Ipv4Cidr, Runner, Stack, StackResources, StaticConfigV4};
use embassy_time::{Duration, Instant, Ticker, with_timeout};
use embedded_io_async::Write;
use redlock_firmware::clock::{self, Clock};
use redlock_firmware::console::{exit, println};
use redlock_firmware::lan9118::{Lan9118, ProbeError};
use redlock_firmware::net::Addressing;
use redlock_firmware::net_driver::Lan9118Driver;
use redlock_firmware::{cmdline, stack, time_driver};
use static_cell::StaticCell;

/// Servers: three, as the gateway's.
const SERVERS: usize = 3;
/// TCP buffers per socket: a reply is read as it comes (the receive
/// window need not hold a whole reply), requests are small.
const SOCKET_RX: usize = 512;
const SOCKET_TX: usize = 256;
/// The longest command line taken (QEMU puts the kernel's path first).
const CMDLINE: usize = 512;
/// The longest resource name taken.
const RESOURCE: usize = 64;
/// How long one step (connect, send, reply, close) may take.
const STEP: Duration = Duration::from_secs(5);
/// The request, as RESP: an array of one bulk string.
const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";
/// The reply expected.
const PONG: &[u8] = b"+PONG\r\n";
/// The most reply bytes read before giving up on a line end.
const REPLY: usize = 64;

/// The ticker task's count of milliseconds.
static TICKS: AtomicU32 = AtomicU32::new(0);

#[exception]
fn SysTick() {
    clock::tick();
    time_driver::tick();
}

/// The run-time arguments.
struct Args {
    ports: [u16; SERVERS],
    /// The lock's name, hold time and ttl: for the Redlock client to come
    /// (only printed for now).
    resource: heapless::String<RESOURCE>,
    hold_ms: u32,
    ttl_ms: u32,
    seed: [u8; 32],
}

/// Reads and parses the command line.
fn args() -> Result<Args, &'static str> {
    let mut line = [0u8; CMDLINE];
    let line = cmdline::read(&mut line)
        .ok_or("no command line (run with -semihosting-config enable=on)")?;
    parse(line)
}

/// Parses `PORT PORT PORT RESOURCE HOLD_MS TTL_MS SEED`, after the kernel
/// file name QEMU puts first.
fn parse(line: &str) -> Result<Args, &'static str> {
    let mut words = line.split_ascii_whitespace().peekable();
    if words.peek().is_some_and(|w| w.parse::<u16>().is_err()) {
        words.next();
    }
    let mut ports = [0u16; SERVERS];
    for port in &mut ports {
        *port = words
            .next()
            .and_then(|w| w.parse().ok())
            .filter(|&p| p != 0)
            .ok_or("expected three server ports")?;
    }
    let resource = words
        .next()
        .ok_or("expected a resource name")?
        .try_into()
        .map_err(|_| "the resource name is too long")?;
    let hold_ms = words
        .next()
        .and_then(|w| w.parse().ok())
        .ok_or("expected the hold time in ms")?;
    let ttl_ms = words
        .next()
        .and_then(|w| w.parse().ok())
        .ok_or("expected the ttl in ms")?;
    let seed = words
        .next()
        .and_then(seed_of)
        .ok_or("expected a seed of 64 hex digits")?;
    if words.next().is_some() {
        return Err("too many arguments");
    }
    Ok(Args {
        ports,
        resource,
        hold_ms,
        ttl_ms,
        seed,
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

/// Prints `error <step>: <why>` and exits 1.
fn fail(step: &str, why: impl core::fmt::Display) -> ! {
    println!("error {}: {}", step, why);
    exit(false)
}

#[embassy_executor::main]
async fn main(spawner: Spawner) {
    stack::paint();
    let args = args().unwrap_or_else(|why| fail("args", why));
    println!("args {} {} {}", args.resource, args.hold_ms, args.ttl_ms);
    let mut core = cortex_m::Peripherals::take().unwrap_or_else(|| fail("boot", BootError::Taken));
    // Timer 0 and SysTick: embassy-time's clock and alarms from here on.
    let _clock = Clock::start(&mut core.SYST);
    let net = network(spawner, &args).unwrap_or_else(|why| fail("boot", why));
    spawner.spawn(ticker().unwrap_or_else(|_| fail("boot", BootError::Taken)));
    let mut sockets = sockets(net).unwrap_or_else(|why| fail("boot", why));

    // The PINGs: what the async Redlock client will replace.
    let start = Instant::now();
    let mut ok = true;
    for (server, (socket, &port)) in sockets.iter_mut().zip(&args.ports).enumerate() {
        ok &= ping(socket, server, port).await;
        if !ok {
            break;
        }
    }
    let network_ms = start.elapsed().as_millis();

    println!(
        "ticks {} network_ms {}",
        TICKS.load(Ordering::Relaxed),
        network_ms
    );
    println!("stack {}", stack::high_water());
    exit(ok)
}

/// Counts milliseconds into [`TICKS`] on its own (a `Ticker`: the next
/// tick is 1 ms after the last one was due, not after it was seen), to
/// show that the executor runs it while the main task waits on the network.
#[embassy_executor::task]
async fn ticker() -> ! {
    let mut ticker = Ticker::every(Duration::from_millis(1));
    loop {
        ticker.next().await;
        TICKS.fetch_add(1, Ordering::Relaxed);
    }
}

/// Runs embassy-net: moves frames between the driver and the sockets.
#[embassy_executor::task]
async fn net_task(mut runner: Runner<'static, Lan9118Driver>) -> ! {
    runner.run().await
}

/// Why the board did not come up.
enum BootError {
    /// Something was taken or spawned twice.
    Taken,
    /// No usable LAN9118.
    Nic(ProbeError),
}

impl core::fmt::Display for BootError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            BootError::Taken => f.write_str("booted twice"),
            BootError::Nic(e) => e.fmt(f),
        }
    }
}

// --- The network: stack and sockets, the parts a Redlock client reuses ---

/// Brings up the LAN9118 and embassy-net on it with QEMU's user-mode
/// addresses (10.0.2.15/24, router 10.0.2.2; no DHCP, no DNS), and spawns
/// its runner. The stack's state lives in a static, with room for one
/// socket per server.
fn network(spawner: Spawner, args: &Args) -> Result<Stack<'static>, BootError> {
    static RESOURCES: StaticCell<StackResources<SERVERS>> = StaticCell::new();
    let lan = Lan9118::probe().map_err(BootError::Nic)?;
    let [a, b, c, d, e, f] = lan.mac();
    println!(
        "nic {:#010x} {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        lan.id_rev(),
        a,
        b,
        c,
        d,
        e,
        f
    );
    let slirp = Addressing::SLIRP;
    let config = Config::ipv4_static(StaticConfigV4 {
        address: Ipv4Cidr::new(slirp.address, slirp.prefix),
        gateway: Some(slirp.router),
        dns_servers: heapless::Vec::new(),
    });
    let resources = RESOURCES
        .try_init(StackResources::new())
        .ok_or(BootError::Taken)?;
    let [s0, s1, s2, s3, s4, s5, s6, s7, ..] = args.seed;
    let seed = u64::from_le_bytes([s0, s1, s2, s3, s4, s5, s6, s7]);
    let (stack, runner) = embassy_net::new(Lan9118Driver::new(lan), config, resources, seed);
    spawner.spawn(net_task(runner).map_err(|_| BootError::Taken)?);
    Ok(stack)
}

/// One connection's TCP buffers.
struct SocketBuffers {
    rx: [u8; SOCKET_RX],
    tx: [u8; SOCKET_TX],
}

/// One TCP socket per server on `stack`, with its buffers in a static:
/// `embedded_io_async` `Read + Write` streams once connected, what the
/// async Redlock client takes.
fn sockets(stack: Stack<'static>) -> Result<[TcpSocket<'static>; SERVERS], BootError> {
    static BUFFERS: StaticCell<[SocketBuffers; SERVERS]> = StaticCell::new();
    let buffers = BUFFERS
        .try_init(
            [const {
                SocketBuffers {
                    rx: [0; SOCKET_RX],
                    tx: [0; SOCKET_TX],
                }
            }; SERVERS],
        )
        .ok_or(BootError::Taken)?;
    Ok(buffers.each_mut().map(|b| {
        let mut socket = TcpSocket::new(stack, &mut b.rx, &mut b.tx);
        // Requests are small and each waits for its reply: send at once.
        socket.set_nagle_enabled(false);
        // A connection that hears nothing for this long is reset.
        socket.set_timeout(Some(STEP));
        socket
    }))
}

// --- The PING steps (to be replaced by the Redlock client) ---

/// Connects `socket` to 10.0.2.2:`port`, sends `PING`, checks `+PONG`,
/// closes; one line per step. `false` after printing an `error` line.
async fn ping(socket: &mut TcpSocket<'_>, server: usize, port: u16) -> bool {
    let remote = (Addressing::SLIRP.router, port);
    match with_timeout(STEP, socket.connect(remote)).await {
        Ok(Ok(())) => println!("connected {} {}", server, port),
        Ok(Err(e)) => return report("connect", server, format_args!("{:?}", e)),
        Err(_) => return report("connect", server, "timed out"),
    }
    let sent = async {
        socket.write_all(PING).await?;
        socket.flush().await
    };
    match with_timeout(STEP, sent).await {
        Ok(Ok(())) => println!("sent {} PING", server),
        Ok(Err(e)) => return report("send", server, format_args!("{:?}", e)),
        Err(_) => return report("send", server, "timed out"),
    }
    let mut reply = [0u8; REPLY];
    let line = with_timeout(STEP, read_line(socket, &mut reply))
        .await
        .map(|read| read.map(|len| reply.get(..len).unwrap_or_default()));
    match line {
        Ok(Ok(line)) if line == PONG => println!("pong {}", server),
        Ok(Ok(line)) => {
            let shown = core::str::from_utf8(line).unwrap_or("(not UTF-8)");
            return report("reply", server, shown.trim_end());
        }
        Ok(Err(why)) => return report("reply", server, why),
        Err(_) => return report("reply", server, "timed out"),
    }
    // Close gracefully: the flush waits until our FIN is acknowledged.
    socket.close();
    match with_timeout(STEP, socket.flush()).await {
        Ok(Ok(())) => println!("closed {}", server),
        Ok(Err(e)) => return report("close", server, format_args!("{:?}", e)),
        Err(_) => return report("close", server, "timed out"),
    }
    true
}

/// Why a reply could not be read.
enum ReplyError {
    /// The connection failed.
    Io(embassy_net::tcp::Error),
    /// The peer closed before a whole line came.
    Closed,
    /// No line end within the buffer.
    TooLong,
}

impl core::fmt::Display for ReplyError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ReplyError::Io(e) => write!(f, "{:?}", e),
            ReplyError::Closed => f.write_str("closed by the server"),
            ReplyError::TooLong => f.write_str("no line end"),
        }
    }
}

/// Reads into `buf` until a `\r\n` arrives; the length of the line, with
/// its `\r\n`.
async fn read_line(socket: &mut TcpSocket<'_>, buf: &mut [u8]) -> Result<usize, ReplyError> {
    let mut len = 0;
    loop {
        let free = match buf.get_mut(len..) {
            Some(free) if !free.is_empty() => free,
            _ => return Err(ReplyError::TooLong),
        };
        let n = socket.read(free).await.map_err(ReplyError::Io)?;
        if n == 0 {
            return Err(ReplyError::Closed);
        }
        len += n;
        let got = buf.get(..len).unwrap_or_default();
        if let Some(end) = got.windows(2).position(|w| w == b"\r\n") {
            return Ok(end + 2);
        }
    }
}

/// Prints `error <step> <server>: <why>`; `false`.
fn report(step: &str, server: usize, why: impl core::fmt::Display) -> bool {
    println!("error {} {}: {}", step, server, why);
    false
}
