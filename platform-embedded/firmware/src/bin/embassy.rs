//! The embassy firmware: the same board as the gateway, on embassy's
//! thread-mode executor, embassy-time (the board clock) and embassy-net
//! (the LAN9118 driver of `redlock_firmware::net_driver`). It takes a
//! Redlock on three Redis servers with `redlock-embedded`'s `AsyncClient`
//! over embassy-net's `TcpClient`, proves a majority holds its token,
//! holds, extends and releases it; then makes a lock call wait on a held
//! resource, while a second task counts milliseconds. It exits 0 only if
//! every step checked out.
//!
//! Arguments (QEMU `-append`, as the gateway's): `PORT PORT PORT RESOURCE
//! HOLD_MS TTL_MS SEED`; the servers are 10.0.2.2:PORT (the host's
//! 127.0.0.1 under QEMU's user-mode networking). `SEED` seeds the token
//! RNG and embassy-net (TCP initial sequence numbers, local ports). One
//! line per step on the semihosting console:
//!
//! ```text
//! args <resource> <hold_ms> <ttl_ms>
//! nic <id_rev> <mac>
//! connected <ready>/3
//! acquired <resource> <token> <validity_ms>
//! proved <holding>/3
//! holding <hold_ms>
//! extended <validity_ms>
//! released
//! waited <ms> ticks <n>      # a lock_until on a held resource; the ticker meanwhile
//! stack <bytes>              # stack high-water mark
//! ```
//!
//! A failed step prints `error <step>: <why>` and exits 1.

#![no_std]
#![no_main]

use core::net::{SocketAddr, SocketAddrV4};
use core::sync::atomic::{AtomicU32, Ordering};

use chacha20::ChaCha20Rng;
use cortex_m_rt::exception;
use embassy_executor::Spawner;
use embassy_net::tcp::client::{TcpClient, TcpClientState, TcpConnection};
use embassy_net::{Config, Ipv4Cidr, Runner, Stack, StackResources, StaticConfigV4};
use embassy_time::{Delay, Duration, Instant, Ticker, Timer};
use rand_core::SeedableRng;
use redlock_embedded::{AsyncClient, Connector, Credentials, Links};
use redlock_firmware::clock::{self, Clock};
use redlock_firmware::console::{exit, println};
use redlock_firmware::lan9118::{Lan9118, ProbeError};
use redlock_firmware::net::Addressing;
use redlock_firmware::net_driver::Lan9118Driver;
use redlock_firmware::{cmdline, stack, time_driver};
use static_cell::StaticCell;

/// Servers: three, as the gateway's.
const SERVERS: usize = 3;
/// Reply buffer per server: holds the handshake's `INFO server` (~600 B).
const IN: usize = 1024;
/// Request buffer per server: holds the largest `SCRIPT LOAD`.
const OUT: usize = 512;
/// TCP buffers per connection: a reply is read as it comes (the receive
/// window need not hold a whole reply), requests are small.
const SOCKET_RX: usize = 512;
const SOCKET_TX: usize = 256;
/// A connection that hears nothing for this long is reset.
const STEP: Duration = Duration::from_secs(5);
/// The resource of the waiting step, and how long it is held first.
const WAIT_RESOURCE: &[u8] = b"embassy-wait";
const WAIT_TTL_MS: u64 = 800;

/// The TCP client (embassy-net's `TcpConnect`).
type Tcp = TcpClient<'static, SERVERS, SOCKET_TX, SOCKET_RX>;
/// The Redlock client's per-server buffers and connection state.
type ClientBuffers = redlock_embedded::Buffers<SERVERS, IN, OUT>;
/// A connection of the TCP client.
type Stream = TcpConnection<'static, SERVERS, SOCKET_TX, SOCKET_RX>;
/// The async Redlock client over embassy-net.
type Redlock = AsyncClient<'static, Stream, Clock, ChaCha20Rng, Delay, SERVERS, IN, OUT>;

/// The ticker task's count of milliseconds.
static TICKS: AtomicU32 = AtomicU32::new(0);

#[exception]
fn SysTick() {
    clock::tick();
    time_driver::tick();
}

/// The run-time arguments.
type Args = cmdline::Args<SERVERS>;

/// Prints `error <step>: <why>` and exits 1.
fn fail(step: &str, why: impl core::fmt::Display) -> ! {
    println!("error {}: {}", step, why);
    exit(false)
}

#[embassy_executor::main]
async fn main(spawner: Spawner) {
    stack::paint();
    let args = cmdline::args(0).unwrap_or_else(|why| fail("args", why));
    println!("args {} {} {}", args.resource, args.hold_ms, args.ttl_ms);
    let mut core = cortex_m::Peripherals::take().unwrap_or_else(|| fail("boot", BootError::Taken));
    // Timer 0 and SysTick: embassy-time's clock and alarms from here on.
    let clock = Clock::start(&mut core.SYST);
    let net = network(spawner, &args).unwrap_or_else(|why| fail("boot", why));
    spawner.spawn(ticker().unwrap_or_else(|_| fail("boot", BootError::Taken)));
    let tcp = tcp_client(net).unwrap_or_else(|why| fail("boot", why));
    let (mut client, connector) =
        redlock(tcp, clock, &args).unwrap_or_else(|why| fail("boot", why));
    spawner.spawn(connect(connector).unwrap_or_else(|_| fail("boot", BootError::Taken)));
    let ok = run(&mut client, &args).await;
    println!("stack {}", stack::high_water());
    exit(ok)
}

/// The steps; `false` after printing an `error` line.
async fn run(client: &mut Redlock, args: &Args) -> bool {
    let ready = client.connect().await;
    println!("connected {}/{}", ready, SERVERS);
    let resource = args.resource.as_bytes();
    let ttl = redlock_embedded::Duration::from_millis(args.ttl_ms);
    // 1. Acquire.
    let mut lock = match client.lock(resource, ttl).await {
        Ok(lock) => lock,
        Err(e) => return report("acquire", e),
    };
    let token = core::str::from_utf8(lock.token().as_bytes()).unwrap_or("?");
    println!(
        "acquired {} {} {}",
        args.resource,
        token,
        lock.validity().as_millis()
    );
    // 2. Prove: a majority holds our token.
    let inspection = match client.inspect(resource).await {
        Ok(i) => i,
        Err(e) => return report("prove", e),
    };
    let ours = lock.token().as_bytes();
    if inspection.majority_holder() != Some(ours) {
        return report("prove", "no majority holds our token");
    }
    let held = inspection
        .entries()
        .iter()
        .filter(|e| e.holder.as_deref() == Some(ours))
        .count();
    println!("proved {}/{}", held, inspection.entries().len());
    // 3. Hold (the executor runs the network and the ticker meanwhile).
    println!("holding {}", args.hold_ms);
    Timer::after(Duration::from_millis(args.hold_ms)).await;
    // 4. Extend.
    if let Err(e) = client.extend(&mut lock, ttl).await {
        return report("extend", e);
    }
    println!("extended {}", lock.validity().as_millis());
    // 5. Release.
    if let Err(e) = client.unlock(&lock).await {
        return report("release", e);
    }
    println!("released");
    // 6. A lock call that waits on a held resource while the ticker runs:
    // the resource is held (by this client, under another token) for
    // WAIT_TTL; `lock_until` retries until that runs out.
    let short = redlock_embedded::Duration::from_millis(WAIT_TTL_MS);
    let first = match client.lock(WAIT_RESOURCE, short).await {
        Ok(lock) => lock,
        Err(e) => return report("wait", e),
    };
    let ticks_before = TICKS.load(Ordering::Relaxed);
    let start = Instant::now();
    let deadline = client
        .now()
        .saturating_add(redlock_embedded::Duration::from_millis(4 * WAIT_TTL_MS));
    let second = match client.lock_until(WAIT_RESOURCE, ttl, deadline).await {
        Ok(lock) => lock,
        Err(e) => return report("wait", e),
    };
    let waited = start.elapsed().as_millis();
    let ticks = TICKS.load(Ordering::Relaxed).wrapping_sub(ticks_before);
    println!("waited {} ticks {}", waited, ticks);
    if second.token() == first.token() {
        return report("wait", "the same token twice");
    }
    if let Err(e) = client.unlock(&second).await {
        return report("wait", e);
    }
    true
}

/// Prints `error <step>: <error>`; `false`.
fn report(step: &str, error: impl core::fmt::Display) -> bool {
    println!("error {}: {}", step, error);
    false
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
    /// The Redlock client refused its settings.
    Client(redlock_embedded::Error),
}

impl core::fmt::Display for BootError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            BootError::Taken => f.write_str("booted twice"),
            BootError::Nic(e) => e.fmt(f),
            BootError::Client(e) => e.fmt(f),
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

/// The TCP client the Redlock client connects through: room for one
/// connection per server, with their buffers in a static.
fn tcp_client(stack: Stack<'static>) -> Result<&'static Tcp, BootError> {
    static STATE: StaticCell<TcpClientState<SERVERS, SOCKET_TX, SOCKET_RX>> = StaticCell::new();
    static CLIENT: StaticCell<Tcp> = StaticCell::new();
    let state = STATE
        .try_init(TcpClientState::new())
        .ok_or(BootError::Taken)?;
    let mut tcp = TcpClient::new(stack, state);
    // A connection that hears nothing for this long is reset.
    tcp.set_timeout(Some(STEP));
    CLIENT.try_init(tcp).map(|c| &*c).ok_or(BootError::Taken)
}

/// The Redlock client over the three servers, and its connector; their
/// buffers and links in statics.
fn redlock(
    tcp: &'static Tcp,
    clock: Clock,
    args: &Args,
) -> Result<(Redlock, Connector<'static, Tcp, SERVERS>), BootError> {
    static BUFFERS: StaticCell<ClientBuffers> = StaticCell::new();
    static LINKS: StaticCell<Links<Stream, SERVERS>> = StaticCell::new();
    let buffers = BUFFERS
        .try_init(ClientBuffers::new())
        .ok_or(BootError::Taken)?;
    let (client_links, connector_links) = LINKS
        .try_init(Links::new())
        .ok_or(BootError::Taken)?
        .split();
    let addrs = args
        .ports
        .map(|port| SocketAddr::V4(SocketAddrV4::new(Addressing::SLIRP.router, port)));
    let rng = ChaCha20Rng::from_seed(args.seed);
    let client = AsyncClient::new(
        client_links,
        clock,
        Delay,
        rng,
        redlock_embedded::Config::DEFAULT,
        [Credentials::NONE; SERVERS],
        buffers,
    )
    .map_err(BootError::Client)?;
    Ok((client, Connector::new(tcp, addrs, connector_links)))
}

/// Opens the Redlock client's connections, for as long as it runs.
#[embassy_executor::task]
async fn connect(mut connector: Connector<'static, Tcp, SERVERS>) -> ! {
    match connector.run().await {}
}
