//! Liveness: recovery after each run of overlapping faults, and stalls
//! outside faults (see the module docs of `check`, point 4).

use serde::{Deserialize, Serialize};

use crate::history::{AttemptOutcome, FaultKind, History, Micros};

/// How acquisitions resumed after one fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RecoveryStatus {
    /// Within the bound.
    Recovered,
    /// Later than the bound.
    Late,
    /// No acquisition followed, though the run went on past the bound.
    Never,
    /// No acquisition followed, and the run ended within the bound: not
    /// judged.
    Undecided,
    /// The fault, or one in its run of overlapping faults, never healed
    /// before the run ended: not judged.
    Unhealed,
}

impl RecoveryStatus {
    /// Liveness failed for this fault.
    pub fn failed(self) -> bool {
        matches!(self, RecoveryStatus::Late | RecoveryStatus::Never)
    }
}

/// Recovery after one fault.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recovery {
    /// The fault, as an index into [`History::faults`].
    pub fault: usize,
    /// Its kind.
    pub kind: FaultKind,
    /// When it healed.
    pub healed: Option<Micros>,
    /// When its run of overlapping faults healed (the last of them to
    /// heal): recovery is timed from here.
    #[serde(default)]
    pub measured_from: Option<Micros>,
    /// The first acquisition (an attempt's end) at or after that.
    pub next_acquisition: Option<Micros>,
    /// From the end of the fault's run to that acquisition.
    pub recovery: Option<Micros>,
    /// The judgement.
    pub status: RecoveryStatus,
}

/// What the liveness check found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Liveness {
    /// The bound the caller stated.
    pub bound: Micros,
    /// One entry per fault, in the order of [`History::faults`].
    pub recoveries: Vec<Recovery>,
    /// How many faults were followed by an acquisition later than the bound,
    /// or by none.
    pub failed: usize,
    /// The longest recovery measured.
    pub worst: Option<Micros>,
    /// The longest time without an acquisition while no fault was active:
    /// between two acquisitions (or the run's start and the first), less
    /// the time faults were active. It fails liveness when longer than the
    /// bound.
    #[serde(default)]
    pub longest_stall: Option<Stall>,
    /// The longest time without an acquisition, outside faults, after the
    /// last acquisition to the run's end (reported, not judged: the run
    /// winds down).
    #[serde(default)]
    pub final_stall: Option<Stall>,
}

impl Liveness {
    /// The longest stall outside faults is longer than the bound.
    pub fn stalled(&self) -> bool {
        self.longest_stall.is_some_and(|x| x.len() > self.bound)
    }
}

/// A stretch of time with no acquisition and no fault active.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stall {
    /// When it began (an acquisition, the run's start, or a heal).
    pub from: Micros,
    /// When it ended (an acquisition, a fault, or the run's end).
    pub until: Micros,
}

impl Stall {
    /// How long it lasted.
    pub fn len(&self) -> Micros {
        self.until.saturating_sub(self.from)
    }

    /// It lasted no time.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The faults' intervals, `[start, end)`, merged where they overlap or
/// touch, in time order; an unhealed fault runs to `Micros::MAX`. Each
/// comes with the indexes (into [`History::faults`]) of its faults.
fn fault_runs(h: &History) -> Vec<(Micros, Micros, Vec<usize>)> {
    let mut spans: Vec<(Micros, Micros, usize)> = h
        .faults
        .iter()
        .enumerate()
        .map(|(i, x)| (x.start, x.end.unwrap_or(Micros::MAX).max(x.start), i))
        .collect();
    spans.sort_unstable();
    let mut runs: Vec<(Micros, Micros, Vec<usize>)> = Vec::with_capacity(spans.len());
    for (start, end, i) in spans {
        match runs.last_mut() {
            Some(last) if start <= last.1 => {
                last.1 = last.1.max(end);
                last.2.push(i);
            }
            _ => runs.push((start, end, vec![i])),
        }
    }
    runs
}

/// Check 4: recovery after each fault, timed from the end of its run of
/// overlapping faults, and the longest stall outside faults.
pub(super) fn liveness(h: &History, bound: Micros) -> Liveness {
    let mut acquisitions: Vec<Micros> = h
        .attempts
        .iter()
        .filter(|a| matches!(a.outcome, AttemptOutcome::Acquired { .. }))
        .map(|a| a.end)
        .collect();
    acquisitions.sort_unstable();
    let runs = fault_runs(h);
    // When each fault's run healed (`None`: not before the run ended).
    let mut run_healed: Vec<Option<Micros>> = vec![None; h.faults.len()];
    for (_, end, members) in &runs {
        let healed = (*end != Micros::MAX).then_some(*end);
        for &i in members {
            if let Some(x) = run_healed.get_mut(i) {
                *x = healed;
            }
        }
    }
    let recoveries: Vec<Recovery> = h
        .faults
        .iter()
        .enumerate()
        .map(|(i, fault)| {
            let from = run_healed.get(i).copied().flatten();
            let next = from.and_then(|healed| {
                let k = acquisitions.partition_point(|&t| t < healed);
                acquisitions.get(k).copied()
            });
            let recovery = from.zip(next).map(|(healed, t)| t - healed);
            let status = match (from, recovery) {
                (None, _) => RecoveryStatus::Unhealed,
                (Some(_), Some(r)) if r <= bound => RecoveryStatus::Recovered,
                (Some(_), Some(_)) => RecoveryStatus::Late,
                (Some(healed), None) if healed.saturating_add(bound) <= h.duration => {
                    RecoveryStatus::Never
                }
                (Some(_), None) => RecoveryStatus::Undecided,
            };
            Recovery {
                fault: i,
                kind: fault.kind,
                healed: fault.end,
                measured_from: from,
                next_acquisition: next,
                recovery,
                status,
            }
        })
        .collect();

    // Stalls: the gaps between acquisitions (from the run's start), cut
    // where faults were active.
    let free = |from: Micros, until: Micros| -> Option<Stall> {
        let mut longest: Option<Stall> = None;
        let mut at = from;
        let k = runs.partition_point(|&(_, end, _)| end <= from);
        for &(start, end, _) in runs.get(k..).unwrap_or_default() {
            if start >= until {
                break;
            }
            let gap = Stall {
                from: at,
                until: start.max(at),
            };
            if longest.is_none_or(|l| gap.len() > l.len()) {
                longest = Some(gap);
            }
            at = at.max(end);
            if at >= until {
                break;
            }
        }
        if at < until {
            let gap = Stall { from: at, until };
            if longest.is_none_or(|l| gap.len() > l.len()) {
                longest = Some(gap);
            }
        }
        longest.filter(|l| !l.is_empty())
    };
    let mut longest_stall: Option<Stall> = None;
    let mut last = 0;
    for &t in &acquisitions {
        if let Some(gap) = free(last, t) {
            if longest_stall.is_none_or(|l| gap.len() > l.len()) {
                longest_stall = Some(gap);
            }
        }
        last = last.max(t);
    }
    let final_stall = if acquisitions.is_empty() {
        None
    } else {
        free(last, h.duration)
    };
    Liveness {
        bound,
        failed: recoveries.iter().filter(|r| r.status.failed()).count(),
        worst: recoveries.iter().filter_map(|r| r.recovery).max(),
        recoveries,
        longest_stall,
        final_stall,
    }
}
