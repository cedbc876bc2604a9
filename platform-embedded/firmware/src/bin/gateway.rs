//! The gateway: takes a Redlock on three Redis servers from a Cortex-M4F
//! over smoltcp, proves it holds it, holds it, extends it, releases it,
//! optionally measures lock/unlock latency, and reports its stack use.
//!
//! Arguments (QEMU `-append`, see the README): `PORT PORT PORT RESOURCE
//! HOLD_MS TTL_MS SEED [CYCLES]`; the servers are 10.0.2.2:PORT (the host's
//! 127.0.0.1 under QEMU's user-mode networking). One line per step on the
//! semihosting console; exit 0 only if every step checked out.

#![no_std]
#![no_main]

use core::mem::MaybeUninit;

use chacha20::ChaCha20Rng;
use cortex_m::singleton;
use cortex_m_rt::{entry, exception};
use rand_core::SeedableRng;
use redlock_embedded::{Client, Config, Credentials, Duration, Error, Instant, Lock};
use redlock_firmware::clock::{self, Clock};
use redlock_firmware::console::{exit, println};
use redlock_firmware::lan9118::{Lan9118, ProbeError};
use redlock_firmware::net::{Addressing, Gateway, Nic, SocketBuffers};
use redlock_firmware::{cmdline, stack};
use smoltcp::iface::SocketStorage;
use smoltcp::wire::{IpAddress, IpEndpoint};

/// Servers: three, a majority of two.
const SERVERS: usize = 3;
/// Reply buffer per server: holds the handshake's `INFO server` (~600 B).
const IN: usize = 1024;
/// Request buffer per server: holds the largest `SCRIPT LOAD`.
const OUT: usize = 512;
/// smoltcp receive and send buffers per socket: the client reads replies
/// as they come, so the receive window need not hold a whole reply.
const SOCKET_RX: usize = 256;
const SOCKET_TX: usize = 192;
/// The most latency cycles measured in one run.
const MAX_CYCLES: usize = 100;

/// The sockets' buffers.
type Buffers = [SocketBuffers<SOCKET_RX, SOCKET_TX>; SERVERS];

/// The client's per-server buffers and connection state.
type ClientBuffers = redlock_embedded::Buffers<SERVERS, IN, OUT>;

/// The client, over the smoltcp gateway.
type Redlock<'n> =
    Client<'static, &'n mut Gateway<'n, SERVERS>, Clock, ChaCha20Rng, SERVERS, IN, OUT>;

#[exception]
fn SysTick() {
    clock::tick();
}

/// The run-time arguments.
type Args = cmdline::Args<SERVERS>;

/// Prints `error <step>: <error>` and exits 1.
fn fail(step: &str, error: impl core::fmt::Display) -> ! {
    println!("error {}: {}", step, error);
    exit(false)
}

#[entry]
fn main() -> ! {
    stack::paint();
    let args = match cmdline::args(MAX_CYCLES) {
        Ok(args) => args,
        Err(why) => fail("args", why),
    };
    let client = match boot(&args) {
        Ok(client) => client,
        Err(why) => fail("boot", why),
    };
    // Booting takes the most stack (`Client::new` returns the client by
    // value, with temporaries); the steps are measured on their own.
    let boot_stack = stack::high_water();
    stack::paint();
    let ok = run(client, &args);
    client.net_mut().shutdown(Duration::from_millis(200));
    let run_stack = stack::high_water();
    println!("stack_phases boot={} run={}", boot_stack, run_stack);
    println!("stack {}", boot_stack.max(run_stack));
    exit(ok)
}

/// Brings up the clock, the NIC, the interface and the client, the
/// long-lived parts in statics (so that they are counted once, in .bss,
/// and their construction's temporaries leave the stack again).
#[inline(never)]
fn boot(args: &Args) -> Result<&'static mut Redlock<'static>, BootError> {
    let mut core = cortex_m::Peripherals::take().ok_or(BootError::Taken)?;
    let clock = Clock::start(&mut core.SYST);
    let lan = Lan9118::probe().map_err(BootError::Nic)?;
    let servers = args
        .ports
        .map(|p| IpEndpoint::new(IpAddress::v4(10, 0, 2, 2), p));
    let storage = singleton!(: [SocketStorage<'static>; SERVERS] = [SocketStorage::EMPTY; SERVERS])
        .ok_or(BootError::Taken)?;
    let buffers = singleton!(: Buffers = [const { SocketBuffers::new() }; SERVERS])
        .ok_or(BootError::Taken)?;
    let net = singleton!(: MaybeUninit<Gateway<'static, SERVERS>> = MaybeUninit::uninit())
        .ok_or(BootError::Taken)?;
    let net = net.write(gateway(lan, clock, servers, storage, buffers));
    let rng = ChaCha20Rng::from_seed(args.seed);
    // Built in place: `client` returns straight into the static's slot.
    let slot = singleton!(: MaybeUninit<Result<Redlock<'static>, Error>> = MaybeUninit::uninit())
        .ok_or(BootError::Taken)?;
    // The client's per-server buffers and state: a static, set up at
    // compile time, never copied.
    let state = singleton!(: ClientBuffers = ClientBuffers::new()).ok_or(BootError::Taken)?;
    let client = client(slot, net, clock, rng, state);
    client.as_mut().map_err(|e| BootError::Client(e.clone()))
}

/// The network (its own function, so that it returns into its static).
#[inline(never)]
fn gateway(
    lan: Lan9118,
    clock: Clock,
    servers: [IpEndpoint; SERVERS],
    storage: &'static mut [SocketStorage<'static>; SERVERS],
    buffers: &'static mut Buffers,
) -> Gateway<'static, SERVERS> {
    Gateway::new(
        Nic::new(lan),
        clock,
        Addressing::SLIRP,
        servers,
        storage,
        buffers,
    )
}

/// The client, built into `slot` (its own function, so that the
/// temporaries of its construction are one frame that ends).
#[inline(never)]
fn client(
    slot: &'static mut MaybeUninit<Result<Redlock<'static>, Error>>,
    net: &'static mut Gateway<'static, SERVERS>,
    clock: Clock,
    rng: ChaCha20Rng,
    state: &'static mut ClientBuffers,
) -> &'static mut Result<Redlock<'static>, Error> {
    let creds = [Credentials::NONE; SERVERS];
    slot.write(Client::new(net, clock, rng, Config::DEFAULT, creds, state))
}

/// Why the board did not come up.
enum BootError {
    Taken,
    Nic(ProbeError),
    Client(Error),
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

/// The steps; `false` after printing an `error` line.
fn run(client: &mut Redlock<'_>, args: &Args) -> bool {
    let ready = client.connect();
    println!("connected {}/{}", ready, SERVERS);
    let Some(mut lock) = acquire(client, args) else {
        return false;
    };
    if !prove(client, &lock) {
        return false;
    }
    // 3. Hold, keeping the network going.
    println!("holding {}", args.hold_ms);
    let until = client.now().saturating_add(args.hold());
    client.net_mut().idle_until(until);
    // 4. Extend.
    if !extend(client, &mut lock, args.ttl()) {
        return false;
    }
    // 5. Release.
    if !release(client, &lock) {
        return false;
    }
    // 6. Latency.
    if args.cycles > 0 {
        return latency(client, args);
    }
    true
}

/// 1. Acquire, and print the token and validity.
#[inline(never)]
fn acquire<'r>(client: &mut Redlock<'_>, args: &'r Args) -> Option<Lock<'r>> {
    match client.lock(args.resource.as_bytes(), args.ttl()) {
        Ok(lock) => {
            println!(
                "acquired {} {} {}",
                args.resource,
                token(&lock),
                lock.validity().as_millis()
            );
            Some(lock)
        }
        Err(e) => {
            report("acquire", e);
            None
        }
    }
}

fn token<'l>(lock: &'l Lock<'_>) -> &'l str {
    core::str::from_utf8(lock.token().as_bytes()).unwrap_or("?")
}

/// 2. Prove: a majority holds our token.
#[inline(never)]
fn prove(client: &mut Redlock<'_>, lock: &Lock<'_>) -> bool {
    let result = client.inspect(lock.resource());
    let inspection = match &result {
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
    true
}

/// 4. Extend to a fresh ttl.
#[inline(never)]
fn extend(client: &mut Redlock<'_>, lock: &mut Lock<'_>, ttl: Duration) -> bool {
    if let Err(e) = client.extend(lock, ttl) {
        return report("extend", e);
    }
    println!("extended {}", lock.validity().as_millis());
    true
}

/// 5. Release.
#[inline(never)]
fn release(client: &mut Redlock<'_>, lock: &Lock<'_>) -> bool {
    if let Err(e) = client.unlock(lock) {
        return report("release", e);
    }
    println!("released");
    true
}

/// 6. Lock+unlock cycles on `<resource>:bench`, each call timed.
#[inline(never)]
fn latency(client: &mut Redlock<'_>, args: &Args) -> bool {
    let mut name = heapless::String::<{ cmdline::RESOURCE + 6 }>::new();
    if name.push_str(&args.resource).is_err() || name.push_str(":bench").is_err() {
        return report("latency", "resource name too long");
    }
    let resource = name.as_bytes();
    // 16-bit samples (a call over 65.5 ms counts as 65,535 µs): they are on
    // the stack while the client runs, within the RAM budget.
    let mut acquire = [0u16; MAX_CYCLES];
    let mut release = [0u16; MAX_CYCLES];
    let n = args.cycles.min(MAX_CYCLES);
    for k in 0..n {
        let t0 = client.now();
        let lock = match client.lock(resource, args.ttl()) {
            Ok(lock) => lock,
            Err(e) => return report("latency", e),
        };
        let t1 = client.now();
        if let Err(e) = client.unlock(&lock) {
            return report("latency", e);
        }
        let t2 = client.now();
        acquire[k] = micros(t0, t1);
        release[k] = micros(t1, t2);
    }
    let (acquire, release) = (&mut acquire[..n], &mut release[..n]);
    sort(acquire);
    sort(release);
    println!(
        "latency acquire_p50_us={} acquire_p99_us={} release_p50_us={} release_p99_us={} cycles={}",
        percentile(acquire, 50),
        percentile(acquire, 99),
        percentile(release, 50),
        percentile(release, 99),
        n
    );
    true
}

/// Insertion sort: a few hundred bytes of flash less than `sort_unstable`,
/// and at most 100 values.
fn sort(values: &mut [u16]) {
    for i in 1..values.len() {
        let mut j = i;
        while j > 0 && values[j - 1] > values[j] {
            values.swap(j - 1, j);
            j -= 1;
        }
    }
}

fn micros(from: Instant, to: Instant) -> u16 {
    u16::try_from(to.saturating_duration_since(from).as_micros()).unwrap_or(u16::MAX)
}

/// The `p`th percentile of sorted `values` (nearest rank).
fn percentile(values: &[u16], p: usize) -> u16 {
    let rank = (values.len() * p).div_ceil(100).max(1);
    values.get(rank - 1).copied().unwrap_or(0)
}

/// Prints `error <step>: <error>`; `false`.
fn report(step: &str, error: impl core::fmt::Display) -> bool {
    println!("error {}: {}", step, error);
    false
}
