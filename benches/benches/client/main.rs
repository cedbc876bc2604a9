//! Client-level benchmarks: lock + unlock latency, client CPU time and
//! 16-thread throughput of `redlock-std` next to the `rslock` and `redlock`
//! crates and a minimal raw-socket "floor", all against the same five real
//! `redis-server` processes on 127.0.0.1, which this bench starts (and stops
//! when it ends).
//!
//! Run with `cargo bench -p redlock-benches --bench client`. The results are
//! markdown tables on stdout; progress goes to stderr. `benches/README.md`
//! describes what each implementation does per cycle.
//!
//! Smaller runs (smoke tests): `CLIENT_BENCH_CYCLES` (measured cycles per
//! implementation, default 40,000) and `CLIENT_BENCH_SECS` (seconds per
//! throughput run, default 4). `CLIENT_BENCH_ONLY=throughput` runs only the
//! distinct-resource throughput of ours and rslock (for quick comparisons
//! while working on the client).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use core::net::SocketAddr;
use core::sync::atomic::{AtomicU64, Ordering};
use core::time::Duration;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Barrier;
use std::time::Instant;

use redlock_resp::{Arg, Reply, Status, encode, parse_reply, script::RELEASE};
use redlock_tests::RedisServer;

/// Redis masters (quorum 3).
const SERVERS: usize = 5;
/// The ttl of every lock.
const TTL: Duration = Duration::from_secs(10);
const TTL_MS: u64 = 10_000;
/// Unmeasured cycles per implementation before the measured ones.
const WARMUP: usize = 2_000;
/// The measured cycles are split into this many rounds; within a round the
/// implementations take turns (in a rotating order), so that a slow minute
/// of the shared machine hits all of them alike.
const ROUNDS: usize = 4;
/// Threads (tasks for rslock) in the throughput runs.
const THREADS: usize = 16;

/// One acquire + release pair of timings, in nanoseconds, and the client
/// CPU time spent around them.
#[derive(Debug, Default)]
struct Samples {
    acquire: Vec<u64>,
    release: Vec<u64>,
    /// Acquires that did not get the lock, and releases that reported an error.
    failures: u64,
    /// user + sys CPU of the process, in clock ticks (1/100 s).
    cpu_ticks: u64,
    /// Context switches of the measuring thread (voluntary + involuntary).
    switches: u64,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// An implementation measured one cycle after another on one thread.
trait Latency {
    fn name(&self) -> &'static str;
    /// `n` cycles of acquire + release of `resource`, timings into `out`.
    fn cycles(&mut self, resource: &[u8], n: usize, out: &mut Samples);
}

/// `redlock_std::Client`: `try_lock` + `unlock`.
struct Ours(redlock_std::Client);

impl Latency for Ours {
    fn name(&self) -> &'static str {
        "ours"
    }

    fn cycles(&mut self, resource: &[u8], n: usize, out: &mut Samples) {
        for _ in 0..n {
            let t0 = Instant::now();
            let lock = self.0.try_lock(resource, TTL);
            out.acquire.push(nanos(t0.elapsed()));
            match lock {
                Ok(lock) => {
                    let t0 = Instant::now();
                    let released = self.0.unlock(&lock);
                    out.release.push(nanos(t0.elapsed()));
                    if released.is_err() {
                        out.failures += 1;
                    }
                }
                Err(_) => out.failures += 1,
            }
        }
    }
}

/// `rslock::LockManager` (tokio, one multiplexed connection per server):
/// `lock` + `unlock`, all cycles in one task on a current-thread runtime.
struct Rslock {
    rt: tokio::runtime::Runtime,
    manager: rslock::LockManager,
}

impl Rslock {
    fn manager(urls: &[String]) -> rslock::LockManager {
        let mut manager = rslock::LockManager::new(urls.to_vec());
        // One attempt, like `try_lock` (the default retries after a random
        // sleep of up to 200 ms).
        manager.set_retry(1, Duration::from_millis(1));
        manager
    }
}

impl Latency for Rslock {
    fn name(&self) -> &'static str {
        "rslock"
    }

    fn cycles(&mut self, resource: &[u8], n: usize, out: &mut Samples) {
        let manager = &self.manager;
        self.rt.block_on(async {
            for _ in 0..n {
                let t0 = Instant::now();
                let lock = manager.lock(resource, TTL).await;
                out.acquire.push(nanos(t0.elapsed()));
                match lock {
                    Ok(lock) => {
                        let t0 = Instant::now();
                        manager.unlock(&lock).await;
                        out.release.push(nanos(t0.elapsed()));
                    }
                    Err(_) => out.failures += 1,
                }
            }
        });
    }
}

/// `redlock::RedLock` (redis-rs, blocking): `lock` + `unlock`.
struct Redlock(redlock::RedLock);

impl Redlock {
    fn new(urls: &[String]) -> Redlock {
        let mut rl = redlock::RedLock::new(urls.to_vec());
        // One attempt (a failed one sleeps `0..1` ms, that is 0).
        rl.set_retry(1, 1);
        Redlock(rl)
    }
}

impl Latency for Redlock {
    fn name(&self) -> &'static str {
        "redlock"
    }

    fn cycles(&mut self, resource: &[u8], n: usize, out: &mut Samples) {
        for _ in 0..n {
            let t0 = Instant::now();
            let lock = self.0.lock(resource, usize::try_from(TTL_MS).unwrap());
            out.acquire.push(nanos(t0.elapsed()));
            match lock {
                Ok(Some(lock)) => {
                    let t0 = Instant::now();
                    self.0.unlock(&lock);
                    out.release.push(nanos(t0.elapsed()));
                }
                _ => out.failures += 1,
            }
        }
    }
}

/// One blocking connection of the floor client.
struct FloorConn {
    stream: TcpStream,
    inbuf: [u8; 512],
    len: usize,
}

impl FloorConn {
    fn connect(addr: SocketAddr) -> FloorConn {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_nodelay(true).unwrap();
        FloorConn {
            stream,
            inbuf: [0; 512],
            len: 0,
        }
    }

    /// Reads until one reply parses and hands it to `f`.
    fn read_reply<R>(&mut self, f: impl FnOnce(Reply<'_>) -> R) -> R {
        loop {
            if let Status::Complete((reply, used)) =
                parse_reply(&self.inbuf[..self.len]).expect("a reply that parses")
            {
                let r = f(reply);
                self.inbuf.copy_within(used..self.len, 0);
                self.len -= used;
                return r;
            }
            let n = self.stream.read(&mut self.inbuf[self.len..]).unwrap();
            assert!(n > 0, "server closed the connection");
            self.len += n;
        }
    }
}

/// The floor: what one lock round-trip costs on the wire, with as little
/// client as possible. Five blocking `TcpStream`s (`TCP_NODELAY`); acquire
/// writes `SET key token NX PX ttl` to all five, then reads the five replies;
/// release does the same with `EVALSHA` of the release script, on all five
/// servers (also after a failed acquire, as the three clients do). Tokens are
/// a counter, not random bytes; no validity arithmetic, no timeouts.
struct Floor {
    conns: Vec<FloorConn>,
    buf: [u8; 256],
    id: u64,
    seq: u64,
}

impl Floor {
    fn connect(addrs: &[SocketAddr], id: u64) -> Floor {
        let mut conns: Vec<FloorConn> = addrs.iter().map(|&a| FloorConn::connect(a)).collect();
        let mut buf = [0u8; 256];
        let n = encode::script_load(&mut buf, RELEASE.source.as_bytes()).unwrap();
        for c in &mut conns {
            c.stream.write_all(&buf[..n]).unwrap();
            let sha = c.read_reply(|r| r.as_bytes().map(<[u8]>::to_vec));
            assert_eq!(sha.as_deref(), Some(RELEASE.sha1.as_bytes()));
        }
        Floor {
            conns,
            buf,
            id,
            seq: 0,
        }
    }

    /// A 40-hex-digit token: the floor's id and a counter.
    fn next_token(&mut self) -> [u8; 40] {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        self.seq += 1;
        let mut t = [b'0'; 40];
        for (i, shift) in (0..16).rev().map(|k| k * 4).enumerate() {
            t[8 + i] = HEX[usize::try_from((self.id >> shift) & 0xf).unwrap()];
            t[24 + i] = HEX[usize::try_from((self.seq >> shift) & 0xf).unwrap()];
        }
        t
    }

    /// `SET NX PX` on every server; the number of servers that said `+OK`.
    fn acquire(&mut self, resource: &[u8], token: &[u8]) -> usize {
        let n = encode::set_nx_px(&mut self.buf, resource, token, TTL_MS).unwrap();
        for c in &mut self.conns {
            c.stream.write_all(&self.buf[..n]).unwrap();
        }
        self.conns
            .iter_mut()
            .map(|c| c.read_reply(|r| r.is_ok()))
            .filter(|&ok| ok)
            .count()
    }

    /// `EVALSHA` of the release script on every server; how many deleted.
    fn release(&mut self, resource: &[u8], token: &[u8]) -> usize {
        let n = encode::evalsha_script(&mut self.buf, &RELEASE, &[resource], &[Arg::Bytes(token)])
            .unwrap();
        for c in &mut self.conns {
            c.stream.write_all(&self.buf[..n]).unwrap();
        }
        self.conns
            .iter_mut()
            .map(|c| c.read_reply(|r| r.as_integer() == Some(1)))
            .filter(|&ok| ok)
            .count()
    }

    /// One try: acquire, and release (on every server) whether or not a
    /// majority said yes.
    fn cycle(&mut self, resource: &[u8]) -> Outcome {
        let token = self.next_token();
        let won = self.acquire(resource, &token) > SERVERS / 2;
        self.release(resource, &token);
        if won { Outcome::Ok } else { Outcome::Conflict }
    }
}

impl Latency for Floor {
    fn name(&self) -> &'static str {
        "floor"
    }

    fn cycles(&mut self, resource: &[u8], n: usize, out: &mut Samples) {
        for _ in 0..n {
            let token = self.next_token();
            let t0 = Instant::now();
            let votes = self.acquire(resource, &token);
            out.acquire.push(nanos(t0.elapsed()));
            let t0 = Instant::now();
            self.release(resource, &token);
            if votes > SERVERS / 2 {
                out.release.push(nanos(t0.elapsed()));
            } else {
                out.failures += 1;
            }
        }
    }
}

/// user + sys CPU time of this process so far, in clock ticks
/// (`/proc/self/stat` fields 14 and 15; 100 ticks per second on Linux).
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // Fields after the command name, which is in parentheses: state is field 3.
    let rest = &stat[stat.rfind(')').unwrap() + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

const TICKS_PER_SEC: f64 = 100.0;

/// Voluntary + involuntary context switches of the calling thread so far
/// (`/proc/thread-self/status`). Every implementation's latency cycles run on
/// the main thread (rslock's on a current-thread runtime).
fn context_switches() -> u64 {
    std::fs::read_to_string("/proc/thread-self/status")
        .unwrap()
        .lines()
        .filter(|l| l.contains("ctxt_switches:"))
        .map(|l| l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap())
        .sum()
}

/// The result of one try in a throughput run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Ok,
    Conflict,
    Error,
}

/// Counts of a throughput run.
#[derive(Debug, Default, Clone, Copy)]
struct Tp {
    ok: u64,
    conflict: u64,
    error: u64,
    secs: f64,
}

impl Tp {
    fn add(&mut self, o: Outcome) {
        match o {
            Outcome::Ok => self.ok += 1,
            Outcome::Conflict => self.conflict += 1,
            Outcome::Error => self.error += 1,
        }
    }

    fn per_sec(&self, n: u64) -> f64 {
        n as f64 / self.secs
    }
}

/// The key a thread locks: its own (`distinct`) or one for all (contended).
fn tp_resource(name: &str, contended: bool, thread: usize) -> Vec<u8> {
    if contended {
        format!("bench:hot:{name}").into_bytes()
    } else {
        format!("bench:tp:{name}:{thread}").into_bytes()
    }
}

/// Runs `cycle` on `THREADS` threads (one state each) for `secs`.
fn tp_threads<S: Send>(
    name: &str,
    contended: bool,
    secs: f64,
    states: Vec<S>,
    cycle: impl Fn(&mut S, &[u8]) -> Outcome + Sync,
) -> Tp {
    let barrier = Barrier::new(THREADS + 1);
    let total = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];
    let run = Duration::from_secs_f64(secs);
    let elapsed = std::thread::scope(|s| {
        for (i, mut state) in states.into_iter().enumerate() {
            let (barrier, total, cycle) = (&barrier, &total, &cycle);
            s.spawn(move || {
                let resource = tp_resource(name, contended, i);
                // Connect and warm up outside the measurement.
                for _ in 0..50 {
                    cycle(&mut state, &resource);
                }
                let mut tp = Tp::default();
                barrier.wait();
                let deadline = Instant::now() + run;
                while Instant::now() < deadline {
                    tp.add(cycle(&mut state, &resource));
                }
                total[0].fetch_add(tp.ok, Ordering::Relaxed);
                total[1].fetch_add(tp.conflict, Ordering::Relaxed);
                total[2].fetch_add(tp.error, Ordering::Relaxed);
            });
        }
        barrier.wait();
        Instant::now()
    })
    .elapsed();
    Tp {
        ok: total[0].load(Ordering::Relaxed),
        conflict: total[1].load(Ordering::Relaxed),
        error: total[2].load(Ordering::Relaxed),
        secs: elapsed.as_secs_f64(),
    }
}

/// `THREADS` tasks on `rt`, each looping on `manager` for `secs`.
fn tp_rslock(
    rt: &tokio::runtime::Runtime,
    manager: &rslock::LockManager,
    name: &str,
    contended: bool,
    secs: f64,
) -> Tp {
    rt.block_on(async {
        // Connect and warm up outside the measurement.
        for _ in 0..50 {
            rslock_cycle(manager, b"bench:warmup").await;
        }
        let start = Instant::now();
        let deadline = start + Duration::from_secs_f64(secs);
        let tasks: Vec<_> = (0..THREADS)
            .map(|i| {
                let manager = manager.clone();
                let resource = tp_resource(name, contended, i);
                tokio::spawn(async move {
                    let mut tp = Tp::default();
                    while Instant::now() < deadline {
                        tp.add(rslock_cycle(&manager, &resource).await);
                    }
                    tp
                })
            })
            .collect();
        let mut total = Tp::default();
        for t in tasks {
            let tp = t.await.unwrap();
            total.ok += tp.ok;
            total.conflict += tp.conflict;
            total.error += tp.error;
        }
        total.secs = start.elapsed().as_secs_f64();
        total
    })
}

async fn rslock_cycle(manager: &rslock::LockManager, resource: &[u8]) -> Outcome {
    match manager.lock(resource, TTL).await {
        Ok(lock) => {
            manager.unlock(&lock).await;
            Outcome::Ok
        }
        Err(rslock::LockError::Unavailable) => Outcome::Conflict,
        Err(_) => Outcome::Error,
    }
}

fn ours_cycle(client: &redlock_std::Client, resource: &[u8]) -> Outcome {
    match client.try_lock(resource, TTL) {
        Ok(lock) => match client.unlock(&lock) {
            Ok(_) => Outcome::Ok,
            Err(_) => Outcome::Error,
        },
        Err(redlock_std::Error::Conflict(_)) => Outcome::Conflict,
        Err(_) => Outcome::Error,
    }
}

fn redlock_cycle(rl: &redlock::RedLock, resource: &[u8]) -> Outcome {
    match rl.lock(resource, usize::try_from(TTL_MS).unwrap()) {
        Ok(Some(lock)) => {
            rl.unlock(&lock);
            Outcome::Ok
        }
        Ok(None) => Outcome::Conflict,
        Err(_) => Outcome::Error,
    }
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn env_or(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Nearest-rank percentile of sorted samples.
fn pct(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

#[derive(Debug)]
struct LatencyRow {
    name: &'static str,
    /// p50, p99, p99.9, mean of acquire, in ns.
    acquire: [u64; 4],
    release: [u64; 4],
    failures: u64,
    /// CPU seconds per 1000 cycles.
    cpu: f64,
    /// Context switches per cycle.
    switches: f64,
}

fn summarize(name: &'static str, mut s: Samples) -> LatencyRow {
    let stats = |v: &mut Vec<u64>| {
        v.sort_unstable();
        let mean = v.iter().sum::<u64>() / u64::try_from(v.len().max(1)).unwrap();
        [pct(v, 0.50), pct(v, 0.99), pct(v, 0.999), mean]
    };
    let cycles = s.acquire.len();
    LatencyRow {
        name,
        acquire: stats(&mut s.acquire),
        release: stats(&mut s.release),
        failures: s.failures,
        cpu: s.cpu_ticks as f64 / TICKS_PER_SEC / cycles as f64 * 1000.0,
        switches: s.switches as f64 / cycles as f64,
    }
}

fn main() {
    let cycles = env_or("CLIENT_BENCH_CYCLES", 40_000.0) as usize;
    let secs = env_or("CLIENT_BENCH_SECS", 4.0);
    let per_round = cycles.div_ceil(ROUNDS);
    let warmup = WARMUP.min(cycles);

    eprintln!("starting {SERVERS} redis-server processes");
    let servers: Vec<RedisServer> = (0..SERVERS)
        .map(|_| RedisServer::start().expect("redis-server"))
        .collect();
    let addrs: Vec<SocketAddr> = servers.iter().map(RedisServer::addr).collect();
    let urls: Vec<String> = addrs.iter().map(|a| format!("redis://{a}/")).collect();

    let ours = redlock_std::Client::builder()
        .servers(&urls)
        .build()
        .expect("client");
    if std::env::var("CLIENT_BENCH_ONLY").as_deref() == Ok("throughput") {
        for run in 1..=3 {
            let tp = tp_threads("ours", false, secs, vec![(); THREADS], |(), r| {
                ours_cycle(&ours, r)
            });
            let rt = current_thread();
            let manager = Rslock::manager(&urls);
            let peer = tp_rslock(&rt, &manager, "rslock", false, secs);
            let (a, b) = (tp.per_sec(tp.ok), peer.per_sec(peer.ok));
            println!(
                "run {run}: 16-thread distinct cycles/s: ours {a:.0}, rslock {b:.0}, ratio {:.2}",
                a / b
            );
        }
        return;
    }
    let mut impls: Vec<Box<dyn Latency>> = vec![
        Box::new(Ours(ours.clone())),
        Box::new(Rslock {
            rt: current_thread(),
            manager: Rslock::manager(&urls),
        }),
        Box::new(Redlock::new(&urls)),
        Box::new(Floor::connect(&addrs, 0)),
    ];

    // Latency and CPU.
    let mut samples: Vec<Samples> = impls
        .iter()
        .map(|_| Samples {
            acquire: Vec::with_capacity(per_round * ROUNDS),
            release: Vec::with_capacity(per_round * ROUNDS),
            ..Samples::default()
        })
        .collect();
    for imp in &mut impls {
        eprintln!("warm-up: {} ({warmup} cycles)", imp.name());
        let resource = format!("bench:lat:{}", imp.name()).into_bytes();
        imp.cycles(&resource, warmup, &mut Samples::default());
    }
    for round in 0..ROUNDS {
        for k in 0..impls.len() {
            let i = (round + k) % impls.len();
            let imp = &mut impls[i];
            eprintln!(
                "round {}/{ROUNDS}: {} ({per_round} cycles)",
                round + 1,
                imp.name()
            );
            let resource = format!("bench:lat:{}", imp.name()).into_bytes();
            let cpu0 = cpu_ticks();
            let switches0 = context_switches();
            imp.cycles(&resource, per_round, &mut samples[i]);
            samples[i].switches += context_switches() - switches0;
            samples[i].cpu_ticks += cpu_ticks() - cpu0;
        }
    }
    let names: Vec<&'static str> = impls.iter().map(|i| i.name()).collect();
    let rows: Vec<LatencyRow> = names
        .iter()
        .zip(samples)
        .map(|(n, s)| summarize(n, s))
        .collect();

    // Throughput. Rows: (name, distinct, contended).
    let mut tps: Vec<(&str, Tp, Tp)> = Vec::new();
    for contended in [false, true] {
        let what = if contended { "contended" } else { "distinct" };
        let mut push = |name: &'static str, tp: Tp| {
            eprintln!(
                "throughput {what}: {name}: {:.0} ok/s, {:.0} conflicts/s, {} errors",
                tp.per_sec(tp.ok),
                tp.per_sec(tp.conflict),
                tp.error
            );
            match tps.iter_mut().find(|(n, _, _)| *n == name) {
                Some(row) => row.2 = tp,
                None => tps.push((name, tp, Tp::default())),
            }
        };
        let states = vec![(); THREADS];
        push(
            "ours",
            tp_threads("ours", contended, secs, states, |(), r| {
                ours_cycle(&ours, r)
            }),
        );
        let states = (0..THREADS)
            .map(|_| {
                redlock_std::Client::builder()
                    .servers(&urls)
                    .build()
                    .unwrap()
            })
            .collect();
        push(
            "ours, one client per thread",
            tp_threads("ours1", contended, secs, states, |c, r| ours_cycle(c, r)),
        );
        let rt = current_thread();
        let manager = Rslock::manager(&urls);
        push(
            "rslock",
            tp_rslock(&rt, &manager, "rslock", contended, secs),
        );
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let manager = Rslock::manager(&urls);
        push(
            "rslock, multi-thread runtime (2 workers)",
            tp_rslock(&rt, &manager, "rslock-mt", contended, secs),
        );
        drop(rt);
        let rl = Redlock::new(&urls).0;
        let states = vec![(); THREADS];
        push(
            "redlock",
            tp_threads("redlock", contended, secs, states, |(), r| {
                redlock_cycle(&rl, r)
            }),
        );
        let states = (0..THREADS)
            .map(|i| Floor::connect(&addrs, u64::try_from(i).unwrap() + 1))
            .collect();
        push(
            "floor",
            tp_threads("floor", contended, secs, states, Floor::cycle),
        );
    }

    print_report(&rows, &tps, warmup, per_round * ROUNDS, secs);
    drop(servers);
}

fn print_report(
    rows: &[LatencyRow],
    tps: &[(&str, Tp, Tp)],
    warmup: usize,
    cycles: usize,
    secs: f64,
) {
    println!();
    println!(
        "{SERVERS} redis-server processes on 127.0.0.1; latency: {cycles} measured cycles per \
         implementation (after {warmup} warm-up cycles; {ROUNDS} interleaved rounds), \
         one thread, the same resource locked and released each cycle; throughput: {THREADS} \
         threads (tasks for rslock), {secs} s per run."
    );
    println!();
    println!(
        "| implementation | acquire p50 | p99 | p99.9 | mean | release p50 | p99 | p99.9 | mean | CPU s / 1000 cycles | context switches / cycle | failed | 16-thread distinct (cycles/s) | 16-thread contended (ok/s + conflicts/s) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let tp_cells = |name: &str| match tps.iter().find(|(n, _, _)| *n == name) {
        Some((_, d, c)) => format!(
            "{:.0}{} | {:.0} + {:.0}{}",
            d.per_sec(d.ok),
            if d.conflict + d.error > 0 {
                format!(" ({} failed)", d.conflict + d.error)
            } else {
                String::new()
            },
            c.per_sec(c.ok),
            c.per_sec(c.conflict),
            if c.error > 0 {
                format!(" ({} errors)", c.error)
            } else {
                String::new()
            }
        ),
        None => "— | —".into(),
    };
    for r in rows {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.4} | {:.1} | {} | {} |",
            r.name,
            us(r.acquire[0]),
            us(r.acquire[1]),
            us(r.acquire[2]),
            us(r.acquire[3]),
            us(r.release[0]),
            us(r.release[1]),
            us(r.release[2]),
            us(r.release[3]),
            r.cpu,
            r.switches,
            r.failures,
            tp_cells(r.name),
        );
    }
    for (name, _, _) in tps {
        if !rows.iter().any(|r| r.name == *name) {
            println!(
                "| {name} | — | — | — | — | — | — | — | — | — | — | — | {} |",
                tp_cells(name)
            );
        }
    }
    println!();
    println!("Times in µs. Ratios (ours / other; below 1× means we are faster or cheaper):");
    println!();
    let row = |n: &str| rows.iter().find(|r| r.name == n).unwrap();
    let ours = row("ours");
    let floor = row("floor");
    let peers: Vec<&LatencyRow> = rows
        .iter()
        .filter(|r| r.name != "ours" && r.name != "floor")
        .collect();
    let best = |f: &dyn Fn(&LatencyRow) -> f64| {
        peers
            .iter()
            .map(|r| (f(r), r.name))
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .unwrap()
    };
    let ratio = |label: &str, f: &dyn Fn(&LatencyRow) -> f64| {
        let (b, who) = best(f);
        println!("- {label}: {:.2}× (best peer: {who})", f(ours) / b);
    };
    println!(
        "- acquire p50 vs the floor: {:.2}×",
        ours.acquire[0] as f64 / floor.acquire[0] as f64
    );
    println!(
        "- release p50 vs the floor: {:.2}×",
        ours.release[0] as f64 / floor.release[0] as f64
    );
    ratio("acquire p50 vs best peer", &|r| r.acquire[0] as f64);
    ratio("acquire p99 vs best peer", &|r| r.acquire[1] as f64);
    ratio("acquire p99.9 vs best peer", &|r| r.acquire[2] as f64);
    ratio("release p50 vs best peer", &|r| r.release[0] as f64);
    ratio("release p99 vs best peer", &|r| r.release[1] as f64);
    ratio("release p99.9 vs best peer", &|r| r.release[2] as f64);
    ratio("CPU per cycle vs best peer", &|r| r.cpu);
    let our_tp = tps.iter().find(|(n, _, _)| *n == "ours").unwrap().1;
    let (peer_name, peer_tp) = tps
        .iter()
        .filter(|(n, _, _)| !n.starts_with("ours") && *n != "floor")
        .map(|(n, d, _)| (*n, d.per_sec(d.ok)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    println!(
        "- 16-thread distinct throughput vs best peer: {:.2}× (best peer: {peer_name}; \
         above 1× means we are faster)",
        our_tp.per_sec(our_tp.ok) / peer_tp
    );
}
