//! `redlock bench`: lock + unlock cycles from N threads sharing one client
//! (or, with `--async`, N tasks on one thread sharing its async API), with
//! latency percentiles and throughput.

use alloc::sync::Arc;
use alloc::task::Wake;
use core::cell::RefCell;
use core::future::Future;
use core::pin::Pin;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use core::task::{Context, Poll, Waker};
use core::time::Duration;
use std::io::{IsTerminal, Write};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use redlock_std::{AsyncClient, Client, Error};

use clap::{Args, ValueEnum};

use crate::args::{OneAttemptArgs, Verbosity, number_in, parse_duration};
use crate::{EX_SOFTWARE, EX_UNAVAILABLE, Failure, client, json, servers};

extern crate alloc;

/// `redlock bench`'s options.
#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    #[arg(
        long,
        value_name = "N",
        default_value = "1",
        allow_hyphen_values = true,
        value_parser = number_in::<1, 1024>,
        value_hint = clap::ValueHint::Other,
        help = "threads; with --async, tasks"
    )]
    pub(crate) clients: usize,
    #[arg(
        long = "async",
        help = "N tasks on one thread using the async API instead of N threads using the \
                blocking API (built with the async-io feature, the thread drives the \
                connections itself, on async-io's reactor); same output"
    )]
    pub(crate) tasks: bool,
    #[arg(
        long,
        value_name = "D",
        default_value = "5s",
        allow_hyphen_values = true,
        value_parser = parse_duration,
        value_hint = clap::ValueHint::Other,
        help = "how long to run"
    )]
    pub(crate) duration: Duration,
    #[arg(
        long,
        value_name = "R",
        default_value = "distinct",
        help = "distinct: one resource per thread; same: all threads contend for one \
                resource (conflicts are counted)"
    )]
    pub(crate) resources: Resources,
    #[arg(
        long,
        value_name = "D",
        default_value = "10s",
        allow_hyphen_values = true,
        value_parser = parse_duration,
        value_hint = clap::ValueHint::Other,
        help = "lock time to live"
    )]
    pub(crate) ttl: Duration,
    #[arg(
        long,
        help = "one JSON object: servers, clients, resources, cycles, cycles_per_sec, \
                acquire_us and release_us (p50, p90, p99, p999, max), conflicts, errors"
    )]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) client: OneAttemptArgs,
    #[command(flatten)]
    pub(crate) verbosity: Verbosity,
}

/// `--resources`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Resources {
    Distinct,
    Same,
}

/// `redlock bench --help`: what it does.
pub(crate) const ABOUT: &str = "\
Runs lock + unlock cycles (one attempt each, no retries) from N threads that
share one client (their requests are pipelined on one connection per
server), then prints acquire and release latency percentiles and cycles per
second. With a terminal, a progress line is shown while it runs.";

/// `redlock bench --help`: its exit statuses.
pub(crate) const AFTER: &str =
    "Exit statuses: 0; 69 when no cycle succeeded because servers did not answer.";

/// What one thread measured.
#[derive(Default)]
struct Samples {
    acquire_ns: Vec<u64>,
    release_ns: Vec<u64>,
    conflicts: u64,
    errors: u64,
    last_error: Option<String>,
}

/// How long a worker or task waits after an error (servers down).
const ERROR_PAUSE: Duration = Duration::from_millis(10);

impl Samples {
    /// A cycle that acquired at `t0..t1` and released (or failed to) at
    /// `t1..t2`.
    fn cycle(&mut self, t0: Instant, t1: Instant, t2: Instant, released: bool, done: &AtomicU64) {
        self.acquire_ns.push(nanos(t1 - t0));
        if released {
            self.release_ns.push(nanos(t2 - t1));
            done.fetch_add(1, Ordering::Relaxed);
        } else {
            self.errors += 1;
        }
    }

    /// An acquisition that failed; true if it was an error (not a
    /// conflict), after which the caller pauses.
    fn failed(&mut self, e: Error) -> bool {
        if let Error::Conflict(_) = e {
            self.conflicts += 1;
            return false;
        }
        self.errors += 1;
        self.last_error = Some(e.to_string());
        true
    }
}

pub(crate) fn bench(args: &BenchArgs) -> Result<u8, Failure> {
    let servers = servers(&args.client.server)?;
    let (clients, duration, ttl) = (args.clients, args.duration, args.ttl);
    let same = args.resources == Resources::Same;
    let (json_out, tasks) = (args.json, args.tasks);
    let options = args.client.options()?;
    options.check_against_ttl(ttl)?;
    let client = client(&servers, &options, ttl, false)?;
    let progress = !json_out && std::io::stdout().is_terminal() && std::io::stderr().is_terminal();

    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    let prefix = format!("redlock-bench:{}:", std::process::id());
    let resource = |t: usize| {
        if same {
            format!("{prefix}same").into_bytes()
        } else {
            format!("{prefix}{t}").into_bytes()
        }
    };
    let started = Instant::now();
    let samples: Vec<Samples> = if tasks {
        let client = client.to_async().map_err(|e| {
            Failure::new(EX_SOFTWARE, format!("cannot start the async client: {e}"))
        })?;
        let timers = Timers::default();
        std::thread::scope(|scope| {
            scope.spawn(|| clock(started, duration, progress, &stop, &done));
            let futures: Vec<Pin<Box<dyn Future<Output = Samples> + '_>>> = (0..clients)
                .map(|t| {
                    let f = task(&client, resource(t), ttl, &stop, &done, &timers);
                    Box::pin(f) as Pin<Box<dyn Future<Output = Samples> + '_>>
                })
                .collect();
            run_tasks(futures, &timers)
        })
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..clients)
                .map(|t| {
                    let (client, stop, done) = (&client, &stop, &done);
                    let resource = resource(t);
                    scope.spawn(move || worker(client, &resource, ttl, stop, done))
                })
                .collect();
            clock(started, duration, progress, &stop, &done);
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_default())
                .collect()
        })
    };
    let elapsed = started.elapsed().as_secs_f64();
    if progress {
        warn_user_inline!("\r{:60}\r", "");
    }

    let mut acquire: Vec<u64> = samples
        .iter()
        .flat_map(|s| s.acquire_ns.iter().copied())
        .collect();
    let mut release: Vec<u64> = samples
        .iter()
        .flat_map(|s| s.release_ns.iter().copied())
        .collect();
    acquire.sort_unstable();
    release.sort_unstable();
    let cycles = release.len() as u64;
    let conflicts: u64 = samples.iter().map(|s| s.conflicts).sum();
    let errors: u64 = samples.iter().map(|s| s.errors).sum();
    let per_sec = cycles as f64 / elapsed.max(1e-9);
    let a = percentiles(&acquire);
    let r = percentiles(&release);
    if json_out {
        let mut o = json::Object::new();
        o.int("servers", servers.len() as i64);
        o.int("clients", clients as i64);
        o.string("resources", if same { "same" } else { "distinct" });
        o.int("cycles", cycles);
        o.float("cycles_per_sec", per_sec);
        o.raw("acquire_us", &percentiles_json(&a));
        o.raw("release_us", &percentiles_json(&r));
        o.int("conflicts", conflicts);
        o.int("errors", errors);
        say!("{}", o.finish());
    } else {
        say!(
            "{} servers, {clients} {}{} sharing one client, {} resources, {elapsed:.1} s",
            servers.len(),
            if tasks { "async task" } else { "client thread" },
            if clients == 1 { "" } else { "s" },
            if same { "one contended" } else { "distinct" },
        );
        say!("cycles: {cycles} ({per_sec:.1}/s), conflicts: {conflicts}, errors: {errors}");
        say!(
            "{:<10}{:>10}{:>10}{:>10}{:>10}{:>10}",
            "µs",
            "p50",
            "p90",
            "p99",
            "p99.9",
            "max"
        );
        for (name, p) in [("acquire", a), ("release", r)] {
            say!(
                "{name:<10}{:>10.1}{:>10.1}{:>10.1}{:>10.1}{:>10.1}",
                p[0],
                p[1],
                p[2],
                p[3],
                p[4]
            );
        }
    }
    if cycles == 0 && conflicts == 0 {
        let why = samples
            .iter()
            .find_map(|s| s.last_error.clone())
            .unwrap_or_else(|| "no cycle ran".into());
        return Err(Failure::new(
            EX_UNAVAILABLE,
            format!("no cycle succeeded: {why}"),
        ));
    }
    Ok(0)
}

/// Shows progress (with a terminal) until `duration` has passed since
/// `started`, then tells the workers to stop.
fn clock(
    started: Instant,
    duration: Duration,
    progress: bool,
    stop: &AtomicBool,
    done: &AtomicU64,
) {
    let end = started + duration;
    let mut last_shown = Instant::now();
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20).min(end - Instant::now().min(end)));
        if progress && last_shown.elapsed() >= Duration::from_millis(250) {
            last_shown = Instant::now();
            let secs = started.elapsed().as_secs_f64();
            let n = done.load(Ordering::Relaxed);
            warn_user_inline!(
                "\r  {secs:5.1}s  {n:>9} cycles  {:>9.0}/s ",
                n as f64 / secs.max(1e-9)
            );
            let _ = std::io::stderr().flush();
        }
    }
    stop.store(true, Ordering::SeqCst);
}

/// One thread's cycles (the blocking API).
fn worker(
    client: &Client,
    resource: &[u8],
    ttl: Duration,
    stop: &AtomicBool,
    done: &AtomicU64,
) -> Samples {
    let mut s = Samples {
        acquire_ns: Vec::with_capacity(1 << 16),
        release_ns: Vec::with_capacity(1 << 16),
        ..Samples::default()
    };
    while !stop.load(Ordering::Relaxed) {
        let t0 = Instant::now();
        let failed = match client.try_lock(resource, ttl) {
            Ok(lock) => {
                let t1 = Instant::now();
                let released = client.unlock(&lock).is_ok();
                s.cycle(t0, t1, Instant::now(), released, done);
                false
            }
            Err(e) => s.failed(e),
        };
        if failed {
            // Do not spin on servers that are down.
            std::thread::sleep(ERROR_PAUSE);
        }
    }
    s
}

/// One task's cycles (`--async`): as [`worker`], awaiting the async API.
async fn task(
    client: &AsyncClient,
    resource: Vec<u8>,
    ttl: Duration,
    stop: &AtomicBool,
    done: &AtomicU64,
    timers: &Timers,
) -> Samples {
    let mut s = Samples {
        acquire_ns: Vec::with_capacity(1 << 12),
        release_ns: Vec::with_capacity(1 << 12),
        ..Samples::default()
    };
    while !stop.load(Ordering::Relaxed) {
        let t0 = Instant::now();
        let failed = match client.try_lock(&resource, ttl).await {
            Ok(lock) => {
                let t1 = Instant::now();
                let released = client.unlock(&lock).await.is_ok();
                s.cycle(t0, t1, Instant::now(), released, done);
                false
            }
            Err(e) => s.failed(e),
        };
        if failed {
            // Do not spin on servers that are down (without blocking the
            // other tasks).
            Pause::new(timers, ERROR_PAUSE).await;
        }
    }
    s
}

// A minimal executor for `--async`: the tasks run on the calling thread,
// inside one `async_io::block_on`, which sleeps in async-io's reactor while
// no task is ready; a task's waker queues it and wakes the thread. The
// client's connections are registered with that reactor (redlock-std's
// `async-io` feature, when built with it): a reply wakes the task that
// leads them on this very thread, with no driver thread in between.

/// Tasks to poll, by index, and the waker of the thread that polls them
/// while it sleeps.
struct Ready {
    queue: Mutex<Queue>,
}

/// What [`Ready`] guards.
struct Queue {
    tasks: Vec<usize>,
    /// The executor's, while it waits for a task.
    idle: Option<Waker>,
}

/// The waker of one task.
struct TaskWaker {
    index: usize,
    /// In the queue already: a second wake-up before its poll adds nothing.
    queued: AtomicBool,
    ready: Arc<Ready>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.queued.swap(true, Ordering::AcqRel) {
            let idle = {
                let mut queue = self
                    .ready
                    .queue
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                queue.tasks.push(self.index);
                queue.idle.take()
            };
            if let Some(idle) = idle {
                idle.wake();
            }
        }
    }
}

/// The tasks' timers: when to wake which task.
type Timers = RefCell<Vec<(Instant, Waker)>>;

/// A pause of a task (ready once `until` has passed), kept by [`run_tasks`].
struct Pause<'a> {
    until: Instant,
    timers: &'a Timers,
}

impl<'a> Pause<'a> {
    fn new(timers: &'a Timers, d: Duration) -> Pause<'a> {
        Pause {
            until: Instant::now() + d,
            timers,
        }
    }
}

impl Future for Pause<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.until {
            return Poll::Ready(());
        }
        self.timers
            .borrow_mut()
            .push((self.until, cx.waker().clone()));
        Poll::Pending
    }
}

/// Runs `futures` on this thread until every one is done; their outputs,
/// in order.
fn run_tasks<'a, T>(
    futures: Vec<Pin<Box<dyn Future<Output = T> + 'a>>>,
    timers: &Timers,
) -> Vec<T> {
    let n = futures.len();
    let ready = Arc::new(Ready {
        queue: Mutex::new(Queue {
            tasks: (0..n).collect(),
            idle: None,
        }),
    });
    let task_wakers: Vec<Arc<TaskWaker>> = (0..n)
        .map(|index| {
            Arc::new(TaskWaker {
                index,
                queued: AtomicBool::new(true),
                ready: ready.clone(),
            })
        })
        .collect();
    let wakers: Vec<Waker> = task_wakers.iter().cloned().map(Waker::from).collect();
    let mut futures: Vec<Option<Pin<Box<dyn Future<Output = T> + 'a>>>> =
        futures.into_iter().map(Some).collect();
    let mut outputs: Vec<Option<T>> = (0..n).map(|_| None).collect();
    let mut left = n;
    let mut batch: Vec<usize> = Vec::new();
    // The end of the next pause, on async-io's timers.
    let mut pause_end: Option<async_io::Timer> = None;
    async_io::block_on(core::future::poll_fn(|cx| {
        while left > 0 {
            {
                let mut queue = ready.queue.lock().unwrap_or_else(PoisonError::into_inner);
                core::mem::swap(&mut batch, &mut queue.tasks);
                if batch.is_empty() {
                    // The next task queued wakes this thread.
                    queue.idle = Some(cx.waker().clone());
                }
            }
            if batch.is_empty() {
                // Nothing ready: wake the tasks whose pause is over, or
                // sleep (turning async-io's reactor) until a waker or the
                // next pause's end wakes this thread.
                let now = Instant::now();
                let mut timers = timers.borrow_mut();
                let mut next: Option<Instant> = None;
                let mut woke = false;
                timers.retain(|(at, waker)| {
                    if *at <= now {
                        waker.wake_by_ref();
                        woke = true;
                        false
                    } else {
                        next = Some(next.map_or(*at, |n| n.min(*at)));
                        true
                    }
                });
                drop(timers);
                if woke {
                    continue;
                }
                pause_end = next.map(async_io::Timer::at);
                if let Some(timer) = pause_end.as_mut() {
                    if Pin::new(timer).poll(cx).is_ready() {
                        continue;
                    }
                }
                return Poll::Pending;
            }
            // In the order they were woken.
            for i in batch.drain(..) {
                // Cleared before the poll: a wake-up during it polls it again.
                task_wakers[i].queued.store(false, Ordering::Release);
                let Some(future) = futures[i].as_mut() else {
                    continue;
                };
                if let Poll::Ready(out) = future.as_mut().poll(&mut Context::from_waker(&wakers[i]))
                {
                    outputs[i] = Some(out);
                    futures[i] = None;
                    left -= 1;
                }
            }
        }
        Poll::Ready(())
    }));
    outputs.into_iter().flatten().collect()
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// p50, p90, p99, p99.9 and max in µs of sorted nanoseconds (NaN when empty).
fn percentiles(sorted: &[u64]) -> [f64; 5] {
    let at = |p: f64| -> f64 {
        if sorted.is_empty() {
            return f64::NAN;
        }
        let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1] as f64 / 1000.0
    };
    [at(0.50), at(0.90), at(0.99), at(0.999), at(1.0)]
}

fn percentiles_json(p: &[f64; 5]) -> String {
    let mut o = json::Object::new();
    for (k, v) in ["p50", "p90", "p99", "p999", "max"].iter().zip(p) {
        o.float(k, *v);
    }
    o.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u64> = (1..=1000).map(|i| i * 1000).collect();
        assert_eq!(percentiles(&v), [500.0, 900.0, 990.0, 999.0, 1000.0]);
        assert!(percentiles(&[]).iter().all(|x| x.is_nan()));
    }

    /// Ready once another thread, started on its first poll, has slept
    /// `after` and woken it (as the client's driver thread wakes a task).
    struct WokenElsewhere {
        after: Duration,
        done: Option<Arc<AtomicBool>>,
    }

    impl Future for WokenElsewhere {
        type Output = ();

        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            match &self.done {
                Some(done) if done.load(Ordering::Acquire) => Poll::Ready(()),
                Some(_) => Poll::Pending,
                None => {
                    let done = Arc::new(AtomicBool::new(false));
                    let (flag, waker, after) = (done.clone(), cx.waker().clone(), self.after);
                    std::thread::spawn(move || {
                        std::thread::sleep(after);
                        flag.store(true, Ordering::Release);
                        waker.wake();
                    });
                    self.done = Some(done);
                    Poll::Pending
                }
            }
        }
    }

    #[test]
    fn run_tasks_runs_every_task_to_its_end_and_keeps_their_order() {
        let timers = Timers::default();
        let started = Instant::now();
        let futures: Vec<Pin<Box<dyn Future<Output = u64> + '_>>> = (0..4u64)
            .map(|i| {
                let timers = &timers;
                Box::pin(async move {
                    // Woken from other threads, in the reverse order.
                    WokenElsewhere {
                        after: Duration::from_millis(20 - 5 * i),
                        done: None,
                    }
                    .await;
                    // Then paused by the executor's own timers.
                    Pause::new(timers, Duration::from_millis(10)).await;
                    i
                }) as Pin<Box<dyn Future<Output = u64> + '_>>
            })
            .collect();
        assert_eq!(run_tasks(futures, &timers), vec![0, 1, 2, 3]);
        // The first task: woken after 20 ms, then paused 10 ms.
        assert!(started.elapsed() >= Duration::from_millis(30));
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(timers.borrow().is_empty());
    }
}
