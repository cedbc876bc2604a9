//! The CLI workers: the real `redlock lock --fence RESOURCE -- torture
//! step ...` in a loop. The step is the command run under the lock; once
//! `redlock lock` exited, the worker rebuilds the hold from the events
//! `redlock lock -v` logged (`worker-N.redlock.log`), which the step cannot
//! see: when the lock call returned, and the validity as the watchdog last
//! extended it.

use alloc::sync::Arc;
use core::sync::atomic::{AtomicBool, Ordering};
use core::time::Duration;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use redlock_tests::sim::SimRng;
use redlock_torture::history::{Attempt, AttemptOutcome, Hold, Micros, RunClock, WorkerKind};

use super::{
    CLI_LIMIT, FROZEN_GAP_DIVISOR, RESOURCE, Register, WorkerArgs, after_release, clock, id, nap,
    pause, resource, stopping, watch_stdin,
};
use crate::args::{Options, Usage, show_duration};
use crate::record::{Journal, Record, micros, read_from, run_time};

pub(super) fn cli_loop(args: &WorkerArgs, journal: &mut Journal) -> Result<(), String> {
    let redlock = args.redlock.as_deref().ok_or("no redlock binary")?;
    let me = std::env::current_exe().map_err(|e| format!("cannot find myself: {e}"))?;
    let mut rng = SimRng::new(args.seed);
    let clock = args.clock;
    while !stopping() {
        let pause = pause(&mut rng, args.ttl);
        let start = clock.now();
        let before = std::fs::metadata(&args.out).map_or(0, |m| m.len());
        let mut command = Command::new(redlock);
        command
            .arg("lock")
            // The lock's events, for `correct_hold`.
            .arg("-v")
            .args(["--servers", &args.servers.join(",")])
            .args(["--ttl", &show_duration(args.ttl)])
            .arg("--fence");
        if let Some(g) = args.restart_guard {
            command.args(["--restart-guard", &show_duration(g)]);
        }
        command
            .arg(RESOURCE)
            .arg("--")
            .arg(&me)
            .arg("step")
            .args(["--id", &args.id.to_string()])
            .args(["--resource", &args.resource.to_string()])
            .args(["--epoch-unix-micros", &clock.epoch_unix_micros.to_string()])
            .args(["--ttl", &show_duration(args.ttl)])
            .args(["--attempt-start", &start.to_string()])
            .args(["--pause", &show_duration(pause)])
            .arg("--out")
            .arg(&args.out)
            // The step inherits standard input: it sees the run end too.
            .stdin(Stdio::inherit());
        let (events_log, log_offset) = match redlock_log(&args.out) {
            Ok(opened) => opened,
            Err(e) => return Err(format!("cannot open redlock's log: {e}")),
        };
        command.stderr(Stdio::from(events_log));
        let status = match command.spawn() {
            Ok(mut child) => wait_bounded(&mut child, CLI_LIMIT),
            Err(e) => return Err(format!("cannot run {}: {e}", redlock.display())),
        };
        let end = clock.now();
        let events = std::fs::read(args.out.with_extension(REDLOCK_LOG))
            .map(|bytes| {
                let from = usize::try_from(log_offset).unwrap_or(usize::MAX);
                LockEvents::parse(bytes.get(from..).unwrap_or_default(), &clock)
            })
            .unwrap_or_default();
        let step = step_records(&args.out, before, args.id, start);
        correct_hold(journal, args.id, start, &step, &events);
        if step.attempt || events.acquired.is_some() {
            nap(after_release(&mut rng));
        } else {
            let outcome = match status {
                Some(75) => AttemptOutcome::Conflict,
                Some(69) => AttemptOutcome::Unavailable,
                Some(65) => AttemptOutcome::FenceLost,
                Some(code) => AttemptOutcome::Other(format!("redlock lock exited with {code}")),
                None => AttemptOutcome::Other("redlock lock was killed".into()),
            };
            let failed = !matches!(outcome, AttemptOutcome::Other(_));
            journal.write(&Record::Attempt(Attempt {
                worker: args.id,
                kind: WorkerKind::Cli,
                start,
                end,
                outcome,
            }));
            if failed {
                nap(Duration::from_millis(rng.range(0, 20)));
            } else {
                // Something unexpected: do not spin on it.
                nap(Duration::from_millis(200));
            }
        }
    }
    Ok(())
}

/// Waits for `child` at most `limit`, then kills it; its exit code (`None`:
/// killed by a signal, or it could not be waited for).
fn wait_bounded(child: &mut std::process::Child, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status.code(),
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(None) => {
                eprintln!("torture: redlock lock ran past {limit:?}: killing it");
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            Err(_) => return None,
        }
    }
}

/// What a step recorded of the attempt that began at `start` (in the
/// records written after `offset`).
#[derive(Debug, Default)]
struct StepRecords {
    /// It recorded the attempt.
    attempt: bool,
    /// The last state of the hold it recorded.
    hold: Option<Hold>,
}

fn step_records(out: &Path, offset: u64, id: u32, start: Micros) -> StepRecords {
    let mut found = StepRecords::default();
    if let Ok((records, _, _)) = read_from(out, offset) {
        for r in records {
            match r {
                Record::Attempt(a) if a.worker == id && a.start == start => found.attempt = true,
                Record::Hold(h) if h.worker == id => found.hold = Some(h),
                _ => {}
            }
        }
    }
    found
}

/// The file `redlock lock -v` writes to, next to the worker's `out`
/// (`worker-N.redlock.log`).
const REDLOCK_LOG: &str = "redlock.log";

/// Opens the log of `redlock lock` for appending; with its length before.
fn redlock_log(out: &Path) -> std::io::Result<(std::fs::File, u64)> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(out.with_extension(REDLOCK_LOG))?;
    let len = file.metadata()?.len();
    Ok((file, len))
}

/// What `redlock lock -v` logged of one lock (its "lock event:" lines), in
/// run time.
#[derive(Debug, Default, PartialEq, Eq)]
struct LockEvents {
    /// When its lock call returned, and the fence.
    acquired: Option<(Micros, Option<u64>)>,
    /// The end of the validity, as last extended.
    valid_until: Option<Micros>,
    /// When it saw the lock lost.
    lost: Option<Micros>,
    /// When it saw the command exit (it releases next).
    released: Option<Micros>,
}

impl LockEvents {
    /// Reads the events in `log`; other lines are skipped.
    fn parse(log: &[u8], clock: &RunClock) -> LockEvents {
        let mut events = LockEvents::default();
        let run = |unix: u64| unix.saturating_sub(clock.epoch_unix_micros);
        for line in String::from_utf8_lossy(log).lines() {
            let Some((_, event)) = line.split_once("lock event: ") else {
                continue;
            };
            // The resource comes last and is quoted: read before it.
            let event = event.split(" resource=").next().unwrap_or(event);
            let mut words = event.split_whitespace();
            let kind = words.next().unwrap_or_default();
            let mut at = None;
            let mut valid_until = None;
            let mut fence = None;
            for word in words {
                let Some((key, value)) = word.split_once('=') else {
                    continue;
                };
                let number = value.parse::<u64>().ok();
                match key {
                    "at_unix_us" => at = number.map(run),
                    "valid_until_unix_us" => valid_until = number.map(run),
                    "fence" => fence = number,
                    _ => {}
                }
            }
            match kind {
                "acquired" => {
                    if let Some(at) = at {
                        events.acquired = Some((at, fence));
                    }
                    events.valid_until = valid_until.or(events.valid_until);
                }
                "extended" => events.valid_until = valid_until.or(events.valid_until),
                "lost" => events.lost = events.lost.or(at),
                "released" => events.released = events.released.or(at),
                _ => {}
            }
        }
        events
    }
}

/// Rebuilds a CLI hold from `redlock lock`'s own events, which the step
/// cannot see: when the lock call returned (before the step started), the
/// validity as the watchdog last extended it (the step knows only the
/// first), the loss and the command's exit as `redlock lock` saw them. The
/// step's record stays if `redlock lock` logged no acquisition (it was
/// killed before it could).
fn correct_hold(
    journal: &mut Journal,
    id: u32,
    start: Micros,
    step: &StepRecords,
    events: &LockEvents,
) {
    let Some((acquired, fence)) = events.acquired else {
        return;
    };
    let Some(valid_until) = events.valid_until else {
        return;
    };
    let fence = fence.or(step.hold.as_ref().map(|h| h.fence)).unwrap_or(0);
    if !step.attempt {
        // The command did not get as far as recording: record it here.
        journal.write(&Record::Attempt(Attempt {
            worker: id,
            kind: WorkerKind::Cli,
            start,
            end: acquired,
            outcome: AttemptOutcome::Acquired { fence },
        }));
    }
    let lost = match (events.lost, step.hold.as_ref().and_then(|h| h.lost)) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let released = events
        .released
        .or(step.hold.as_ref().and_then(|h| h.released));
    let hold = Hold {
        worker: id,
        kind: WorkerKind::Cli,
        fence,
        acquired,
        valid_until,
        released,
        lost,
    };
    journal.write(&Record::HoldFix {
        worker: id,
        acquired: step.hold.as_ref().map_or(acquired, |h| h.acquired),
        hold,
    });
}

/// `torture step ...`: the command `redlock lock --fence` runs for a CLI
/// worker. It records the attempt (acquired, with `REDLOCK_FENCE`) and the
/// hold, reads the register, pauses, writes, and exits.
///
/// The step's hold is its own view, for the nemesis to see a holder while
/// the step runs: from its start to `REDLOCK_VALID_UNTIL` (the validity
/// before any extension), moved to the step's end if it ran on (then the
/// watchdog extended it). If the step sees a gap in its own time of half a
/// ttl or more (it was stopped, SIGSTOP), its write is marked past its
/// validity. SIGTERM (from `redlock lock`, the lock was lost) records the
/// loss and exits without writing.
///
/// Once `redlock lock` exited, the CLI worker replaces this hold with the
/// one `redlock lock -v` logged (see [`correct_hold`]): its lock call's
/// return, and the validity as last extended.
pub(crate) fn step(raw: &[String]) -> Result<ExitCode, Usage> {
    let o = Options::parse(
        raw,
        &[
            "id",
            "resource",
            "epoch-unix-micros",
            "ttl",
            "attempt-start",
            "pause",
            "out",
        ],
        &[],
    )?;
    let clock = clock(&o)?;
    let start = clock.now();
    let id = id(&o)?;
    let addr = resource(&o)?;
    let ttl = o
        .duration("ttl")?
        .ok_or_else(|| Usage("--ttl is required".into()))?;
    let pause = o.duration("pause")?.unwrap_or_default();
    let attempt_start = o.number("attempt-start")?.unwrap_or(start);
    let out = PathBuf::from(o.required("out")?);
    let Some(fence) = std::env::var("REDLOCK_FENCE")
        .ok()
        .and_then(|f| f.parse::<u64>().ok())
    else {
        eprintln!("torture step: no REDLOCK_FENCE (run it with redlock lock --fence)");
        return Ok(ExitCode::from(2));
    };
    let term = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        if let Err(e) = signal_hook::flag::register(sig, term.clone()) {
            eprintln!("torture step: cannot handle signal {sig}: {e}");
        }
    }
    watch_stdin();
    let mut journal = match Journal::open(&out) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("torture step: {}: {e}", out.display());
            return Ok(ExitCode::from(2));
        }
    };
    journal.write(&Record::Attempt(Attempt {
        worker: id,
        kind: WorkerKind::Cli,
        start: attempt_start,
        end: start,
        outcome: AttemptOutcome::Acquired { fence },
    }));
    journal.write(&Record::Intent {
        worker: id,
        token: std::env::var("REDLOCK_TOKEN").unwrap_or_default(),
        pause_ms: u64::try_from(pause.as_millis()).unwrap_or(u64::MAX),
    });
    let mut hold = Hold {
        worker: id,
        kind: WorkerKind::Cli,
        fence,
        acquired: start,
        valid_until: std::env::var("REDLOCK_VALID_UNTIL")
            .ok()
            .and_then(|ms| ms.parse::<u64>().ok())
            .map_or_else(
                || start.saturating_add(micros(ttl)),
                |ms| {
                    ms.saturating_mul(1000)
                        .saturating_sub(clock.epoch_unix_micros)
                },
            ),
        released: None,
        lost: None,
    };
    journal.write(&Record::Hold(hold.clone()));
    let mut register = Register::new(addr);
    let lost = |journal: &mut Journal, mut hold: Hold| {
        hold.lost = Some(clock.now());
        journal.write(&Record::Hold(hold));
        ExitCode::from(143)
    };
    let read = register.read(id, fence);
    let until = Instant::now() + pause;
    let mut frozen_at: Option<Micros> = None;
    let mut last = Instant::now();
    while !stopping() && Instant::now() < until {
        if term.load(Ordering::SeqCst) {
            return Ok(lost(&mut journal, hold));
        }
        std::thread::sleep(
            until
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(10)),
        );
        let now = Instant::now();
        if frozen_at.is_none() && now.duration_since(last) >= ttl / FROZEN_GAP_DIVISOR {
            // `redlock lock` was stopped too. It held the lock at least
            // until then (it would have stopped this step otherwise); its
            // validity as last extended is in its events (`correct_hold`).
            let at = run_time(&clock, last);
            frozen_at = Some(at);
            if at > hold.valid_until {
                hold.valid_until = at;
                journal.write(&Record::Hold(hold.clone()));
            }
        }
        last = now;
    }
    if term.load(Ordering::SeqCst) {
        return Ok(lost(&mut journal, hold));
    }
    register.write(id, fence, read, frozen_at.is_some());
    let released = clock.now();
    hold.released = Some(released);
    if frozen_at.is_none() {
        hold.valid_until = hold.valid_until.max(released);
    }
    journal.write(&Record::Hold(hold));
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::merge;

    const EPOCH: u64 = 1_700_000_000_000_000;

    fn clock() -> RunClock {
        RunClock {
            epoch_unix_micros: EPOCH,
        }
    }

    /// A log as `redlock lock -v` writes it, with the library's own lines
    /// and the step's in between.
    fn log() -> String {
        let t = |run: u64| EPOCH + run;
        format!(
            "[   0.000s WARN  redlock_std::transport::wire] redlock: cannot connect to redis://127.0.0.1:1: refused\n\
             [   0.001s INFO  redlock::run] lock event: acquired at_unix_us={} valid_until_unix_us={} fence=42 resource=\"a b=c\"\n\
             torture step: something\n\
             [   0.665s INFO  redlock::run] lock event: extended valid_until_unix_us={} resource=\"a b=c\"\n\
             [   1.329s INFO  redlock::run] lock event: extended valid_until_unix_us={} resource=\"a b=c valid_until_unix_us=1\"\n\
             [   4.000s INFO  redlock::run] lock event: lost at_unix_us={} resource=\"a b=c\"\n",
            t(1_000),
            t(1_900_000),
            t(2_600_000),
            t(3_200_000),
            t(4_000_000),
        )
    }

    #[test]
    fn the_events_are_read_from_the_log_with_the_last_validity() {
        let e = LockEvents::parse(log().as_bytes(), &clock());
        assert_eq!(e.acquired, Some((1_000, Some(42))));
        assert_eq!(e.valid_until, Some(3_200_000), "the last extension");
        assert_eq!(e.lost, Some(4_000_000));
        assert_eq!(e.released, None);
        let none = LockEvents::parse(b"no events\n\xff\xfe\n", &clock());
        assert_eq!(none, LockEvents::default());
    }

    fn folder(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("torture-cli-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn step_hold(acquired: Micros) -> Hold {
        Hold {
            worker: 3,
            kind: WorkerKind::Cli,
            fence: 42,
            acquired,
            valid_until: acquired + 500_000,
            released: None,
            lost: Some(4_100_000),
        }
    }

    #[test]
    fn the_steps_hold_is_replaced_by_what_redlock_lock_saw() {
        let dir = folder("replace");
        let file = dir.join("worker-3.jsonl");
        let mut journal = Journal::open(&file).unwrap();
        // The step's view: it began after the lock call returned, knew only
        // the first validity, and learnt of the loss later.
        journal.write(&Record::Hold(step_hold(9_000)));
        let step = step_records(&file, 0, 3, 500);
        assert!(step.hold.is_some());
        let events = LockEvents::parse(log().as_bytes(), &clock());
        correct_hold(&mut journal, 3, 500, &step, &events);
        let (attempts, holds, bad) = merge(core::slice::from_ref(&file));
        assert_eq!(bad, 0);
        assert_eq!(
            holds,
            vec![Hold {
                worker: 3,
                kind: WorkerKind::Cli,
                fence: 42,
                acquired: 1_000,
                valid_until: 3_200_000,
                released: None,
                lost: Some(4_000_000),
            }]
        );
        // The step recorded no attempt here: one is added.
        assert_eq!(attempts.len(), 1);
        assert_eq!(attempts[0].outcome, AttemptOutcome::Acquired { fence: 42 });
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_lock_whose_command_recorded_nothing_is_still_recorded() {
        let dir = folder("added");
        let file = dir.join("worker-3.jsonl");
        let mut journal = Journal::open(&file).unwrap();
        let step = step_records(&file, 0, 3, 500);
        assert!(!step.attempt && step.hold.is_none());
        let mut events = LockEvents::parse(log().as_bytes(), &clock());
        events.lost = None;
        events.released = Some(2_000_000);
        correct_hold(&mut journal, 3, 500, &step, &events);
        let (attempts, holds, _) = merge(core::slice::from_ref(&file));
        assert_eq!(attempts.len(), 1);
        assert_eq!(holds.len(), 1);
        assert_eq!(holds[0].acquired, 1_000);
        assert_eq!(holds[0].end(), 2_000_000);
        // No acquisition logged (redlock lock was killed first): nothing
        // is changed.
        correct_hold(&mut journal, 3, 600, &step, &LockEvents::default());
        assert_eq!(merge(core::slice::from_ref(&file)).1, holds);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
