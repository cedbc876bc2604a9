//! Issue 24's multi-thread question: what the async API makes of a tokio
//! multi-thread runtime (2 workers), and what a leader pinned per worker
//! could make of it at most, next to rslock 0.10 on both runtimes. Five
//! real `redis-server`s; 16 tasks on 16 distinct resources, lock + unlock
//! cycles, `ROUNDS` interleaved rounds of `SECS` each, medians printed.
//!
//! Rows:
//! - `ours multi-thread`: one client on a 2-worker multi-thread runtime,
//!   as a user would build it (the tasks lead on tokio's reactor).
//! - `ours multi-thread, driver thread`: the same with
//!   `drive_on_runtime(false)` (the client's driver thread serves them).
//! - `ours 2 x current-thread`: two threads, each with its own
//!   current-thread runtime, its own client and 8 of the 16 tasks. This is
//!   the ceiling of "the leader role pinned per worker": every worker leads
//!   its own connections on the reactor, and no task ever moves between
//!   workers (a real work-stealing runtime would move some).
//! - `ours current-thread`: one client, 16 tasks on one current-thread
//!   runtime.
//! - `rslock current-thread`, `rslock multi-thread`: `LockManager` (one
//!   attempt), 16 tasks.
//!
//! Per cycle: the client's CPU and context switches (the whole process,
//! `getrusage`) and the five servers' CPU (`/proc/<pid>/stat`), summed and
//! the least and most of any one server.
//!
//! `cargo run --release -p redlock-benches --example multi_thread -- [ROUNDS] [SECS]`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

extern crate alloc;

use alloc::sync::Arc;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use core::time::Duration;
use std::time::Instant;

use redlock_std::Client;
use redlock_tests::RedisServer;

// Shared with the benches (which use more of it).
#[allow(dead_code)]
#[path = "../benches/client/cost.rs"]
mod cost;
// Shared with the benches (which use `now`).
#[allow(dead_code)]
#[path = "../benches/client/servers_cpu.rs"]
mod servers_cpu;

use cost::Cost;
use servers_cpu::ServersCpu;

const TTL: Duration = Duration::from_secs(10);
const TASKS: usize = 16;

fn runtime(multi: bool) -> tokio::runtime::Runtime {
    if multi {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }
}

/// One measurement: cycles/s, and per cycle the client's CPU (µs), the
/// servers' CPU (µs), the client's context switches, the commands the
/// servers ran and the reads they made (their `read()` calls that brought
/// commands: fewer per command when the client writes more per `write`).
#[derive(Clone, Copy)]
struct Run {
    rate: f64,
    cpu: f64,
    servers: f64,
    /// The least and the most any one server spent (µs per cycle).
    quietest: f64,
    busiest: f64,
    switches: f64,
    commands: f64,
    reads: f64,
}

/// Summed over the servers: commands run (`INFO commandstats`, without the
/// `INFO` that asks) and reads processed (`INFO stats`).
fn server_counts(servers: &[RedisServer]) -> (u64, u64) {
    let mut commands = 0;
    let mut reads = 0;
    for server in servers {
        commands += server
            .command_stats()
            .unwrap()
            .iter()
            .filter(|(name, _)| name.as_str() != "info")
            .map(|(_, &(calls, _))| calls)
            .sum::<u64>();
        let info = server
            .conn()
            .unwrap()
            .request(&[b"INFO", b"stats"])
            .unwrap();
        let redlock_tests::Value::Bulk(text) = info else {
            panic!("INFO stats: {info:?}");
        };
        reads += String::from_utf8_lossy(&text)
            .lines()
            .find_map(|l| l.strip_prefix("total_reads_processed:"))
            .and_then(|n| n.trim().parse::<u64>().ok())
            .unwrap();
    }
    (commands, reads)
}

/// Runs `spawn_all` (which spawns the tasks and returns once they ended)
/// on `shards` threads, each with its own runtime, for `secs`.
fn measure<F>(servers: &[RedisServer], shards: usize, secs: u64, body: F) -> Run
where
    F: Fn(usize, Arc<AtomicBool>, Arc<AtomicU64>) + Send + Sync + 'static,
{
    let body = Arc::new(body);
    let count = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let cpu = ServersCpu::new(servers);
    let counts0 = server_counts(servers);
    let (cost0, servers0) = (Cost::now(), cpu.each());
    let t0 = Instant::now();
    let threads: Vec<_> = (0..shards)
        .map(|shard| {
            let (body, stop, count) = (body.clone(), stop.clone(), count.clone());
            std::thread::spawn(move || body(shard, stop, count))
        })
        .collect();
    std::thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let cost = Cost::now().since(cost0);
    let each: Vec<f64> = cpu
        .each()
        .iter()
        .zip(&servers0)
        .map(|(t, t0)| (*t - *t0).as_secs_f64())
        .collect();
    let cycles = count.load(Ordering::Relaxed) as f64;
    let per_cycle = |t: f64| t * 1e6 / cycles;
    let counts = server_counts(servers);
    Run {
        rate: cycles / elapsed,
        cpu: cost.cpu.as_secs_f64() * 1e6 / cycles,
        servers: per_cycle(each.iter().sum()),
        quietest: per_cycle(each.iter().copied().fold(f64::MAX, f64::min)),
        busiest: per_cycle(each.iter().copied().fold(0.0, f64::max)),
        switches: cost.switches as f64 / cycles,
        commands: (counts.0 - counts0.0) as f64 / cycles,
        reads: (counts.1 - counts0.1) as f64 / cycles,
    }
}

/// Our async client: `shards` threads, each with a runtime (`multi` or
/// current-thread) and a client of its own, `TASKS / shards` tasks each;
/// the connections driven on the runtime's reactor (`on_runtime`) or by
/// the client's driver thread.
fn ours(
    urls: &[String],
    servers: &[RedisServer],
    multi: bool,
    shards: usize,
    on_runtime: bool,
    secs: u64,
) -> Run {
    let urls = urls.to_vec();
    measure(servers, shards, secs, move |shard, stop, count| {
        let rt = runtime(multi);
        let client = Client::builder()
            .servers(&urls)
            .drive_on_runtime(on_runtime)
            .build_async()
            .unwrap();
        rt.block_on(async {
            let tasks: Vec<_> = (0..TASKS / shards)
                .map(|t| {
                    let (client, stop, count) = (client.clone(), stop.clone(), count.clone());
                    tokio::spawn(async move {
                        let key = format!("ours-{shard}-{t}");
                        while !stop.load(Ordering::Relaxed) {
                            let lock = client.try_lock(key.as_bytes(), TTL).await.unwrap();
                            client.unlock(&lock).await.unwrap();
                            count.fetch_add(1, Ordering::Relaxed);
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
        });
    })
}

/// rslock 0.10: one `LockManager`, `TASKS` tasks on one runtime.
fn rslock(urls: &[String], servers: &[RedisServer], multi: bool, secs: u64) -> Run {
    let urls = urls.to_vec();
    measure(servers, 1, secs, move |_, stop, count| {
        let rt = runtime(multi);
        let mut manager = rslock::LockManager::new(urls.clone());
        manager.set_retry(1, Duration::from_millis(1));
        rt.block_on(async {
            let tasks: Vec<_> = (0..TASKS)
                .map(|t| {
                    let (manager, stop, count) = (manager.clone(), stop.clone(), count.clone());
                    tokio::spawn(async move {
                        let key = format!("rslock-{t}");
                        while !stop.load(Ordering::Relaxed) {
                            let lock = manager.lock(key.as_bytes(), TTL).await.unwrap();
                            manager.unlock(&lock).await;
                            count.fetch_add(1, Ordering::Relaxed);
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
        });
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(3, |n| n.parse().unwrap());
    let secs: u64 = args.next().map_or(4, |n| n.parse().unwrap());
    let servers: Vec<RedisServer> = (0..5).map(|_| RedisServer::start().unwrap()).collect();
    let urls: Vec<String> = servers
        .iter()
        .map(|s| format!("redis://{}", s.addr()))
        .collect();
    type Row = (
        &'static str,
        Box<dyn Fn(&[String], &[RedisServer], u64) -> Run>,
    );
    let rows: Vec<Row> = vec![
        (
            "ours multi-thread",
            Box::new(|u, c, s| ours(u, c, true, 1, true, s)),
        ),
        (
            "ours multi-thread, driver thread",
            Box::new(|u, c, s| ours(u, c, true, 1, false, s)),
        ),
        (
            "ours 2 x current-thread",
            Box::new(|u, c, s| ours(u, c, false, 2, true, s)),
        ),
        (
            "ours current-thread",
            Box::new(|u, c, s| ours(u, c, false, 1, true, s)),
        ),
        (
            "rslock current-thread",
            Box::new(|u, c, s| rslock(u, c, false, s)),
        ),
        (
            "rslock multi-thread",
            Box::new(|u, c, s| rslock(u, c, true, s)),
        ),
    ];
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); rows.len()];
    for round in 0..rounds {
        let mut line = format!("round {round}:");
        for (i, (name, run)) in rows.iter().enumerate() {
            let r = run(&urls, &servers, secs);
            line += &format!(" {name} {:.0}/s;", r.rate);
            runs[i].push(r);
        }
        println!("{line}");
    }
    let rate: Vec<f64> = runs
        .iter()
        .map(|r| median(r.iter().map(|r| r.rate).collect()))
        .collect();
    println!(
        "\n| row | cycles/s (median of {rounds}) | range | client CPU µs / cycle | servers' CPU µs / cycle | each server's (least–most) | client context switches / cycle | server commands / cycle | commands per server read |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (i, (name, _)) in rows.iter().enumerate() {
        let lo = runs[i].iter().map(|r| r.rate).fold(f64::MAX, f64::min);
        let hi = runs[i].iter().map(|r| r.rate).fold(0.0, f64::max);
        let of = |f: fn(&Run) -> f64| median(runs[i].iter().map(f).collect());
        println!(
            "| {name} | {:.0} | {lo:.0}–{hi:.0} | {:.1} | {:.1} | {:.1}–{:.1} | {:.2} | {:.1} | {:.2} |",
            rate[i],
            of(|r| r.cpu),
            of(|r| r.servers),
            of(|r| r.quietest),
            of(|r| r.busiest),
            of(|r| r.switches),
            of(|r| r.commands),
            of(|r| r.commands / r.reads),
        );
    }
    let best = rate[4].max(rate[5]);
    println!(
        "\nours multi-thread / rslock's best: {:.2}x",
        rate[0] / best
    );
    println!(
        "ours multi-thread / rslock multi-thread: {:.2}x",
        rate[0] / rate[5]
    );
    println!(
        "ours multi-thread / its driver thread: {:.2}x",
        rate[0] / rate[1]
    );
    println!(
        "ours 2 x current-thread (pinned-leader ceiling) / rslock's best: {:.2}x",
        rate[2] / best
    );
    println!(
        "ours current-thread / rslock current-thread: {:.2}x",
        rate[3] / rate[4]
    );
}
