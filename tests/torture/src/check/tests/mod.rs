//! The checker's tests: a small clean run as the fixture, then each check
//! with negative controls (a history that must fail, and one that must
//! not), by concern.

use super::*;
use crate::history::{
    Access, AccessOp, Attempt, Fault, FaultKind, Hold, Repair, RunClock, WorkerKind,
};

pub(super) const S: Micros = 1_000_000;
pub(super) const TTL: Micros = 2 * S;
pub(super) const BOUND: Micros = 10 * S;

/// A small clean run: three workers take turns, each reads and writes
/// with its fence; one server pause in the middle, healed.
pub(super) struct Run {
    h: History,
    /// Next value of the register, and its fence.
    register: u64,
    max_fence: u64,
    last_write: u64,
}

impl Run {
    pub(super) fn new(profile: Profile) -> Run {
        Run {
            h: History {
                profile,
                seed: 7,
                clock: RunClock {
                    epoch_unix_micros: 0,
                },
                duration: 60 * S,
                max_ttl: TTL,
                attempts: Vec::new(),
                holds: Vec::new(),
                accesses: Vec::new(),
                faults: Vec::new(),
                leftovers: Vec::new(),
                repairs: Vec::new(),
            },
            register: 0,
            max_fence: 0,
            last_write: 0,
        }
    }

    /// Worker `w` acquires `fence` at `t` (the call began 2 ms before)
    /// and holds for 300 ms: a read at +100 ms, a write at +200 ms.
    pub(super) fn turn(&mut self, w: u32, fence: u64, t: Micros) {
        self.h.attempts.push(Attempt {
            worker: w,
            kind: WorkerKind::Plain,
            start: t - 2_000,
            end: t,
            outcome: AttemptOutcome::Acquired { fence },
        });
        self.h.holds.push(Hold {
            worker: w,
            kind: WorkerKind::Plain,
            fence,
            acquired: t,
            valid_until: t + TTL,
            released: Some(t + 300_000),
            lost: None,
        });
        let read = self.register;
        self.access(w, fence, AccessOp::Read, t + 100_000);
        self.access(
            w,
            fence,
            AccessOp::Write {
                value: read + 1,
                read,
                past_validity: false,
            },
            t + 200_000,
        );
    }

    /// An access as a correct resource records it.
    pub(super) fn access(&mut self, w: u32, fence: u64, op: AccessOp, at: Micros) {
        let accepted = match op {
            AccessOp::Read => fence >= self.max_fence,
            AccessOp::Write { .. } => fence >= self.max_fence && fence > self.last_write,
        };
        self.h.accesses.push(Access {
            worker: w,
            fence,
            op: op.clone(),
            at,
            accepted,
            max_fence_before: self.max_fence,
            value_before: self.register,
        });
        if accepted {
            self.max_fence = fence;
            if let AccessOp::Write { value, .. } = op {
                self.register = value;
                self.last_write = fence;
            }
        }
    }

    pub(super) fn fault(&mut self, kind: FaultKind, start: Micros, end: Micros, breaks: bool) {
        self.h.faults.push(Fault {
            kind,
            target: "server 1".to_owned(),
            start,
            end: Some(end),
            breaks_assumptions: breaks,
        });
    }

    pub(super) fn clean(profile: Profile) -> Run {
        let mut r = Run::new(profile);
        r.turn(1, 1, S);
        r.turn(2, 2, 2 * S);
        r.fault(FaultKind::PauseServers, 3 * S, 5 * S, false);
        r.turn(3, 3, 6 * S);
        r.turn(1, 4, 7 * S);
        r
    }
}

pub(super) fn fails_with(h: &History, text: &str) {
    let v = check(h, BOUND).verdict(h.profile);
    assert!(!v.pass, "expected a failure mentioning {text:?}");
    assert!(
        v.reasons.iter().any(|r| r.contains(text)),
        "{text:?} not in {:?}",
        v.reasons
    );
}

/// An unsafe run with a breaking restart at 10 s, healed at 10.05 s.
pub(super) fn restarted() -> Run {
    let mut r = Run::clean(Profile::Unsafe);
    r.fault(
        FaultKind::KillImmediateRestart,
        10 * S,
        10 * S + 50_000,
        true,
    );
    r
}

/// Worker `w` acquires `fence` at `t` and never releases (a pause): it
/// holds for its whole ttl.
pub(super) fn held(r: &mut Run, w: u32, fence: u64, t: Micros) {
    r.turn(w, fence, t);
    r.h.holds.last_mut().unwrap().released = None;
}

mod fences;
mod liveness;
mod overlaps;

#[test]
fn a_clean_history_passes_every_check() {
    let r = Run::clean(Profile::Safe);
    let f = check(&r.h, BOUND);
    assert_eq!(f.acquisitions, 4);
    assert!(f.overlaps.is_empty());
    assert_eq!(f.fences.violation_count, 0);
    assert_eq!(f.fences.regression_count, 0);
    assert_eq!((f.fences.reads_accepted, f.fences.writes_accepted), (4, 4));
    assert_eq!(f.lost_updates.count, 0);
    assert_eq!(f.liveness.failed, 0);
    assert_eq!(f.liveness.recoveries[0].recovery, Some(S));
    assert_eq!(f.liveness.recoveries[0].status, RecoveryStatus::Recovered);
    let v = f.verdict(Profile::Safe);
    assert!(v.pass, "{:?}", v.reasons);
    assert!(f.verdict(Profile::UnsafeGuarded).pass);
    // The unsafe profile must show the known limit: a clean run fails it.
    let v = f.verdict(Profile::Unsafe);
    assert!(!v.pass);
    assert!(v.reasons[0].contains("known limit did not show"));
}

#[test]
fn an_empty_run_does_not_pass() {
    fails_with(&Run::new(Profile::Safe).h, "exercised nothing");
}

#[test]
fn leftovers_fail_every_profile() {
    let mut r = Run::clean(Profile::Safe);
    r.h.leftovers.push("redis-server pid 42".to_owned());
    fails_with(&r.h, "redis-server pid 42");
    r.h.profile = Profile::Unsafe;
    fails_with(&r.h, "left running");
}

#[test]
fn the_unsafe_verdict_says_when_no_stale_write_was_tried() {
    let mut r = restarted();
    held(&mut r, 1, 5, 9 * S + 500_000);
    r.turn(2, 6, 11 * S);
    let v = check(&r.h, BOUND).verdict(Profile::Unsafe);
    assert!(v.pass, "{:?}", v.reasons);
    assert!(
        v.notes.iter().any(|n| n.contains("no stale write")),
        "{:?}",
        v.notes
    );
    // Worker 1 wakes and tries: refused, and the note goes.
    r.access(
        1,
        5,
        AccessOp::Write {
            value: 50,
            read: 1,
            past_validity: true,
        },
        11 * S + 500_000,
    );
    let f = check(&r.h, BOUND);
    assert_eq!(f.fences.stale_writes, 1);
    let v = f.verdict(Profile::Unsafe);
    assert!(v.pass, "{:?}", v.reasons);
    assert!(!v.notes.iter().any(|n| n.contains("no stale write")));
}

#[test]
fn findings_serialise() {
    let f = check(&Run::clean(Profile::Safe).h, BOUND);
    let v = serde_json::to_value(&f).unwrap();
    assert_eq!(v["acquisitions"], 4);
    assert_eq!(v["liveness"]["bound"], BOUND);
    let back: Findings = serde_json::from_value(v).unwrap();
    assert_eq!(back, f);
}
