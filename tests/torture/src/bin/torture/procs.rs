//! Processes seen through `/proc`, and signals sent with `kill(1)` (the
//! binary has no `unsafe`, so no `libc::kill`).

use std::process::{Command, Stdio};

/// One process as `/proc/PID/stat` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Proc {
    /// Its id.
    pub(crate) pid: u32,
    /// Its parent's.
    pub(crate) ppid: u32,
    /// Its process group's.
    pub(crate) pgid: u32,
    /// Its state letter (`R`, `S`, `T` stopped, `Z` zombie, ...).
    pub(crate) state: char,
    /// When it started, in clock ticks since boot: with the pid, it names
    /// one process even after the pid is reused.
    pub(crate) start: u64,
}

/// The process `pid`, if it exists.
pub(crate) fn stat(pid: u32) -> Option<Proc> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid ...`: the name may hold spaces and parentheses.
    let after = text.get(text.rfind(')')? + 1..)?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After the name: state (field 3), ppid (4), pgrp (5), ..., starttime
    // (22).
    Some(Proc {
        pid,
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgid: fields.get(2)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

/// Every process now.
pub(crate) fn all() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(stat)
        .collect()
}

/// The command line of `pid`, its arguments joined by spaces.
pub(crate) fn cmdline(pid: u32) -> Option<String> {
    let bytes = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        String::from_utf8_lossy(&bytes)
            .split('\0')
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// Whether a process group `pgid` exists now (so its id cannot have been
/// reused for another process).
pub(crate) fn group_exists(pgid: u32) -> bool {
    all().iter().any(|p| p.pgid == pgid && p.state != 'Z')
}

/// Every descendant of `root` now (not `root` itself).
pub(crate) fn descendants(root: u32) -> Vec<Proc> {
    let procs = all();
    let mut found: Vec<Proc> = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for p in procs.iter().filter(|p| p.ppid == parent) {
            if !found.iter().any(|f| f.pid == p.pid) {
                found.push(*p);
                frontier.push(p.pid);
            }
        }
    }
    found
}

/// A process the run started, to be checked for after the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tracked {
    /// Its id.
    pub(crate) pid: u32,
    /// Its start time (see [`Proc::start`]), if it was read.
    pub(crate) start: Option<u64>,
    /// What it is, in words (`redis-server on port 6379`).
    pub(crate) what: String,
}

impl Tracked {
    /// Tracks `pid`, reading its start time now.
    pub(crate) fn new(pid: u32, what: impl Into<String>) -> Tracked {
        Tracked {
            pid,
            start: stat(pid).map(|p| p.start),
            what: what.into(),
        }
    }

    /// Whether this very process still runs (a zombie does not count: it
    /// is dead and only waits for its parent).
    pub(crate) fn alive(&self) -> bool {
        match stat(self.pid) {
            Some(p) => p.state != 'Z' && self.start.is_none_or(|s| s == p.start),
            None => false,
        }
    }
}

/// Sends `signal` (`STOP`, `CONT`, `KILL`, ...) to `targets`: a positive
/// number is a process, a negative one a process group. Best effort: a
/// target that is gone is skipped.
pub(crate) fn signal(signal: &str, targets: &[i64]) {
    if targets.is_empty() {
        return;
    }
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg("--")
        .args(targets.iter().map(ToString::to_string))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if let Err(e) = status {
        eprintln!("torture: cannot run kill -{signal}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_seen() {
        let me = std::process::id();
        let p = stat(me);
        assert!(p.is_some_and(|p| p.pid == me && p.state != 'Z'));
        assert!(Tracked::new(me, "me").alive());
        assert!(cmdline(me).is_some_and(|c| !c.is_empty()));
    }
}
