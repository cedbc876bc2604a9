//! The figures both reports are made of, computed from a history and its
//! findings.

use serde::Serialize;

use crate::check::{BreakingWindows, Findings, PastValidityWrites, RecoveryStatus, Stall, Verdict};
use crate::history::{AttemptOutcome, FaultKind, History, Micros, Profile, WorkerKind};

use super::{FAULT_KINDS, fault_label, worker_label};

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
