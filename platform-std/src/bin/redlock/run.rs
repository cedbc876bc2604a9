//! `redlock lock`: run a command with a lock held and kept alive, forward
//! signals to it, stop it if the lock is lost, release when it exits.

use alloc::sync::Arc;
use core::sync::atomic::{AtomicBool, Ordering};
use core::time::Duration;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus};
use std::time::Instant;

use crate::args::Spec;
use crate::{EX_SOFTWARE, Failure, acquire_lock, client, parse, servers};

extern crate alloc;

const HELP: &str = "\
redlock lock [--servers URLS] [--ttl D] [--wait D] [--fence] [--grace D] RESOURCE -- CMD [ARGS..]

Acquires RESOURCE, runs CMD with the lock held and kept alive by a watchdog,
releases the lock when CMD exits, and exits with CMD's status.

CMD's environment has REDLOCK_RESOURCE, REDLOCK_TOKEN and, with --fence,
REDLOCK_FENCE (the fencing token: larger for every later holder).

  --ttl D     lock time to live; the watchdog extends it while CMD runs
              (default 30s)
  --wait D    retry with jitter until D has passed (default: one call with
              the normal retries)
  --fence     take an F1 fencing token
  --grace D   if the lock is lost, CMD gets SIGTERM, then SIGKILL after D
              (default 5s)

SIGINT, SIGTERM and SIGHUP sent to redlock are forwarded to CMD; the lock is
released when CMD exits.

Exit statuses: CMD's own (128+N if killed by signal N); 75 held by someone
else; 69 too few servers answered; 70 the lock was lost while CMD ran, or an
internal error; 64 bad usage; 127 CMD not found; 126 CMD could not be run.";

/// Signals redlock forwards to the command.
const FORWARDED: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Flags set by signal handlers, one per forwarded signal.
struct Signals {
    flags: Vec<(i32, Arc<AtomicBool>)>,
}

impl Signals {
    fn register() -> Result<Signals, Failure> {
        let mut flags = Vec::new();
        for sig in FORWARDED {
            let flag = Arc::new(AtomicBool::new(false));
            signal_hook::flag::register(sig, flag.clone()).map_err(|e| {
                Failure::new(EX_SOFTWARE, format!("cannot handle signal {sig}: {e}"))
            })?;
            flags.push((sig, flag));
        }
        Ok(Signals { flags })
    }

    /// True if a signal arrived and was not taken yet.
    fn pending(&self) -> bool {
        self.flags.iter().any(|(_, f)| f.load(Ordering::SeqCst))
    }

    /// The signals received since the last call.
    fn take(&self) -> impl Iterator<Item = i32> + '_ {
        self.flags
            .iter()
            .filter(|(_, f)| f.swap(false, Ordering::SeqCst))
            .map(|(sig, _)| *sig)
    }
}

/// Sends `signal` to the child `pid`.
#[allow(unsafe_code)]
fn send_signal(pid: u32, signal: i32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) takes two integers and touches no memory of this
    // process. `pid` is a child this process spawned and has not reaped yet
    // (callers only signal before `try_wait` reported its exit), so it
    // cannot name another process.
    unsafe {
        libc::kill(pid, signal);
    }
}

/// The shell's convention: the exit code, or 128 + the signal that killed it.
fn status_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(EX_SOFTWARE),
        (None, Some(sig)) => u8::try_from(128 + (sig & 0x7f)).unwrap_or(EX_SOFTWARE),
        _ => EX_SOFTWARE,
    }
}

pub(crate) fn lock(raw: &[String]) -> Result<u8, Failure> {
    let spec = Spec {
        with_value: &["servers", "ttl", "wait", "grace"],
        flags: &["fence"],
        command_after: Some(1),
    };
    let Some(args) = parse(raw, &spec, HELP)? else {
        return Ok(0);
    };
    args.expect_positionals(&["RESOURCE"])?;
    if args.command.is_empty() {
        return Err(Failure::from(crate::args::usage(
            "missing the command to run (RESOURCE -- CMD [ARGS..])",
        )));
    }
    let servers = servers(&args)?;
    let ttl = args.duration("ttl", Duration::from_secs(30))?;
    let wait = args.duration_opt("wait")?;
    let grace = args.duration("grace", Duration::from_secs(5))?;
    let fence = args.flag("fence");
    let resource = &args.positionals[0];
    let client = client(&servers, ttl, fence)?;
    let signals = Signals::register()?;

    let lock = match acquire_lock(&client, resource, ttl, wait, &|| signals.pending()) {
        Ok(lock) => lock,
        Err(failure) => {
            return Err(match signals.take().next() {
                Some(sig) => Failure::new(
                    u8::try_from(128 + sig).unwrap_or(EX_SOFTWARE),
                    format!("interrupted (signal {sig}) while waiting for {resource:?}"),
                ),
                None => failure,
            });
        }
    };
    if let Some(sig) = signals.take().next() {
        // Interrupted while acquiring: give the lock back, run nothing.
        let _ = client.unlock(&lock);
        return Ok(u8::try_from(128 + sig).unwrap_or(EX_SOFTWARE));
    }
    let (token, fence_token) = (lock.token().to_string(), lock.fence());
    let auto = client
        .auto_extend(lock, ttl, None)
        .map_err(|e| Failure::new(EX_SOFTWARE, format!("cannot start the watchdog: {e}")))?;

    let mut command = Command::new(&args.command[0]);
    command
        .args(&args.command[1..])
        .env("REDLOCK_RESOURCE", resource)
        .env("REDLOCK_TOKEN", &token);
    match fence_token {
        Some(f) => command.env("REDLOCK_FENCE", f.to_string()),
        None => command.env_remove("REDLOCK_FENCE"),
    };
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            let _ = auto.release();
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            return Err(Failure::new(
                code,
                format!("cannot run {:?}: {e}", args.command[0]),
            ));
        }
    };

    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                if let Err(e) = auto.release() {
                    eprintln!("redlock lock: warning: releasing {resource:?} failed: {e}");
                }
                return Ok(status_code(status));
            }
            Ok(None) => {}
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Failure::new(
                    EX_SOFTWARE,
                    format!("cannot watch the command: {e}"),
                ));
            }
        }
        for sig in signals.take() {
            send_signal(child.id(), sig);
        }
        if let Some(why) = auto.wait_lost(Duration::from_millis(20)) {
            stop(&mut child, grace, &signals);
            drop(auto);
            return Err(Failure::new(
                EX_SOFTWARE,
                format!(
                    "lost the lock on {resource:?} while the command ran ({why}); the command was stopped"
                ),
            ));
        }
    }
}

/// SIGTERM, then SIGKILL after `grace`; waits for the child to exit.
fn stop(child: &mut Child, grace: Duration, signals: &Signals) {
    send_signal(child.id(), libc::SIGTERM);
    let give_up = Instant::now() + grace;
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return,
            Ok(None) => {}
        }
        if Instant::now() >= give_up {
            let _ = child.kill();
            let _ = child.wait();
            return;
        }
        for sig in signals.take() {
            send_signal(child.id(), sig);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
