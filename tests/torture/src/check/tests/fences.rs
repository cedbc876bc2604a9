//! The fencing replay, writes past validity, lost updates, F1 and repairs.

use super::*;

#[test]
fn a_stale_write_accepted_fails_every_profile() {
    let mut r = Run::clean(Profile::Unsafe);
    r.fault(
        FaultKind::KillImmediateRestart,
        10 * S,
        10 * S + 50_000,
        true,
    );
    r.turn(1, 5, 9 * S + 500_000);
    r.h.holds.last_mut().unwrap().released = None;
    r.turn(2, 6, 11 * S);
    assert!(check(&r.h, BOUND).verdict(Profile::Unsafe).pass);
    // Worker 1 wakes and the resource wrongly takes its write (fence 5
    // after fence 6 was used).
    let before = r.register;
    r.h.accesses.push(Access {
        worker: 1,
        fence: 5,
        op: AccessOp::Write {
            value: 99,
            read: before,
            past_validity: true,
        },
        at: 11 * S + 500_000,
        accepted: true,
        max_fence_before: 6,
        value_before: before,
    });
    let f = check(&r.h, BOUND);
    assert_eq!(f.fences.stale_writes_accepted, 1);
    assert_eq!(f.fences.past_validity.accepted_after_newer_fence, 1);
    assert_eq!(
        f.fences.violations[0].kind,
        FenceViolationKind::StaleAccepted { max_fence: 6 }
    );
    fails_with(&r.h, "broke the fencing rule");
    r.h.profile = Profile::Safe;
    fails_with(&r.h, "broke the fencing rule");
}

#[test]
fn stale_writes_refused_are_counted_not_failed() {
    let mut r = Run::clean(Profile::Safe);
    let before = r.register;
    // Worker 2 (fence 2) wakes after fence 4 was used: refused.
    r.access(
        2,
        2,
        AccessOp::Write {
            value: 50,
            read: 1,
            past_validity: true,
        },
        8 * S,
    );
    // Worker 3 wakes past its validity with the newest fence (nobody
    // newer touched the resource): accepted, harmless; but a newer
    // holder (fence 9) had acquired, unused.
    r.h.holds.push(Hold {
        worker: 1,
        kind: WorkerKind::Plain,
        fence: 9,
        acquired: 8 * S,
        valid_until: 10 * S,
        released: Some(10 * S),
        lost: None,
    });
    r.access(3, 8, AccessOp::Read, 8 * S + 10);
    r.access(
        3,
        8,
        AccessOp::Write {
            value: before + 1,
            read: before,
            past_validity: true,
        },
        8 * S + 20,
    );
    let f = check(&r.h, BOUND);
    assert_eq!(f.fences.violation_count, 0);
    let p = &f.fences.past_validity;
    assert_eq!((p.issued, p.rejected, p.accepted), (2, 1, 1));
    assert_eq!(p.accepted_after_newer_fence, 0);
    assert_eq!(p.accepted_with_newer_holder, 1);
    assert_eq!(f.fences.writes_rejected, 1);
    let v = f.verdict(Profile::Safe);
    assert!(v.pass, "{:?}", v.reasons);
    assert!(v.notes.iter().any(|n| n.contains("2 write(s) past")));
}

#[test]
fn a_write_not_above_an_earlier_write_is_caught() {
    let mut r = Run::clean(Profile::Safe);
    // Fence 4 wrote last; a second write with fence 4 accepted.
    let before = r.register;
    r.h.accesses.push(Access {
        worker: 1,
        fence: 4,
        op: AccessOp::Write {
            value: before + 1,
            read: before,
            past_validity: false,
        },
        at: 7 * S + 250_000,
        accepted: true,
        max_fence_before: 4,
        value_before: before,
    });
    let f = check(&r.h, BOUND);
    assert_eq!(
        f.fences.violations[0].kind,
        FenceViolationKind::WriteNotAboveEarlier { earlier: 4 }
    );
    fails_with(&r.h, "broke the fencing rule");
}

#[test]
fn a_refusal_without_cause_and_a_false_record_are_caught() {
    let mut r = Run::clean(Profile::Safe);
    r.h.accesses[6].accepted = false; // worker 1's read with fence 4
    let f = check(&r.h, BOUND);
    assert!(matches!(
        f.fences.violations[0].kind,
        FenceViolationKind::RejectedWithoutCause { max_fence: 3 }
    ));
    let mut r = Run::clean(Profile::Safe);
    r.h.accesses[2].max_fence_before = 0;
    let f = check(&r.h, BOUND);
    assert_eq!(f.fences.violation_count, 0);
    assert_eq!(f.fences.record_mismatches, 1);
    assert!(matches!(
        f.fences.mismatches[0].kind,
        FenceViolationKind::RecordMismatch {
            max_fence: 1,
            recorded_max_fence: 0,
            ..
        }
    ));
    fails_with(&r.h, "false record");
}

#[test]
fn a_lost_update_is_caught() {
    let mut r = Run::clean(Profile::Safe);
    // Worker 1 (fence 4) writes what it would have written had it read
    // before worker 3's write: the resource took it (say it checked
    // writes only).
    if let AccessOp::Write { read, value, .. } = &mut r.h.accesses[7].op {
        *read -= 1;
        *value -= 1;
    }
    let f = check(&r.h, BOUND);
    assert_eq!(f.lost_updates.count, 1);
    assert_eq!(f.lost_updates.examples[0].access, 7);
    assert_eq!(
        (
            f.lost_updates.examples[0].read,
            f.lost_updates.examples[0].register
        ),
        (2, 3)
    );
    assert_eq!(f.fences.violation_count, 0);
    fails_with(&r.h, "lost update");
    r.h.profile = Profile::Unsafe;
    fails_with(&r.h, "lost update");
}

#[test]
fn a_fence_regression_is_caught() {
    let mut r = Run::clean(Profile::Safe);
    // Worker 2 acquires at 9 s, after fence 4 was handed out, with 3.
    r.h.attempts.push(Attempt {
        worker: 2,
        kind: WorkerKind::Cli,
        start: 9 * S,
        end: 9 * S + 5_000,
        outcome: AttemptOutcome::Acquired { fence: 3 },
    });
    let f = check(&r.h, BOUND);
    assert_eq!(f.fences.regression_count, 1);
    let g = &f.fences.regressions[0];
    assert_eq!((g.attempt, g.fence, g.earlier_fence), (4, 3, 4));
    fails_with(&r.h, "F1");
    // Concurrent attempts may return in either order: fence 4 returns
    // after fence 5, but began before fence 5 returned.
    let mut r = Run::clean(Profile::Safe);
    r.h.attempts[3].outcome = AttemptOutcome::Acquired { fence: 5 };
    r.h.attempts.push(Attempt {
        worker: 2,
        kind: WorkerKind::Cli,
        start: 7 * S - 3_000,
        end: 7 * S + 5_000,
        outcome: AttemptOutcome::Acquired { fence: 4 },
    });
    assert_eq!(check(&r.h, BOUND).fences.regression_count, 0);
}

/// A clean run, then worker 2 is handed fence 5 at 8 s (and pauses);
/// the counters are lost, the operator repairs them at 9 s with the
/// highest fence the resource accepted (4), and worker 3 is handed
/// fence 5 again at 10 s.
fn repaired(profile: Profile) -> Run {
    let mut r = Run::clean(profile);
    r.h.attempts.push(Attempt {
        worker: 2,
        kind: WorkerKind::Plain,
        start: 8 * S - 2_000,
        end: 8 * S,
        outcome: AttemptOutcome::Acquired { fence: 5 },
    });
    r.h.repairs.push(Repair {
        at: 9 * S,
        at_least: 4,
    });
    r.turn(3, 5, 10 * S);
    r
}

#[test]
fn a_fence_repeated_after_a_repair_is_a_note_unless_the_resource_accepted_it() {
    let r = repaired(Profile::Safe);
    let f = check(&r.h, BOUND);
    assert_eq!(f.fences.regression_count, 0);
    assert_eq!(f.fences.repaired_regression_count, 1);
    let g = &f.fences.repaired_regressions[0];
    assert_eq!((g.fence, g.earlier_fence, g.after_repair), (5, 5, Some(0)));
    assert_eq!((g.start, g.end), (10 * S - 2_000, 10 * S));
    let v = f.verdict(Profile::Safe);
    assert!(v.pass, "{:?}", v.reasons);
    assert!(
        v.notes.iter().any(|n| n.contains("after a repair")),
        "{:?}",
        v.notes
    );
    // Without the repair, it is a regression.
    let mut r = repaired(Profile::Safe);
    r.h.repairs.clear();
    fails_with(&r.h, "F1");
    // A repair whose floor did not take (the fence is not above it).
    let mut r = repaired(Profile::Safe);
    r.h.repairs[0].at_least = 5;
    fails_with(&r.h, "F1");
    // Fence 6 was handed out after the repair (at 10.5 s), then fence 5
    // once more: a regression after the repair, not explained by it.
    let mut r = repaired(Profile::Safe);
    for (worker, fence, t) in [(1, 6, 10 * S + 500_000), (2, 5, 12 * S)] {
        r.h.attempts.push(Attempt {
            worker,
            kind: WorkerKind::Plain,
            start: t - 1_000,
            end: t,
            outcome: AttemptOutcome::Acquired { fence },
        });
    }
    let f = check(&r.h, BOUND);
    assert_eq!(f.fences.repaired_regression_count, 1);
    assert_eq!(f.fences.regression_count, 1);
    assert_eq!(f.fences.regressions[0].earlier_fence, 6);
    // The repair came before the earlier fence was handed out: it
    // explains nothing.
    let mut r = repaired(Profile::Safe);
    r.h.repairs[0].at = 7 * S + 500_000;
    fails_with(&r.h, "F1");
    // Worker 2 had used fence 5 (its read accepted before the repair):
    // the repair's floor was below an accepted fence.
    let mut r = Run::clean(Profile::Safe);
    r.turn(2, 5, 8 * S);
    r.h.repairs.push(Repair {
        at: 9 * S,
        at_least: 4,
    });
    r.turn(3, 5, 10 * S);
    fails_with(&r.h, "F1");
    // Worker 2 wakes after the repair and its read with fence 5 is
    // accepted, after worker 3's: the repeated fence let it in.
    let mut r = repaired(Profile::Safe);
    r.access(2, 5, AccessOp::Read, 11 * S);
    assert!(r.h.accesses.last().unwrap().accepted);
    fails_with(&r.h, "F1");
}

#[test]
fn the_replay_resyncs_after_a_false_record() {
    // The record lacks worker 2's accepted write: every access after it
    // disagrees with the replay by one, but only the first is a false
    // record, and no update was lost.
    let mut r = Run::clean(Profile::Safe);
    r.h.accesses.remove(3);
    let f = check(&r.h, BOUND);
    assert_eq!(f.fences.record_mismatches, 1);
    assert_eq!(f.fences.mismatches[0].access, 3);
    assert_eq!(f.lost_updates.count, 0);
    assert_eq!(f.fences.violation_count, 0);
    fails_with(&r.h, "disagree");
}
