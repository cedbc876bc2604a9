//! The fencing rule replayed over the resource's accesses, writes past
//! validity, lost updates, and F1 on the lock's side (see the module docs
//! of `check`, points 2 and 3).

use serde::{Deserialize, Serialize};

use super::EXAMPLES;
use crate::history::{AccessOp, AttemptOutcome, History, Micros};

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
    /// its accepted accesses imply (a false record: counted apart, in
    /// [`FenceFindings::record_mismatches`]; the replay goes on from the
    /// recorded state).
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
    /// When it returned with the fence.
    #[serde(default)]
    pub end: Micros,
    /// The earlier attempt with the largest fence, as an index into
    /// [`History::attempts`].
    pub earlier_attempt: usize,
    /// Its fence.
    pub earlier_fence: u64,
    /// The repair of the fence counters (an index into
    /// [`History::repairs`]) that explains it: the fence repeats one handed
    /// out before the repair that the resource never accepted (C6). `None`:
    /// a violation of F1.
    #[serde(default)]
    pub after_repair: Option<usize>,
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
    /// How many accesses broke the rule (a stale access accepted, a write
    /// accepted not above an earlier one, a refusal without cause).
    pub violation_count: usize,
    /// Of those, stale accesses (reads or writes) accepted.
    pub stale_accepted: usize,
    /// Of those, stale writes accepted.
    pub stale_writes_accepted: usize,
    /// The first [`EXAMPLES`] violations.
    pub violations: Vec<FenceViolation>,
    /// Stale writes that reached the resource (a fence below one it had
    /// accepted), accepted or refused: 0 means the run never tried the
    /// resource's fencing on a write.
    #[serde(default)]
    pub stale_writes: usize,
    /// Accesses whose recorded state before them disagrees with the replay
    /// (a false record; the replay then adopts the recorded state).
    #[serde(default)]
    pub record_mismatches: usize,
    /// The first [`EXAMPLES`] of them (each a
    /// [`FenceViolationKind::RecordMismatch`]).
    #[serde(default)]
    pub mismatches: Vec<FenceViolation>,
    /// Writes issued past the writer's validity.
    pub past_validity: PastValidityWrites,
    /// How many acquisitions broke F1.
    pub regression_count: usize,
    /// The first [`EXAMPLES`] of them.
    pub regressions: Vec<FenceRegression>,
    /// How many acquisitions repeated a fence handed out before a repair of
    /// the counters but never accepted by the resource (C6 allows it).
    #[serde(default)]
    pub repaired_regression_count: usize,
    /// The first [`EXAMPLES`] of them.
    #[serde(default)]
    pub repaired_regressions: Vec<FenceRegression>,
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

/// Checks 2 and 3: replays the resource's rule over the accesses.
pub(super) fn replay(h: &History) -> (FenceFindings, LostUpdates) {
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
            f.record_mismatches += 1;
            if f.mismatches.len() < EXAMPLES {
                f.mismatches.push(at(FenceViolationKind::RecordMismatch {
                    max_fence,
                    recorded_max_fence: a.max_fence_before,
                    value: register,
                    recorded_value: a.value_before,
                }));
            }
            // Go on from the recorded state: a record missing or false
            // once is then reported once, not at every access after it.
            max_fence = a.max_fence_before;
            register = a.value_before;
            last_write = last_write.map(|w| w.min(max_fence));
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
        f.stale_writes += usize::from(stale && write.is_some());
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
/// larger fence, except right after a repair of the fence counters (see
/// the module docs). Fills in the regressions of `f`.
pub(super) fn regressions(h: &History, f: &mut FenceFindings) {
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
    let mut repairs: Vec<(Micros, usize)> = h
        .repairs
        .iter()
        .enumerate()
        .map(|(k, r)| (r.at, k))
        .collect();
    repairs.sort_unstable();
    let mut repairs = repairs.into_iter().peekable();
    let accepted = accepted_by_acquisition(h);
    // The largest fence among the attempts that returned so far, and among
    // those that returned since the latest repair so far.
    let mut largest: Option<(u64, usize)> = None;
    let mut since_repair: Option<u64> = None;
    let mut repair: Option<usize> = None;
    let mut returned = by_end.iter().peekable();
    for &(i, start, end, fence) in &by_start {
        // Returns and repairs before `start`, in time order (a return at a
        // repair's time counts as before it).
        loop {
            let next_return = returned
                .peek()
                .map(|&&(_, _, e, _)| e)
                .filter(|&e| e < start);
            let next_repair = repairs.peek().map(|&(at, _)| at).filter(|&at| at <= start);
            let take_return = match (next_return, next_repair) {
                (None, None) => break,
                (Some(e), Some(at)) => e <= at,
                (Some(_), None) => true,
                (None, Some(_)) => false,
            };
            if take_return {
                if let Some(&(j, _, _, earlier)) = returned.next() {
                    if largest.is_none_or(|(f, _)| earlier > f) {
                        largest = Some((earlier, j));
                    }
                    since_repair = Some(since_repair.map_or(earlier, |f| f.max(earlier)));
                }
            } else if let Some((_, k)) = repairs.next() {
                repair = Some(k);
                since_repair = None;
            }
        }
        let Some((earlier_fence, earlier_attempt)) = largest else {
            continue;
        };
        if fence > earlier_fence {
            continue;
        }
        // Excused: right after a repair (no acquisition since it returned a
        // fence this large), above the repair's floor, and no fence it
        // repeats was accepted from a holder of before the repair.
        let after_repair = repair.filter(|&k| {
            h.repairs.get(k).is_some_and(|r| {
                since_repair.is_none_or(|x| x < fence)
                    && fence > r.at_least
                    && !accepted.before(r.at, fence, earlier_fence)
            })
        });
        let regression = FenceRegression {
            attempt: i,
            worker: h.attempts.get(i).map_or(0, |a| a.worker),
            fence,
            start,
            end,
            earlier_attempt,
            earlier_fence,
            after_repair,
        };
        let (count, examples) = if after_repair.is_some() {
            (
                &mut f.repaired_regression_count,
                &mut f.repaired_regressions,
            )
        } else {
            (&mut f.regression_count, &mut f.regressions)
        };
        *count += 1;
        if examples.len() < EXAMPLES {
            examples.push(regression);
        }
    }
}

/// The accepted accesses by fence, each with when the acquisition it
/// belongs to returned: its worker's latest acquisition, with the same
/// fence, that returned before it (a worker holds one lock at a time). An
/// access that matches none counts as from the start of the run.
struct AcceptedFences(Vec<(u64, Micros)>);

fn accepted_by_acquisition(h: &History) -> AcceptedFences {
    // Every worker's acquisitions: (worker, end, fence), in order.
    let mut acquisitions: Vec<(u32, Micros, u64)> = h
        .attempts
        .iter()
        .filter_map(|a| match a.outcome {
            AttemptOutcome::Acquired { fence } => Some((a.worker, a.end, fence)),
            _ => None,
        })
        .collect();
    acquisitions.sort_unstable();
    let mut accepted: Vec<(u64, Micros)> = h
        .accesses
        .iter()
        .filter(|a| a.accepted)
        .map(|a| {
            let k = acquisitions.partition_point(|&(w, end, _)| (w, end) <= (a.worker, a.at));
            let from = k
                .checked_sub(1)
                .and_then(|k| acquisitions.get(k))
                .filter(|&&(w, _, fence)| w == a.worker && fence == a.fence)
                .map_or(0, |&(_, end, _)| end);
            (a.fence, from)
        })
        .collect();
    accepted.sort_unstable();
    AcceptedFences(accepted)
}

impl AcceptedFences {
    /// The resource accepted a fence in `low..=high` from an acquisition
    /// that returned before `at` (or from none known).
    fn before(&self, at: Micros, low: u64, high: u64) -> bool {
        let from = self.0.partition_point(|&(fence, _)| fence < low);
        self.0
            .get(from..)
            .unwrap_or_default()
            .iter()
            .take_while(|&&(fence, _)| fence <= high)
            .any(|&(_, acquired)| acquired < at)
    }
}
