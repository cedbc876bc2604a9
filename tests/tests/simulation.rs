//! The deterministic simulation of Redlock (see `redlock_tests::sim`).
//!
//! - `SIM_SEEDS=N` runs N seeds (default 10,000) of scenarios within the
//!   algorithm's assumptions; every checker must stay silent.
//! - `SIM_SEED=S` replays one seed and prints its scenario and report.
//! - Negative controls break one assumption, or the algorithm itself, and
//!   must be caught.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // test driver

use redlock_core::{Config, Duration, Mutants, Retry};
use redlock_tests::sim::{Crashes, RunReport, Scenario, Violation, run};

fn seeds() -> u64 {
    std::env::var("SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000)
}

fn replay() -> Option<u64> {
    std::env::var("SIM_SEED").ok().and_then(|s| s.parse().ok())
}

/// Runs the seeds `range` of `make`, on all cores; panics with the first
/// failing seed, printed so that `SIM_SEED` replays it.
fn run_seeds(
    name: &str,
    range: core::ops::Range<u64>,
    make: fn(u64) -> Scenario,
) -> (usize, usize) {
    if let Some(seed) = replay() {
        let sc = make(seed);
        println!("{name} seed {seed}: {sc:#?}");
        let report = run(sc);
        println!("{report:#?}");
        assert!(report.violations.is_empty(), "{name}: seed {seed} failed");
        return (report.grants, report.failures);
    }
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let range = range.clone();
            std::thread::spawn(move || {
                let (mut grants, mut failures) = (0, 0);
                for seed in range.filter(|s| s % threads == t) {
                    let report = match std::panic::catch_unwind(|| run(make(seed))) {
                        Ok(report) => report,
                        Err(_) => return Err((seed, RunReport::default())),
                    };
                    if !report.violations.is_empty() {
                        return Err((seed, report));
                    }
                    grants += report.grants;
                    failures += report.failures;
                }
                Ok((grants, failures))
            })
        })
        .collect();
    let mut totals = (0, 0);
    for h in handles {
        match h.join().unwrap() {
            Ok((g, f)) => {
                totals.0 += g;
                totals.1 += f;
            }
            Err((seed, report)) => {
                panic!(
                    "{name}: seed {seed} failed (replay with SIM_SEED={seed}): {:?} (none: it panicked)",
                    report.violations
                )
            }
        }
    }
    println!(
        "{name}: {} seeds, {} grants, {} failed acquisitions",
        range.end - range.start,
        totals.0,
        totals.1
    );
    totals
}

#[test]
fn within_the_assumptions_no_checker_fires() {
    let (grants, failures) = run_seeds("assumptions", 0..seeds(), Scenario::within_assumptions);
    if replay().is_none() {
        // The runs did real work, with contention and faults.
        assert!(grants > seeds() as usize, "{grants} grants");
        assert!(
            failures > 0,
            "no acquisition ever failed: the faults did nothing"
        );
    }
}

#[test]
fn with_a_majority_up_and_no_contention_every_acquisition_succeeds() {
    let n = (seeds() / 10).max(100);
    let (grants, failures) = run_seeds("liveness", 0..n, Scenario::liveness);
    if replay().is_none() {
        assert_eq!(failures, 0);
        assert!(grants >= 2 * n as usize);
    }
}

/// Runs `count` seeds of a scenario that breaks something, and returns how
/// many runs the checkers flagged, with the first violation seen.
fn violations(count: u64, make: impl Fn(u64) -> Scenario) -> (u64, Option<Violation>) {
    let mut flagged = 0;
    let mut first = None;
    for seed in 0..count {
        let RunReport { violations, .. } = run(make(seed));
        if !violations.is_empty() {
            flagged += 1;
            first.get_or_insert(violations[0].clone());
        }
    }
    (flagged, first)
}

/// Contention on one resource: 4 clients, long holds, short idle.
fn contended(seed: u64) -> Scenario {
    let mut sc = Scenario::within_assumptions(seed);
    sc.clients = 4;
    sc.cycles = 6;
    sc.servers = 5;
    sc.hold_permille = (900, 990);
    sc.idle_ms = (0, 2);
    sc.config.retry = Retry {
        retries: 20,
        jitter: Duration::from_millis(3),
    };
    sc
}

fn quiet(mut sc: Scenario) -> Scenario {
    sc.reset_ppm = 0;
    sc.partition = (0, 0);
    sc.crashes = None;
    sc.pause = (0, (0, 0));
    sc.spike = (0, 0);
    sc
}

#[test]
fn negative_control_restart_without_persistence_or_delay_is_caught() {
    let (flagged, first) = violations(300, |seed| {
        let mut sc = quiet(contended(seed));
        sc.servers = 3;
        sc.config.fencing = seed % 2 == 0;
        sc.crashes = Some(Crashes {
            per_ms_ppm: 3_000,
            persistent: false,
            down_ms: (1, 3),
            only_first: 3,
        });
        sc
    });
    println!("restart without persistence: {flagged}/300 runs flagged, e.g. {first:?}");
    assert!(flagged > 0);
}

#[test]
fn the_restart_guard_makes_immediate_restarts_safe() {
    let (flagged, first) = violations(300, |seed| {
        let mut sc = quiet(contended(seed));
        sc.servers = 3;
        sc.crashes = Some(Crashes {
            per_ms_ppm: 3_000,
            persistent: false,
            down_ms: (1, 3),
            only_first: 3,
        });
        sc.config.restart_guard = Some(Duration::from_millis(sc.ttl_ms));
        sc
    });
    assert_eq!(flagged, 0, "{first:?}");
}

#[test]
fn negative_control_clock_drift_beyond_the_bound_is_caught() {
    let (flagged, first) = violations(300, |seed| {
        let mut sc = quiet(contended(seed));
        sc.clock_ppm = 100_000;
        sc
    });
    println!("clock drift 10%: {flagged}/300 runs flagged, e.g. {first:?}");
    assert!(flagged > 0);
}

#[test]
fn negative_control_a_client_paused_past_its_validity_is_caught() {
    let (flagged, first) = violations(300, |seed| {
        let mut sc = quiet(contended(seed));
        sc.pause = (300_000, (sc.ttl_ms, sc.ttl_ms * 3));
        sc.pause_while_holding = true;
        sc
    });
    println!("pause past validity: {flagged}/300 runs flagged, e.g. {first:?}");
    assert!(flagged > 0);
}

fn mutant(m: Mutants) -> impl Fn(u64) -> Scenario {
    move |seed| {
        let mut sc = quiet(contended(seed));
        sc.config = Config {
            mutants: m,
            ..sc.config
        };
        sc
    }
}

#[test]
fn broken_variant_half_quorum_is_caught() {
    let m = Mutants {
        half_quorum: true,
        ..Mutants::NONE
    };
    let (flagged, first) = violations(300, |seed| {
        let mut sc = mutant(m)(seed);
        sc.servers = 4;
        sc
    });
    println!("quorum N/2: {flagged}/300 runs flagged, e.g. {first:?}");
    assert!(flagged > 0);
}

#[test]
fn broken_variant_no_drift_term_is_caught() {
    let (flagged, first) = violations(60, |seed| {
        let mut sc = mutant(Mutants {
            no_drift: true,
            ..Mutants::NONE
        })(seed);
        // Clock rates at the bound the drift term is there for (servers
        // 0.25% fast, clients 0.25% slow), holders using their whole
        // validity, contenders that keep trying.
        sc.clock_ppm = 2_500;
        sc.clock_extreme = true;
        sc.ttl_ms = 1_000 + seed % 1_000;
        sc.cycles = 3;
        sc.hold_permille = (999, 1_000);
        sc.config.retry = Retry {
            retries: 100_000,
            jitter: Duration::from_millis(1),
        };
        sc
    });
    println!("no drift term: {flagged}/60 runs flagged, e.g. {first:?}");
    assert!(flagged > 0);
}

#[test]
fn broken_variant_bare_del_release_is_caught() {
    let (flagged, first) = violations(300, |seed| {
        let mut sc = mutant(Mutants {
            bare_del_release: true,
            ..Mutants::NONE
        })(seed);
        // Late messages: a release that arrives after its key expired.
        sc.spike = (50_000, sc.ttl_ms * 2_000);
        sc
    });
    println!("bare DEL release: {flagged}/300 runs flagged, e.g. {first:?}");
    assert!(flagged > 0);
}

#[test]
fn at_the_drift_bound_the_real_algorithm_stays_safe() {
    // The same worst-case clocks and hungry contenders as the no-drift
    // mutant, with the drift term in place.
    let (flagged, first) = violations(40, |seed| {
        let mut sc = quiet(contended(seed));
        sc.clock_ppm = 2_500;
        sc.clock_extreme = true;
        sc.ttl_ms = 1_000 + seed % 1_000;
        sc.cycles = 3;
        sc.hold_permille = (999, 1_000);
        sc.config.retry = Retry {
            retries: 100_000,
            jitter: Duration::from_millis(1),
        };
        sc
    });
    assert_eq!(flagged, 0, "{first:?}");
}

#[test]
fn fencing_survives_a_minority_restarting_without_persistence() {
    // F1 repair: one server of three (or two of five) keeps losing its
    // counters; the restart guard keeps S1, the repair rule keeps the
    // fence tokens increasing.
    let (flagged, first) = violations(300, |seed| {
        let mut sc = quiet(contended(seed));
        sc.servers = if seed % 2 == 0 { 3 } else { 5 };
        sc.config.fencing = true;
        sc.config.restart_guard = Some(Duration::from_millis(sc.ttl_ms));
        sc.crashes = Some(Crashes {
            per_ms_ppm: 3_000,
            persistent: false,
            down_ms: (1, 3),
            only_first: sc.servers / 2,
        });
        sc
    });
    assert_eq!(flagged, 0, "{first:?}");
}

#[test]
fn negative_control_fencing_without_the_repair_rule_is_caught() {
    // A server restarting without persistence, no guard, and the naive
    // fence rule (a missing counter counts as 0): the fence checker itself
    // must fire (tokens going backwards), not only the overlap checker.
    let mut flagged = 0;
    let mut regressions = 0;
    for seed in 0..300 {
        let mut sc = quiet(contended(seed));
        sc.servers = 3;
        sc.config.fencing = true;
        sc.config.mutants = Mutants {
            naive_fence: true,
            ..Mutants::NONE
        };
        sc.crashes = Some(Crashes {
            per_ms_ppm: 3_000,
            persistent: false,
            down_ms: (1, 3),
            only_first: 1,
        });
        let report = run(sc);
        flagged += u32::from(!report.violations.is_empty());
        regressions += report
            .violations
            .iter()
            .filter(|v| matches!(v, Violation::FenceRegression { .. }))
            .count();
    }
    println!(
        "naive fence rule, restarts without guard: {flagged}/300 runs flagged, {regressions} fence regressions"
    );
    assert!(regressions > 0);
}

#[test]
fn the_repair_rule_keeps_fences_increasing_even_without_the_guard() {
    // The same restarts with the real rule: S1 can break (no guard), but the
    // fences never go backwards.
    let mut regressions = 0;
    for seed in 0..300 {
        let mut sc = quiet(contended(seed));
        sc.servers = 3;
        sc.config.fencing = true;
        sc.crashes = Some(Crashes {
            per_ms_ppm: 3_000,
            persistent: false,
            down_ms: (1, 3),
            only_first: 1,
        });
        let report = run(sc);
        regressions += report
            .violations
            .iter()
            .filter(|v| matches!(v, Violation::FenceRegression { .. }))
            .count();
    }
    assert_eq!(regressions, 0);
}
