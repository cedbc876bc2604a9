//! `torture run`: the orchestrator. It starts the servers and their
//! proxies, the fenced resource, the workers, the nemesis and the
//! operator; stops everything at the end or on SIGINT/SIGTERM/SIGHUP;
//! merges what was recorded into a [`History`], checks it and writes the
//! report.
//!
//! Every wait is bounded: the workers get [`STOP_GRACE`] to finish their
//! cycle once their standard input closes, then they (and every process
//! below them) are killed; a server restart waits at most the harness'
//! start timeout; the nested `cargo build` of `redlock` at most
//! [`BUILD_LIMIT`].

use alloc::sync::Arc;
use core::sync::atomic::{AtomicBool, Ordering};
use core::time::Duration;
use std::fs::File;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::time::Instant;

use redlock_std::Client;
use redlock_torture::check::{check, suggested_liveness_bound};
use redlock_torture::history::{History, Profile, Repair, RunClock, WorkerKind};
use redlock_torture::resource::ResourceServer;
use redlock_torture::{report, svg};
use serde_json::{Value, json};

use crate::args::{Options, Usage, show_duration};
use crate::cluster::Cluster;
use crate::nemesis::{self, FaultLog, Nemesis, WorkerHandle};
use crate::operator;
use crate::procs::{self, Tracked};
use crate::record::{merge, micros};
use crate::worker::WorkerArgs;

/// How many servers.
const SERVERS: usize = 5;
/// The ttls the workers use, in turn.
const TTLS: [Duration; 2] = [Duration::from_secs(2), Duration::from_secs(3)];
/// No faults in the run's first seconds (the workers connect).
const WARM_UP: Duration = Duration::from_secs(2);
/// No faults in the run's last seconds: everything healed, acquisitions
/// resume.
const TAIL: Duration = Duration::from_secs(5);
/// How long the workers have to finish their cycle once told to stop
/// (two ttls of the largest, and a second): then they are killed.
const STOP_GRACE: Duration = Duration::from_secs(7);
/// How much older than the restart guard the servers are when a guarded
/// run begins.
const GUARD_MARGIN: Duration = Duration::from_millis(1500);
/// How long the nested `cargo build` of `redlock` may take.
pub(crate) const BUILD_LIMIT: Duration = Duration::from_secs(600);

/// The options of `torture run`.
const WITH_VALUE: &[&str] = &["profile", "seed", "duration", "out", "workers", "redlock"];

fn profile(name: &str) -> Result<Profile, Usage> {
    match name {
        "safe" => Ok(Profile::Safe),
        "unsafe" => Ok(Profile::Unsafe),
        "unsafe-guarded" | "guarded" => Ok(Profile::UnsafeGuarded),
        p => Err(Usage(format!(
            "--profile: {p:?} is not safe, unsafe or unsafe-guarded"
        ))),
    }
}

/// The settings of a run.
#[derive(Debug)]
struct Settings {
    profile: Profile,
    seed: u64,
    duration: Duration,
    out: PathBuf,
    workers: usize,
    json: bool,
    redlock: Option<String>,
}

impl Settings {
    fn parse(raw: &[String]) -> Result<Settings, Usage> {
        let o = Options::parse(raw, WITH_VALUE, &["json"])?;
        let duration = o.duration("duration")?.unwrap_or(Duration::from_secs(60));
        if duration < WARM_UP + TAIL + Duration::from_secs(5) {
            return Err(Usage(format!(
                "--duration: at least {}s (a warm-up of {}s and a calm tail of {}s)",
                (WARM_UP + TAIL).as_secs() + 5,
                WARM_UP.as_secs(),
                TAIL.as_secs()
            )));
        }
        let workers = o.number("workers")?.unwrap_or(6);
        if !(2..=30).contains(&workers) {
            return Err(Usage(format!("--workers: {workers} is not from 2 to 30")));
        }
        Ok(Settings {
            profile: profile(o.value("profile").unwrap_or("safe"))?,
            seed: o.number("seed")?.unwrap_or(1),
            duration,
            out: PathBuf::from(o.required("out")?),
            workers: usize::try_from(workers).unwrap_or(6),
            json: o.flag("json"),
            redlock: o.value("redlock").map(str::to_owned),
        })
    }
}

/// The arguments of `torture run` (main sets the harness' time limit from
/// them before any thread starts).
pub(crate) fn duration_of(raw: &[String]) -> Option<Duration> {
    Settings::parse(raw).ok().map(|s| s.duration)
}

/// A worker process of the run.
#[derive(Debug)]
struct WorkerProc {
    handle: WorkerHandle,
    child: Child,
    /// Closing it tells the worker to stop.
    stdin: Option<ChildStdin>,
    file: PathBuf,
}

/// The run's workers; dropping it kills whatever is left of them.
#[derive(Debug, Default)]
struct Workers {
    procs: Vec<WorkerProc>,
    /// Every process seen below a worker when stopping them.
    below: Vec<Tracked>,
}

impl Workers {
    /// Tells every worker to stop, waits for them (at most [`STOP_GRACE`]),
    /// then kills whatever is left, below them included.
    fn stop(&mut self) {
        for w in &mut self.procs {
            // Only a worker not yet reaped: its pid is still its own.
            if !matches!(w.child.try_wait(), Ok(None)) {
                continue;
            }
            nemesis::resume(w.handle.pid);
            self.below.extend(
                procs::descendants(w.handle.pid)
                    .iter()
                    .map(|p| Tracked::new(p.pid, format!("a process of worker {}", w.handle.id))),
            );
        }
        for w in &mut self.procs {
            drop(w.stdin.take());
        }
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline
            && self
                .procs
                .iter_mut()
                .any(|w| matches!(w.child.try_wait(), Ok(None)))
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
    }

    /// SIGKILL to every worker's group and everything below it; waits for
    /// the workers.
    fn kill(&mut self) {
        let mut targets = Vec::new();
        for w in &mut self.procs {
            let running = matches!(w.child.try_wait(), Ok(None));
            if running {
                eprintln!(
                    "torture: worker {} did not stop in time: killing it",
                    w.handle.id
                );
            }
            // The worker's group, while it has processes (a `redlock lock`
            // may outlive its worker; once the group is empty, its id may
            // be another process' by now).
            if running || procs::group_exists(w.handle.pid) {
                targets.push(-i64::from(w.handle.pid));
            }
            if !running {
                continue;
            }
            for p in procs::descendants(w.handle.pid) {
                self.below.push(Tracked::new(
                    p.pid,
                    format!("a process of worker {}", w.handle.id),
                ));
            }
        }
        targets.extend(
            self.below
                .iter()
                .filter(|t| t.alive())
                .map(|t| i64::from(t.pid)),
        );
        procs::signal("KILL", &targets);
        for w in &mut self.procs {
            let deadline = Instant::now() + Duration::from_secs(2);
            while matches!(w.child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `torture run ...`.
pub(crate) fn run(raw: &[String]) -> Result<ExitCode, Usage> {
    let settings = Settings::parse(raw)?;
    let interrupted = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        if let Err(e) = signal_hook::flag::register(sig, interrupted.clone()) {
            eprintln!("torture: cannot handle signal {sig}: {e}");
        }
    }
    match orchestrate(&settings, &interrupted) {
        Ok(code) => Ok(code),
        Err(e) => {
            eprintln!("torture: {e}");
            Ok(ExitCode::from(2))
        }
    }
}

/// Where the run lists its servers' processes as they start (`PID START
/// WHAT` lines): whoever runs a run can stop them even if it dies by
/// SIGKILL. Workers and the CLI's processes name the folder on their
/// command lines.
pub(crate) const PIDS_FILE: &str = "servers.pids";

/// The files a run writes in its folder (removed first, so that nothing of
/// an earlier run is merged in).
fn clear_out(out: &Path) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let entries = std::fs::read_dir(out).map_err(|e| format!("{}: {e}", out.display()))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours = (name.starts_with("worker-")
            && (name.ends_with(".jsonl") || name.ends_with(".log")))
            || [
                "history.json",
                "report.txt",
                "report.json",
                "timeline.svg",
                "run.json",
                "build-redlock.log",
                PIDS_FILE,
            ]
            .contains(&name.as_str());
        if ours {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    Ok(())
}

fn orchestrate(s: &Settings, interrupted: &AtomicBool) -> Result<ExitCode, String> {
    clear_out(&s.out)?;
    let out = s
        .out
        .canonicalize()
        .map_err(|e| format!("{}: {e}", s.out.display()))?;
    let kinds: Vec<(WorkerKind, Duration)> = (0..s.workers)
        .map(|i| {
            let kind = [WorkerKind::Watchdog, WorkerKind::Plain, WorkerKind::Cli][i % 3];
            (kind, TTLS[i % TTLS.len()])
        })
        .collect();
    let max_ttl = kinds.iter().map(|k| k.1).max().unwrap_or_default();
    let guard = (s.profile == Profile::UnsafeGuarded).then_some(max_ttl);
    let cluster = Cluster::start(SERVERS).map_err(|e| format!("cannot start the servers: {e}"))?;
    cluster.list_pids_in(out.join(PIDS_FILE));
    let servers_up = Instant::now();
    let redlock = if kinds.iter().any(|k| k.0 == WorkerKind::Cli) {
        Some(crate::redlock_bin::find(
            s.redlock.as_deref(),
            &out,
            interrupted,
        )?)
    } else {
        None
    };
    // With the restart guard, servers younger than the guard do not vote:
    // the run begins once they are older (uptime is counted in whole
    // seconds), so that the guard shows what it does after restarts, not
    // at the first start.
    if let Some(guard) = guard {
        let ready = servers_up + guard + GUARD_MARGIN;
        while Instant::now() < ready && !interrupted.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    if interrupted.load(Ordering::Relaxed) {
        return Ok(ExitCode::from(130));
    }
    let me = std::env::current_exe().map_err(|e| format!("cannot find myself: {e}"))?;
    let clock = RunClock::start();
    eprintln!(
        "torture: {:?} run, seed {}, {} s, into {} (servers on ports {:?})",
        s.profile,
        s.seed,
        s.duration.as_secs(),
        out.display(),
        cluster.ports()
    );
    let began = Instant::now();
    let mut resource =
        ResourceServer::start(clock).map_err(|e| format!("cannot start the resource: {e}"))?;

    let workers = spawn_workers(&Spawn {
        me: &me,
        out: &out,
        kinds: &kinds,
        servers: cluster.proxy_urls(),
        resource: resource.addr(),
        clock,
        seed: s.seed,
        guard,
        redlock: redlock.as_deref(),
    })?;
    let mut workers = workers;
    let worker_tracked: Vec<Tracked> = workers
        .procs
        .iter()
        .map(|w| {
            Tracked::new(
                w.handle.pid,
                format!("worker {} ({:?})", w.handle.id, w.handle.kind),
            )
        })
        .collect();

    let window_end = s.duration.saturating_sub(TAIL);
    let ttls: Vec<Duration> = kinds.iter().map(|k| k.1).collect();
    let plan = nemesis::plan(s.profile, s.seed, (WARM_UP, window_end), SERVERS, &ttls);
    let handles: Vec<WorkerHandle> = workers.procs.iter().map(|w| w.handle.clone()).collect();
    let files: Vec<PathBuf> = workers.procs.iter().map(|w| w.file.clone()).collect();
    let log = FaultLog::default();
    let nemesis_stop = AtomicBool::new(false);
    let operator_stop = AtomicBool::new(false);
    let server_addrs: Vec<core::net::SocketAddr> = cluster
        .ports()
        .into_iter()
        .map(|p| core::net::SocketAddr::from((core::net::Ipv4Addr::LOCALHOST, p)))
        .collect();
    let repair_client = Client::builder()
        .servers(cluster.server_urls())
        .build()
        .map_err(|e| format!("cannot build the operator's client: {e}"))?;

    let mut repairs = Vec::new();
    let mut early_exits = Vec::new();
    let nemesis = Nemesis {
        cluster: &cluster,
        log: &log,
        clock,
        began,
        stop: &nemesis_stop,
        files: &files,
    };
    std::thread::scope(|scope| {
        let (servers_plan, workers_plan) = (&plan.servers, &plan.workers);
        let n = &nemesis;
        let lanes = [
            scope.spawn(move || n.servers(servers_plan, window_end)),
            scope.spawn(|| n.workers(workers_plan, &handles, window_end)),
        ];
        let operator = scope.spawn(|| {
            operator::run(
                &server_addrs,
                &files,
                &resource,
                &repair_client,
                clock,
                &operator_stop,
            )
        });
        // The run itself: wait for its end, or a signal.
        while began.elapsed() < s.duration && !interrupted.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
            for w in &mut workers.procs {
                if let Ok(Some(status)) = w.child.try_wait() {
                    if !early_exits.iter().any(|(id, _)| *id == w.handle.id) {
                        eprintln!("torture: worker {} exited early: {status}", w.handle.id);
                        early_exits.push((w.handle.id, status.to_string()));
                    }
                }
            }
        }
        nemesis_stop.store(true, Ordering::Relaxed);
        let stopping = Instant::now();
        for lane in lanes {
            if lane.join().is_err() {
                eprintln!("torture: a nemesis lane panicked");
            }
        }
        let healed = stopping.elapsed();
        workers.stop();
        eprintln!(
            "torture: stopping: nemesis healed in {} ms, workers stopped in {} ms",
            healed.as_millis(),
            stopping.elapsed().saturating_sub(healed).as_millis()
        );
        operator_stop.store(true, Ordering::Relaxed);
        match operator.join() {
            Ok(r) => repairs = r,
            Err(_) => eprintln!("torture: the operator panicked"),
        }
    });
    let duration = clock.now();
    resource.stop();
    let server_tracked = cluster.tracked();
    let ports = cluster.ports();
    drop(cluster);
    let was_interrupted = interrupted.load(Ordering::Relaxed);

    // Anything of the run still running: the processes it started, and
    // any process whose command line names a worker's file (a CLI worker's
    // `redlock lock` and its command).
    let mut tracked: Vec<Tracked> = server_tracked;
    tracked.extend(worker_tracked);
    tracked.extend(workers.below.iter().cloned());
    let leftovers = leftovers(&tracked, &out);

    let (attempts, holds, bad_lines) = merge(&files);
    let history = History {
        profile: s.profile,
        seed: s.seed,
        clock,
        duration,
        max_ttl: micros(max_ttl),
        attempts,
        holds,
        accesses: resource.accesses(),
        faults: log.faults(),
        leftovers,
        repairs: repairs
            .iter()
            .filter(|r| r.counter.is_some())
            .map(|r| Repair {
                at: r.done,
                at_least: r.at_least,
            })
            .collect(),
    };
    let run_info = json!({
        "liveness_bound_micros": suggested_liveness_bound(history.max_ttl),
        "interrupted": was_interrupted,
        "servers": ports,
        "workers": workers.procs.iter().map(|w| json!({
            "id": w.handle.id,
            "kind": w.handle.kind,
            "pid": w.handle.pid,
            "ttl_ms": kinds.get(w.handle.id as usize - 1).map(|k| k.1.as_millis()),
        })).collect::<Vec<_>>(),
        "early_exits": early_exits,
        "nemesis_errors": log.errors(),
        "unparsed_record_lines": bad_lines,
        "redlock": redlock.as_ref().map(|p| p.display().to_string()),
        "restart_guard": guard.map(show_duration),
        "plan": {
            "servers": plan.servers.iter().map(|(at, step)| json!({
                "at_ms": at.as_millis(), "step": format!("{step:?}")
            })).collect::<Vec<_>>(),
            "workers": plan.workers.iter().map(|(at, step)| json!({
                "at_ms": at.as_millis(),
                "worker": step.worker + 1,
                "into_hold_ms": step.into_hold.as_millis(),
                "span_ms": step.span.as_millis(),
            })).collect::<Vec<_>>(),
        },
        "operator_repairs": repairs,
        "processes": tracked.iter().map(|t| json!({
            "pid": t.pid, "start": t.start, "what": t.what
        })).collect::<Vec<_>>(),
    });

    write(&out.join("history.json"), &encode(&history)?)?;
    write(&out.join("run.json"), &encode(&run_info)?)?;
    let pass = reports(&out, &history, &run_info, s.json)?;
    Ok(if was_interrupted {
        ExitCode::from(130)
    } else if pass && early_exits.is_empty() && log.errors().is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Checks `history` (with the liveness bound `run_info` states), writes
/// `report.txt`, `report.json` (with `run_info` as its `run`) and
/// `timeline.svg` into `out`, prints the text report (or the JSON one);
/// whether the verdict passes.
fn reports(out: &Path, history: &History, run_info: &Value, json: bool) -> Result<bool, String> {
    let bound = run_info["liveness_bound_micros"]
        .as_u64()
        .unwrap_or_else(|| suggested_liveness_bound(history.max_ttl));
    let findings = check(history, bound);
    let verdict = findings.verdict(history.profile);
    let repairs = run_info["operator_repairs"]
        .as_array()
        .map_or(0, |r| r.iter().filter(|r| !r["counter"].is_null()).count());
    let mut text = format!(
        "{}\nrun: liveness bound {} ms (two largest ttls + 5 s); {repairs} fence repair(s) by the operator",
        report::text(history, &findings),
        bound / 1000,
    );
    if run_info["interrupted"] == Value::Bool(true) {
        text.push_str("; INTERRUPTED before its end");
    }
    if run_info["early_exits"]
        .as_array()
        .is_some_and(|e| !e.is_empty())
    {
        text.push_str(&format!(
            "; workers that exited early: {}",
            run_info["early_exits"]
        ));
    }
    if let Some(errors) = run_info["nemesis_errors"]
        .as_array()
        .filter(|e| !e.is_empty())
    {
        text.push_str(&format!(
            "; NEMESIS ERRORS (the run fails): {}",
            Value::Array(errors.clone())
        ));
    }
    text.push('\n');
    let mut report_json = report::json(history, &findings);
    if let Some(map) = report_json.as_object_mut() {
        map.insert("run".to_owned(), run_info.clone());
    }
    write(&out.join("report.json"), &encode(&report_json)?)?;
    write(&out.join("report.txt"), text.as_bytes())?;
    write(
        &out.join("timeline.svg"),
        svg::timeline(history, &findings).as_bytes(),
    )?;
    print(if json {
        serde_json::to_string_pretty(&report_json).unwrap_or_default()
    } else {
        text
    });
    Ok(verdict.pass)
}

/// `torture report --out DIR [--json]`: the reports of an earlier run
/// again, from its `history.json` and `run.json` (after a change to the
/// checker, say). Exits as `run` would have.
pub(crate) fn report(raw: &[String]) -> Result<ExitCode, Usage> {
    let o = Options::parse(raw, &["out"], &["json"])?;
    let out = PathBuf::from(o.required("out")?);
    let read = |name: &str| -> Result<Vec<u8>, String> {
        std::fs::read(out.join(name)).map_err(|e| format!("{}: {e}", out.join(name).display()))
    };
    let result = read("history.json").and_then(|h| {
        let history: History =
            serde_json::from_slice(&h).map_err(|e| format!("history.json: {e}"))?;
        let run_info: Value = match read("run.json") {
            Ok(r) => serde_json::from_slice(&r).map_err(|e| format!("run.json: {e}"))?,
            Err(_) => Value::Null,
        };
        let pass = reports(&out, &history, &run_info, o.flag("json"))?;
        let failed = |key: &str| run_info[key].as_array().is_some_and(|e| !e.is_empty());
        Ok(pass && !failed("early_exits") && !failed("nemesis_errors"))
    });
    Ok(match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("torture: {e}");
            ExitCode::from(2)
        }
    })
}

/// What every worker is started with.
#[derive(Debug)]
struct Spawn<'a> {
    /// This binary.
    me: &'a Path,
    out: &'a Path,
    /// Each worker's kind and ttl.
    kinds: &'a [(WorkerKind, Duration)],
    /// The proxies' addresses.
    servers: Vec<String>,
    resource: core::net::SocketAddr,
    clock: RunClock,
    seed: u64,
    guard: Option<Duration>,
    redlock: Option<&'a Path>,
}

/// Starts the workers, each in a process group of its own (so that the
/// nemesis can stop one with everything it runs, and a Ctrl-C at a
/// terminal does not reach it: the run stops it), its standard input a
/// pipe the run holds, its output in `DIR/worker-N.log`.
fn spawn_workers(w: &Spawn<'_>) -> Result<Workers, String> {
    let mut workers = Workers::default();
    for (i, &(kind, ttl)) in w.kinds.iter().enumerate() {
        let id = u32::try_from(i + 1).unwrap_or(u32::MAX);
        let file = w.out.join(format!("worker-{id}.jsonl"));
        let log = File::create(w.out.join(format!("worker-{id}.log")))
            .map_err(|e| format!("cannot create worker {id}'s log: {e}"))?;
        let log2 = log
            .try_clone()
            .map_err(|e| format!("cannot create worker {id}'s log: {e}"))?;
        let args = WorkerArgs::new(
            kind,
            id,
            w.servers.clone(),
            w.resource,
            w.clock,
            ttl,
            file.clone(),
            w.seed ^ (u64::from(id) << 32),
            w.guard,
            w.redlock
                .filter(|_| kind == WorkerKind::Cli)
                .map(Path::to_path_buf),
        );
        let mut child = Command::new(w.me)
            .args(args.to_args())
            .stdin(Stdio::piped())
            .stdout(log)
            .stderr(log2)
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start worker {id}: {e}"))?;
        let stdin = child.stdin.take();
        workers.procs.push(WorkerProc {
            handle: WorkerHandle {
                id,
                kind,
                pid: child.id(),
                file: file.clone(),
            },
            child,
            stdin,
            file,
        });
    }
    Ok(workers)
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Pretty JSON.
fn encode<T: serde::Serialize>(value: &T) -> Result<Vec<u8>, String> {
    serde_json::to_vec_pretty(value).map_err(|e| format!("cannot encode JSON: {e}"))
}

#[allow(clippy::print_stdout)] // the report is the run's output
fn print(text: String) {
    println!("{text}");
}

/// The processes of the run still running: those it tracked, and any whose
/// command line names a worker's file in the run's folder.
fn leftovers(tracked: &[Tracked], out: &Path) -> Vec<String> {
    // Zombies of processes the run did not wait for are gone: give the
    // kernel a moment to finish the kills.
    let deadline = Instant::now() + Duration::from_secs(2);
    // This process and its ancestors (the shell, a test) may name the
    // folder too: only the workers' files single out the run's processes.
    let mut mine = vec![std::process::id()];
    while let Some(parent) = mine.last().and_then(|&p| procs::stat(p)).map(|p| p.ppid) {
        if parent == 0 || mine.contains(&parent) {
            break;
        }
        mine.push(parent);
    }
    let out = out.join("worker-").display().to_string();
    loop {
        let mut left: Vec<String> = tracked
            .iter()
            .filter(|t| t.alive())
            .map(|t| format!("{} (pid {})", t.what, t.pid))
            .collect();
        for p in procs::all() {
            if mine.contains(&p.pid) || p.state == 'Z' || tracked.iter().any(|t| t.pid == p.pid) {
                continue;
            }
            if let Some(cmd) = procs::cmdline(p.pid) {
                if cmd.contains(&out) {
                    left.push(format!("{cmd} (pid {})", p.pid));
                }
            }
        }
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The harness time limit for a run of `duration`, in seconds.
pub(crate) fn limit_secs(duration: Duration) -> u64 {
    duration.as_secs() + 300
}
