//! What a torture run records: every lock attempt and hold of every worker,
//! every access the fenced resource saw, and every fault the nemesis
//! injected, on one time line.
//!
//! Times are [`Micros`]: microseconds since the run began, read from the
//! wall clock (`SystemTime`) by every process of the run, which share one
//! host and one clock. The nemesis never touches the host's clock, so the
//! processes' readings are comparable.

use serde::{Deserialize, Serialize};

/// Microseconds since the run began (see the module docs).
pub type Micros = u64;

/// The run's clock: microseconds since `epoch_unix_micros`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunClock {
    /// When the run began, in microseconds since the Unix epoch.
    pub epoch_unix_micros: u64,
}

impl RunClock {
    /// A clock whose epoch is now.
    pub fn start() -> RunClock {
        RunClock {
            epoch_unix_micros: unix_micros(),
        }
    }

    /// Microseconds since the epoch (0 before it).
    pub fn now(&self) -> Micros {
        unix_micros().saturating_sub(self.epoch_unix_micros)
    }
}

fn unix_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// How a worker holds its locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WorkerKind {
    /// The library's watchdog (`lock_auto_extend`) keeps the lock alive.
    Watchdog,
    /// The library's `lock`, `extend` as needed, `unlock`.
    Plain,
    /// `redlock lock --fence RESOURCE -- CMD`: the command does the work.
    Cli,
}

/// How one lock attempt (a `lock` call, retries included) ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AttemptOutcome {
    /// Acquired, with this fence.
    Acquired {
        /// The F1 fencing token.
        fence: u64,
    },
    /// Held by someone else.
    Conflict,
    /// Too few servers answered usefully.
    Unavailable,
    /// A majority answered too late.
    Expired,
    /// Fence counters lost on too many servers (C6).
    FenceLost,
    /// Anything else, in words.
    Other(String),
}

/// One lock attempt of one worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// The worker's number.
    pub worker: u32,
    /// How it holds locks.
    pub kind: WorkerKind,
    /// When the call began.
    pub start: Micros,
    /// When it returned.
    pub end: Micros,
    /// How it ended.
    pub outcome: AttemptOutcome,
}

/// One hold: from when a worker's lock call returned with the lock, to
/// when the worker stopped believing it held it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    /// The worker's number.
    pub worker: u32,
    /// How it holds locks.
    pub kind: WorkerKind,
    /// The fencing token of this hold.
    pub fence: u64,
    /// When the lock call returned with the lock.
    pub acquired: Micros,
    /// The end of the validity the client computed, after its last
    /// successful extension (`acquired + remaining()` at that point).
    pub valid_until: Micros,
    /// When the worker began to release it (its `unlock` call, or the end
    /// of the CLI's command), if it did.
    pub released: Option<Micros>,
    /// When the worker learnt the lock was lost (a failed extension, the
    /// watchdog's loss), if it did.
    pub lost: Option<Micros>,
}

impl Hold {
    /// The end of the worker's belief that it holds the lock: the first of
    /// its validity's end, its release and its loss.
    pub fn end(&self) -> Micros {
        [Some(self.valid_until), self.released, self.lost]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(self.valid_until)
    }
}

/// What an access to the fenced resource did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AccessOp {
    /// Read the register.
    Read,
    /// Write `value` into the register, having read `read` before.
    Write {
        /// The value written.
        value: u64,
        /// The value the worker had read (for the lost-update check).
        read: u64,
        /// The worker issued it after its own validity had ended (a stale
        /// write, as after a pause).
        past_validity: bool,
    },
}

/// One access to the fenced resource, as the resource recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Access {
    /// The worker's number.
    pub worker: u32,
    /// The fencing token the access carried.
    pub fence: u64,
    /// Read or write.
    pub op: AccessOp,
    /// When the resource handled it.
    pub at: Micros,
    /// Whether the resource accepted it (a read with a fence below the
    /// largest the resource has seen, or a write with a fence not above
    /// every accepted one, is refused).
    pub accepted: bool,
    /// The largest fence the resource had seen before this access.
    pub max_fence_before: u64,
    /// The register's value before this access.
    pub value_before: u64,
}

/// A kind of fault the nemesis injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FaultKind {
    /// `kill -9` of a minority of servers, restarted only after the
    /// largest ttl (the SPEC's delayed restart).
    KillDelayedRestart,
    /// `kill -9` and immediate restart without persistence (the unsafe
    /// profile only: outside the assumptions).
    KillImmediateRestart,
    /// SIGSTOP, then SIGCONT, of a minority of servers.
    PauseServers,
    /// SIGSTOP of a worker for longer than its ttl (the critique's GC pause).
    PauseWorker,
    /// The fault proxy delays a server's traffic.
    ProxyDelay,
    /// The fault proxy holds a server's traffic, then lets it go.
    ProxyHold,
    /// The fault proxy drops a server's traffic (the connection stays open).
    ProxyBlackhole,
    /// The fault proxy resets a server's connections.
    ProxyReset,
}

/// One fault, from when it was injected until it healed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    /// What was done.
    pub kind: FaultKind,
    /// To whom (server ports, a worker number), in words.
    pub target: String,
    /// When it began.
    pub start: Micros,
    /// When it healed (`None`: not before the run ended).
    pub end: Option<Micros>,
    /// The fault takes the run outside the algorithm's assumptions (an
    /// immediate restart without persistence), so overlapping holds are
    /// expected (the known limit), not a violation.
    pub breaks_assumptions: bool,
}

/// One repair of the lost fence counters (SPEC C6), by the run's operator.
///
/// C6 has the operator raise the counter to at least the highest fence the
/// protected resource accepted. Fences handed out before the loss but never
/// used at the resource may then be handed out again: the checker's F1
/// check reports such a repeat right after a repair as a note, not a
/// failure, as long as the resource never accepted the fence repeated (see
/// `check`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Repair {
    /// When the repair began: an acquisition that began at or after it may
    /// repeat a fence handed out before it, if its fence is above
    /// `at_least` (the floor took) and the resource never accepted the
    /// fence it repeats.
    pub at: Micros,
    /// The floor given: every server's counter is at least this after it.
    pub at_least: u64,
}

/// Which set of faults a run injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Profile {
    /// Faults inside the assumptions: delayed restarts, pauses, proxy faults.
    Safe,
    /// Also immediate restarts without persistence: overlapping holders are
    /// expected and must be found; the fenced resource must still refuse
    /// every stale write.
    Unsafe,
    /// The unsafe profile with the client's restart guard on (the largest
    /// ttl): what the guard buys.
    UnsafeGuarded,
}

/// Everything a run recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    /// The profile.
    pub profile: Profile,
    /// The nemesis' seed.
    pub seed: u64,
    /// The run's clock.
    pub clock: RunClock,
    /// How long the run lasted.
    pub duration: Micros,
    /// The largest ttl any worker uses.
    pub max_ttl: Micros,
    /// Every lock attempt.
    pub attempts: Vec<Attempt>,
    /// Every hold.
    pub holds: Vec<Hold>,
    /// Every access to the fenced resource, in the order it handled them.
    pub accesses: Vec<Access>,
    /// Every fault.
    pub faults: Vec<Fault>,
    /// Processes of the run (servers, workers, proxies) still running when
    /// the run ended, by description: must be empty.
    pub leftovers: Vec<String>,
    /// Every repair of the fence counters (C6) that succeeded, in any
    /// order (absent from older histories: none).
    #[serde(default)]
    pub repairs: Vec<Repair>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_history_without_repairs_still_reads() {
        let h = History {
            profile: Profile::Safe,
            seed: 1,
            clock: RunClock {
                epoch_unix_micros: 5,
            },
            duration: 10,
            max_ttl: 2,
            attempts: vec![],
            holds: vec![],
            accesses: vec![],
            faults: vec![],
            leftovers: vec![],
            repairs: vec![Repair { at: 3, at_least: 7 }],
        };
        let mut v = serde_json::to_value(&h).unwrap();
        assert_eq!(v["repairs"][0]["at_least"], 7);
        let back: History = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(back, h);
        v.as_object_mut().unwrap().remove("repairs");
        let old: History = serde_json::from_value(v).unwrap();
        assert!(old.repairs.is_empty());
    }
}
