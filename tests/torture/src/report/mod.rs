//! The report of a torture run: [`text`] for a person, [`json`] for a
//! program, both from the same [`Figures`].

use serde::Serialize;

use crate::check::Findings;
use crate::history::{FaultKind, History, WorkerKind};

mod figures;
#[cfg(test)]
mod tests;
mod text;

pub use figures::{
    FaultCount, Figures, Latency, LivenessFigures, Operations, Outcomes, Percentiles, Violations,
    figures,
};
pub use text::text;

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
