//! Client-level benchmarks: lock + unlock latency, client CPU time and
//! 16-thread (16-task) throughput of `redlock-std`, its blocking and its
//! async API, next to the `rslock` (0.10) and `redlock` crates and a minimal
//! raw-socket "floor", all against the same five real `redis-server`
//! processes on 127.0.0.1, which this bench starts (and stops when it ends).
//!
//! Run with `cargo bench -p redlock-benches --bench client`. The results are
//! markdown tables on stdout; progress goes to stderr. `benches/README.md`
//! describes what each implementation does per cycle.
//!
//! Smaller runs (smoke tests): `CLIENT_BENCH_CYCLES` (measured cycles per
//! implementation, default 40,000), `CLIENT_BENCH_SECS` (seconds per
//! throughput run, default 4) and `CLIENT_BENCH_RUNS` (throughput runs per
//! implementation, default 3; the tables show medians).
//! `CLIENT_BENCH_ONLY=throughput` runs only the distinct-resource throughput
//! of the blocking API and rslock (for quick comparisons while working on
//! the client); `CLIENT_BENCH_ONLY=async` runs the rows that compare the
//! async API: latency of the blocking and async APIs (the connections
//! driven on the runtime's reactor, and by the driver thread), rslock and
//! the floor, and throughput of the blocking API's 16 threads, the async
//! API's 16 tasks on both tokio runtimes (reactor and driver thread) and on
//! `async_io::block_on`, and rslock's on both tokio runtimes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod cost;
mod floor;
mod latency;
mod report;
mod throughput;

use core::net::SocketAddr;
use core::time::Duration;

use redlock_tests::RedisServer;

use crate::cost::{Cost, thread_switches};
use crate::floor::Floor;
use crate::latency::{
    Executor, Latency, LatencyRow, OURS_ASYNC, OURS_ASYNC_FUTURES, OURS_ASYNC_THREAD, Ours,
    OursAsync, Redlock, Rslock, Samples, summarize,
};
use crate::report::Report;
use crate::throughput::{
    AsyncCycle, Tp, TpRow, current_thread, multi_thread, ours_cycle, redlock_cycle, tp_async_io,
    tp_tasks, tp_threads,
};

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
/// Threads (tasks for the async rows) in the throughput runs.
const THREADS: usize = 16;

/// The names of the throughput rows the report compares.
const TP_OURS: &str = "ours (16 threads, one client)";
const TP_OURS_ASYNC_CT: &str = "ours async, reactor (16 tasks, tokio current-thread)";
/// The default client on a multi-thread runtime: its tasks lead on the
/// runtime's reactor.
const TP_OURS_ASYNC_MT: &str = "ours async, reactor (16 tasks, tokio multi-thread, 2 workers)";
const TP_OURS_THREAD_CT: &str = "ours async, driver thread (16 tasks, tokio current-thread)";
const TP_OURS_THREAD_MT: &str =
    "ours async, driver thread (16 tasks, tokio multi-thread, 2 workers)";
const TP_OURS_ASYNC_IO: &str = "ours async, reactor (16 tasks, async-io block_on)";
const TP_RSLOCK: &str = "rslock 0.10 (16 tasks, tokio current-thread)";
const TP_RSLOCK_MT: &str = "rslock 0.10 (16 tasks, tokio multi-thread, 2 workers)";

fn env_or(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Which rows a run measures (`CLIENT_BENCH_ONLY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Only {
    /// Everything.
    All,
    /// The blocking API's and rslock's distinct-resource throughput.
    Throughput,
    /// The rows that compare the async API.
    Async,
}

/// A throughput implementation: its row name and one run of it
/// (`contended`, seconds).
struct TpImpl<'a> {
    name: &'static str,
    run: Box<dyn FnMut(bool, f64) -> Tp + 'a>,
}

impl<'a> TpImpl<'a> {
    fn new(name: &'static str, run: impl FnMut(bool, f64) -> Tp + 'a) -> TpImpl<'a> {
        TpImpl {
            name,
            run: Box::new(run),
        }
    }

    /// Tasks on a runtime of their own, all sharing `client`.
    fn tasks<C: AsyncCycle>(
        name: &'static str,
        key: &'static str,
        rt: tokio::runtime::Runtime,
        client: C,
    ) -> TpImpl<'a> {
        TpImpl::new(name, move |contended, secs| {
            tp_tasks(&rt, &client, key, contended, secs)
        })
    }
}

fn main() {
    let cycles = env_or("CLIENT_BENCH_CYCLES", 40_000.0) as usize;
    let secs = env_or("CLIENT_BENCH_SECS", 4.0);
    let runs = (env_or("CLIENT_BENCH_RUNS", 3.0) as usize).max(1);
    let per_round = cycles.div_ceil(ROUNDS);
    let warmup = WARMUP.min(cycles);
    let only = match std::env::var("CLIENT_BENCH_ONLY").as_deref() {
        Err(_) | Ok("") => Only::All,
        Ok("throughput") => Only::Throughput,
        Ok("async") => Only::Async,
        Ok(other) => panic!("CLIENT_BENCH_ONLY={other}: expected throughput or async"),
    };

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
    if only == Only::Throughput {
        for run in 1..=runs {
            let tp = tp_threads("ours", false, secs, vec![(); THREADS], |(), r| {
                ours_cycle(&ours, r)
            });
            let rt = current_thread();
            let manager = Rslock::manager(&urls);
            let peer = tp_tasks(&rt, &manager, "rslock", false, secs);
            let (a, b) = (tp.per_sec(tp.ok), peer.per_sec(peer.ok));
            println!(
                "run {run}: 16-thread distinct cycles/s: ours {a:.0}, rslock 0.10 {b:.0}, ratio {:.2}",
                a / b
            );
        }
        return;
    }
    // Every async row has a client of its own (as every rslock row has its
    // own manager): its driver thread never competes with another row's
    // client for its connections, and a client's poll is registered with
    // the reactor of one runtime only (a client that moved to another tokio
    // runtime would keep waiting on the first one's reactor, which no
    // thread turns any more; the driver thread's deadlines are what would
    // move it on). `reactor`: its tasks drive the connections on their
    // runtime's reactor (the default); else the driver thread does it for
    // them.
    let async_client = |reactor: bool| {
        redlock_std::Client::builder()
            .servers(&urls)
            .drive_on_runtime(reactor)
            .build_async()
            .expect("async client")
    };

    let mut impls: Vec<Box<dyn Latency>> = vec![
        Box::new(Ours(ours.clone())),
        Box::new(OursAsync {
            name: OURS_ASYNC,
            rt: current_thread(),
            client: async_client(true),
            executor: Executor::Tokio,
        }),
        Box::new(OursAsync {
            name: OURS_ASYNC_THREAD,
            rt: current_thread(),
            client: async_client(false),
            executor: Executor::Tokio,
        }),
        Box::new(OursAsync {
            name: OURS_ASYNC_FUTURES,
            rt: current_thread(),
            client: async_client(true),
            executor: Executor::Futures,
        }),
        Box::new(Rslock {
            rt: current_thread(),
            manager: Rslock::manager(&urls),
        }),
    ];
    if only == Only::All {
        impls.push(Box::new(Redlock::new(&urls)));
    }
    impls.push(Box::new(Floor::connect(&addrs, 0)));
    let rows = latency(&mut impls, warmup, per_round);
    drop(impls);

    let mut tp_impls = vec![
        TpImpl::new(TP_OURS, |contended, secs| {
            tp_threads("ours", contended, secs, vec![(); THREADS], |(), r| {
                ours_cycle(&ours, r)
            })
        }),
        TpImpl::tasks(
            TP_OURS_ASYNC_CT,
            "ours-async-ct",
            current_thread(),
            async_client(true),
        ),
        TpImpl::tasks(
            TP_OURS_ASYNC_MT,
            "ours-async-mt",
            multi_thread(),
            async_client(true),
        ),
        TpImpl::tasks(
            TP_OURS_THREAD_CT,
            "ours-thread-ct",
            current_thread(),
            async_client(false),
        ),
        TpImpl::tasks(
            TP_OURS_THREAD_MT,
            "ours-thread-mt",
            multi_thread(),
            async_client(false),
        ),
        {
            let client = async_client(true);
            TpImpl::new(TP_OURS_ASYNC_IO, move |contended, secs| {
                tp_async_io(&client, "ours-async-io", contended, secs)
            })
        },
        TpImpl::tasks(
            TP_RSLOCK,
            "rslock",
            current_thread(),
            Rslock::manager(&urls),
        ),
        TpImpl::tasks(
            TP_RSLOCK_MT,
            "rslock-mt",
            multi_thread(),
            Rslock::manager(&urls),
        ),
    ];
    if only == Only::All {
        tp_impls.push(TpImpl::new(
            "ours, one client per thread",
            |contended, secs| {
                let states = (0..THREADS)
                    .map(|_| {
                        redlock_std::Client::builder()
                            .servers(&urls)
                            .build()
                            .unwrap()
                    })
                    .collect();
                tp_threads("ours1", contended, secs, states, |c, r| ours_cycle(c, r))
            },
        ));
        tp_impls.push(TpImpl::new("redlock", |contended, secs| {
            let rl = Redlock::new(&urls).0;
            tp_threads("redlock", contended, secs, vec![(); THREADS], |(), r| {
                redlock_cycle(&rl, r)
            })
        }));
        tp_impls.push(TpImpl::new("floor", |contended, secs| {
            let states = (0..THREADS)
                .map(|i| Floor::connect(&addrs, u64::try_from(i).unwrap() + 1))
                .collect();
            tp_threads("floor", contended, secs, states, Floor::cycle)
        }));
    }
    let tps = throughput(&mut tp_impls, runs, secs);
    drop(tp_impls);

    Report {
        rows: &rows,
        tps: &tps,
        warmup,
        cycles: per_round * ROUNDS,
        secs,
        runs,
    }
    .print();
    drop(servers);
}

/// Warm-up, then `ROUNDS` rounds of `per_round` cycles where the
/// implementations take turns in a rotating order.
fn latency(impls: &mut [Box<dyn Latency>], warmup: usize, per_round: usize) -> Vec<LatencyRow> {
    let mut samples: Vec<Samples> = impls
        .iter()
        .map(|_| Samples {
            acquire: Vec::with_capacity(per_round * ROUNDS),
            release: Vec::with_capacity(per_round * ROUNDS),
            ..Samples::default()
        })
        .collect();
    for imp in impls.iter_mut() {
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
            let cost0 = Cost::now();
            let switches0 = thread_switches();
            imp.cycles(&resource, per_round, &mut samples[i]);
            samples[i].thread_switches += thread_switches() - switches0;
            samples[i].cost = samples[i].cost.plus(Cost::now().since(cost0));
        }
    }
    impls
        .iter()
        .zip(samples)
        .map(|(imp, s)| summarize(imp.name(), s))
        .collect()
}

/// `runs` runs of every implementation, distinct resources then one
/// contended resource per run, the implementations taking turns in a
/// rotating order.
fn throughput(impls: &mut [TpImpl<'_>], runs: usize, secs: f64) -> Vec<TpRow> {
    let mut rows: Vec<TpRow> = impls
        .iter()
        .map(|i| TpRow {
            name: i.name,
            distinct: Vec::new(),
            contended: Vec::new(),
        })
        .collect();
    for run in 0..runs {
        for contended in [false, true] {
            let what = if contended { "contended" } else { "distinct" };
            for k in 0..impls.len() {
                let i = (run + k) % impls.len();
                let tp = (impls[i].run)(contended, secs);
                eprintln!(
                    "throughput run {}/{runs}, {what}: {}: {:.0} ok/s, {:.0} conflicts/s, {} \
                     errors, {:.2} ctx switches and {:.4} CPU s / 1000 per success",
                    run + 1,
                    impls[i].name,
                    tp.per_sec(tp.ok),
                    tp.per_sec(tp.conflict),
                    tp.error,
                    tp.cost.switches_per(tp.ok),
                    tp.cost.cpu_per_1000(tp.ok),
                );
                let row = &mut rows[i];
                if contended {
                    row.contended.push(tp);
                } else {
                    row.distinct.push(tp);
                }
            }
        }
    }
    rows
}
