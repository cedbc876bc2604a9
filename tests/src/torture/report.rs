//! The report of a torture run: [`text`] for a person, [`json`] for a
//! program, both from the same [`Figures`].

use core::fmt::Write as _;

use serde::Serialize;

use super::check::{BreakingWindows, Findings, PastValidityWrites, RecoveryStatus, Stall, Verdict};
use super::history::{AttemptOutcome, FaultKind, History, Micros, Profile, WorkerKind};

/// Every fault kind, in the order reports list them.
pub const FAULT_KINDS: [FaultKind; 8] = [
    FaultKind::KillDelayedRestart,
    FaultKind::KillImmediateRestart,
    FaultKind::PauseServers,
    FaultKind::PauseWorker,
    FaultKind::ProxyDelay,
    FaultKind::ProxyHold,
    FaultKind::ProxyBlackhole,
    FaultKind::ProxyReset,
];

/// A fault kind in words.
pub fn fault_label(kind: FaultKind) -> &'static str {
    match kind {
        FaultKind::KillDelayedRestart => "servers killed, restarted after the largest ttl",
        FaultKind::KillImmediateRestart => "servers killed, restarted at once without persistence",
        FaultKind::PauseServers => "servers paused (SIGSTOP)",
        FaultKind::PauseWorker => "worker paused past its ttl (SIGSTOP)",
        FaultKind::ProxyDelay => "proxy: delay",
        FaultKind::ProxyHold => "proxy: hold",
        FaultKind::ProxyBlackhole => "proxy: blackhole",
        FaultKind::ProxyReset => "proxy: reset",
    }
}

/// A worker kind in words.
pub fn worker_label(kind: WorkerKind) -> &'static str {
    match kind {
        WorkerKind::Watchdog => "watchdog",
        WorkerKind::Plain => "plain",
        WorkerKind::Cli => "cli",
    }
}

/// Lock attempts by how they ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Outcomes {
    /// All attempts.
    pub total: usize,
    /// Acquired.
    pub acquired: usize,
    /// Held by someone else.
    pub conflict: usize,
    /// Too few servers answered usefully.
    pub unavailable: usize,
    /// A majority answered too late.
    pub expired: usize,
    /// Fence counters lost (C6).
    pub fence_lost: usize,
    /// Anything else.
    pub other: usize,
}

/// The operations of the run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Operations {
    /// Lock attempts by outcome.
    pub attempts: Outcomes,
    /// Holds.
    pub holds: usize,
    /// Holds that ended with the worker's release.
    pub holds_released: usize,
    /// Holds that ended with the worker learning the lock was lost.
    pub holds_lost: usize,
    /// Holds that ended with their validity (neither released nor known
    /// lost by then: a paused worker, say).
    pub holds_expired: usize,
    /// Reads the resource accepted.
    pub reads_accepted: usize,
    /// Reads it refused.
    pub reads_rejected: usize,
    /// Writes it accepted.
    pub writes_accepted: usize,
    /// Writes it refused.
    pub writes_rejected: usize,
    /// Writes issued past the writer's validity.
    pub past_validity: PastValidityWrites,
}

/// Faults of one kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FaultCount {
    /// The kind.
    pub kind: FaultKind,
    /// In words.
    pub label: &'static str,
    /// How many were injected.
    pub count: usize,
    /// How many of them break the assumptions.
    pub breaking: usize,
    /// Their total duration (an unhealed one counts until the run's end).
    pub total: Micros,
}

/// Violations found, by check.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Violations {
    /// Overlapping holds while the run was inside the assumptions.
    pub overlaps_inside_assumptions: usize,
    /// Overlapping holds outside them (the known limit: a violation only in
    /// the safe and guarded profiles).
    pub overlaps_outside_assumptions: usize,
    /// Accesses that broke the fencing rule.
    pub fence: usize,
    /// Accesses whose recorded state disagrees with the replay (a false
    /// record of the resource).
    pub false_records: usize,
    /// Of those, stale writes accepted.
    pub stale_writes_accepted: usize,
    /// Lost updates.
    pub lost_updates: usize,
    /// Acquisitions whose fence was not above an earlier one's (F1).
    pub fence_regressions: usize,
    /// Faults not followed by an acquisition within the bound.
    pub liveness: usize,
    /// A stall outside faults longer than the bound (a liveness failure
    /// too).
    pub stalled: bool,
    /// Processes left running.
    pub leftovers: usize,
}

/// The liveness figures.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LivenessFigures {
    /// The bound.
    pub bound: Micros,
    /// Faults followed by an acquisition within it.
    pub recovered: usize,
    /// Followed by one later than it.
    pub late: usize,
    /// Followed by none.
    pub never: usize,
    /// Healed too late in the run, or never, to judge.
    pub unjudged: usize,
    /// The median recovery measured.
    pub p50: Option<Micros>,
    /// The longest recovery measured.
    pub worst: Option<Micros>,
    /// The longest time without an acquisition while no fault was active.
    pub longest_stall: Option<Stall>,
    /// Of that kind, the time after the last acquisition (not judged).
    pub final_stall: Option<Stall>,
}

/// Percentiles of a set of durations (nearest rank; all 0 when empty).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Percentiles {
    /// How many durations.
    pub count: usize,
    /// The median.
    pub p50: Micros,
    /// The 90th percentile.
    pub p90: Micros,
    /// The 99th percentile.
    pub p99: Micros,
    /// The longest.
    pub max: Micros,
}

impl Percentiles {
    /// The percentiles of `values` (sorted here).
    pub fn of(mut values: Vec<Micros>) -> Percentiles {
        values.sort_unstable();
        let rank = |p: usize| -> Micros {
            // Nearest rank: the smallest value with at least p% at or below.
            let k = (p * values.len()).div_ceil(100).saturating_sub(1);
            values.get(k).copied().unwrap_or(0)
        };
        Percentiles {
            count: values.len(),
            p50: rank(50),
            p90: rank(90),
            p99: rank(99),
            max: values.last().copied().unwrap_or(0),
        }
    }
}

/// Lock attempt latency (call to return), during faults and outside them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Latency {
    /// Attempts whose call met a fault (between its start and its heal, or
    /// the run's end).
    pub during_faults: Percentiles,
    /// The others.
    pub outside_faults: Percentiles,
}

/// Every figure of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Figures {
    /// The profile.
    pub profile: Profile,
    /// The nemesis' seed.
    pub seed: u64,
    /// How long the run lasted.
    pub duration: Micros,
    /// The largest ttl any worker used.
    pub max_ttl: Micros,
    /// Workers by kind (label, count).
    pub workers: Vec<(&'static str, usize)>,
    /// The operations.
    pub operations: Operations,
    /// Faults injected, by kind (every kind, in [`FAULT_KINDS`] order).
    pub faults: Vec<FaultCount>,
    /// How much of the run the faults that break the assumptions can
    /// excuse overlaps in.
    pub breaking_windows: BreakingWindows,
    /// Acquisitions that repeated a fence after a repair of the counters
    /// (C6 allows it; not a violation).
    pub repaired_regressions: usize,
    /// Successful acquisitions.
    pub acquisitions: usize,
    /// Attempts that found the lock held.
    pub conflicts: usize,
    /// Accesses the resource refused.
    pub rejections: usize,
    /// Violations, by check.
    pub violations: Violations,
    /// Recovery after faults.
    pub liveness: LivenessFigures,
    /// Lock attempt latency.
    pub latency: Latency,
    /// The verdict for the run's profile.
    pub verdict: Verdict,
}

/// Computes the report's figures.
pub fn figures(h: &History, f: &Findings) -> Figures {
    let mut attempts = Outcomes {
        total: h.attempts.len(),
        ..Outcomes::default()
    };
    for a in &h.attempts {
        let n = match a.outcome {
            AttemptOutcome::Acquired { .. } => &mut attempts.acquired,
            AttemptOutcome::Conflict => &mut attempts.conflict,
            AttemptOutcome::Unavailable => &mut attempts.unavailable,
            AttemptOutcome::Expired => &mut attempts.expired,
            AttemptOutcome::FenceLost => &mut attempts.fence_lost,
            AttemptOutcome::Other(_) => &mut attempts.other,
        };
        *n += 1;
    }
    let mut ops = Operations {
        holds: h.holds.len(),
        reads_accepted: f.fences.reads_accepted,
        reads_rejected: f.fences.reads_rejected,
        writes_accepted: f.fences.writes_accepted,
        writes_rejected: f.fences.writes_rejected,
        past_validity: f.fences.past_validity.clone(),
        ..Operations::default()
    };
    for x in &h.holds {
        let end = x.end();
        if x.released == Some(end) {
            ops.holds_released += 1;
        } else if x.lost == Some(end) {
            ops.holds_lost += 1;
        } else {
            ops.holds_expired += 1;
        }
    }
    let conflicts = attempts.conflict;
    ops.attempts = attempts;

    let mut workers: Vec<(u32, WorkerKind)> = h
        .attempts
        .iter()
        .map(|a| (a.worker, a.kind))
        .chain(h.holds.iter().map(|x| (x.worker, x.kind)))
        .collect();
    workers.sort_unstable_by_key(|&(w, k)| (w, worker_label(k)));
    workers.dedup_by_key(|&mut (w, _)| w);
    let workers = [WorkerKind::Watchdog, WorkerKind::Plain, WorkerKind::Cli]
        .into_iter()
        .map(|k| {
            let n = workers.iter().filter(|&&(_, wk)| wk == k).count();
            (worker_label(k), n)
        })
        .collect();

    let faults = FAULT_KINDS
        .iter()
        .map(|&kind| {
            let of_kind = h.faults.iter().filter(|x| x.kind == kind);
            FaultCount {
                kind,
                label: fault_label(kind),
                count: of_kind.clone().count(),
                breaking: of_kind.clone().filter(|x| x.breaks_assumptions).count(),
                total: of_kind
                    .map(|x| x.end.unwrap_or(h.duration).saturating_sub(x.start))
                    .sum(),
            }
        })
        .collect();

    let lv = &f.liveness;
    let count = |s: RecoveryStatus| lv.recoveries.iter().filter(|r| r.status == s).count();
    let liveness = LivenessFigures {
        bound: lv.bound,
        recovered: count(RecoveryStatus::Recovered),
        late: count(RecoveryStatus::Late),
        never: count(RecoveryStatus::Never),
        unjudged: count(RecoveryStatus::Undecided) + count(RecoveryStatus::Unhealed),
        p50: {
            let p = Percentiles::of(lv.recoveries.iter().filter_map(|r| r.recovery).collect());
            (p.count > 0).then_some(p.p50)
        },
        worst: lv.worst,
        longest_stall: lv.longest_stall,
        final_stall: lv.final_stall,
    };

    Figures {
        profile: h.profile,
        seed: h.seed,
        duration: h.duration,
        max_ttl: h.max_ttl,
        workers,
        acquisitions: f.acquisitions,
        conflicts,
        rejections: ops.reads_rejected + ops.writes_rejected,
        operations: ops,
        faults,
        breaking_windows: f.breaking_windows.clone(),
        repaired_regressions: f.fences.repaired_regression_count,
        violations: Violations {
            overlaps_inside_assumptions: f.overlaps_inside_assumptions,
            overlaps_outside_assumptions: f.overlaps_outside_assumptions,
            fence: f.fences.violation_count,
            false_records: f.fences.record_mismatches,
            stale_writes_accepted: f.fences.stale_writes_accepted,
            lost_updates: f.lost_updates.count,
            fence_regressions: f.fences.regression_count,
            liveness: lv.failed,
            stalled: lv.stalled(),
            leftovers: f.leftovers.len(),
        },
        liveness,
        latency: latency(h),
        verdict: f.verdict(h.profile),
    }
}

/// Lock attempt latency, split by whether the call met a fault.
fn latency(h: &History) -> Latency {
    // The faults' intervals, merged, in order.
    let mut spans: Vec<(Micros, Micros)> = h
        .faults
        .iter()
        .map(|x| (x.start, x.end.unwrap_or(Micros::MAX)))
        .collect();
    spans.sort_unstable();
    let mut merged: Vec<(Micros, Micros)> = Vec::with_capacity(spans.len());
    for (start, end) in spans {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    let (mut during, mut outside) = (Vec::new(), Vec::new());
    for a in &h.attempts {
        let k = merged.partition_point(|&(_, end)| end < a.start);
        let met = merged.get(k).is_some_and(|&(start, _)| start <= a.end);
        let took = a.end.saturating_sub(a.start);
        if met {
            during.push(took);
        } else {
            outside.push(took);
        }
    }
    Latency {
        during_faults: Percentiles::of(during),
        outside_faults: Percentiles::of(outside),
    }
}

/// `1234567` µs as `1234.567 ms`.
fn ms(t: Micros) -> String {
    format!("{}.{:03} ms", t / 1000, t % 1000)
}

/// `1234567` µs as `1.234 s`.
fn secs(t: Micros) -> String {
    format!("{}.{:03} s", t / 1_000_000, t % 1_000_000 / 1000)
}

/// How many examples of each kind the text lists.
const SHOWN: usize = 5;

/// The human-readable report.
pub fn text(h: &History, f: &Findings) -> String {
    let g = figures(h, f);
    let mut s = String::new();
    // Writing to a String cannot fail.
    let _ = write_text(&mut s, h, f, &g);
    s
}

fn write_text(s: &mut String, h: &History, f: &Findings, g: &Figures) -> core::fmt::Result {
    writeln!(
        s,
        "torture run: profile {:?}, seed {}, {}, largest ttl {}",
        g.profile,
        g.seed,
        secs(g.duration),
        ms(g.max_ttl)
    )?;
    let total: usize = g.workers.iter().map(|&(_, n)| n).sum();
    let kinds: Vec<String> = g
        .workers
        .iter()
        .map(|&(label, n)| format!("{n} {label}"))
        .collect();
    writeln!(s, "workers: {total} ({})", kinds.join(", "))?;

    let o = &g.operations;
    let a = &o.attempts;
    writeln!(s, "\noperations")?;
    writeln!(
        s,
        "  lock attempts {:>8}: acquired {}, conflict {}, unavailable {}, expired {}, fence lost {}, other {}",
        a.total, a.acquired, a.conflict, a.unavailable, a.expired, a.fence_lost, a.other
    )?;
    writeln!(
        s,
        "  holds         {:>8}: released {}, lost {}, expired {}",
        o.holds, o.holds_released, o.holds_lost, o.holds_expired
    )?;
    writeln!(
        s,
        "  reads         {:>8}: accepted {}, rejected {}",
        o.reads_accepted + o.reads_rejected,
        o.reads_accepted,
        o.reads_rejected
    )?;
    writeln!(
        s,
        "  writes        {:>8}: accepted {}, rejected {}",
        o.writes_accepted + o.writes_rejected,
        o.writes_accepted,
        o.writes_rejected
    )?;
    let p = &o.past_validity;
    writeln!(
        s,
        "  writes past validity {}: rejected {}, accepted {} ({} with a newer fence held but unused, {} after a newer fence)",
        p.issued,
        p.rejected,
        p.accepted,
        p.accepted_with_newer_holder,
        p.accepted_after_newer_fence
    )?;

    let injected: usize = g.faults.iter().map(|x| x.count).sum();
    writeln!(s, "\nfaults injected: {injected}")?;
    for x in g.faults.iter().filter(|x| x.count > 0) {
        let mark = if x.breaking > 0 {
            " (breaks the assumptions)"
        } else {
            ""
        };
        writeln!(
            s,
            "  {:<56}{:>6}, {} in all{mark}",
            x.label,
            x.count,
            secs(x.total)
        )?;
    }
    let w = &g.breaking_windows;
    if w.faults > 0 {
        writeln!(
            s,
            "  windows in which faults breaking the assumptions excuse overlaps: {}, {:.1}% of the run",
            secs(w.covered),
            100.0 * w.fraction()
        )?;
    }

    writeln!(
        s,
        "\nacquisitions {}, conflicts {}, rejections {} ({} reads, {} writes)",
        g.acquisitions, g.conflicts, g.rejections, o.reads_rejected, o.writes_rejected
    )?;

    let v = &g.violations;
    writeln!(s, "\nviolations")?;
    writeln!(
        s,
        "  overlapping holds inside the assumptions   {}",
        v.overlaps_inside_assumptions
    )?;
    writeln!(
        s,
        "  overlapping holds outside the assumptions  {} (the known limit)",
        v.overlaps_outside_assumptions
    )?;
    for x in f.overlaps.iter().take(SHOWN) {
        let why = match x.breaking_fault.and_then(|k| h.faults.get(k)) {
            Some(fault) => format!("after {} ({})", fault_label(fault.kind), fault.target),
            None => "inside the assumptions".to_owned(),
        };
        writeln!(
            s,
            "    workers {} and {} (fences {} and {}) from {} for {}, {why}",
            x.workers[0],
            x.workers[1],
            x.fences[0],
            x.fences[1],
            secs(x.from),
            ms(x.until.saturating_sub(x.from))
        )?;
    }
    writeln!(
        s,
        "  fencing rule broken                        {} (stale writes accepted: {})",
        v.fence, v.stale_writes_accepted
    )?;
    for x in f.fences.violations.iter().take(SHOWN) {
        writeln!(
            s,
            "    worker {} fence {} at {}: {:?}",
            x.worker,
            x.fence,
            secs(x.at),
            x.kind
        )?;
    }
    writeln!(
        s,
        "  false records of the resource              {}",
        v.false_records
    )?;
    for x in f.fences.mismatches.iter().take(SHOWN) {
        writeln!(
            s,
            "    worker {} fence {} at {}: {:?}",
            x.worker,
            x.fence,
            secs(x.at),
            x.kind
        )?;
    }
    writeln!(
        s,
        "  lost updates                               {}",
        v.lost_updates
    )?;
    for x in f.lost_updates.examples.iter().take(SHOWN) {
        writeln!(
            s,
            "    worker {} fence {} at {}: read {}, the register held {}",
            x.worker,
            x.fence,
            secs(x.at),
            x.read,
            x.register
        )?;
    }
    writeln!(
        s,
        "  fence regressions (F1)                     {}",
        v.fence_regressions
    )?;
    for x in f.fences.regressions.iter().take(SHOWN) {
        writeln!(
            s,
            "    worker {} got fence {} at {}, after fence {} was handed out",
            x.worker,
            x.fence,
            secs(x.end),
            x.earlier_fence
        )?;
    }
    if g.repaired_regressions > 0 {
        writeln!(
            s,
            "    and {} after a repair of the counters, repeating fences never accepted (C6 allows it)",
            g.repaired_regressions
        )?;
    }
    writeln!(
        s,
        "  liveness failures                          {}{}",
        v.liveness,
        if v.stalled {
            ", and a stall outside faults"
        } else {
            ""
        }
    )?;
    writeln!(
        s,
        "  processes left running                     {}",
        v.leftovers
    )?;
    for x in f.leftovers.iter().take(SHOWN) {
        writeln!(s, "    {x}")?;
    }

    let l = &g.liveness;
    writeln!(
        s,
        "\nliveness (bound {}): recovered {}, late {}, never {}, not judged {}; median {}, worst {}",
        ms(l.bound),
        l.recovered,
        l.late,
        l.never,
        l.unjudged,
        l.p50.map_or_else(|| "-".to_owned(), ms),
        l.worst.map_or_else(|| "-".to_owned(), ms)
    )?;
    let stall = |x: Option<Stall>| {
        x.map_or_else(
            || "-".to_owned(),
            |x| {
                format!(
                    "{} (from {} to {})",
                    ms(x.len()),
                    secs(x.from),
                    secs(x.until)
                )
            },
        )
    };
    writeln!(
        s,
        "  longest time without an acquisition outside faults: {}; after the last one: {}",
        stall(l.longest_stall),
        stall(l.final_stall)
    )?;
    for r in f
        .liveness
        .recoveries
        .iter()
        .filter(|r| r.status.failed())
        .take(SHOWN)
    {
        let target = h.faults.get(r.fault).map_or("", |x| x.target.as_str());
        let overlapped = match (r.healed, r.measured_from) {
            (Some(own), Some(all)) if all > own => {
                format!(" (its run of overlapping faults at {})", secs(all))
            }
            _ => String::new(),
        };
        writeln!(
            s,
            "  {} ({target}) healed at {}{overlapped}: {}",
            fault_label(r.kind),
            r.healed.map_or_else(|| "-".to_owned(), secs),
            r.recovery.map_or_else(
                || "no acquisition after".to_owned(),
                |t| format!("next acquisition after {}", ms(t))
            )
        )?;
    }

    writeln!(
        s,
        "\nlock attempt latency   {:>7} {:>13} {:>13} {:>13} {:>13}",
        "count", "p50", "p90", "p99", "max"
    )?;
    for (name, p) in [
        ("during faults", g.latency.during_faults),
        ("outside faults", g.latency.outside_faults),
    ] {
        writeln!(
            s,
            "  {name:<20} {:>7} {:>13} {:>13} {:>13} {:>13}",
            p.count,
            ms(p.p50),
            ms(p.p90),
            ms(p.p99),
            ms(p.max)
        )?;
    }

    let verdict = &g.verdict;
    writeln!(
        s,
        "\nverdict ({:?}): {}",
        verdict.profile,
        if verdict.pass { "PASS" } else { "FAIL" }
    )?;
    for r in &verdict.reasons {
        writeln!(s, "  - {r}")?;
    }
    for n in &verdict.notes {
        writeln!(s, "  note: {n}")?;
    }
    Ok(())
}

/// The report as JSON: `{"figures": Figures, "findings": Findings}`.
pub fn json(h: &History, f: &Findings) -> serde_json::Value {
    #[derive(Serialize)]
    struct Report<'a> {
        figures: Figures,
        findings: &'a Findings,
    }
    let report = Report {
        figures: figures(h, f),
        findings: f,
    };
    serde_json::to_value(&report).unwrap_or_else(|e| {
        let mut m = serde_json::Map::new();
        m.insert("error".to_owned(), serde_json::Value::String(e.to_string()));
        serde_json::Value::Object(m)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::torture::check::check;
    use crate::torture::history::{Access, AccessOp, Attempt, Fault, Hold, RunClock};

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
}
