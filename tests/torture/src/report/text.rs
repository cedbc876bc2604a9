//! The report for a person.

use core::fmt::Write as _;

use crate::check::{Findings, Stall};
use crate::history::{History, Micros};

use super::{Figures, fault_label, figures};

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
