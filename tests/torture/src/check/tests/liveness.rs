//! Recovery after faults, and stalls.

use super::*;

#[test]
fn liveness_late_never_and_unjudged() {
    let mut r = Run::clean(Profile::Safe);
    // Healed at 8 s; next acquisition at 20 s: late (bound 10 s).
    r.fault(FaultKind::ProxyBlackhole, 7 * S + 500_000, 8 * S, false);
    r.turn(2, 5, 20 * S);
    // Healed at 30 s; nothing after, and the run lasts to 60 s: never.
    r.fault(FaultKind::PauseWorker, 29 * S, 30 * S, false);
    // Healed at 55 s: the run ends within the bound: undecided.
    r.fault(FaultKind::ProxyReset, 54 * S, 55 * S, false);
    r.h.faults.push(Fault {
        kind: FaultKind::ProxyHold,
        target: "server 2".to_owned(),
        start: 58 * S,
        end: None,
        breaks_assumptions: false,
    });
    let f = check(&r.h, BOUND);
    let statuses: Vec<_> = f.liveness.recoveries.iter().map(|x| x.status).collect();
    assert_eq!(
        statuses,
        [
            RecoveryStatus::Recovered,
            RecoveryStatus::Late,
            RecoveryStatus::Never,
            RecoveryStatus::Undecided,
            RecoveryStatus::Unhealed
        ]
    );
    assert_eq!(f.liveness.failed, 2);
    assert_eq!(f.liveness.worst, Some(12 * S));
    fails_with(&r.h, "not followed by an acquisition within 10000 ms");
    // The unsafe profile reports it without failing on it.
    let v = f.verdict(Profile::Unsafe);
    assert!(v.notes.iter().any(|n| n.contains("within 10000 ms")));
    assert!(!v.reasons.iter().any(|n| n.contains("within 10000 ms")));
}

#[test]
fn recovery_is_timed_from_the_end_of_a_run_of_overlapping_faults() {
    let mut r = Run::clean(Profile::Safe);
    r.h.duration = 25 * S;
    // A blackhole healed at 8 s inside a pause that lasts to 19 s; the
    // next acquisition at 20 s is 1 s after the faults ended.
    r.fault(FaultKind::ProxyBlackhole, 7 * S + 500_000, 8 * S, false);
    r.fault(FaultKind::PauseServers, 7 * S + 900_000, 19 * S, false);
    r.turn(2, 5, 20 * S);
    let f = check(&r.h, BOUND);
    assert_eq!(f.liveness.failed, 0, "{:?}", f.liveness.recoveries);
    assert_eq!(f.liveness.recoveries[1].healed, Some(8 * S));
    assert_eq!(f.liveness.recoveries[1].measured_from, Some(19 * S));
    assert_eq!(f.liveness.recoveries[1].recovery, Some(S));
    assert_eq!(f.liveness.recoveries[2].recovery, Some(S));
    let v = f.verdict(Profile::Safe);
    assert!(v.pass, "{:?}", v.reasons);
}

#[test]
fn a_stall_without_any_fault_fails_liveness() {
    // Nothing acquired from 7 s to 30 s, and no fault at all then.
    let mut r = Run::clean(Profile::Safe);
    r.turn(2, 5, 30 * S);
    let f = check(&r.h, BOUND);
    assert_eq!(
        f.liveness.longest_stall,
        Some(Stall {
            from: 7 * S,
            until: 30 * S
        })
    );
    assert!(f.liveness.stalled());
    assert_eq!(f.liveness.failed, 0);
    fails_with(&r.h, "no fault was active");
    // The unsafe profile notes it.
    let v = f.verdict(Profile::Unsafe);
    assert!(v.notes.iter().any(|n| n.contains("no fault was active")));
    // The same gap filled by a fault that heals 5 s before: fine.
    let mut r = Run::clean(Profile::Safe);
    r.fault(FaultKind::ProxyBlackhole, 7 * S + 500_000, 25 * S, false);
    r.turn(2, 5, 30 * S);
    let f = check(&r.h, BOUND);
    assert_eq!(
        f.liveness.longest_stall,
        Some(Stall {
            from: 25 * S,
            until: 30 * S
        })
    );
    let v = f.verdict(Profile::Safe);
    assert!(v.pass, "{:?}", v.reasons);
    // After the last acquisition, 30 s with no fault: noted, not judged.
    assert_eq!(f.liveness.final_stall.map(|x| x.len()), Some(30 * S));
    assert!(
        v.notes.iter().any(|n| n.contains("none for 30000 ms")),
        "{:?}",
        v.notes
    );
    // From the run's start too: the first acquisition 12 s in.
    let mut r = Run::new(Profile::Safe);
    r.turn(1, 1, 12 * S);
    fails_with(&r.h, "no fault was active");
}
