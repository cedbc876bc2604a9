//! Latency: one thread (one task) doing acquire + release cycles, each call
//! timed with `Instant`.

use core::time::Duration;
use std::time::Instant;

use crate::cost::Cost;
use crate::{TTL, TTL_MS};

/// The timings of acquire + release pairs, in nanoseconds, and what the
/// process spent around them.
#[derive(Debug, Default)]
pub(crate) struct Samples {
    pub(crate) acquire: Vec<u64>,
    pub(crate) release: Vec<u64>,
    /// Acquires that did not get the lock, and releases that reported an error.
    pub(crate) failures: u64,
    /// CPU and context switches of the whole process.
    pub(crate) cost: Cost,
    /// Context switches of the measuring thread (voluntary + involuntary).
    pub(crate) thread_switches: u64,
}

pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// An implementation measured one cycle after another on one thread.
pub(crate) trait Latency {
    fn name(&self) -> &'static str;
    /// `n` cycles of acquire + release of `resource`, timings into `out`.
    fn cycles(&mut self, resource: &[u8], n: usize, out: &mut Samples);
}

/// `redlock_std::Client`: `try_lock` + `unlock`.
pub(crate) struct Ours(pub(crate) redlock_std::Client);

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

/// How the async API's single task is run.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Executor {
    /// `block_on` on a tokio current-thread runtime, as for rslock: while
    /// the task waits, the thread sleeps in the runtime's `epoll_wait`, and
    /// a wake-up from another thread goes through its `eventfd`.
    Tokio,
    /// `futures::executor::block_on`: the thread sleeps in `thread::park`
    /// (a futex).
    Futures,
}

/// `redlock_std::AsyncClient` (its own client, not the blocking row's):
/// `try_lock` + `unlock` awaited in one task.
pub(crate) struct OursAsync {
    pub(crate) name: &'static str,
    pub(crate) rt: tokio::runtime::Runtime,
    pub(crate) client: redlock_std::AsyncClient,
    pub(crate) executor: Executor,
}

/// The name of the async API's latency row (tokio, the connections driven
/// on the runtime's reactor: the headline).
pub(crate) const OURS_ASYNC: &str = "ours async, reactor (1 task, tokio current-thread)";
/// The same with the connections driven by the client's driver thread
/// (`drive_on_runtime(false)`).
pub(crate) const OURS_ASYNC_THREAD: &str =
    "ours async, driver thread (1 task, tokio current-thread)";
/// The reactor's client on `futures::executor::block_on` (no tokio
/// runtime: async-io's reactor, turned by async-io's own thread).
pub(crate) const OURS_ASYNC_FUTURES: &str = "ours async (1 task, futures block_on)";

impl Latency for OursAsync {
    fn name(&self) -> &'static str {
        self.name
    }

    fn cycles(&mut self, resource: &[u8], n: usize, out: &mut Samples) {
        let client = &self.client;
        let cycles = async {
            for _ in 0..n {
                let t0 = Instant::now();
                let lock = client.try_lock(resource, TTL).await;
                out.acquire.push(nanos(t0.elapsed()));
                match lock {
                    Ok(lock) => {
                        let t0 = Instant::now();
                        let released = client.unlock(&lock).await;
                        out.release.push(nanos(t0.elapsed()));
                        if released.is_err() {
                            out.failures += 1;
                        }
                    }
                    Err(_) => out.failures += 1,
                }
            }
        };
        match self.executor {
            Executor::Tokio => self.rt.block_on(cycles),
            Executor::Futures => futures::executor::block_on(cycles),
        }
    }
}

/// The name of rslock's latency row (the version this bench builds).
pub(crate) const RSLOCK: &str = "rslock 0.10";

/// `rslock::LockManager` (0.10: tokio, one `redis` 1.8 multiplexed
/// connection per server): `lock` + `unlock`, all cycles in one task on a
/// current-thread runtime.
pub(crate) struct Rslock {
    pub(crate) rt: tokio::runtime::Runtime,
    pub(crate) manager: rslock::LockManager,
}

impl Rslock {
    pub(crate) fn manager(urls: &[String]) -> rslock::LockManager {
        let mut manager = rslock::LockManager::new(urls.to_vec());
        // One attempt, like `try_lock` (the default retries after a random
        // sleep of up to 200 ms).
        manager.set_retry(1, Duration::from_millis(1));
        manager
    }
}

impl Latency for Rslock {
    fn name(&self) -> &'static str {
        RSLOCK
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
pub(crate) struct Redlock(pub(crate) redlock::RedLock);

impl Redlock {
    pub(crate) fn new(urls: &[String]) -> Redlock {
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

/// Nearest-rank percentile of sorted samples.
pub(crate) fn pct(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// One implementation's latency figures.
#[derive(Debug)]
pub(crate) struct LatencyRow {
    pub(crate) name: &'static str,
    /// p50, p99, p99.9, mean of acquire, in ns.
    pub(crate) acquire: [u64; 4],
    pub(crate) release: [u64; 4],
    pub(crate) failures: u64,
    /// CPU seconds of the process per 1000 cycles.
    pub(crate) cpu: f64,
    /// Context switches per cycle: of the measuring thread, of the process.
    pub(crate) thread_switches: f64,
    pub(crate) switches: f64,
}

pub(crate) fn summarize(name: &'static str, mut s: Samples) -> LatencyRow {
    let stats = |v: &mut Vec<u64>| {
        v.sort_unstable();
        let mean = v.iter().sum::<u64>() / u64::try_from(v.len().max(1)).unwrap();
        [pct(v, 0.50), pct(v, 0.99), pct(v, 0.999), mean]
    };
    let cycles = u64::try_from(s.acquire.len()).unwrap();
    LatencyRow {
        name,
        acquire: stats(&mut s.acquire),
        release: stats(&mut s.release),
        failures: s.failures,
        cpu: s.cost.cpu_per_1000(cycles),
        thread_switches: s.thread_switches as f64 / cycles.max(1) as f64,
        switches: s.cost.switches_per(cycles),
    }
}
