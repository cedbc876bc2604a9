//! The checker: what a torture run's [`History`] shows, and whether that
//! passes for its [`Profile`].
//!
//! [`check`] looks at five things (issue 15):
//!
//! 1. **Overlaps**: two workers' holds, `[acquired, end())`, that intersect
//!    in real time. Each is marked *outside the assumptions* when it meets a
//!    fault that breaks them (`breaks_assumptions`), or comes within the
//!    largest ttl after one heals: a key forgotten by an immediate restart
//!    lets a second holder in while the first still holds, for at most one
//!    ttl more.
//! 2. **Fences**: the checker replays the resource's rule over the accesses
//!    in handling order, from its own count (not the resource's word):
//!    every accepted access carried a fence at least the largest accepted
//!    so far (a *stale* access must be refused), every accepted write a
//!    fence above every earlier accepted write's, nothing was refused
//!    without cause, and the resource's record (`max_fence_before`,
//!    `value_before`) agrees with the replay. Writes issued past the
//!    writer's validity are counted: refused, accepted, and accepted though
//!    a newer fence had touched the resource (harmful: also a stale access).
//!    Separately, F1 on the lock's side: an acquisition that began after
//!    another had returned carries a larger fence (*fence regressions*).
//! 3. **Lost updates**: every accepted write read the value the register
//!    held just before it.
//! 4. **Liveness**: after each fault heals, some worker acquires within the
//!    bound the caller states.
//! 5. **Leftovers**: no process of the run outlived it.
//!
//! [`Findings::verdict`] judges them for a profile.

use alloc::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::history::{AccessOp, AttemptOutcome, FaultKind, History, Hold, Micros, Profile};

/// How many examples of each kind of violation [`Findings`] keeps (the
/// counts are exact).
pub const EXAMPLES: usize = 20;

/// A liveness bound for runs whose largest ttl is `max_ttl`: two ttls (a
/// holder paused or cut off keeps the lock for up to one, a server
/// restarted with a delay stays out for one) plus five seconds of retries.
pub fn suggested_liveness_bound(max_ttl: Micros) -> Micros {
    max_ttl.saturating_mul(2).saturating_add(5_000_000)
}

/// Two workers' holds that intersect in real time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Overlap {
    /// The two holds, as indexes into [`History::holds`] (the one acquired
    /// first, first).
    pub holds: [usize; 2],
    /// Their workers.
    pub workers: [u32; 2],
    /// Their fences.
    pub fences: [u64; 2],
    /// When the intersection began (the later acquisition).
    pub from: Micros,
    /// When it ended (the earlier end).
    pub until: Micros,
    /// The fault that breaks the assumptions which this overlap meets (or
    /// follows within the largest ttl), as an index into
    /// [`History::faults`]; `None`: the run was inside the assumptions, and
    /// the overlap is a violation in every profile.
    pub breaking_fault: Option<usize>,
}

impl Overlap {
    /// The overlap happened outside the algorithm's assumptions.
    pub fn outside_assumptions(&self) -> bool {
        self.breaking_fault.is_some()
    }
}

/// What was wrong with one access, by the resource's own rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum FenceViolationKind {
    /// Accepted with a fence below the largest fence accepted before it (a
    /// stale access).
    StaleAccepted {
        /// The largest fence accepted before it.
        max_fence: u64,
    },
    /// A write accepted with a fence not above an earlier accepted write's.
    WriteNotAboveEarlier {
        /// The largest fence of the accepted writes before it.
        earlier: u64,
    },
    /// Refused although its fence passed the rule.
    RejectedWithoutCause {
        /// The largest fence accepted before it.
        max_fence: u64,
    },
    /// The resource recorded a state before the access other than the one
    /// its accepted accesses imply.
    RecordMismatch {
        /// The largest fence before it, by the replay.
        max_fence: u64,
        /// The largest fence before it, as recorded.
        recorded_max_fence: u64,
        /// The register's value before it, by the replay.
        value: u64,
        /// The register's value before it, as recorded.
        recorded_value: u64,
    },
}

/// One access that broke the fencing rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FenceViolation {
    /// The access, as an index into [`History::accesses`].
    pub access: usize,
    /// Its worker.
    pub worker: u32,
    /// Its fence.
    pub fence: u64,
    /// When the resource handled it.
    pub at: Micros,
    /// What was wrong.
    pub kind: FenceViolationKind,
}

/// Writes issued after the writer's own validity had ended (stale writes,
/// as after a pause).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PastValidityWrites {
    /// How many reached the resource.
    pub issued: usize,
    /// How many it refused.
    pub rejected: usize,
    /// How many it accepted.
    pub accepted: usize,
    /// Of those accepted, how many after a newer fence had touched the
    /// resource (harmful: each is also a stale access accepted).
    pub accepted_after_newer_fence: usize,
    /// Of those accepted, how many while a worker held (had acquired) a
    /// newer fence that had not yet touched the resource: harmless, since
    /// that holder's first access then sees the write, but it shows that
    /// the lock alone did not exclude the writer.
    pub accepted_with_newer_holder: usize,
}

/// An acquisition whose fence is not above that of an acquisition which
/// returned before it began (F1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FenceRegression {
    /// The later attempt, as an index into [`History::attempts`].
    pub attempt: usize,
    /// Its worker.
    pub worker: u32,
    /// Its fence.
    pub fence: u64,
    /// When it began.
    pub start: Micros,
    /// The earlier attempt with the largest fence, as an index into
    /// [`History::attempts`].
    pub earlier_attempt: usize,
    /// Its fence.
    pub earlier_fence: u64,
}

/// What the replay of the accesses found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FenceFindings {
    /// Reads accepted.
    pub reads_accepted: usize,
    /// Reads refused.
    pub reads_rejected: usize,
    /// Writes accepted.
    pub writes_accepted: usize,
    /// Writes refused.
    pub writes_rejected: usize,
    /// How many accesses broke the rule (of any kind).
    pub violation_count: usize,
    /// Of those, stale accesses (reads or writes) accepted.
    pub stale_accepted: usize,
    /// Of those, stale writes accepted.
    pub stale_writes_accepted: usize,
    /// The first [`EXAMPLES`] violations.
    pub violations: Vec<FenceViolation>,
    /// Writes issued past the writer's validity.
    pub past_validity: PastValidityWrites,
    /// How many acquisitions broke F1.
    pub regression_count: usize,
    /// The first [`EXAMPLES`] of them.
    pub regressions: Vec<FenceRegression>,
}

/// An accepted write that did not read the register's value just before
/// it: another write landed between its read and it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LostUpdate {
    /// The write, as an index into [`History::accesses`].
    pub access: usize,
    /// Its worker.
    pub worker: u32,
    /// Its fence.
    pub fence: u64,
    /// When the resource handled it.
    pub at: Micros,
    /// The value the worker had read.
    pub read: u64,
    /// The register's value just before the write.
    pub register: u64,
}

/// What the lost-update check found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LostUpdates {
    /// How many accepted writes lost an update.
    pub count: usize,
    /// The first [`EXAMPLES`] of them.
    pub examples: Vec<LostUpdate>,
}

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
    /// The fault never healed before the run ended: not judged.
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
    /// The first acquisition (an attempt's end) at or after the heal.
    pub next_acquisition: Option<Micros>,
    /// From the heal to that acquisition.
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
}

/// Everything [`check`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Findings {
    /// Successful acquisitions.
    pub acquisitions: usize,
    /// Every overlap, in the order of the later acquisition.
    pub overlaps: Vec<Overlap>,
    /// Overlaps while the run was inside the assumptions (violations).
    pub overlaps_inside_assumptions: usize,
    /// Overlaps outside them (the known limit).
    pub overlaps_outside_assumptions: usize,
    /// The fence checks.
    pub fences: FenceFindings,
    /// The lost-update check.
    pub lost_updates: LostUpdates,
    /// The liveness check.
    pub liveness: Liveness,
    /// Processes still running when the run ended.
    pub leftovers: Vec<String>,
}

/// A judgement of [`Findings`] for a profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// The profile judged.
    pub profile: Profile,
    /// Whether the run passed.
    pub pass: bool,
    /// Why it failed (empty when it passed).
    pub reasons: Vec<String>,
    /// What was found without failing it (the known limit shown, figures
    /// the profile reports but does not judge).
    pub notes: Vec<String>,
}

/// Checks a history; `liveness_bound` is the longest a heal may wait for
/// the next acquisition (see [`suggested_liveness_bound`]).
pub fn check(h: &History, liveness_bound: Micros) -> Findings {
    let overlaps = overlaps(h);
    let outside = overlaps.iter().filter(|o| o.outside_assumptions()).count();
    let (mut fences, lost_updates) = replay(h);
    let (regression_count, regressions) = regressions(h);
    fences.regression_count = regression_count;
    fences.regressions = regressions;
    Findings {
        acquisitions: h
            .attempts
            .iter()
            .filter(|a| matches!(a.outcome, AttemptOutcome::Acquired { .. }))
            .count(),
        overlaps_inside_assumptions: overlaps.len() - outside,
        overlaps_outside_assumptions: outside,
        overlaps,
        fences,
        lost_updates,
        liveness: liveness(h, liveness_bound),
        leftovers: h.leftovers.clone(),
    }
}

/// Check 1: holds of different workers that intersect.
fn overlaps(h: &History) -> Vec<Overlap> {
    // The windows in which the assumptions did not hold.
    let windows: Vec<(usize, Micros, Micros)> = h
        .faults
        .iter()
        .enumerate()
        .filter(|(_, f)| f.breaks_assumptions)
        .map(|(i, f)| {
            let end = f.end.map_or(Micros::MAX, |e| e.saturating_add(h.max_ttl));
            (i, f.start, end)
        })
        .collect();
    let mut order: Vec<usize> = (0..h.holds.len())
        .filter(|&i| h.holds.get(i).is_some_and(|x| x.end() > x.acquired))
        .collect();
    order.sort_by_key(|&i| h.holds.get(i).map(|x| (x.acquired, x.end())));
    let mut found = Vec::new();
    // Holds acquired so far that have not ended yet (a sweep over time).
    let mut active: Vec<(usize, &Hold)> = Vec::new();
    for i in order {
        let Some(b) = h.holds.get(i) else { continue };
        active.retain(|(_, a)| a.end() > b.acquired);
        for &(j, a) in &active {
            if a.worker == b.worker {
                continue;
            }
            let (from, until) = (b.acquired, a.end().min(b.end()));
            let breaking_fault = windows
                .iter()
                .find(|&&(_, start, end)| from < end && start < until)
                .map(|&(k, _, _)| k);
            found.push(Overlap {
                holds: [j, i],
                workers: [a.worker, b.worker],
                fences: [a.fence, b.fence],
                from,
                until,
                breaking_fault,
            });
        }
        active.push((i, b));
    }
    found
}

/// Checks 2 and 3: replays the resource's rule over the accesses.
fn replay(h: &History) -> (FenceFindings, LostUpdates) {
    // The holds' fences by acquisition time, with the largest so far.
    let mut held: Vec<(Micros, u64)> = h.holds.iter().map(|x| (x.acquired, x.fence)).collect();
    held.sort_unstable();
    let mut largest = 0;
    for (_, fence) in &mut held {
        largest = largest.max(*fence);
        *fence = largest;
    }
    let newest_held_at = |at: Micros| -> Option<u64> {
        let n = held.partition_point(|&(acquired, _)| acquired <= at);
        n.checked_sub(1)
            .and_then(|k| held.get(k))
            .map(|&(_, fence)| fence)
    };

    let mut f = FenceFindings::default();
    let mut lost = LostUpdates::default();
    let (mut max_fence, mut last_write, mut register) = (0u64, None::<u64>, 0u64);
    let violation = |f: &mut FenceFindings, v: FenceViolation| {
        f.violation_count += 1;
        if f.violations.len() < EXAMPLES {
            f.violations.push(v);
        }
    };
    for (i, a) in h.accesses.iter().enumerate() {
        let at = |kind| FenceViolation {
            access: i,
            worker: a.worker,
            fence: a.fence,
            at: a.at,
            kind,
        };
        if a.max_fence_before != max_fence || a.value_before != register {
            violation(
                &mut f,
                at(FenceViolationKind::RecordMismatch {
                    max_fence,
                    recorded_max_fence: a.max_fence_before,
                    value: register,
                    recorded_value: a.value_before,
                }),
            );
        }
        let write = match a.op {
            AccessOp::Read => None,
            AccessOp::Write {
                value,
                read,
                past_validity,
            } => Some((value, read, past_validity)),
        };
        let stale = a.fence < max_fence;
        let not_above = write.is_some() && last_write.is_some_and(|w| a.fence <= w);
        if a.accepted && stale {
            f.stale_accepted += 1;
            f.stale_writes_accepted += usize::from(write.is_some());
            violation(&mut f, at(FenceViolationKind::StaleAccepted { max_fence }));
        } else if a.accepted && not_above {
            violation(
                &mut f,
                at(FenceViolationKind::WriteNotAboveEarlier {
                    earlier: last_write.unwrap_or_default(),
                }),
            );
        } else if !a.accepted && !stale && !not_above {
            violation(
                &mut f,
                at(FenceViolationKind::RejectedWithoutCause { max_fence }),
            );
        }
        match (write, a.accepted) {
            (None, true) => f.reads_accepted += 1,
            (None, false) => f.reads_rejected += 1,
            (Some(_), true) => f.writes_accepted += 1,
            (Some(_), false) => f.writes_rejected += 1,
        }
        if let Some((_, _, true)) = write {
            let p = &mut f.past_validity;
            p.issued += 1;
            if a.accepted {
                p.accepted += 1;
                p.accepted_after_newer_fence += usize::from(stale);
                p.accepted_with_newer_holder +=
                    usize::from(!stale && newest_held_at(a.at).is_some_and(|n| n > a.fence));
            } else {
                p.rejected += 1;
            }
        }
        if let (Some((_, read, _)), true) = (write, a.accepted) {
            if read != register {
                lost.count += 1;
                if lost.examples.len() < EXAMPLES {
                    lost.examples.push(LostUpdate {
                        access: i,
                        worker: a.worker,
                        fence: a.fence,
                        at: a.at,
                        read,
                        register,
                    });
                }
            }
        }
        if a.accepted {
            max_fence = max_fence.max(a.fence);
            if let Some((value, _, _)) = write {
                register = value;
                last_write = Some(last_write.map_or(a.fence, |w| w.max(a.fence)));
            }
        }
    }
    (f, lost)
}

/// F1 over the acquisitions: one that began after another returned has a
/// larger fence. Returns the count and the first examples.
fn regressions(h: &History) -> (usize, Vec<FenceRegression>) {
    let acquired: Vec<(usize, Micros, Micros, u64)> = h
        .attempts
        .iter()
        .enumerate()
        .filter_map(|(i, a)| match a.outcome {
            AttemptOutcome::Acquired { fence } => Some((i, a.start, a.end, fence)),
            _ => None,
        })
        .collect();
    let mut by_end = acquired.clone();
    by_end.sort_by_key(|&(_, _, end, _)| end);
    let mut by_start = acquired;
    by_start.sort_by_key(|&(_, start, _, _)| start);
    let (mut count, mut examples) = (0, Vec::new());
    // The largest fence among the attempts that returned so far.
    let mut largest: Option<(u64, usize)> = None;
    let mut returned = by_end.iter().peekable();
    for &(i, start, _, fence) in &by_start {
        while let Some(&(j, _, _, earlier)) = returned.next_if(|&&(_, _, end, _)| end < start) {
            if largest.is_none_or(|(f, _)| earlier > f) {
                largest = Some((earlier, j));
            }
        }
        if let Some((earlier_fence, earlier_attempt)) = largest {
            if fence <= earlier_fence {
                count += 1;
                if examples.len() < EXAMPLES {
                    examples.push(FenceRegression {
                        attempt: i,
                        worker: h.attempts.get(i).map_or(0, |a| a.worker),
                        fence,
                        start,
                        earlier_attempt,
                        earlier_fence,
                    });
                }
            }
        }
    }
    (count, examples)
}

/// Check 4: recovery after each fault.
fn liveness(h: &History, bound: Micros) -> Liveness {
    let mut acquisitions: Vec<Micros> = h
        .attempts
        .iter()
        .filter(|a| matches!(a.outcome, AttemptOutcome::Acquired { .. }))
        .map(|a| a.end)
        .collect();
    acquisitions.sort_unstable();
    let recoveries: Vec<Recovery> = h
        .faults
        .iter()
        .enumerate()
        .map(|(i, fault)| {
            let next = fault.end.and_then(|healed| {
                let k = acquisitions.partition_point(|&t| t < healed);
                acquisitions.get(k).copied()
            });
            let recovery = fault.end.zip(next).map(|(healed, t)| t - healed);
            let status = match (fault.end, recovery) {
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
                next_acquisition: next,
                recovery,
                status,
            }
        })
        .collect();
    Liveness {
        bound,
        failed: recoveries.iter().filter(|r| r.status.failed()).count(),
        worst: recoveries.iter().filter_map(|r| r.recovery).max(),
        recoveries,
    }
}

impl Findings {
    /// Judges the findings for `profile`.
    ///
    /// - Every profile fails on a fence violation (the resource broke its
    ///   own rule, or accepted a stale access: that is what fencing must
    ///   prevent), a lost update, an overlap while the run was inside the
    ///   assumptions, a process left running, or a run that exercised
    ///   nothing (no acquisition or no accepted write).
    /// - [`Profile::Safe`] and [`Profile::UnsafeGuarded`] fail on any
    ///   overlap at all, a fence regression (F1), and a liveness failure.
    /// - [`Profile::Unsafe`] fails unless overlaps outside the assumptions
    ///   were found (the known limit must show); its fence regressions and
    ///   liveness are reported as notes. Lost updates still fail it: the
    ///   resource checks the fence of reads too, so a write accepted with
    ///   fence `f` implies no write was accepted between its read (which
    ///   raised the resource's largest fence to at least `f`) and it (such
    ///   a write would have needed a fence of at least `f`, and then `f`
    ///   would not be above it). Fencing that checked writes only could not
    ///   stop two holders who both read before either wrote; this resource
    ///   can, whatever the lock did, so a lost update is a bug of the
    ///   resource or of a worker, in every profile.
    pub fn verdict(&self, profile: Profile) -> Verdict {
        let mut reasons = Vec::new();
        let mut notes = Vec::new();
        let strict = matches!(profile, Profile::Safe | Profile::UnsafeGuarded);

        if self.acquisitions == 0 {
            reasons.push("no lock was acquired: the run exercised nothing".to_owned());
        }
        if self.fences.writes_accepted == 0 {
            reasons.push("the resource accepted no write: the run exercised nothing".to_owned());
        }
        let f = &self.fences;
        if f.violation_count > 0 {
            reasons.push(format!(
                "{} access(es) broke the fencing rule ({} stale access(es) accepted, {} of them writes)",
                f.violation_count, f.stale_accepted, f.stale_writes_accepted
            ));
        }
        if self.lost_updates.count > 0 {
            reasons.push(format!("{} lost update(s)", self.lost_updates.count));
        }
        if self.overlaps_inside_assumptions > 0 {
            reasons.push(format!(
                "{} overlapping hold(s) while the run was inside the assumptions",
                self.overlaps_inside_assumptions
            ));
        }
        if !self.leftovers.is_empty() {
            reasons.push(format!(
                "{} process(es) left running: {}",
                self.leftovers.len(),
                self.leftovers.join(", ")
            ));
        }

        let outside = self.overlaps_outside_assumptions;
        let regressions = format!(
            "{} acquisition(s) with a fence not above an earlier one's (F1)",
            f.regression_count
        );
        let late = format!(
            "{} fault(s) not followed by an acquisition within {} ms of healing",
            self.liveness.failed,
            self.liveness.bound / 1000
        );
        if strict {
            if outside > 0 {
                reasons.push(format!(
                    "{outside} overlapping hold(s) outside the assumptions ({profile:?} allows none)"
                ));
            }
            if f.regression_count > 0 {
                reasons.push(regressions);
            }
            if self.liveness.failed > 0 {
                reasons.push(late);
            }
        } else {
            if outside == 0 {
                reasons.push(
                    "no overlapping holds outside the assumptions: the known limit did not show"
                        .to_owned(),
                );
            } else {
                notes.push(format!(
                    "{outside} overlapping hold(s) outside the assumptions (the known limit), \
                     and the resource accepted {} stale write(s)",
                    f.stale_writes_accepted
                ));
            }
            if f.regression_count > 0 {
                notes.push(regressions);
            }
            if self.liveness.failed > 0 {
                notes.push(late);
            }
        }
        let p = &f.past_validity;
        if p.issued > 0 {
            notes.push(format!(
                "{} write(s) past the writer's validity: {} refused, {} accepted \
                 ({} with a newer fence held but unused, {} after a newer fence)",
                p.issued,
                p.rejected,
                p.accepted,
                p.accepted_with_newer_holder,
                p.accepted_after_newer_fence
            ));
        }
        let unjudged = self
            .liveness
            .recoveries
            .iter()
            .filter(|r| {
                matches!(
                    r.status,
                    RecoveryStatus::Unhealed | RecoveryStatus::Undecided
                )
            })
            .count();
        if unjudged > 0 {
            notes.push(format!(
                "{unjudged} fault(s) healed too late in the run (or never) to judge liveness"
            ));
        }
        Verdict {
            profile,
            pass: reasons.is_empty(),
            reasons,
            notes,
        }
    }

    /// The holds involved in an overlap, as indexes into
    /// [`History::holds`].
    pub fn overlapping_holds(&self) -> BTreeSet<usize> {
        self.overlaps.iter().flat_map(|o| o.holds).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::torture::history::{Access, Attempt, Fault, RunClock, WorkerKind};

    const S: Micros = 1_000_000;
    const TTL: Micros = 2 * S;
    const BOUND: Micros = 10 * S;

    /// A small clean run: three workers take turns, each reads and writes
    /// with its fence; one server pause in the middle, healed.
    struct Run {
        h: History,
        /// Next value of the register, and its fence.
        register: u64,
        max_fence: u64,
        last_write: u64,
    }

    impl Run {
        fn new(profile: Profile) -> Run {
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
                },
                register: 0,
                max_fence: 0,
                last_write: 0,
            }
        }

        /// Worker `w` acquires `fence` at `t` (the call began 2 ms before)
        /// and holds for 300 ms: a read at +100 ms, a write at +200 ms.
        fn turn(&mut self, w: u32, fence: u64, t: Micros) {
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
        fn access(&mut self, w: u32, fence: u64, op: AccessOp, at: Micros) {
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

        fn fault(&mut self, kind: FaultKind, start: Micros, end: Micros, breaks: bool) {
            self.h.faults.push(Fault {
                kind,
                target: "server 1".to_owned(),
                start,
                end: Some(end),
                breaks_assumptions: breaks,
            });
        }

        fn clean(profile: Profile) -> Run {
            let mut r = Run::new(profile);
            r.turn(1, 1, S);
            r.turn(2, 2, 2 * S);
            r.fault(FaultKind::PauseServers, 3 * S, 5 * S, false);
            r.turn(3, 3, 6 * S);
            r.turn(1, 4, 7 * S);
            r
        }
    }

    fn fails_with(h: &History, text: &str) {
        let v = check(h, BOUND).verdict(h.profile);
        assert!(!v.pass, "expected a failure mentioning {text:?}");
        assert!(
            v.reasons.iter().any(|r| r.contains(text)),
            "{text:?} not in {:?}",
            v.reasons
        );
    }

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
        assert!(matches!(
            f.fences.violations[0].kind,
            FenceViolationKind::RecordMismatch {
                max_fence: 1,
                recorded_max_fence: 0,
                ..
            }
        ));
        fails_with(&r.h, "broke the fencing rule");
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
    fn leftovers_fail_every_profile() {
        let mut r = Run::clean(Profile::Safe);
        r.h.leftovers.push("redis-server pid 42".to_owned());
        fails_with(&r.h, "redis-server pid 42");
        r.h.profile = Profile::Unsafe;
        fails_with(&r.h, "left running");
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
}
