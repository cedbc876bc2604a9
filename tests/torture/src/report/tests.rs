//! The reports' tests.

use super::*;
use crate::check::check;
use crate::history::{
    Access, AccessOp, Attempt, AttemptOutcome, Fault, Hold, Micros, Profile, RunClock,
};

const S: Micros = 1_000_000;

/// Two workers, three attempts (one conflict), two holds, four accesses
/// (one refused), two faults (one breaking).
fn small() -> History {
    let attempt = |worker, kind, start, end, outcome| Attempt {
        worker,
        kind,
        start,
        end,
        outcome,
    };
    let access = |worker, fence, op, at, accepted, max_fence_before, value_before| Access {
        worker,
        fence,
        op,
        at,
        accepted,
        max_fence_before,
        value_before,
    };
    History {
        profile: Profile::Safe,
        seed: 4242,
        clock: RunClock {
            epoch_unix_micros: 0,
        },
        duration: 20 * S,
        max_ttl: 2 * S,
        attempts: vec![
            attempt(
                1,
                WorkerKind::Watchdog,
                S,
                S + 3_000,
                AttemptOutcome::Acquired { fence: 1 },
            ),
            attempt(
                2,
                WorkerKind::Cli,
                S + 10_000,
                S + 17_000,
                AttemptOutcome::Conflict,
            ),
            attempt(
                2,
                WorkerKind::Cli,
                4 * S,
                4 * S + 250_000,
                AttemptOutcome::Acquired { fence: 2 },
            ),
        ],
        holds: vec![
            Hold {
                worker: 1,
                kind: WorkerKind::Watchdog,
                fence: 1,
                acquired: S + 3_000,
                valid_until: 3 * S,
                released: Some(2 * S),
                lost: None,
            },
            Hold {
                worker: 2,
                kind: WorkerKind::Cli,
                fence: 2,
                acquired: 4 * S + 250_000,
                valid_until: 6 * S,
                released: None,
                lost: None,
            },
        ],
        accesses: vec![
            access(1, 1, AccessOp::Read, S + 100_000, true, 0, 0),
            access(
                1,
                1,
                AccessOp::Write {
                    value: 1,
                    read: 0,
                    past_validity: false,
                },
                S + 200_000,
                true,
                1,
                0,
            ),
            access(2, 2, AccessOp::Read, 5 * S, true, 1, 1),
            access(
                1,
                1,
                AccessOp::Write {
                    value: 5,
                    read: 0,
                    past_validity: true,
                },
                5 * S + 1,
                false,
                2,
                1,
            ),
            access(
                2,
                2,
                AccessOp::Write {
                    value: 2,
                    read: 1,
                    past_validity: false,
                },
                5 * S + 2,
                true,
                2,
                1,
            ),
        ],
        faults: vec![
            Fault {
                kind: FaultKind::ProxyDelay,
                target: "server 6380".to_owned(),
                start: 4 * S - 100_000,
                end: Some(4 * S + 100_000),
                breaks_assumptions: false,
            },
            Fault {
                kind: FaultKind::KillImmediateRestart,
                target: "server 6381".to_owned(),
                start: 10 * S,
                end: Some(10 * S + 10_000),
                breaks_assumptions: true,
            },
        ],
        leftovers: vec![],
        repairs: vec![],
    }
}

#[test]
fn percentiles_by_nearest_rank() {
    let p = Percentiles::of((1..=100).rev().collect());
    assert_eq!(
        (p.count, p.p50, p.p90, p.p99, p.max),
        (100, 50, 90, 99, 100)
    );
    let p = Percentiles::of(vec![7]);
    assert_eq!((p.p50, p.p99, p.max), (7, 7, 7));
    assert_eq!(Percentiles::of(vec![]), Percentiles::default());
}

#[test]
fn figures_of_a_small_history() {
    let h = small();
    let g = figures(&h, &check(&h, 5 * S));
    assert_eq!(g.workers, [("watchdog", 1), ("plain", 0), ("cli", 1)]);
    let o = &g.operations;
    assert_eq!(
        (o.attempts.total, o.attempts.acquired, o.attempts.conflict),
        (3, 2, 1)
    );
    assert_eq!((o.holds, o.holds_released, o.holds_expired), (2, 1, 1));
    assert_eq!(
        (o.reads_accepted, o.writes_accepted, o.writes_rejected),
        (2, 2, 1)
    );
    assert_eq!((o.past_validity.issued, o.past_validity.rejected), (1, 1));
    assert_eq!((g.acquisitions, g.conflicts, g.rejections), (2, 1, 1));
    let delay = &g.faults[4];
    assert_eq!(
        (delay.kind, delay.count, delay.total),
        (FaultKind::ProxyDelay, 1, 200_000)
    );
    assert_eq!((g.faults[1].count, g.faults[1].breaking), (1, 1));
    // The attempt at 4 s met the delay; the two at 1 s did not.
    assert_eq!(g.latency.during_faults.count, 1);
    assert_eq!(g.latency.during_faults.max, 250_000);
    assert_eq!(g.latency.outside_faults.count, 2);
    assert_eq!(g.latency.outside_faults.max, 7_000);
    // Recovered after 150 ms; the restart at 10 s was never followed by
    // an acquisition.
    assert_eq!((g.liveness.recovered, g.liveness.never), (1, 1));
    assert_eq!(g.liveness.worst, Some(150_000));
    assert_eq!(g.violations.liveness, 1);
    assert!(!g.verdict.pass);
}

#[test]
fn the_text_has_the_figures() {
    let h = small();
    let t = text(&h, &check(&h, 5 * S));
    for needle in [
        "profile Safe, seed 4242, 20.000 s, largest ttl 2000.000 ms",
        "workers: 2 (1 watchdog, 0 plain, 1 cli)",
        "lock attempts        3: acquired 2, conflict 1",
        "holds                2: released 1, lost 0, expired 1",
        "writes               3: accepted 2, rejected 1",
        "writes past validity 1: rejected 1, accepted 0",
        "faults injected: 2",
        "proxy: delay                                                 1, 0.200 s in all",
        "restarted at once without persistence",
        "(breaks the assumptions)",
        "acquisitions 2, conflicts 1, rejections 1 (0 reads, 1 writes)",
        "overlapping holds inside the assumptions   0",
        "lost updates                               0",
        "liveness failures                          1",
        "false records of the resource              0",
        "excuse overlaps: 2.010 s, 10.1% of the run",
        "outside faults: 2897.000 ms (from 1.003 s to 3.900 s); after the last one: 9990.000 ms",
        "recovered 1, late 0, never 1",
        "worst 150.000 ms",
        "healed at 10.010 s: no acquisition after",
        "during faults",
        "250.000 ms",
        "7.000 ms",
        "verdict (Safe): FAIL",
        "not followed by an acquisition within 5000 ms",
    ] {
        assert!(t.contains(needle), "{needle:?} not in\n{t}");
    }
}

#[test]
fn the_json_has_the_same_figures() {
    let h = small();
    let f = check(&h, 5 * S);
    let j = json(&h, &f);
    let g = &j["figures"];
    assert_eq!(g["profile"], "Safe");
    assert_eq!(g["seed"], 4242);
    assert_eq!(g["operations"]["attempts"]["conflict"], 1);
    assert_eq!(g["operations"]["writes_rejected"], 1);
    assert_eq!(g["faults"][4]["count"], 1);
    assert_eq!(g["faults"][4]["label"], "proxy: delay");
    assert_eq!(g["acquisitions"], 2);
    assert_eq!(g["rejections"], 1);
    assert_eq!(g["violations"]["liveness"], 1);
    assert_eq!(g["latency"]["during_faults"]["p50"], 250_000);
    assert_eq!(g["latency"]["outside_faults"]["count"], 2);
    assert_eq!(g["verdict"]["pass"], false);
    assert_eq!(j["findings"]["liveness"]["bound"], 5 * S);
    assert_eq!(
        j["findings"]["liveness"]["recoveries"][1]["status"],
        "Never"
    );
}

#[test]
fn a_regression_is_reported_when_its_fence_came_back() {
    let mut h = small();
    // Worker 1 calls at 8 s and gets fence 1 back at 8.005 s, after
    // fence 2 was handed out.
    h.attempts.push(Attempt {
        worker: 1,
        kind: WorkerKind::Watchdog,
        start: 8 * S,
        end: 8 * S + 5_000,
        outcome: AttemptOutcome::Acquired { fence: 1 },
    });
    let t = text(&h, &check(&h, 5 * S));
    assert!(
        t.contains("worker 1 got fence 1 at 8.005 s, after fence 2 was handed out"),
        "{t}"
    );
}
