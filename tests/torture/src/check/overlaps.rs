//! Overlapping holds in real time, and the windows of faults that break
//! the assumptions (see the module docs of `check`, point 1).

use serde::{Deserialize, Serialize};

use crate::history::{History, Hold, Micros};

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

/// Check 1: holds of different workers that intersect, and the windows of
/// the faults that break the assumptions.
pub(super) fn overlaps(h: &History) -> (Vec<Overlap>, BreakingWindows) {
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
