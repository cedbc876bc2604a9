//! The checker: what a torture run's [`History`] shows, and whether that
//! passes for its [`Profile`].
//!
//! [`check`] looks at five things (issue 15):
//!
//! 1. **Overlaps**: two workers' holds, `[acquired, end())`, that intersect
//!    in real time. An overlap is marked *outside the assumptions* (the
//!    known limit) only when a fault that breaks them (`breaks_assumptions`:
//!    an immediate restart without persistence) can explain it: a key
//!    forgotten by the restart lets a second holder in while the first
//!    still holds, so the later hold must have been acquired at or after
//!    the fault began and before a largest ttl after it healed, and the
//!    earlier one before it healed. An overlap that merely reaches into
//!    such a fault's window, or whose holds both began after the restarted
//!    server came back, is a violation. [`BreakingWindows`] says how much of
//!    the run those windows cover.
//! 2. **Fences**: the checker replays the resource's rule over the accesses
//!    in handling order, from its own count (not the resource's word):
//!    every accepted access carried a fence at least the largest accepted
//!    so far (a *stale* access must be refused), every accepted write a
//!    fence above every earlier accepted write's, and nothing was refused
//!    without cause. Where the resource's record (`max_fence_before`,
//!    `value_before`) disagrees with the replay, that is counted apart (a
//!    *false record*), and the replay adopts the recorded state from there
//!    on, so that one missing or false record is reported once, not at
//!    every access after it. Writes issued past the writer's validity are
//!    counted: refused, accepted, and accepted though a newer fence had
//!    touched the resource (harmful: also a stale access).
//!    Separately, F1 on the lock's side: an acquisition that began after
//!    another had returned carries a larger fence (*fence regressions*),
//!    except right after a repair of lost fence counters (C6, in
//!    [`History::repairs`]): C6 repairs to the highest fence the resource
//!    accepted, so fences handed out before the loss but never used may be
//!    handed out again. Such a repeat is a note, as long as the resource
//!    never accepted a fence it repeats from a holder of before the repair;
//!    if it did, it stays a failure.
//! 3. **Lost updates**: every accepted write read the value the register
//!    held just before it.
//! 4. **Liveness**: after each fault heals, some worker acquires within the
//!    bound the caller states, timed from the end of the fault's run of
//!    overlapping faults (a fault healed while another still blocks is not
//!    late for it); and outside faults, acquisitions never stop for longer
//!    than the bound (a *stall*: gaps between acquisitions, from the run's
//!    start, less the time faults were active).
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
    /// The fault that breaks the assumptions and explains this overlap, as
    /// an index into [`History::faults`]: the later hold was acquired at or
    /// after the fault began and before a largest ttl after it healed, and
    /// the earlier one before it healed (see the module docs). `None`: no
    /// such fault, and the overlap is a violation in every profile.
    pub breaking_fault: Option<usize>,
}

impl Overlap {
    /// The overlap happened outside the algorithm's assumptions.
    pub fn outside_assumptions(&self) -> bool {
        self.breaking_fault.is_some()
    }
}

/// How much of the run the faults that break the assumptions can excuse
/// overlaps in: each such fault's window runs from its start to a largest
/// ttl after it healed (to the run's end if it never did).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakingWindows {
    /// How many faults broke the assumptions.
    pub faults: usize,
    /// How long their windows cover, merged, within the run.
    pub covered: Micros,
    /// How long the run lasted.
    pub duration: Micros,
}

impl BreakingWindows {
    /// The fraction of the run the windows cover (0 for an empty run).
    pub fn fraction(&self) -> f64 {
        if self.duration == 0 {
            0.0
        } else {
            self.covered as f64 / self.duration as f64
        }
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
    /// How much of the run the faults that break the assumptions can
    /// excuse overlaps in.
    #[serde(default)]
    pub breaking_windows: BreakingWindows,
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
    let (overlaps, breaking_windows) = overlaps(h);
    let outside = overlaps.iter().filter(|o| o.outside_assumptions()).count();
    let (mut fences, lost_updates) = replay(h);
    regressions(h, &mut fences);
    Findings {
        acquisitions: h
            .attempts
            .iter()
            .filter(|a| matches!(a.outcome, AttemptOutcome::Acquired { .. }))
            .count(),
        overlaps_inside_assumptions: overlaps.len() - outside,
        overlaps_outside_assumptions: outside,
        overlaps,
        breaking_windows,
        fences,
        lost_updates,
        liveness: liveness(h, liveness_bound),
        leftovers: h.leftovers.clone(),
    }
}

/// Check 1: holds of different workers that intersect, and the windows of
/// the faults that break the assumptions.
fn overlaps(h: &History) -> (Vec<Overlap>, BreakingWindows) {
    // The faults that break the assumptions: (index, start, healed, and
    // a largest ttl after the heal). An unhealed one runs to the end.
    let breaking: Vec<(usize, Micros, Micros, Micros)> = h
        .faults
        .iter()
        .enumerate()
        .filter(|(_, f)| f.breaks_assumptions)
        .map(|(i, f)| {
            let healed = f.end.unwrap_or(Micros::MAX).max(f.start);
            (i, f.start, healed, healed.saturating_add(h.max_ttl))
        })
        .collect();
    let mut windows: Vec<(Micros, Micros)> = breaking
        .iter()
        .map(|&(_, start, _, until)| (start.min(h.duration), until.min(h.duration)))
        .collect();
    windows.sort_unstable();
    let (mut covered, mut reach) = (0, 0);
    for (start, until) in windows {
        let start = start.max(reach);
        if until > start {
            covered += until - start;
            reach = until;
        }
    }
    let windows = BreakingWindows {
        faults: breaking.len(),
        covered,
        duration: h.duration,
    };

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
            // A key forgotten by the restart lets the later holder in only
            // once the server is killed (at or after `start`; the heal is
            // noted only after a readiness poll, so a server may answer a
            // little before it), within a ttl of the heal, while a holder
            // from before the heal still holds.
            let breaking_fault = breaking
                .iter()
                .find(|&&(_, start, healed, until)| {
                    (start..until).contains(&b.acquired) && a.acquired < healed
                })
                .map(|&(k, _, _, _)| k);
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
    (found, windows)
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
fn regressions(h: &History, f: &mut FenceFindings) {
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
fn liveness(h: &History, bound: Micros) -> Liveness {
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

impl Findings {
    /// Judges the findings for `profile`.
    ///
    /// - Every profile fails on a fence violation (the resource broke its
    ///   own rule, or accepted a stale access: that is what fencing must
    ///   prevent), a false record of the resource, a lost update, an
    ///   overlap while the run was inside the assumptions, a process left
    ///   running, or a run that exercised nothing (no acquisition or no
    ///   accepted write).
    /// - [`Profile::Safe`] and [`Profile::UnsafeGuarded`] fail on any
    ///   overlap at all, a fence regression (F1), and a liveness failure
    ///   (a late recovery after faults, or a stall outside faults). A fence
    ///   repeated right after a repair of the counters, never accepted by
    ///   the resource from an earlier holder, is a note (C6 allows it).
    /// - [`Profile::Unsafe`] fails unless overlaps outside the assumptions
    ///   were found (the known limit must show); its fence regressions and
    ///   liveness are reported as notes, and so is a run in which no stale
    ///   write reached the resource (its fencing was then never tried on a
    ///   write, so the run does not show it refusing one). Lost updates
    ///   still fail it: the
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
        if f.record_mismatches > 0 {
            reasons.push(format!(
                "{} access record(s) of the resource disagree with the replay of its rule (a false record)",
                f.record_mismatches
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
        let stall = self
            .liveness
            .longest_stall
            .filter(|_| self.liveness.stalled())
            .map(|x| {
                format!(
                    "no acquisition for {} ms, from {} ms to {} ms, while no fault was active (bound {} ms)",
                    x.len() / 1000,
                    x.from / 1000,
                    x.until / 1000,
                    self.liveness.bound / 1000
                )
            });
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
            reasons.extend(stall);
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
            notes.extend(stall);
            if f.stale_writes == 0 {
                notes.push(
                    "no stale write reached the resource (none with a fence below one it had \
                     accepted): this run does not show its fencing refusing one"
                        .to_owned(),
                );
            }
        }
        if f.repaired_regression_count > 0 {
            notes.push(format!(
                "{} acquisition(s) after a repair of the fence counters repeated a fence \
                 handed out before it but never accepted by the resource (C6 allows it)",
                f.repaired_regression_count
            ));
        }
        let w = &self.breaking_windows;
        if w.faults > 0 {
            notes.push(format!(
                "{} fault(s) broke the assumptions; the windows in which they excuse overlaps \
                 cover {:.1}% of the run",
                w.faults,
                100.0 * w.fraction()
            ));
        }
        if let Some(x) = self
            .liveness
            .final_stall
            .filter(|x| x.len() > self.liveness.bound)
        {
            notes.push(format!(
                "after the last acquisition, none for {} ms while no fault was active, \
                 from {} ms to {} ms (not judged: the run winds down)",
                x.len() / 1000,
                x.from / 1000,
                x.until / 1000
            ));
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
    use crate::torture::history::{Access, Attempt, Fault, Repair, RunClock, WorkerKind};

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
                    repairs: Vec::new(),
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
        assert_eq!(f.fences.violation_count, 0);
        assert_eq!(f.fences.record_mismatches, 1);
        assert!(matches!(
            f.fences.mismatches[0].kind,
            FenceViolationKind::RecordMismatch {
                max_fence: 1,
                recorded_max_fence: 0,
                ..
            }
        ));
        fails_with(&r.h, "false record");
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

    /// An unsafe run with a breaking restart at 10 s, healed at 10.05 s.
    fn restarted() -> Run {
        let mut r = Run::clean(Profile::Unsafe);
        r.fault(
            FaultKind::KillImmediateRestart,
            10 * S,
            10 * S + 50_000,
            true,
        );
        r
    }

    /// Worker `w` acquires `fence` at `t` and never releases (a pause): it
    /// holds for its whole ttl.
    fn held(r: &mut Run, w: u32, fence: u64, t: Micros) {
        r.turn(w, fence, t);
        r.h.holds.last_mut().unwrap().released = None;
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

    /// A clean run, then worker 2 is handed fence 5 at 8 s (and pauses);
    /// the counters are lost, the operator repairs them at 9 s with the
    /// highest fence the resource accepted (4), and worker 3 is handed
    /// fence 5 again at 10 s.
    fn repaired(profile: Profile) -> Run {
        let mut r = Run::clean(profile);
        r.h.attempts.push(Attempt {
            worker: 2,
            kind: WorkerKind::Plain,
            start: 8 * S - 2_000,
            end: 8 * S,
            outcome: AttemptOutcome::Acquired { fence: 5 },
        });
        r.h.repairs.push(Repair {
            at: 9 * S,
            at_least: 4,
        });
        r.turn(3, 5, 10 * S);
        r
    }

    #[test]
    fn a_fence_repeated_after_a_repair_is_a_note_unless_the_resource_accepted_it() {
        let r = repaired(Profile::Safe);
        let f = check(&r.h, BOUND);
        assert_eq!(f.fences.regression_count, 0);
        assert_eq!(f.fences.repaired_regression_count, 1);
        let g = &f.fences.repaired_regressions[0];
        assert_eq!((g.fence, g.earlier_fence, g.after_repair), (5, 5, Some(0)));
        assert_eq!((g.start, g.end), (10 * S - 2_000, 10 * S));
        let v = f.verdict(Profile::Safe);
        assert!(v.pass, "{:?}", v.reasons);
        assert!(
            v.notes.iter().any(|n| n.contains("after a repair")),
            "{:?}",
            v.notes
        );
        // Without the repair, it is a regression.
        let mut r = repaired(Profile::Safe);
        r.h.repairs.clear();
        fails_with(&r.h, "F1");
        // A repair whose floor did not take (the fence is not above it).
        let mut r = repaired(Profile::Safe);
        r.h.repairs[0].at_least = 5;
        fails_with(&r.h, "F1");
        // Fence 6 was handed out after the repair (at 10.5 s), then fence 5
        // once more: a regression after the repair, not explained by it.
        let mut r = repaired(Profile::Safe);
        for (worker, fence, t) in [(1, 6, 10 * S + 500_000), (2, 5, 12 * S)] {
            r.h.attempts.push(Attempt {
                worker,
                kind: WorkerKind::Plain,
                start: t - 1_000,
                end: t,
                outcome: AttemptOutcome::Acquired { fence },
            });
        }
        let f = check(&r.h, BOUND);
        assert_eq!(f.fences.repaired_regression_count, 1);
        assert_eq!(f.fences.regression_count, 1);
        assert_eq!(f.fences.regressions[0].earlier_fence, 6);
        // The repair came before the earlier fence was handed out: it
        // explains nothing.
        let mut r = repaired(Profile::Safe);
        r.h.repairs[0].at = 7 * S + 500_000;
        fails_with(&r.h, "F1");
        // Worker 2 had used fence 5 (its read accepted before the repair):
        // the repair's floor was below an accepted fence.
        let mut r = Run::clean(Profile::Safe);
        r.turn(2, 5, 8 * S);
        r.h.repairs.push(Repair {
            at: 9 * S,
            at_least: 4,
        });
        r.turn(3, 5, 10 * S);
        fails_with(&r.h, "F1");
        // Worker 2 wakes after the repair and its read with fence 5 is
        // accepted, after worker 3's: the repeated fence let it in.
        let mut r = repaired(Profile::Safe);
        r.access(2, 5, AccessOp::Read, 11 * S);
        assert!(r.h.accesses.last().unwrap().accepted);
        fails_with(&r.h, "F1");
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

    #[test]
    fn the_replay_resyncs_after_a_false_record() {
        // The record lacks worker 2's accepted write: every access after it
        // disagrees with the replay by one, but only the first is a false
        // record, and no update was lost.
        let mut r = Run::clean(Profile::Safe);
        r.h.accesses.remove(3);
        let f = check(&r.h, BOUND);
        assert_eq!(f.fences.record_mismatches, 1);
        assert_eq!(f.fences.mismatches[0].access, 3);
        assert_eq!(f.lost_updates.count, 0);
        assert_eq!(f.fences.violation_count, 0);
        fails_with(&r.h, "disagree");
    }

    #[test]
    fn the_unsafe_verdict_says_when_no_stale_write_was_tried() {
        let mut r = restarted();
        held(&mut r, 1, 5, 9 * S + 500_000);
        r.turn(2, 6, 11 * S);
        let v = check(&r.h, BOUND).verdict(Profile::Unsafe);
        assert!(v.pass, "{:?}", v.reasons);
        assert!(
            v.notes.iter().any(|n| n.contains("no stale write")),
            "{:?}",
            v.notes
        );
        // Worker 1 wakes and tries: refused, and the note goes.
        r.access(
            1,
            5,
            AccessOp::Write {
                value: 50,
                read: 1,
                past_validity: true,
            },
            11 * S + 500_000,
        );
        let f = check(&r.h, BOUND);
        assert_eq!(f.fences.stale_writes, 1);
        let v = f.verdict(Profile::Unsafe);
        assert!(v.pass, "{:?}", v.reasons);
        assert!(!v.notes.iter().any(|n| n.contains("no stale write")));
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
