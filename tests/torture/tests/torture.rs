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
//! - interrupted (SIGINT, then SIGTERM, 12 s into an unsafe run): it
//!   stops everything it started and exits 130 with its reports.
//!
//! Each run must write its files, and leave no process behind: neither one
//! it lists in `run.json` (servers, workers, what ran below them), nor a
//! server it listed in `servers.pids` as it started it, nor any process
//! whose command line names its folder. `redlock` is built first (a no-op
//! when up to date), under its own limit, so that no run's limit includes a
//! build. A run that overruns its time limit gets SIGTERM (it then stops
//! everything it started), and SIGKILL 30 s later; whatever it left is
//! then killed by the test (SIGCONT, SIGKILL), and the test fails.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test driver

use core::time::Duration;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::thread::JoinHandle;
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

/// The `redlock` binary for the CLI workers, built (a no-op when up to
/// date) before any timed run, under its own time limit, so that a run's
/// limit never includes a build.
fn redlock_binary() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        // target/<profile>/deps/torture-HASH: the binary goes to
        // target/<profile>/redlock.
        let exe = std::env::current_exe().unwrap();
        let profile_dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
        let target_dir = profile_dir.parent().unwrap();
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut build = Command::new(cargo);
        build
            .args(["build", "-p", "redlock-cli"])
            .args(["--bin", "redlock", "--target-dir"])
            .arg(target_dir)
            .stdin(Stdio::null());
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            build.arg("--release");
        }
        let mut child = build.spawn().expect("cargo starts");
        let deadline = Instant::now() + BUILD_LIMIT;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("building redlock took more than {BUILD_LIMIT:?}");
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        assert!(status.success(), "building redlock failed: {status}");
        let bin = profile_dir.join("redlock");
        assert!(bin.is_file(), "no {}", bin.display());
        bin
    })
    .clone()
}

/// How long the build of `redlock` may take (it is built already when
/// `cargo test --workspace` built redlock-std's tests).
const BUILD_LIMIT: Duration = Duration::from_secs(20 * 60);

/// Starts a run of `profile` in a fresh folder; with the thread that
/// reads its standard output.
fn start(profile: &str, seed: u64, duration: Duration, out: &Path) -> (Child, JoinHandle<String>) {
    let _ = std::fs::remove_dir_all(out);
    let mut child = Command::new(env!("CARGO_BIN_EXE_torture"))
        .args(["run", "--profile", profile, "--seed", &seed.to_string()])
        .args(["--duration", &format!("{}s", duration.as_secs())])
        .arg("--out")
        .arg(out)
        .arg("--redlock")
        .arg(redlock_binary())
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
    (child, reader)
}

fn out_dir(profile: &str, seed: u64) -> PathBuf {
    std::env::temp_dir().join(format!(
        "redlock-torture-{}-{profile}-{seed}",
        std::process::id()
    ))
}

/// Waits for `child` until `limit` has passed since `started`, then sends
/// SIGTERM, and SIGKILL 30 s later; its exit status, and whether it had to
/// be signalled. After a SIGKILL, whatever the run started is swept (see
/// [`sweep`]) before this fails.
fn wait_limited(
    child: &mut Child,
    started: Instant,
    limit: Duration,
    out: &Path,
    what: &str,
) -> (ExitStatus, bool) {
    let mut signalled = None;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        match signalled {
            None if started.elapsed() > limit => {
                eprintln!("torture {what}: past its {limit:?} limit: SIGTERM");
                signal("TERM", child.id());
                signalled = Some(Instant::now());
            }
            Some(at) if at.elapsed() > Duration::from_secs(30) => {
                eprintln!("torture {what}: still running 30 s after SIGTERM: SIGKILL");
                let _ = child.kill();
                let _ = child.wait();
                let swept = sweep(out);
                panic!(
                    "the {what} run ignored SIGTERM for 30 s and was killed; its files are in {}; \
                     processes it left, now killed: {swept:#?}",
                    out.display()
                );
            }
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    (status, signalled.is_some())
}

fn torture(profile: &str, seed: u64, duration: Duration) -> Run {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let out = out_dir(profile, seed);
    let (mut child, reader) = start(profile, seed, duration, &out);
    let started = Instant::now();
    // The run, its setup and its teardown.
    let limit = duration + Duration::from_secs(120);
    let (status, signalled) = wait_limited(&mut child, started, limit, &out, profile);
    let text = reader.join().unwrap();
    eprintln!("{text}");
    eprintln!(
        "torture {profile} seed {seed}: {:?} in {:.1} s",
        status.code(),
        started.elapsed().as_secs_f64()
    );
    let swept = sweep(&out);
    assert!(
        swept.is_empty(),
        "processes left by the run (now killed): {swept:#?}"
    );
    assert!(!signalled, "the {profile} run overran its time limit");
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

/// The processes of the run in `out` still running (not zombies): the
/// servers its `servers.pids` lists (the same pid with the same start
/// time), and any process whose command line names the folder (workers,
/// `redlock lock`, the CLI's commands and group guards).
fn of_the_run(out: &Path) -> Vec<(u64, String)> {
    let mut found = Vec::new();
    let listed = std::fs::read_to_string(out.join("servers.pids")).unwrap_or_default();
    for line in listed.lines() {
        let mut words = line.splitn(3, ' ');
        let (Some(pid), Some(start), what) = (words.next(), words.next(), words.next()) else {
            continue;
        };
        let Ok(pid) = pid.parse::<u64>() else {
            continue;
        };
        if let Some((state, now_start)) = stat(pid) {
            if state != 'Z' && start.parse::<u64>().is_ok_and(|s| s == now_start) {
                found.push((pid, what.unwrap_or_default().to_owned()));
            }
        }
    }
    let folder = format!("{}/", out.display());
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u64>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(&folder) && stat(pid).is_some_and(|(state, _)| state != 'Z') {
            found.push((pid, cmdline));
        }
    }
    found
}

/// Kills whatever of the run in `out` still runs (SIGCONT first, for the
/// stopped ones, then SIGKILL); what it found.
fn sweep(out: &Path) -> Vec<String> {
    let found = of_the_run(out);
    for (pid, _) in &found {
        let pid = u32::try_from(*pid).unwrap();
        signal("CONT", pid);
        signal("KILL", pid);
    }
    found
        .into_iter()
        .map(|(pid, what)| format!("{pid}: {what}"))
        .collect()
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
    let servers = std::fs::read_to_string(run.out.join("servers.pids")).unwrap_or_default();
    assert!(
        servers.lines().count() >= 5,
        "servers.pids lists the 5 servers at least: {servers}"
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
    left.extend(sweep(&run.out));
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

/// Interrupted (Ctrl-C, then SIGTERM) in the middle of its faults, a run
/// stops everything it started, stopped processes included, and exits 130
/// with its reports written.
#[test]
fn an_interrupted_run_leaves_nothing_running() {
    for (sig, seed) in [("INT", 11), ("TERM", 12)] {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
        let profile = "unsafe";
        let out = out_dir(profile, seed);
        let (mut child, reader) = start(profile, seed, Duration::from_secs(120), &out);
        let started = Instant::now();
        // Interrupted once faults are under way and every worker has
        // recorded something (so the CLI workers' processes exist).
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let busy = (1..=6).all(|w| {
                std::fs::metadata(out.join(format!("worker-{w}.jsonl"))).is_ok_and(|m| m.len() > 0)
            });
            if busy && started.elapsed() > Duration::from_secs(12) {
                break;
            }
            assert!(
                child.try_wait().unwrap().is_none(),
                "the run ended before it was interrupted"
            );
            assert!(Instant::now() < deadline, "the workers never started");
            std::thread::sleep(Duration::from_millis(100));
        }
        let running = of_the_run(&out);
        assert!(
            running.len() >= 5 + 6,
            "the servers and workers are not found: {running:#?}"
        );
        signal(sig, child.id());
        let interrupted = Instant::now();
        let (status, signalled) =
            wait_limited(&mut child, interrupted, Duration::from_secs(60), &out, sig);
        let text = reader.join().unwrap();
        let swept = sweep(&out);
        assert!(swept.is_empty(), "SIG{sig}: processes left: {swept:#?}");
        assert!(!signalled, "SIG{sig}: the run did not stop within 60 s");
        assert_eq!(status.code(), Some(130), "SIG{sig}:\n{text}");
        assert!(text.contains("INTERRUPTED"), "SIG{sig}:\n{text}");
        let run_json: Value =
            serde_json::from_slice(&std::fs::read(out.join("run.json")).unwrap()).unwrap();
        assert_eq!(run_json["interrupted"], Value::Bool(true));
        let _ = std::fs::remove_dir_all(&out);
    }
}
