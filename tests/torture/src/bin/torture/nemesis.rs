//! The nemesis: a schedule of faults drawn from the run's seed before the
//! run starts ([`plan()`]), then carried out on two lanes at once: one for
//! the servers (one fault at a time, never more than a minority of the
//! servers inside the assumptions) and one for the workers (pauses).
//!
//! Server faults (every profile), each on one or two of the five servers:
//!
//! | fault | how | how long |
//! |---|---|---|
//! | kill, delayed restart | SIGKILL, restart (empty) after the largest ttl | down max ttl + 0.5-1.5 s |
//! | pause servers | SIGSTOP, then SIGCONT | 0.5-3 s |
//! | proxy delay | both directions, 10-80 ms per chunk | 1-4 s |
//! | proxy hold | keep the bytes, then let them go | 0.3-2 s |
//! | proxy blackhole | drop the bytes, the connection stays | 0.5-3 s |
//! | proxy reset | close every connection, and new ones | 0.2-1.5 s |
//!
//! with 1-2.5 s of calm between two of them, in a seeded order in which
//! every six consecutive safe faults are the six kinds. Worker faults: SIGSTOP of one
//! worker (its process group and every process below it: for a CLI worker
//! the `redlock lock`, its command's group and its group guard) for its
//! ttl + 1-2.5 s, 0-400 ms into one of its holds that is still going on
//! then (the planned worker's if it holds within 3 s, else the next
//! holder's within 3 s more; the worker then writes past its validity, and
//! the resource must refuse it), the first
//! 3-6 s into the run (planned), each next one planned 7-11 s after the
//! planned end of the last (the wait for a holder comes out of that).
//!
//! The unsafe profiles (`unsafe`, `unsafe-guarded`: the same schedule)
//! repeat two restart steps and one of the safe server faults above. A
//! restart step is the **overlap scenario** (every fourth one, a kill and
//! immediate restart of one server at random instead): hold the traffic of
//! two servers A and B at their proxies; wait (at most 6 s) until a worker
//! X has acquired on the three others C, D and E (the same new token on all
//! three, their fence counters raised to one value, and X's intent recorded
//! in its file: it means to pause at least 500 ms; a shorter holder is
//! passed over); then SIGKILL A, B and C and restart them at once, empty
//! (the held bytes die with the connections). X's key is now on D and E
//! only; A, B and C vote for the next worker Y. The fence counters are known
//! on D and E only, so Y fails with `FenceLost` (C6) until the operator
//! repairs them (`operator.rs`, within about 50 ms); then Y holds while X
//! still does. With the restart guard on, A, B and C do not vote until
//! they have been up for the largest ttl, by which time X's key has
//! expired. The restarts are the faults that break the assumptions. In
//! these profiles a restart (and a delayed one) is followed by the largest
//! ttl + 2-3.5 s of calm, so that a guarded client counts the restarted
//! servers again, and the operator repairs, before the next fault.

use core::sync::atomic::{AtomicBool, Ordering};
use core::time::Duration;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use redlock_tests::proxy::Fault as ProxyFault;
use redlock_torture::history::{Fault, FaultKind, Micros, RunClock, WorkerKind};

use crate::cluster::{Cluster, get, get_number};
use crate::procs;
use crate::record::{Record, read_from};
use crate::worker::RESOURCE;

mod plan;

pub(crate) use plan::{ServerStep, WorkerStep, plan};

/// How long the overlap scenario waits for a worker to acquire on the three
/// servers whose traffic is not held.
const OVERLAP_WAIT: Duration = Duration::from_secs(6);

/// The overlap scenario's holder must mean to pause at least this long
/// between its read and its write: time for the restarts, the operator's
/// repair and another worker's acquisition while it still holds.
const OVERLAP_MIN_PAUSE_MS: u64 = 500;

/// How long the overlap scenario waits for a holder's intent to be
/// recorded (right after its acquisition).
const INTENT_WAIT: Duration = Duration::from_millis(150);

/// How many times a killed server is started again before the run gives
/// up on it.
const RESTART_TRIES: u32 = 2;

/// How long the worker lane waits for a worker to hold the lock.
const HOLDER_WAIT: Duration = Duration::from_secs(3);

/// A worker as the nemesis sees it.
#[derive(Debug, Clone)]
pub(crate) struct WorkerHandle {
    pub(crate) id: u32,
    pub(crate) kind: WorkerKind,
    /// Its process id, also its process group's.
    pub(crate) pid: u32,
    /// Its records.
    pub(crate) file: PathBuf,
}

/// The intents the workers recorded (token, pause), newest last.
#[derive(Debug)]
struct Intents {
    files: Vec<(PathBuf, u64)>,
    seen: Vec<(String, u64)>,
}

impl Intents {
    fn new(files: &[PathBuf]) -> Intents {
        // Only what is recorded from now on matters.
        let files = files
            .iter()
            .map(|f| (f.clone(), std::fs::metadata(f).map_or(0, |m| m.len())))
            .collect();
        Intents {
            files,
            seen: Vec::new(),
        }
    }

    fn refresh(&mut self) {
        for (path, offset) in &mut self.files {
            let Ok((records, next, _)) = read_from(path, *offset) else {
                continue;
            };
            *offset = next;
            for r in records {
                if let Record::Intent {
                    token, pause_ms, ..
                } = r
                {
                    self.seen.push((token, pause_ms));
                }
            }
        }
    }

    fn pause_of(&self, token: &[u8]) -> Option<u64> {
        self.seen
            .iter()
            .rev()
            .find(|(t, _)| t.as_bytes() == token)
            .map(|&(_, p)| p)
    }
}

/// The hold each worker is in now (when it began), from its records.
#[derive(Debug)]
struct Holders {
    files: Vec<(PathBuf, u64, Option<Micros>)>,
}

impl Holders {
    fn new(workers: &[WorkerHandle]) -> Holders {
        Holders {
            files: workers.iter().map(|w| (w.file.clone(), 0, None)).collect(),
        }
    }

    /// Reads what the workers recorded since the last call.
    fn refresh(&mut self) {
        for (path, offset, open) in &mut self.files {
            let Ok((records, next, _)) = read_from(path, *offset) else {
                continue;
            };
            *offset = next;
            for r in records {
                if let Record::Hold(h) = r {
                    *open = (h.released.is_none() && h.lost.is_none()).then_some(h.acquired);
                }
            }
        }
    }

    /// When the hold `worker` is in began, if it is in one.
    fn open(&self, worker: usize) -> Option<Micros> {
        self.files.get(worker).and_then(|f| f.2)
    }

    /// A worker in a hold, and when it began.
    fn any(&self) -> Option<(usize, Micros)> {
        self.files
            .iter()
            .enumerate()
            .find_map(|(i, f)| f.2.map(|a| (i, a)))
    }
}

/// The faults injected so far.
#[derive(Debug, Default)]
pub(crate) struct FaultLog {
    faults: Mutex<Vec<Fault>>,
    /// What went wrong in the nemesis itself (a server that did not come
    /// back): the run cannot pass with any.
    errors: Mutex<Vec<String>>,
}

impl FaultLog {
    fn begin(&self, kind: FaultKind, target: String, start: Micros, breaks: bool) -> usize {
        let mut faults = self.faults.lock().unwrap_or_else(PoisonError::into_inner);
        faults.push(Fault {
            kind,
            target,
            start,
            end: None,
            breaks_assumptions: breaks,
        });
        faults.len() - 1
    }

    fn end(&self, i: usize, at: Micros) {
        let mut faults = self.faults.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(f) = faults.get_mut(i) {
            f.end = Some(at);
        }
    }

    /// Records a failure of the nemesis itself.
    fn error(&self, text: String) {
        eprintln!("torture: {text}");
        self.errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(text);
    }

    /// The nemesis' own failures so far.
    pub(crate) fn errors(&self) -> Vec<String> {
        self.errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Every fault so far, in the order they began.
    pub(crate) fn faults(&self) -> Vec<Fault> {
        self.faults
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Carries out a [`Plan`](plan::Plan).
#[derive(Debug)]
pub(crate) struct Nemesis<'a> {
    pub(crate) cluster: &'a Cluster,
    pub(crate) log: &'a FaultLog,
    pub(crate) clock: RunClock,
    /// When the run began (the plan's times are since then).
    pub(crate) began: Instant,
    /// Set to stop: the current fault heals at once, no other begins.
    pub(crate) stop: &'a AtomicBool,
    /// The workers' records (the overlap scenario reads their intents).
    pub(crate) files: &'a [PathBuf],
}

impl Nemesis<'_> {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Sleeps until `at` (since the run began); false if told to stop.
    fn until(&self, at: Duration) -> bool {
        self.sleep_until(self.began + at)
    }

    fn sleep_until(&self, at: Instant) -> bool {
        while !self.stopping() {
            let now = Instant::now();
            if now >= at {
                return true;
            }
            std::thread::sleep((at - now).min(Duration::from_millis(10)));
        }
        false
    }

    /// Sleeps `d`; false if told to stop (then the caller heals at once).
    fn hold_for(&self, d: Duration) -> bool {
        self.sleep_until(Instant::now() + d)
    }

    fn ports(&self, servers: &[usize]) -> String {
        let ports: Vec<String> = servers
            .iter()
            .map(|&i| self.cluster.port(i).to_string())
            .collect();
        format!("port {}", ports.join(", "))
    }

    /// The server lane.
    pub(crate) fn servers(&self, steps: &[(Duration, ServerStep)], window_end: Duration) {
        for (at, step) in steps {
            if !self.until(*at) || self.began.elapsed() >= window_end {
                return;
            }
            self.server_step(step);
        }
    }

    fn server_step(&self, step: &ServerStep) {
        let (log, clock, cluster) = (self.log, self.clock, self.cluster);
        match step {
            ServerStep::KillDelayed { servers, down } => {
                for &i in servers {
                    cluster.kill(i);
                }
                let f = log.begin(
                    FaultKind::KillDelayedRestart,
                    self.ports(servers),
                    clock.now(),
                    false,
                );
                if !self.hold_for(*down) {
                    // Left down: the run is ending and stops them anyway.
                    return;
                }
                if self.restart_all(servers) {
                    log.end(f, clock.now());
                }
            }
            ServerStep::PauseServers { servers, span } => {
                for &i in servers {
                    cluster.signal(i, "STOP");
                }
                let f = log.begin(
                    FaultKind::PauseServers,
                    self.ports(servers),
                    clock.now(),
                    false,
                );
                self.hold_for(*span);
                for &i in servers {
                    cluster.signal(i, "CONT");
                }
                log.end(f, clock.now());
            }
            ServerStep::Proxy {
                kind,
                fault,
                servers,
                span,
            } => {
                for &i in servers {
                    cluster.set_fault(i, *fault);
                }
                let target = match fault {
                    ProxyFault::Delay(d) => {
                        format!("{} ({} ms)", self.ports(servers), d.as_millis())
                    }
                    _ => self.ports(servers),
                };
                let f = log.begin(*kind, target, clock.now(), false);
                self.hold_for(*span);
                for &i in servers {
                    cluster.set_fault(i, ProxyFault::Pass);
                }
                log.end(f, clock.now());
            }
            ServerStep::KillImmediate { server } => {
                cluster.kill(*server);
                let f = log.begin(
                    FaultKind::KillImmediateRestart,
                    self.ports(&[*server]),
                    clock.now(),
                    true,
                );
                if self.restart_all(&[*server]) {
                    log.end(f, clock.now());
                }
            }
            ServerStep::Overlap { held, restarted } => self.overlap(*held, *restarted),
        }
    }

    /// Restarts `servers` in parallel (see [`Nemesis::restart`]); whether
    /// all of them are back.
    fn restart_all(&self, servers: &[usize]) -> bool {
        std::thread::scope(|s| {
            let restarts: Vec<_> = servers
                .iter()
                .map(|&i| s.spawn(move || self.restart(i)))
                .collect();
            let back: Vec<bool> = restarts
                .into_iter()
                .map(|r| r.join().unwrap_or(false))
                .collect();
            back.into_iter().all(|ok| ok)
        })
    }

    /// Restarts server `i` (each try within the harness' start timeout),
    /// trying [`RESTART_TRIES`] times; whether it is back. A server that
    /// does not come back is a run error (see [`FaultLog::errors`]): its
    /// fault is left without an end, as it never healed.
    fn restart(&self, i: usize) -> bool {
        let mut last = String::new();
        for attempt in 1..=RESTART_TRIES {
            match self.cluster.restart(i) {
                Ok(()) => return true,
                Err(e) => {
                    last = e.to_string();
                    eprintln!(
                        "torture: the server on port {} did not restart (try {attempt}): {e}",
                        self.cluster.port(i)
                    );
                }
            }
            if self.stopping() {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        self.log.error(format!(
            "the server on port {} could not be restarted: {last}",
            self.cluster.port(i)
        ));
        false
    }

    /// The overlap scenario (see the module docs).
    fn overlap(&self, held: [usize; 2], restarted: usize) {
        let (log, clock, cluster) = (self.log, self.clock, self.cluster);
        for i in held {
            cluster.set_fault(i, ProxyFault::Hold);
        }
        let hold = log.begin(
            FaultKind::ProxyHold,
            format!("{} (overlap scenario)", self.ports(&held)),
            clock.now(),
            false,
        );
        let free: Vec<usize> = (0..cluster.len()).filter(|i| !held.contains(i)).collect();
        let found = self.fresh_majority(&free, restarted);
        if !found {
            for i in held {
                cluster.set_fault(i, ProxyFault::Pass);
            }
            log.end(hold, clock.now());
            return;
        }
        let victims = [held[0], held[1], restarted];
        for &i in &victims {
            cluster.kill(i);
        }
        let killed = clock.now();
        log.end(hold, killed);
        let faults: Vec<usize> = victims
            .iter()
            .map(|&i| {
                log.begin(
                    FaultKind::KillImmediateRestart,
                    format!("{} (overlap scenario)", self.ports(&[i])),
                    killed,
                    true,
                )
            })
            .collect();
        for i in held {
            cluster.set_fault(i, ProxyFault::Pass);
        }
        std::thread::scope(|s| {
            for (&i, &f) in victims.iter().zip(&faults) {
                s.spawn(move || {
                    if self.restart(i) {
                        log.end(f, clock.now());
                    }
                });
            }
        });
    }

    /// Waits (at most [`OVERLAP_WAIT`]) until a worker has acquired on
    /// exactly the servers `free` (a new token on all of them, and their
    /// fence counters raised to one value: its acquisition is complete).
    fn fresh_majority(&self, free: &[usize], probe: usize) -> bool {
        let mut conns = Vec::new();
        for &i in free {
            match self.cluster.conn(i) {
                Ok(c) => conns.push(c),
                Err(_) => return false,
            }
        }
        let mut intents = Intents::new(self.files);
        let mut passed_over: Vec<Vec<u8>> = Vec::new();
        let fence_key = format!("{RESOURCE}:fence");
        let probe_at = free.iter().position(|&i| i == probe).unwrap_or(0);
        let Some(first) = conns.get_mut(probe_at) else {
            return false;
        };
        let token_before = get(first, RESOURCE.as_bytes());
        let counter_before = get_number(first, fence_key.as_bytes());
        let deadline = Instant::now() + OVERLAP_WAIT;
        while !self.stopping() && Instant::now() < deadline {
            let tokens: Vec<Option<Vec<u8>>> = conns
                .iter_mut()
                .map(|c| get(c, RESOURCE.as_bytes()))
                .collect();
            let counters: Vec<u64> = conns
                .iter_mut()
                .map(|c| get_number(c, fence_key.as_bytes()))
                .collect();
            let same_token = tokens.windows(2).all(|w| w[0] == w[1]);
            let same_counter = counters.windows(2).all(|w| w[0] == w[1]);
            let token = tokens.first().cloned().flatten();
            let counter = counters.first().copied().unwrap_or(0);
            if let Some(token) = token.filter(|t| {
                same_token
                    && same_counter
                    && Some(t) != token_before.as_ref()
                    && counter > counter_before
                    && !passed_over.contains(t)
            }) {
                // Only a worker's acquisition (it records its intent right
                // after; an attempt that failed after writing its keys does
                // not), and one whose holder will not release soon.
                match self.intent(&mut intents, &token) {
                    Some(pause_ms) if pause_ms >= OVERLAP_MIN_PAUSE_MS => return true,
                    _ => passed_over.push(token),
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        false
    }

    /// How long the holder of `token` means to pause, once its intent is
    /// recorded (at most [`INTENT_WAIT`] from now).
    fn intent(&self, intents: &mut Intents, token: &[u8]) -> Option<u64> {
        let deadline = Instant::now() + INTENT_WAIT;
        loop {
            intents.refresh();
            if let Some(pause) = intents.pause_of(token) {
                return Some(pause);
            }
            if Instant::now() >= deadline || !self.hold_for(Duration::from_millis(2)) {
                return None;
            }
        }
    }

    /// The worker lane.
    pub(crate) fn workers(
        &self,
        steps: &[(Duration, WorkerStep)],
        workers: &[WorkerHandle],
        window_end: Duration,
    ) {
        let mut holders = Holders::new(workers);
        for (at, step) in steps {
            if !self.until(*at) || self.began.elapsed() >= window_end {
                return;
            }
            let Some(chosen) = self.holder(&mut holders, step.worker, step.into_hold) else {
                return;
            };
            let Some(w) = workers.get(chosen) else {
                continue;
            };
            let group = -i64::from(w.pid);
            // The worker's group first (the worker, and `redlock lock` for a
            // CLI worker), then whatever runs below it (a CLI worker's
            // command and group guard, in groups of their own).
            procs::signal("STOP", &[group]);
            let below: Vec<i64> = procs::descendants(w.pid)
                .iter()
                .map(|p| i64::from(p.pid))
                .collect();
            procs::signal("STOP", &below);
            let start = self.clock.now();
            let f = self.log.begin(
                FaultKind::PauseWorker,
                format!("worker {} ({:?})", w.id, w.kind),
                start,
                false,
            );
            self.hold_for(step.span);
            resume(w.pid);
            self.log.end(f, self.clock.now());
        }
    }
}

impl Nemesis<'_> {
    /// The worker to pause, [`WorkerStep::into_hold`] into one of its
    /// holds: `planned` if it holds the lock within [`HOLDER_WAIT`], else
    /// the first worker to hold it within another [`HOLDER_WAIT`] (a hold
    /// that ends before `into_hold` has passed does not count), else
    /// `planned`, at once. `None` if told to stop.
    fn holder(&self, holders: &mut Holders, planned: usize, into_hold: Duration) -> Option<usize> {
        let began = Instant::now();
        while began.elapsed() < HOLDER_WAIT * 2 {
            holders.refresh();
            let found = if began.elapsed() < HOLDER_WAIT {
                holders.open(planned).map(|a| (planned, a))
            } else {
                holders.any()
            };
            if let Some((w, acquired)) = found {
                if !self.hold_for(into_hold) {
                    return None;
                }
                holders.refresh();
                if holders.open(w) == Some(acquired) {
                    return Some(w);
                }
            } else if !self.hold_for(Duration::from_millis(5)) {
                return None;
            }
        }
        Some(planned)
    }
}

/// SIGCONT to a worker's group and everything below it.
pub(crate) fn resume(pid: u32) {
    let mut targets = vec![-i64::from(pid)];
    targets.extend(procs::descendants(pid).iter().map(|p| i64::from(p.pid)));
    procs::signal("CONT", &targets);
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_that_does_not_come_back_is_a_run_error_not_a_healed_fault() {
        let cluster = Cluster::start(1).expect("a redis-server starts");
        let log = FaultLog::default();
        let stop = AtomicBool::new(false);
        let nemesis = Nemesis {
            cluster: &cluster,
            log: &log,
            clock: RunClock::start(),
            began: Instant::now(),
            stop: &stop,
            files: &[],
        };
        cluster.kill(0);
        // Its port taken by someone else: it cannot come back.
        let squatter = loop {
            match std::net::TcpListener::bind(("127.0.0.1", cluster.port(0))) {
                Ok(l) => break l,
                // The killed server's socket may linger a moment.
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        nemesis.server_step(&ServerStep::KillImmediate { server: 0 });
        let faults = log.faults();
        assert_eq!(faults.len(), 1);
        assert_eq!(faults[0].end, None, "logged as healed: {faults:?}");
        let errors = log.errors();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].contains(&cluster.port(0).to_string()),
            "{errors:?}"
        );
        // Once the port is free again, a restart heals the fault.
        drop(squatter);
        nemesis.server_step(&ServerStep::KillImmediate { server: 0 });
        let faults = log.faults();
        assert!(faults[1].end.is_some(), "{faults:?}");
        assert_eq!(log.errors().len(), 1);
    }
}
