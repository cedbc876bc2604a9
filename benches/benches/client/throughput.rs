//! Throughput: `THREADS` threads or tasks doing lock + unlock cycles for a
//! fixed time, on distinct resources or all on one.

use core::future::Future;
use core::sync::atomic::{AtomicU64, Ordering};
use core::time::Duration;
use std::sync::Barrier;
use std::time::Instant;

use futures::stream::{FuturesUnordered, StreamExt};

use crate::cost::Cost;
use crate::{THREADS, TTL, TTL_MS};

/// Unmeasured cycles before a throughput run (per thread; in one task for
/// the tokio runs), which also open the connections.
const WARMUP_CYCLES: usize = 50;

/// Errors shown on stderr (the first few of the whole bench, so that a slow
/// moment of the machine cannot flood it).
static ERRORS_SHOWN: AtomicU64 = AtomicU64::new(0);

/// An error of a throughput cycle: shown (the first 5), then counted.
fn error(who: &str, e: &dyn core::fmt::Display) -> Outcome {
    if ERRORS_SHOWN.fetch_add(1, Ordering::Relaxed) < 5 {
        eprintln!("{who}: error: {e}");
    }
    Outcome::Error
}

/// The result of one try in a throughput run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ok,
    Conflict,
    Error,
}

/// Counts of a throughput run, and what the process spent during it.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Tp {
    pub(crate) ok: u64,
    pub(crate) conflict: u64,
    pub(crate) error: u64,
    pub(crate) secs: f64,
    pub(crate) cost: Cost,
}

impl Tp {
    fn add(&mut self, o: Outcome) {
        match o {
            Outcome::Ok => self.ok += 1,
            Outcome::Conflict => self.conflict += 1,
            Outcome::Error => self.error += 1,
        }
    }

    fn merge(&mut self, other: Tp) {
        self.ok += other.ok;
        self.conflict += other.conflict;
        self.error += other.error;
    }

    pub(crate) fn per_sec(&self, n: u64) -> f64 {
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
pub(crate) fn tp_threads<S: Send>(
    name: &str,
    contended: bool,
    secs: f64,
    states: Vec<S>,
    cycle: impl Fn(&mut S, &[u8]) -> Outcome + Sync,
) -> Tp {
    let barrier = Barrier::new(THREADS + 1);
    let total = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];
    let run = Duration::from_secs_f64(secs);
    let (started, cost0) = std::thread::scope(|s| {
        for (i, mut state) in states.into_iter().enumerate() {
            let (barrier, total, cycle) = (&barrier, &total, &cycle);
            s.spawn(move || {
                let resource = tp_resource(name, contended, i);
                // Connect and warm up outside the measurement.
                for _ in 0..WARMUP_CYCLES {
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
        (Instant::now(), Cost::now())
    });
    Tp {
        ok: total[0].load(Ordering::Relaxed),
        conflict: total[1].load(Ordering::Relaxed),
        error: total[2].load(Ordering::Relaxed),
        secs: started.elapsed().as_secs_f64(),
        cost: Cost::now().since(cost0),
    }
}

/// A client whose cycles are futures (rslock, our async API).
pub(crate) trait AsyncCycle: Clone + Send + Sync + 'static {
    /// One try: lock, and unlock if it was won.
    fn cycle(&self, resource: &[u8]) -> impl Future<Output = Outcome> + Send;
}

impl AsyncCycle for rslock::LockManager {
    async fn cycle(&self, resource: &[u8]) -> Outcome {
        match self.lock(resource, TTL).await {
            Ok(lock) => {
                self.unlock(&lock).await;
                Outcome::Ok
            }
            Err(rslock::LockError::Unavailable) => Outcome::Conflict,
            Err(e) => error("rslock", &e),
        }
    }
}

impl AsyncCycle for redlock_std::AsyncClient {
    async fn cycle(&self, resource: &[u8]) -> Outcome {
        match self.try_lock(resource, TTL).await {
            Ok(lock) => match self.unlock(&lock).await {
                Ok(_) => Outcome::Ok,
                Err(e) => error("ours async, unlock", &e),
            },
            Err(redlock_std::Error::Conflict(_)) => Outcome::Conflict,
            Err(e) => error("ours async, try_lock", &e),
        }
    }
}

/// One task of a throughput run: cycles on `resource` until `deadline`.
async fn task_cycles<C: AsyncCycle>(client: C, resource: Vec<u8>, deadline: Instant) -> Tp {
    let mut tp = Tp::default();
    while Instant::now() < deadline {
        tp.add(client.cycle(&resource).await);
    }
    tp
}

/// `THREADS` tasks on `rt`, each looping on `client` for `secs`.
pub(crate) fn tp_tasks<C: AsyncCycle>(
    rt: &tokio::runtime::Runtime,
    client: &C,
    name: &str,
    contended: bool,
    secs: f64,
) -> Tp {
    rt.block_on(async {
        // Connect and warm up outside the measurement.
        for _ in 0..WARMUP_CYCLES {
            client.cycle(b"bench:warmup").await;
        }
        let cost0 = Cost::now();
        let start = Instant::now();
        let deadline = start + Duration::from_secs_f64(secs);
        let tasks: Vec<_> = (0..THREADS)
            .map(|i| {
                let resource = tp_resource(name, contended, i);
                tokio::spawn(task_cycles(client.clone(), resource, deadline))
            })
            .collect();
        let mut total = Tp::default();
        for t in tasks {
            total.merge(t.await.unwrap());
        }
        total.secs = start.elapsed().as_secs_f64();
        total.cost = Cost::now().since(cost0);
        total
    })
}

/// `THREADS` tasks looping on `client` for `secs`, on the calling thread
/// under `async_io::block_on` (smol's reactor, turned by this thread while
/// every task waits): the tasks are futures of one `FuturesUnordered`, each
/// woken on its own, as on a single-threaded executor.
pub(crate) fn tp_async_io<C: AsyncCycle>(client: &C, name: &str, contended: bool, secs: f64) -> Tp {
    async_io::block_on(async {
        for _ in 0..WARMUP_CYCLES {
            client.cycle(b"bench:warmup").await;
        }
        let cost0 = Cost::now();
        let start = Instant::now();
        let deadline = start + Duration::from_secs_f64(secs);
        let mut tasks: FuturesUnordered<_> = (0..THREADS)
            .map(|i| task_cycles(client.clone(), tp_resource(name, contended, i), deadline))
            .collect();
        let mut total = Tp::default();
        while let Some(tp) = tasks.next().await {
            total.merge(tp);
        }
        total.secs = start.elapsed().as_secs_f64();
        total.cost = Cost::now().since(cost0);
        total
    })
}

pub(crate) fn ours_cycle(client: &redlock_std::Client, resource: &[u8]) -> Outcome {
    match client.try_lock(resource, TTL) {
        Ok(lock) => match client.unlock(&lock) {
            Ok(_) => Outcome::Ok,
            Err(e) => error("ours, unlock", &e),
        },
        Err(redlock_std::Error::Conflict(_)) => Outcome::Conflict,
        Err(e) => error("ours, try_lock", &e),
    }
}

pub(crate) fn redlock_cycle(rl: &redlock::RedLock, resource: &[u8]) -> Outcome {
    match rl.lock(resource, usize::try_from(TTL_MS).unwrap()) {
        Ok(Some(lock)) => {
            rl.unlock(&lock);
            Outcome::Ok
        }
        Ok(None) => Outcome::Conflict,
        Err(e) => error("redlock", &e),
    }
}

pub(crate) fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A multi-thread runtime with 2 workers (one per core of the machine).
pub(crate) fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The runs of one throughput implementation, distinct and contended.
#[derive(Debug)]
pub(crate) struct TpRow {
    pub(crate) name: &'static str,
    pub(crate) distinct: Vec<Tp>,
    pub(crate) contended: Vec<Tp>,
}

/// The median of `f` over `runs` (the mean of the middle two for an even count).
pub(crate) fn median(runs: &[Tp], f: impl Fn(&Tp) -> f64) -> f64 {
    let mut v: Vec<f64> = runs.iter().map(f).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

impl TpRow {
    /// Distinct resources: median cycles/s.
    pub(crate) fn cycles_per_sec(&self) -> f64 {
        median(&self.distinct, |t| t.per_sec(t.ok))
    }

    /// Distinct resources: median context switches of the process per cycle.
    pub(crate) fn switches_per_cycle(&self) -> f64 {
        median(&self.distinct, |t| t.cost.switches_per(t.ok))
    }

    /// Distinct resources: median CPU seconds of the process per 1000 cycles.
    pub(crate) fn cpu_per_1000(&self) -> f64 {
        median(&self.distinct, |t| t.cost.cpu_per_1000(t.ok))
    }

    /// One resource: median successes/s and conflicts/s.
    pub(crate) fn contended_per_sec(&self) -> (f64, f64) {
        (
            median(&self.contended, |t| t.per_sec(t.ok)),
            median(&self.contended, |t| t.per_sec(t.conflict)),
        )
    }
}
