//! The markdown tables and ratios printed at the end of a run.

use crate::latency::{LatencyRow, OURS_ASYNC, OURS_ASYNC_FUTURES, OURS_ASYNC_THREAD, RSLOCK};
use crate::throughput::{TpRow, median};
use crate::{
    ROUNDS, SERVERS, THREADS, TP_OURS, TP_OURS_ASYNC_CT, TP_OURS_ASYNC_IO, TP_OURS_ASYNC_MT,
    TP_OURS_THREAD_CT, TP_OURS_THREAD_MT, TP_RSLOCK, TP_RSLOCK_MT,
};

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

/// `1234567.8` as `1,234,568`.
fn thousands(x: f64) -> String {
    if !x.is_finite() {
        return "—".into();
    }
    let digits = format!("{:.0}", x.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if x < 0.0 { format!("-{out}") } else { out }
}

/// What a run measured, for the report.
pub(crate) struct Report<'a> {
    pub(crate) rows: &'a [LatencyRow],
    pub(crate) tps: &'a [TpRow],
    pub(crate) warmup: usize,
    pub(crate) cycles: usize,
    pub(crate) secs: f64,
    pub(crate) runs: usize,
}

impl Report<'_> {
    fn row(&self, name: &str) -> Option<&LatencyRow> {
        self.rows.iter().find(|r| r.name == name)
    }

    fn tp(&self, name: &str) -> Option<&TpRow> {
        self.tps.iter().find(|r| r.name == name)
    }

    pub(crate) fn print(&self) {
        let Report {
            warmup,
            cycles,
            secs,
            runs,
            ..
        } = *self;
        println!();
        println!(
            "{SERVERS} redis-server processes on 127.0.0.1; latency: {cycles} measured cycles per \
             implementation (after {warmup} warm-up cycles; {ROUNDS} interleaved rounds), \
             one thread (one task), the same resource locked and released each cycle; \
             throughput: {THREADS} threads or tasks, {secs} s per run, {runs} interleaved runs \
             per implementation (medians)."
        );
        self.print_latency();
        self.print_throughput();
        println!();
        println!(
            "Ratios (ours / other; below 1× means we are faster or cheaper, except throughput):"
        );
        println!();
        self.print_blocking_ratios();
        self.print_async_ratios();
        self.print_reactor_ratios();
    }

    fn print_latency(&self) {
        println!();
        println!(
            "| implementation | acquire p50 | p99 | p99.9 | mean | release p50 | p99 | p99.9 | mean | CPU s / 1000 cycles | ctx switches / cycle (thread) | ctx switches / cycle (process) | failed |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for r in self.rows {
            println!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.4} | {:.2} | {:.2} | {} |",
                r.name,
                us(r.acquire[0]),
                us(r.acquire[1]),
                us(r.acquire[2]),
                us(r.acquire[3]),
                us(r.release[0]),
                us(r.release[1]),
                us(r.release[2]),
                us(r.release[3]),
                r.cpu,
                r.thread_switches,
                r.switches,
                r.failures,
            );
        }
        println!();
        println!(
            "Times in µs; CPU and the process's context switches from getrusage(RUSAGE_SELF)."
        );
    }

    fn print_throughput(&self) {
        println!();
        println!(
            "| implementation | distinct: cycles/s (median) | min–max | ctx switches / cycle | CPU s / 1000 cycles | contended: ok/s + conflicts/s (median) | errors (all runs) |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|");
        for r in self.tps {
            let per_sec = |t: &crate::throughput::Tp| t.per_sec(t.ok);
            let lo = r.distinct.iter().map(per_sec).fold(f64::INFINITY, f64::min);
            let hi = r.distinct.iter().map(per_sec).fold(0.0, f64::max);
            let (ok, conflicts) = r.contended_per_sec();
            let errors: u64 = r.distinct.iter().chain(&r.contended).map(|t| t.error).sum();
            println!(
                "| {} | {} | {}–{} | {:.2} | {:.4} | {} + {} | {} |",
                r.name,
                thousands(r.cycles_per_sec()),
                thousands(lo),
                thousands(hi),
                r.switches_per_cycle(),
                r.cpu_per_1000(),
                thousands(ok),
                thousands(conflicts),
                errors,
            );
        }
        println!();
        println!(
            "Context switches and CPU: the whole process (getrusage), during the distinct runs, \
             per successful cycle."
        );
    }

    /// The blocking API against the floor and the best peer.
    fn print_blocking_ratios(&self) {
        let (Some(ours), Some(floor)) = (self.row("ours"), self.row("floor")) else {
            return;
        };
        let peers: Vec<&LatencyRow> = self
            .rows
            .iter()
            .filter(|r| !r.name.starts_with("ours") && r.name != "floor")
            .collect();
        let best = |f: &dyn Fn(&LatencyRow) -> f64| {
            peers
                .iter()
                .map(|r| (f(r), r.name))
                .min_by(|a, b| a.0.total_cmp(&b.0))
        };
        let ratio = |label: &str, f: &dyn Fn(&LatencyRow) -> f64| {
            if let Some((b, who)) = best(f) {
                println!("- {label}: {:.2}× (best peer: {who})", f(ours) / b);
            }
        };
        println!("Blocking API (`ours`):");
        println!();
        println!(
            "- acquire p50 vs the floor: {:.2}×",
            ours.acquire[0] as f64 / floor.acquire[0] as f64
        );
        println!(
            "- release p50 vs the floor: {:.2}×",
            ours.release[0] as f64 / floor.release[0] as f64
        );
        ratio("acquire p50 vs best peer", &|r| r.acquire[0] as f64);
        ratio("acquire p99 vs best peer", &|r| r.acquire[1] as f64);
        ratio("acquire p99.9 vs best peer", &|r| r.acquire[2] as f64);
        ratio("release p50 vs best peer", &|r| r.release[0] as f64);
        ratio("release p99 vs best peer", &|r| r.release[1] as f64);
        ratio("release p99.9 vs best peer", &|r| r.release[2] as f64);
        ratio("CPU per cycle vs best peer", &|r| r.cpu);
        let ours_tp = self.tp(TP_OURS);
        let best_tp = self
            .tps
            .iter()
            .filter(|r| !r.name.starts_with("ours") && r.name != "floor")
            .max_by(|a, b| a.cycles_per_sec().total_cmp(&b.cycles_per_sec()));
        if let (Some(o), Some(p)) = (ours_tp, best_tp) {
            println!(
                "- {THREADS}-thread distinct throughput vs best peer: {:.2}× (best peer: {}; \
                 above 1× means we are faster)",
                o.cycles_per_sec() / p.cycles_per_sec(),
                p.name
            );
        }
    }

    /// The async API against rslock, the blocking API and the floor, with
    /// the goals of its issue.
    fn print_async_ratios(&self) {
        let verdict = |met: bool| if met { "met" } else { "NOT met" };
        println!();
        println!("Async API:");
        println!();
        if let (Some(a), Some(b), Some(f)) =
            (self.row(OURS_ASYNC), self.row("ours"), self.row("floor"))
        {
            for (label, i) in [("p50", 0), ("p99", 1)] {
                let vs_b = a.acquire[i] as f64 / b.acquire[i] as f64;
                let vs_f = a.acquire[i] as f64 / f.acquire[i] as f64;
                println!(
                    "- 1 task, acquire {label}: {} µs; / blocking {:.2}×, / floor {:.2}×{}",
                    us(a.acquire[i]),
                    vs_b,
                    vs_f,
                    if i == 0 {
                        format!(
                            " (goal ≤ 1.05× blocking, ≤ 1× floor: {})",
                            verdict(vs_b <= 1.05 && vs_f <= 1.0)
                        )
                    } else {
                        String::new()
                    }
                );
            }
            if let Some(fu) = self.row(OURS_ASYNC_FUTURES) {
                println!(
                    "- 1 task on futures::executor::block_on, acquire p50: {} µs; / blocking \
                     {:.2}×, / floor {:.2}×",
                    us(fu.acquire[0]),
                    fu.acquire[0] as f64 / b.acquire[0] as f64,
                    fu.acquire[0] as f64 / f.acquire[0] as f64
                );
            }
            println!(
                "- 1 task, release p50: / blocking {:.2}×, / floor {:.2}×",
                a.release[0] as f64 / b.release[0] as f64,
                a.release[0] as f64 / f.release[0] as f64
            );
            println!(
                "- 1 task, context switches per cycle (process): async {:.2}, blocking {:.2}, \
                 floor {:.2}",
                a.switches, b.switches, f.switches
            );
            if let Some(r) = self.row(RSLOCK) {
                println!(
                    "- 1 task, acquire p50 / rslock: {:.2}×; CPU per 1000 cycles / rslock: \
                     {:.2}× ({:.4} vs {:.4} s; goal ≤ 1×: {})",
                    a.acquire[0] as f64 / r.acquire[0] as f64,
                    a.cpu / r.cpu,
                    a.cpu,
                    r.cpu,
                    verdict(a.cpu <= r.cpu)
                );
            }
        }
        let (Some(ct), Some(mt), Some(rs)) = (
            self.tp(TP_OURS_ASYNC_CT),
            self.tp(TP_OURS_ASYNC_MT),
            self.tp(TP_RSLOCK),
        ) else {
            return;
        };
        let rs_mt = self.tp(TP_RSLOCK_MT);
        for (ours, label) in [(ct, "current-thread"), (mt, "multi-thread")] {
            let ratio = ours.cycles_per_sec() / rs.cycles_per_sec();
            println!(
                "- {THREADS} tasks distinct, {label}: {} cycles/s; / rslock (current-thread) \
                 {ratio:.2}× (goal ≥ 1.5×: {}){}",
                thousands(ours.cycles_per_sec()),
                verdict(ratio >= 1.5),
                rs_mt.map_or(String::new(), |m| format!(
                    ", / rslock multi-thread {:.2}×",
                    ours.cycles_per_sec() / m.cycles_per_sec()
                ))
            );
        }
        for (ours, peer, label) in [
            (ct, Some(rs), "current-thread vs rslock current-thread"),
            (mt, rs_mt, "multi-thread vs rslock multi-thread"),
        ] {
            let Some(peer) = peer else { continue };
            println!(
                "- {THREADS} tasks distinct, {label}: CPU per 1000 cycles {:.4} vs {:.4} s \
                 ({:.2}×; goal ≤ 1×: {}), context switches per cycle {:.2} vs {:.2}",
                ours.cpu_per_1000(),
                peer.cpu_per_1000(),
                ours.cpu_per_1000() / peer.cpu_per_1000(),
                verdict(ours.cpu_per_1000() <= peer.cpu_per_1000()),
                ours.switches_per_cycle(),
                peer.switches_per_cycle(),
            );
        }
        if let Some(b) = self.tp(TP_OURS) {
            println!(
                "- {THREADS} tasks distinct vs {THREADS} threads of the blocking API: \
                 current-thread {:.2}×, multi-thread {:.2}×",
                ct.cycles_per_sec() / b.cycles_per_sec(),
                mt.cycles_per_sec() / b.cycles_per_sec()
            );
        }
        let ok = |r: &TpRow| median(&r.contended, |t| t.per_sec(t.ok));
        println!(
            "- {THREADS} tasks on one resource, successes/s: current-thread {} ({:.2}× rslock), \
             multi-thread {} ({:.2}× rslock {})",
            thousands(ok(ct)),
            ok(ct) / ok(rs),
            thousands(ok(mt)),
            ok(mt) / rs_mt.map_or(ok(rs), ok),
            if rs_mt.is_some() {
                "multi-thread"
            } else {
                "current-thread"
            },
        );
    }

    /// The async API's two ways of driving the connections side by side:
    /// on the runtime's reactor (the default) and by the driver thread
    /// (`drive_on_runtime(false)`), and the reactor on async-io.
    fn print_reactor_ratios(&self) {
        println!();
        println!("Async API, reactor / driver thread (below 1× is better, except cycles/s):");
        println!();
        if let (Some(r), Some(t)) = (self.row(OURS_ASYNC), self.row(OURS_ASYNC_THREAD)) {
            println!(
                "- 1 task: acquire p50 {} vs {} µs ({:.2}×), p99 {} vs {} µs ({:.2}×), release \
                 p50 {} vs {} µs ({:.2}×); CPU per 1000 cycles {:.4} vs {:.4} s ({:.2}×); \
                 context switches per cycle (process) {:.2} vs {:.2}",
                us(r.acquire[0]),
                us(t.acquire[0]),
                r.acquire[0] as f64 / t.acquire[0] as f64,
                us(r.acquire[1]),
                us(t.acquire[1]),
                r.acquire[1] as f64 / t.acquire[1] as f64,
                us(r.release[0]),
                us(t.release[0]),
                r.release[0] as f64 / t.release[0] as f64,
                r.cpu,
                t.cpu,
                r.cpu / t.cpu,
                r.switches,
                t.switches,
            );
        }
        let ok = |r: &TpRow| median(&r.contended, |t| t.per_sec(t.ok));
        for (reactor, thread, label) in [
            (TP_OURS_ASYNC_CT, TP_OURS_THREAD_CT, "current-thread"),
            (TP_OURS_ASYNC_MT, TP_OURS_THREAD_MT, "multi-thread"),
        ] {
            let (Some(r), Some(t)) = (self.tp(reactor), self.tp(thread)) else {
                continue;
            };
            println!(
                "- {THREADS} tasks distinct, {label}: {} vs {} cycles/s ({:.2}×); CPU per 1000 \
                 cycles {:.4} vs {:.4} s ({:.2}×); context switches per cycle {:.2} vs {:.2}; \
                 one resource: {} vs {} successes/s",
                thousands(r.cycles_per_sec()),
                thousands(t.cycles_per_sec()),
                r.cycles_per_sec() / t.cycles_per_sec(),
                r.cpu_per_1000(),
                t.cpu_per_1000(),
                r.cpu_per_1000() / t.cpu_per_1000(),
                r.switches_per_cycle(),
                t.switches_per_cycle(),
                thousands(ok(r)),
                thousands(ok(t)),
            );
        }
        if let Some(io) = self.tp(TP_OURS_ASYNC_IO) {
            let vs = |name: &str| {
                self.tp(name).map_or(String::new(), |o| {
                    format!(", {:.2}× {name}", io.cycles_per_sec() / o.cycles_per_sec())
                })
            };
            println!(
                "- {THREADS} tasks distinct on async-io's reactor (async_io::block_on): {} \
                 cycles/s{}{}; CPU per 1000 cycles {:.4} s; context switches per cycle {:.2}; \
                 one resource: {} successes/s",
                thousands(io.cycles_per_sec()),
                vs(TP_OURS_ASYNC_CT),
                vs(TP_RSLOCK),
                io.cpu_per_1000(),
                io.switches_per_cycle(),
                thousands(ok(io)),
            );
        }
    }
}
