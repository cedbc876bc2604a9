//! The gateway firmware (`platform-embedded/firmware`, binary `gateway`)
//! under QEMU `mps2-an386`, against three real `redis-server` processes on
//! the host: it takes a lock, proves it, holds it (while the host checks
//! that nobody else can take it), extends it and releases it; and its
//! lock/unlock latency next to the std client's. The embassy firmware
//! (binary `embassy`) takes the same lock with the async client, and shows
//! another task running while a lock call waits.
//!
//! QEMU is required: without `qemu-system-arm` these tests fail.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

use core::time::Duration;
use std::io::Read;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Instant;

use redlock_std::{Client, Error};
use redlock_tests::qemu::{Qemu, build_firmware, require_qemu};
use redlock_tests::{RedisServer, Value};

/// QEMU is killed after this long.
const LIMIT: Duration = Duration::from_secs(60);

/// The gateway's ELF, built once per test binary.
fn gateway() -> PathBuf {
    static ELF: OnceLock<PathBuf> = OnceLock::new();
    ELF.get_or_init(|| {
        require_qemu();
        build_firmware("gateway", &[])
    })
    .clone()
}

fn servers() -> Vec<RedisServer> {
    (0..3).map(|_| RedisServer::start().unwrap()).collect()
}

/// 64 hex digits from the OS: a fresh RNG seed for every run.
fn fresh_seed() -> String {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .expect("/dev/urandom");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn std_client(servers: &[RedisServer]) -> Client {
    Client::builder()
        .servers(servers.iter().map(|s| s.addr().to_string()))
        .build()
        .unwrap()
}

fn holder(server: &RedisServer, key: &str) -> Value {
    server
        .conn()
        .unwrap()
        .request(&[b"GET", key.as_bytes()])
        .unwrap()
}

/// A firmware's command line: ports, resource, hold, ttl, seed, and the
/// cycles (if any: the embassy firmware takes none).
fn append(servers: &[RedisServer], resource: &str, hold_ms: u64, cycles: usize) -> String {
    let ports: Vec<String> = servers.iter().map(|s| s.port().to_string()).collect();
    let mut line = format!(
        "{} {resource} {hold_ms} 10000 {}",
        ports.join(" "),
        fresh_seed()
    );
    if cycles > 0 {
        line.push_str(&format!(" {cycles}"));
    }
    line
}

/// Boots the gateway; see [`boot`].
fn run(
    servers: &[RedisServer],
    resource: &str,
    hold_ms: u64,
    cycles: usize,
    during_hold: impl FnMut(&[String]),
) -> (Vec<String>, bool, String) {
    boot(&gateway(), servers, resource, hold_ms, cycles, during_hold)
}

/// Boots the firmware `elf` and reads its console to the end, calling
/// `during_hold` once when it says `holding`; returns the lines, the exit
/// status and stderr.
fn boot(
    elf: &std::path::Path,
    servers: &[RedisServer],
    resource: &str,
    hold_ms: u64,
    cycles: usize,
    mut during_hold: impl FnMut(&[String]),
) -> (Vec<String>, bool, String) {
    let args = append(servers, resource, hold_ms, cycles);
    let mut qemu = Qemu::boot(elf, &args, LIMIT).expect("QEMU starts");
    let mut lines = Vec::new();
    while let Some(line) = qemu.next_line() {
        eprintln!("firmware: {line}");
        let holding = line.starts_with("holding ");
        lines.push(line);
        if holding {
            during_hold(&lines);
        }
    }
    let (status, stderr) = qemu.wait();
    (lines, status.success(), stderr)
}

/// The line that starts with `word `, split into its fields.
fn fields<'l>(lines: &'l [String], word: &str) -> Vec<&'l str> {
    lines
        .iter()
        .find(|l| l.split(' ').next() == Some(word))
        .unwrap_or_else(|| panic!("no `{word}` line in {lines:#?}"))
        .split(' ')
        .collect()
}

fn number(s: &str) -> u64 {
    s.parse()
        .unwrap_or_else(|_| panic!("`{s}` is not a number"))
}

/// While the firmware says it holds `resource`: the std client cannot
/// take it, and a majority holds the firmware's token.
fn held_by_the_firmware(s: &[RedisServer], resource: &str, lines: &[String]) {
    let token = fields(lines, "acquired")[2].to_string();
    let c = std_client(s);
    let other = c.try_lock(resource, Duration::from_secs(5));
    assert!(
        matches!(other, Err(Error::Conflict(_))),
        "the std client took the firmware's lock: {other:?}"
    );
    let holding = s
        .iter()
        .filter(|server| holder(server, resource) == Value::Bulk(token.clone().into_bytes()))
        .count();
    assert!(holding >= 2, "only {holding}/3 servers hold {token}");
}

/// The `acquired`, `proved` and `extended` lines of a 10 s lock on
/// `resource` held by all three servers.
fn lock_lines_check_out(lines: &[String], resource: &str) {
    let acquired = fields(lines, "acquired");
    assert_eq!(acquired.len(), 4, "{acquired:?}");
    assert_eq!(acquired[1], resource);
    let token = acquired[2];
    assert_eq!(token.len(), 40, "{token}");
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{token}");
    let validity = number(acquired[3]);
    assert!((9_000..=10_000).contains(&validity), "validity {validity}");
    assert_eq!(fields(lines, "proved"), ["proved", "3/3"]);
    let extended = number(fields(lines, "extended")[1]);
    assert!((9_000..=10_000).contains(&extended), "extended {extended}");
}

#[test]
fn gateway_acquires_proves_holds_extends_and_releases_a_lock() {
    let s = servers();
    let resource = "firmware-gateway";
    let mut checked = false;
    let (lines, ok, stderr) = run(&s, resource, 3000, 0, |lines| {
        held_by_the_firmware(&s, resource, lines);
        checked = true;
    });
    assert!(ok, "the gateway failed: {lines:#?}\nQEMU stderr: {stderr}");
    assert!(checked, "the firmware never said `holding`: {lines:#?}");

    // The steps, in order, with their formats.
    let words: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.split(' ').next())
        .filter(|w| {
            [
                "acquired", "proved", "holding", "extended", "released", "stack",
            ]
            .contains(w)
        })
        .collect();
    assert_eq!(
        words,
        [
            "acquired", "proved", "holding", "extended", "released", "stack"
        ],
        "{lines:#?}"
    );
    assert!(!lines.iter().any(|l| l.starts_with("error")), "{lines:#?}");
    lock_lines_check_out(&lines, resource);
    assert_eq!(fields(&lines, "holding"), ["holding", "3000"]);
    let stack = number(fields(&lines, "stack")[1]);
    assert!(stack > 0 && stack < 64 * 1024, "stack {stack}");

    // Released everywhere.
    for server in &s {
        assert_eq!(holder(server, resource), Value::Nil);
    }
}

/// Percentile (nearest rank) of `values`, in microseconds.
fn percentile(values: &mut [u64], p: usize) -> u64 {
    values.sort_unstable();
    let rank = (values.len() * p).div_ceil(100).max(1);
    values[rank - 1]
}

#[test]
fn gateway_latency_next_to_the_std_client() {
    const CYCLES: usize = 100;
    let s = servers();
    let resource = "firmware-latency";
    let (lines, ok, stderr) = run(&s, resource, 0, CYCLES, |_| {});
    assert!(ok, "the gateway failed: {lines:#?}\nQEMU stderr: {stderr}");
    let latency = fields(&lines, "latency");
    let value = |name: &str| {
        latency
            .iter()
            .find_map(|f| f.strip_prefix(&format!("{name}=")))
            .map(number)
            .unwrap_or_else(|| panic!("no {name} in {latency:?}"))
    };
    let firmware = [
        value("acquire_p50_us"),
        value("acquire_p99_us"),
        value("release_p50_us"),
        value("release_p99_us"),
    ];
    assert_eq!(value("cycles"), CYCLES as u64);

    // The std client over the same servers, on the same resource name.
    let c = std_client(&s);
    let bench = format!("{resource}:bench");
    let warm = c.lock(&bench, Duration::from_secs(10)).unwrap();
    c.unlock(&warm).unwrap();
    let (mut acquire, mut release) = (Vec::new(), Vec::new());
    for _ in 0..CYCLES {
        let t0 = Instant::now();
        let lock = c.lock(&bench, Duration::from_secs(10)).unwrap();
        let t1 = Instant::now();
        c.unlock(&lock).unwrap();
        let t2 = Instant::now();
        acquire.push(u64::try_from((t1 - t0).as_micros()).unwrap());
        release.push(u64::try_from((t2 - t1).as_micros()).unwrap());
    }
    let host = [
        percentile(&mut acquire, 50),
        percentile(&mut acquire, 99),
        percentile(&mut release, 50),
        percentile(&mut release, 99),
    ];
    eprintln!(
        "latency over 3 local servers, {CYCLES} lock+unlock cycles (us):\n\
         {:<34} {:>12} {:>12} {:>12} {:>12}\n\
         {:<34} {:>12} {:>12} {:>12} {:>12}\n\
         {:<34} {:>12} {:>12} {:>12} {:>12}",
        "client",
        "acquire p50",
        "acquire p99",
        "release p50",
        "release p99",
        "gateway (QEMU mps2-an386, smoltcp)",
        firmware[0],
        firmware[1],
        firmware[2],
        firmware[3],
        "redlock-std (host)",
        host[0],
        host[1],
        host[2],
        host[3],
    );
}

/// The gateway's lock cycles through fault proxies, two of which swallow
/// one `SET` each on a live connection: the firmware's sessions find both
/// connections out of step and replace them, and every cycle completes
/// (without the probe, two connections out of step for ever leave no
/// majority, and the gateway fails).
#[test]
fn gateway_recovers_from_requests_lost_on_live_connections() {
    use redlock_tests::proxy::{Fault, FaultProxy};
    let s = servers();
    let proxies: Vec<FaultProxy> = s
        .iter()
        .map(|server| FaultProxy::start(server.addr()).unwrap())
        .collect();
    let elf = gateway();
    let ports: Vec<String> = proxies
        .iter()
        .map(|p| p.addr().port().to_string())
        .collect();
    let args = format!(
        "{} firmware-lost 0 10000 {} 100",
        ports.join(" "),
        fresh_seed()
    );
    let mut qemu = Qemu::boot(&elf, &args, LIMIT).expect("QEMU starts");
    let mut lines = Vec::new();
    while let Some(line) = qemu.next_line() {
        eprintln!("firmware: {line}");
        if line.split(' ').next() == Some("released") {
            // The latency cycles start now: a SET lost on servers 0 and 1.
            proxies[0].set(Fault::Swallow(b"SET"));
            proxies[1].set(Fault::Swallow(b"SET"));
        }
        lines.push(line);
    }
    let (status, stderr) = qemu.wait();
    assert!(
        status.success(),
        "the gateway failed: {lines:#?}\nQEMU stderr: {stderr}"
    );
    assert_eq!(fields(&lines, "latency").last(), Some(&"cycles=100"));
    for (i, p) in proxies.iter().take(2).enumerate() {
        assert_eq!(p.fault(), Fault::Pass, "server {i} lost a SET");
        assert!(p.accepted() >= 2, "server {i} was reconnected");
    }
    assert_eq!(proxies[2].accepted(), 1);
}

/// The embassy firmware (binary `embassy`, feature `embassy`): on
/// embassy's executor, its time driver and embassy-net over the LAN9118,
/// the async client takes, proves, holds (checked from here), extends and
/// releases a lock; then a lock call waits on a held resource while a
/// second task counts milliseconds.
#[test]
fn embassy_firmware_locks_holds_extends_releases_and_its_ticker_runs_while_a_lock_call_waits() {
    require_qemu();
    let elf = build_firmware("embassy", &["embassy"]);
    let servers = servers();
    let resource = "firmware-embassy";

    let mut checked = false;
    let (lines, ok, stderr) = boot(&elf, &servers, resource, 2000, 0, |lines| {
        held_by_the_firmware(&servers, resource, lines);
        checked = true;
    });
    assert!(
        ok,
        "the embassy firmware failed: {lines:#?}\nQEMU stderr: {stderr}"
    );
    assert!(checked, "the firmware never said `holding`: {lines:#?}");
    assert!(!lines.iter().any(|l| l.starts_with("error")), "{lines:#?}");
    assert_eq!(fields(&lines, "args"), ["args", resource, "2000", "10000"]);
    assert_eq!(fields(&lines, "nic")[1], "0x01180001", "{lines:#?}");
    let words: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.split(' ').next())
        .filter(|w| {
            [
                "connected",
                "acquired",
                "proved",
                "holding",
                "extended",
                "released",
                "waited",
                "stack",
            ]
            .contains(w)
        })
        .collect();
    assert_eq!(
        words,
        [
            "connected",
            "acquired",
            "proved",
            "holding",
            "extended",
            "released",
            "waited",
            "stack"
        ],
        "{lines:#?}"
    );
    assert_eq!(fields(&lines, "connected"), ["connected", "3/3"]);
    lock_lines_check_out(&lines, resource);
    // Released everywhere, the waiting step's lock too.
    for server in &servers {
        assert_eq!(holder(server, resource), Value::Nil);
        assert_eq!(holder(server, "embassy-wait"), Value::Nil);
    }
    // The lock call waited for the first holder's 800 ms ttl, and the
    // ticker ran meanwhile: a 1 ms ticker counts about one per millisecond
    // (at least half are asked for, to allow for a busy host).
    let waited = fields(&lines, "waited");
    assert_eq!(waited.len(), 4, "{waited:?}");
    assert_eq!(waited[2], "ticks");
    let (ms, ticks) = (number(waited[1]), number(waited[3]));
    assert!(ms >= 500, "the lock call waited only {ms} ms: {lines:#?}");
    assert!(
        ticks * 2 >= ms,
        "{ticks} ticks in the {ms} ms the lock call waited: {lines:#?}"
    );
    let stack = number(fields(&lines, "stack")[1]);
    assert!(stack > 0 && stack < 64 * 1024, "stack {stack}");
}
