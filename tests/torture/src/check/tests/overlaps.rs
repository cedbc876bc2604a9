//! Overlapping holds, and the faults that excuse them.

use super::*;

#[test]
fn overlap_inside_the_assumptions_fails_every_profile() {
    let mut r = Run::clean(Profile::Safe);
    // Worker 2 acquires while worker 1's hold at 7 s still runs.
    r.turn(2, 5, 7 * S + 100_000);
    let f = check(&r.h, BOUND);
    assert_eq!(f.overlaps.len(), 1);
    let o = &f.overlaps[0];
    assert_eq!((o.workers, o.fences), ([1, 2], [4, 5]));
    assert_eq!((o.from, o.until), (7 * S + 100_000, 7 * S + 300_000));
    assert!(!o.outside_assumptions());
    assert_eq!(f.overlapping_holds().len(), 2);
    fails_with(&r.h, "inside the assumptions");
    r.h.profile = Profile::Unsafe;
    fails_with(&r.h, "inside the assumptions");
}

#[test]
fn holds_that_only_touch_or_share_a_worker_do_not_overlap() {
    let mut r = Run::clean(Profile::Safe);
    // Acquired exactly when worker 1's hold ended: [a, e) intervals.
    r.turn(2, 5, 7 * S + 300_000);
    // Worker 2 again, on top of its own hold.
    r.turn(2, 6, 7 * S + 400_000);
    assert!(check(&r.h, BOUND).overlaps.is_empty());
}

#[test]
fn the_end_of_a_hold_is_its_first_of_validity_release_and_loss() {
    let mut r = Run::clean(Profile::Safe);
    // Worker 1 paused: never released; its validity ends at 9 s.
    r.h.holds[3].released = None;
    r.turn(2, 5, 8 * S);
    assert_eq!(check(&r.h, BOUND).overlaps.len(), 1);
    // Learnt of the loss at 7.5 s: no overlap.
    r.h.holds[3].lost = Some(7 * S + 500_000);
    assert!(check(&r.h, BOUND).overlaps.is_empty());
}

#[test]
fn overlap_after_an_unsafe_restart_is_the_known_limit() {
    let mut r = Run::clean(Profile::Unsafe);
    r.fault(
        FaultKind::KillImmediateRestart,
        10 * S,
        10 * S + 50_000,
        true,
    );
    // Worker 1 acquired before the restart and holds for its whole ttl.
    r.turn(1, 5, 9 * S + 500_000);
    r.h.holds.last_mut().unwrap().released = None;
    // Worker 2 acquires after the restart (key forgotten), within a ttl.
    r.turn(2, 6, 11 * S);
    let f = check(&r.h, BOUND);
    assert_eq!(f.overlaps.len(), 1);
    assert_eq!(f.overlaps[0].breaking_fault, Some(1));
    assert_eq!(f.overlaps_outside_assumptions, 1);
    let v = f.verdict(Profile::Unsafe);
    assert!(v.pass, "{:?}", v.reasons);
    assert!(v.notes[0].contains("known limit"));
    // With the guard on, or in the safe profile, no overlap is allowed.
    assert!(!f.verdict(Profile::UnsafeGuarded).pass);
    assert!(!f.verdict(Profile::Safe).pass);
    // An overlap more than a ttl after the heal is not explained by it.
    let mut late = Run::clean(Profile::Unsafe);
    late.fault(
        FaultKind::KillImmediateRestart,
        10 * S,
        10 * S + 50_000,
        true,
    );
    late.turn(1, 5, 12 * S + 100_000);
    late.h.holds.last_mut().unwrap().released = None;
    late.turn(2, 6, 13 * S);
    let f = check(&late.h, BOUND);
    assert_eq!(f.overlaps_inside_assumptions, 1);
    // A fault that keeps the assumptions explains nothing.
    let mut safe_fault = Run::clean(Profile::Unsafe);
    safe_fault.fault(FaultKind::KillDelayedRestart, 10 * S, 13 * S, false);
    safe_fault.turn(1, 5, 9 * S + 500_000);
    safe_fault.h.holds.last_mut().unwrap().released = None;
    safe_fault.turn(2, 6, 11 * S);
    assert_eq!(check(&safe_fault.h, BOUND).overlaps_inside_assumptions, 1);
}

#[test]
fn an_overlap_merely_reaching_into_a_breaking_window_is_not_excused() {
    // Both acquired before the restart: a key forgotten at 10 s cannot
    // have let worker 2 in at 9.5 s, though the overlap runs past 10 s.
    let mut r = restarted();
    held(&mut r, 1, 5, 9 * S);
    held(&mut r, 2, 6, 9 * S + 500_000);
    let f = check(&r.h, BOUND);
    assert_eq!(f.overlaps.len(), 1);
    assert_eq!(f.overlaps[0].breaking_fault, None);
    assert_eq!(f.overlaps_inside_assumptions, 1);
    // Both acquired after the restart: each went through the restarted
    // server, which had forgotten nothing that either holds.
    let mut r = restarted();
    held(&mut r, 1, 5, 10 * S + 500_000);
    held(&mut r, 2, 6, 11 * S);
    let f = check(&r.h, BOUND);
    assert_eq!(f.overlaps_inside_assumptions, 1, "{:?}", f.overlaps);
    // The known limit itself: the first before the restart, the second
    // after it, within a ttl of the heal.
    let mut r = restarted();
    held(&mut r, 1, 5, 9 * S + 500_000);
    held(&mut r, 2, 6, 11 * S);
    let f = check(&r.h, BOUND);
    assert_eq!(f.overlaps[0].breaking_fault, Some(1));
    // The window: from the kill at 10 s to a ttl after the heal, 12.05 s,
    // of a 60 s run.
    let w = &f.breaking_windows;
    assert_eq!(
        (w.faults, w.covered, w.duration),
        (1, 2 * S + 50_000, 60 * S)
    );
    assert!((w.fraction() - 2.05 / 60.0).abs() < 1e-9);
    let v = f.verdict(Profile::Unsafe);
    assert!(
        v.notes.iter().any(|n| n.contains("cover 3.4% of the run")),
        "{:?}",
        v.notes
    );
    // The second acquired during the restart (a server may answer
    // before the nemesis notes that it is back): still the limit.
    let mut r = restarted();
    held(&mut r, 1, 5, 9 * S + 500_000);
    held(&mut r, 2, 6, 10 * S + 20_000);
    let f = check(&r.h, BOUND);
    assert_eq!(f.overlaps[0].breaking_fault, Some(1));
}
