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
/// failing seed, printed so that `SIM_SEED` replays it. Returns the
/// counts summed over the runs.
fn run_seeds(name: &str, range: core::ops::Range<u64>, make: fn(u64) -> Scenario) -> RunReport {
    if let Some(seed) = replay() {
        let sc = make(seed);
        println!("{name} seed {seed}: {sc:#?}");
        let report = run(sc);
        println!("{report:#?}");
        assert!(report.violations.is_empty(), "{name}: seed {seed} failed");
        return report;
    }
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let range = range.clone();
            std::thread::spawn(move || {
                let mut totals = RunReport::default();
                for seed in range.filter(|s| s % threads == t) {
                    let report = match std::panic::catch_unwind(|| run(make(seed))) {
                        Ok(report) => report,
                        Err(_) => return Err((seed, RunReport::default())),
                    };
                    if !report.violations.is_empty() {
                        return Err((seed, report));
                    }
                    add(&mut totals, &report);
                }
                Ok(totals)
            })
        })
        .collect();
    let mut totals = RunReport::default();
    for h in handles {
        match h.join().unwrap() {
            Ok(part) => add(&mut totals, &part),
            Err((seed, report)) => {
                panic!(
                    "{name}: seed {seed} failed (replay with SIM_SEED={seed}): {:?} (none: it panicked)",
                    report.violations
                )
            }
        }
    }
    println!(
        "{name}: {} seeds, {} grants, {} failed acquisitions, {} extensions, {} locks lost",
        range.end - range.start,
        totals.grants,
        totals.failures,
        totals.extensions,
        totals.lost
    );
    totals
}

fn add(totals: &mut RunReport, report: &RunReport) {
    totals.grants += report.grants;
    totals.failures += report.failures;
    totals.extensions += report.extensions;
    totals.lost += report.lost;
}

#[test]
fn within_the_assumptions_no_checker_fires() {
    let totals = run_seeds("assumptions", 0..seeds(), Scenario::within_assumptions);
    if replay().is_none() {
        // The runs did real work, with contention and faults, and holders
        // that extended their locks and lost some.
        assert!(totals.grants > seeds() as usize, "{} grants", totals.grants);
        assert!(
            totals.failures > 0,
            "no acquisition ever failed: the faults did nothing"
        );
        assert!(totals.extensions > seeds() as usize, "{totals:?}");
        assert!(totals.lost > 0, "no watchdog ever lost a lock: {totals:?}");
    }
}

#[test]
fn with_a_majority_up_and_no_contention_every_acquisition_succeeds() {
    let n = (seeds() / 10).max(100);
    let totals = run_seeds("liveness", 0..n, Scenario::liveness);
    if replay().is_none() {
        assert_eq!(totals.failures, 0);
        assert!(totals.grants >= 2 * n as usize);
        assert!(totals.extensions > 0, "{totals:?}");
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

/// Contended holders that keep their locks with the watchdog, for one to
/// three validities; servers 0 and 1 of three restart without persistence
/// at once, with the restart guard on.
fn extending_with_restarts(seed: u64) -> Scenario {
    let mut sc = quiet(contended(seed));
    sc.servers = 3;
    sc.watchdog = true;
    sc.hold_permille = (1_500, 3_000);
    sc.crashes = Some(Crashes {
        per_ms_ppm: 3_000,
        persistent: false,
        down_ms: (1, 3),
        only_first: 2,
    });
    sc.config.restart_guard = Some(Duration::from_millis(sc.ttl_ms));
    sc
}

#[test]
fn extensions_with_the_restart_guard_stay_safe() {
    // A key lost on a majority fails the next extension (a majority says it
    // is no longer ours), and the holder stops before the guard lets a
    // restarted server vote for anyone else.
    let (mut extensions, mut lost) = (0, 0);
    let mut flagged = None;
    for seed in 0..150 {
        let report = run(extending_with_restarts(seed));
        extensions += report.extensions;
        lost += report.lost;
        if let Some(v) = report.violations.first() {
            flagged.get_or_insert((seed, v.clone()));
        }
    }
    assert!(
        extensions > 0 && lost > 0,
        "{extensions} extensions, {lost} lost"
    );
    assert_eq!(flagged, None);
}

/// Contended holders that keep their locks with the watchdog for one to
/// three validities, over three servers that are often cut off (for up to a
/// ttl) and connections that often reset: many extension rounds reach only
/// some of the servers.
fn extending_over_a_bad_network(seed: u64) -> Scenario {
    let mut sc = quiet(contended(seed));
    sc.servers = 3;
    sc.watchdog = true;
    sc.hold_permille = (1_500, 3_000);
    sc.partition = (1_000, sc.ttl_ms);
    sc.reset_ppm = 20_000;
    sc
}

#[test]
fn extensions_over_a_bad_network_stay_safe() {
    let mut extensions = 0;
    let mut flagged = 0;
    let mut first = None;
    for seed in 0..200 {
        let report = run(extending_over_a_bad_network(seed));
        extensions += report.extensions;
        if let Some(v) = report.violations.first() {
            flagged += 1;
            first.get_or_insert((seed, v.clone()));
        }
    }
    assert!(extensions > 1_000, "{extensions} extensions");
    assert_eq!(flagged, 0, "{first:?}");
}

#[test]
fn broken_variant_half_quorum_extension_is_caught() {
    // The same runs, with acquisitions as they are but extensions that
    // count with N/2 votes (one of three): a holder extends on the one
    // server it reached while its key expires on the two others, where
    // another client takes the lock.
    let (flagged, first) = violations(200, |seed| {
        let mut sc = extending_over_a_bad_network(seed);
        sc.extend_config = Some(Config {
            mutants: Mutants {
                half_quorum: true,
                ..Mutants::NONE
            },
            ..sc.config
        });
        sc
    });
    println!("extension quorum N/2: {flagged}/200 runs flagged, e.g. {first:?}");
    assert!(flagged > 0);
}

/// Contended holders with watchdogs, and late replies: frequent delay
/// spikes of up to a ttl, on top of the usual resets and partitions.
fn extending_with_late_replies(seed: u64) -> Scenario {
    let mut sc = contended(seed);
    sc.watchdog = true;
    sc.hold_permille = (1_500, 3_000);
    sc.crashes = None;
    sc.pause = (0, (0, 0));
    sc.spike = (50_000, sc.ttl_ms * 1_000);
    sc
}

#[test]
fn negative_control_a_late_extension_is_caught() {
    // A broken client that keeps extending until its validity ends and
    // counts a round whose majority came too late: checker 6 fires. The
    // real watchdog, in the same runs, is never flagged.
    let mut late = 0;
    let mut flagged = 0;
    let mut real_flagged = None;
    for seed in 0..150 {
        let mut sc = extending_with_late_replies(seed);
        if let Some(v) = run(sc.clone()).violations.first() {
            real_flagged.get_or_insert((seed, v.clone()));
        }
        sc.late_extensions_count = true;
        let report = run(sc);
        flagged += u32::from(!report.violations.is_empty());
        late += report
            .violations
            .iter()
            .filter(|v| matches!(v, Violation::LateExtension { .. }))
            .count();
    }
    println!("late extensions counted: {flagged}/150 runs flagged, {late} late extensions");
    assert_eq!(real_flagged, None);
    assert!(late > 0);
}

/// Bytes lost on live connections (requests, replies), replies that come
/// twice, and resets between a request and its reply, with contention:
/// the sessions find the connections out of step and replace them, and no
/// checker fires.
fn losing_bytes_contended(seed: u64) -> Scenario {
    let mut sc = Scenario::losing_bytes(seed);
    sc.clients = 3;
    sc.hold_permille = (200, 800);
    sc
}

#[test]
fn lost_and_duplicated_bytes_on_live_connections_are_survived() {
    let n = (seeds() / 10).max(200);
    let totals = run_seeds("losing bytes", 0..n, Scenario::losing_bytes);
    if replay().is_none() {
        // Checker 3 held after the faults ended, and the faults did fail
        // acquisitions while they lasted.
        assert!(totals.grants > 10 * n as usize, "{totals:?}");
        assert!(totals.failures > 0, "the faults did nothing: {totals:?}");
    }
    let totals = run_seeds("losing bytes, contended", 0..n, losing_bytes_contended);
    if replay().is_none() {
        assert!(totals.grants > 10 * n as usize, "{totals:?}");
    }
}

#[test]
fn negative_control_a_session_that_keeps_an_out_of_step_connection_is_caught() {
    // A broken session that never probes: a connection that lost a request
    // or a reply stays out of step, and the acquisitions after the faults
    // ended keep failing (checker 3).
    let (flagged, first) = violations(40, |seed| {
        let mut sc = Scenario::losing_bytes(seed);
        sc.session_hook = Some(|s| s.keep_out_of_step());
        sc
    });
    assert!(flagged >= 30, "only {flagged} of 40 runs caught: {first:?}");
    // The same runs with the real session: none.
    let (flagged, first) = violations(40, Scenario::losing_bytes);
    assert_eq!(flagged, 0, "{first:?}");
}
