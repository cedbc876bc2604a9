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

use crate::history::{AttemptOutcome, History, Micros, Profile};

mod fences;
mod liveness;
mod overlaps;
#[cfg(test)]
mod tests;

pub use fences::{
    FenceFindings, FenceRegression, FenceViolation, FenceViolationKind, LostUpdate, LostUpdates,
    PastValidityWrites,
};
pub use liveness::{Liveness, Recovery, RecoveryStatus, Stall};
pub use overlaps::{BreakingWindows, Overlap};

/// How many examples of each kind of violation [`Findings`] keeps (the
/// counts are exact).
pub const EXAMPLES: usize = 20;

/// A liveness bound for runs whose largest ttl is `max_ttl`: two ttls (a
/// holder paused or cut off keeps the lock for up to one, a server
/// restarted with a delay stays out for one) plus five seconds of retries.
pub fn suggested_liveness_bound(max_ttl: Micros) -> Micros {
    max_ttl.saturating_mul(2).saturating_add(5_000_000)
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
    let (overlaps, breaking_windows) = overlaps::overlaps(h);
    let outside = overlaps.iter().filter(|o| o.outside_assumptions()).count();
    let (mut fences, lost_updates) = fences::replay(h);
    fences::regressions(h, &mut fences);
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
        liveness: liveness::liveness(h, liveness_bound),
        leftovers: h.leftovers.clone(),
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
