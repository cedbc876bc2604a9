//! The torture run (issue 15), CI-sized: the `torture` binary against five
//! real redis-servers, six worker processes (watchdog, plain and the real
//! `redlock lock --fence`) and the nemesis, once per profile, with fixed
//! seeds and short durations (25 + 35 + 35 s of runs, one at a time; the
//! guarded run waits 4.5 s more for its servers to be older than the guard:
//! about 110 s in all on 2 cores).
//!
//! - safe: the verdict passes (no overlapping holds, no stale access
//!   accepted, no lost update, liveness after every fault);
//! - unsafe: overlapping holds are found, all of them outside the
//!   assumptions (after immediate restarts without persistence), and the
//!   resource accepted no stale write;
//! - unsafe-guarded (the same schedule, the restart guard on): no
//!   overlapping holds, and the verdict passes.
//!
//! Each run must write its files, and leave no process behind: neither one
//! it lists in `run.json` (servers, workers, what ran below them) nor any
//! whose command line names one of its workers' files. A run that overruns
//! its time limit gets SIGTERM (it then stops everything it started), and
//! SIGKILL 30 s later.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test driver

use core::time::Duration;
use std::io::Read as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use serde_json::Value;

/// Runs go one at a time: two at once on a 2-core machine would be a fault
/// of their own.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// What one run left. Its folder is removed when the test passes, kept
/// (and named on stderr) when it fails.
struct Run {
    code: Option<i32>,
    out: PathBuf,
    text: String,
    report: Value,
}

impl Drop for Run {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("the run's files are in {}", self.out.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.out);
        }
    }
}

impl Run {
    fn figure(&self, path: &str) -> &Value {
        let mut v = &self.report["figures"];
        for part in path.split('.') {
            v = &v[part];
        }
        v
    }

    fn count(&self, path: &str) -> u64 {
        self.figure(path)
            .as_u64()
            .unwrap_or_else(|| panic!("no figure {path} in the report:\n{}", self.text))
    }

    fn faults(&self, kind: &str) -> u64 {
        self.figure("faults")
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["kind"] == kind)
            .map_or(0, |f| f["count"].as_u64().unwrap())
    }
}

fn torture(profile: &str, seed: u64, duration: Duration) -> Run {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let out = std::env::temp_dir().join(format!(
        "redlock-torture-{}-{profile}-{seed}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&out);
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_torture"))
        .args(["run", "--profile", profile, "--seed", &seed.to_string()])
        .args(["--duration", &format!("{}s", duration.as_secs())])
        .arg("--out")
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the torture binary starts");
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    // The run, its setup (a nested cargo build of redlock when it is out of
    // date) and its teardown.
    let limit = duration + Duration::from_secs(120);
    let mut signalled = None;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        match signalled {
            None if started.elapsed() > limit => {
                eprintln!("torture {profile}: past its {limit:?} limit: SIGTERM");
                signal("TERM", child.id());
                signalled = Some(Instant::now());
            }
            Some(at) if at.elapsed() > Duration::from_secs(30) => {
                eprintln!("torture {profile}: still running 30 s after SIGTERM: SIGKILL");
                let _ = child.kill();
            }
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let text = reader.join().unwrap();
    eprintln!("{text}");
    eprintln!(
        "torture {profile} seed {seed}: {:?} in {:.1} s",
        status.code(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        signalled.is_none(),
        "the {profile} run overran its time limit"
    );
    for file in [
        "history.json",
        "report.txt",
        "report.json",
        "run.json",
        "timeline.svg",
    ] {
        let len = std::fs::metadata(out.join(file)).map_or(0, |m| m.len());
        assert!(len > 0, "{} was not written", out.join(file).display());
    }
    let svg = std::fs::read_to_string(out.join("timeline.svg")).unwrap();
    assert!(svg.contains("<svg"), "timeline.svg is not an SVG");
    let report: Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    let run = Run {
        code: status.code(),
        out,
        text,
        report,
    };
    assert_nothing_left(&run);
    run
}

fn signal(name: &str, pid: u32) {
    let _ = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status();
}

/// `(state, start time)` of a process, from `/proc/PID/stat`.
fn stat(pid: u64) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = text
        .get(text.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    Some((
        fields.first()?.chars().next()?,
        fields.get(19)?.parse().ok()?,
    ))
}

/// No process of the run is left: neither one `run.json` lists (the same
/// pid with the same start time, not a zombie) nor any whose command line
/// names one of the run's worker files.
fn assert_nothing_left(run: &Run) {
    let history: Value =
        serde_json::from_slice(&std::fs::read(run.out.join("history.json")).unwrap()).unwrap();
    assert_eq!(
        history["leftovers"],
        Value::Array(Vec::new()),
        "the run reports leftovers"
    );
    let listed = run.report["run"]["processes"].as_array().unwrap();
    assert!(
        listed.len() >= 11,
        "run.json lists the 5 servers and 6 workers at least: {listed:?}"
    );
    let mut left = Vec::new();
    for p in listed {
        let pid = p["pid"].as_u64().unwrap();
        if let Some((state, start)) = stat(pid) {
            if state != 'Z' && p["start"].as_u64().is_none_or(|s| s == start) {
                left.push(p.to_string());
            }
        }
    }
    let files = run.out.join("worker-").display().to_string();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u64>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(&files) && stat(pid).is_some_and(|(state, _)| state != 'Z') {
            left.push(format!("{pid}: {cmdline}"));
        }
    }
    assert!(left.is_empty(), "processes left by the run: {left:#?}");
}

fn workers_of_every_kind_acquired(run: &Run) {
    let history: Value =
        serde_json::from_slice(&std::fs::read(run.out.join("history.json")).unwrap()).unwrap();
    for kind in ["Watchdog", "Plain", "Cli"] {
        let acquired = history["holds"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|h| h["kind"] == kind)
            .count();
        assert!(
            acquired > 0,
            "no {kind} worker held the lock:\n{}",
            run.text
        );
    }
}

#[test]
fn safe_profile_passes() {
    let run = torture("safe", 7, Duration::from_secs(25));
    assert_eq!(run.code, Some(0), "the safe run failed:\n{}", run.text);
    assert_eq!(run.figure("verdict.pass"), &Value::Bool(true));
    workers_of_every_kind_acquired(&run);
    assert!(run.count("acquisitions") > 20, "{}", run.text);
    assert_eq!(run.count("violations.overlaps_inside_assumptions"), 0);
    assert_eq!(run.count("violations.overlaps_outside_assumptions"), 0);
    assert_eq!(run.count("violations.fence"), 0);
    assert_eq!(run.count("violations.lost_updates"), 0);
    assert_eq!(run.faults("KillImmediateRestart"), 0);
    assert!(run.faults("PauseWorker") > 0, "{}", run.text);
    let faults: u64 = run
        .figure("faults")
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["count"].as_u64().unwrap())
        .sum();
    assert!(faults >= 5, "{}", run.text);
}

#[test]
fn unsafe_profile_shows_overlaps_and_refuses_stale_writes() {
    let run = torture("unsafe", 7, Duration::from_secs(35));
    assert_eq!(run.code, Some(0), "the unsafe run failed:\n{}", run.text);
    workers_of_every_kind_acquired(&run);
    assert!(run.faults("KillImmediateRestart") > 0, "{}", run.text);
    assert!(
        run.count("violations.overlaps_outside_assumptions") > 0,
        "no overlapping holders after immediate restarts:\n{}",
        run.text
    );
    assert_eq!(
        run.count("violations.overlaps_inside_assumptions"),
        0,
        "{}",
        run.text
    );
    assert_eq!(
        run.count("violations.stale_writes_accepted"),
        0,
        "{}",
        run.text
    );
    assert_eq!(run.count("violations.fence"), 0, "{}", run.text);
    assert_eq!(run.count("violations.lost_updates"), 0, "{}", run.text);
    assert_eq!(
        run.count("operations.past_validity.accepted_after_newer_fence"),
        0,
        "{}",
        run.text
    );
}

#[test]
fn the_restart_guard_prevents_the_overlaps() {
    let run = torture("unsafe-guarded", 7, Duration::from_secs(35));
    assert_eq!(run.code, Some(0), "the guarded run failed:\n{}", run.text);
    assert!(run.faults("KillImmediateRestart") > 0, "{}", run.text);
    assert_eq!(
        run.count("violations.overlaps_outside_assumptions"),
        0,
        "{}",
        run.text
    );
    assert_eq!(
        run.count("violations.overlaps_inside_assumptions"),
        0,
        "{}",
        run.text
    );
    assert_eq!(run.count("violations.fence"), 0, "{}", run.text);
    assert_eq!(run.count("violations.liveness"), 0, "{}", run.text);
}
