//! `redlock lock`: run a command with a lock held and kept alive, forward
//! signals to it, stop it if the lock is lost, release when it exits.

use alloc::sync::Arc;
use core::sync::atomic::{AtomicBool, Ordering};
use core::time::Duration;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus};
use std::time::{Instant, SystemTime};

use clap::Args;

use crate::args::{RetryingArgs, Target, WaitArgs, parse_duration, show_duration};
use crate::guard::GroupGuard;
use crate::{EX_SOFTWARE, Failure, acquire_lock, client, servers};

extern crate alloc;

/// `redlock lock`'s options.
#[derive(Debug, Args)]
pub(crate) struct LockArgs {
    #[arg(
        long,
        value_name = "D",
        default_value = "30s",
        allow_hyphen_values = true,
        value_parser = parse_duration,
        value_hint = clap::ValueHint::Other,
        help = "lock time to live (a bare number is seconds); the watchdog extends it \
                while CMD runs"
    )]
    pub(crate) ttl: Duration,
    #[arg(long, help = "take an F1 fencing token (REDLOCK_FENCE)")]
    pub(crate) fence: bool,
    #[arg(
        long,
        value_name = "D",
        default_value = "5s",
        allow_hyphen_values = true,
        value_parser = parse_duration,
        value_hint = clap::ValueHint::Other,
        help = grace_help()
    )]
    pub(crate) grace: Duration,
    #[command(flatten)]
    pub(crate) wait: WaitArgs,
    #[command(flatten)]
    pub(crate) client: RetryingArgs,
    #[command(flatten)]
    pub(crate) target: Target,
    // Everything from the first argument after RESOURCE that is not one of
    // these options (or after `--`) is the command's: `lock r ls -la`.
    #[arg(
        value_name = "CMD",
        required = true,
        trailing_var_arg = true,
        value_parser = clap::value_parser!(std::ffi::OsString),
        value_hint = clap::ValueHint::CommandWithArguments,
        help = "the command to run, and its arguments"
    )]
    /// As given, bytes that are not UTF-8 included (a file name, say).
    pub(crate) command: Vec<std::ffi::OsString>,
}

/// `--grace`'s help.
fn grace_help() -> String {
    format!(
        "if the lock is lost, CMD gets SIGTERM at once and SIGKILL after D, or sooner: {} \
         before the lock's validity (as this client computed it) ends, at once if that is \
         past",
        show_duration(KILL_MARGIN)
    )
}

/// `redlock lock --help`: what it does.
pub(crate) const ABOUT: &str = "\
Acquires RESOURCE, runs CMD with the lock held and kept alive by a watchdog,
releases the lock when CMD exits, and exits with CMD's status.

CMD's environment has REDLOCK_RESOURCE, REDLOCK_TOKEN, REDLOCK_VALID_UNTIL
(when the lock's validity ends unless the watchdog extends it, in
milliseconds since the Unix epoch, rounded down) and, with --fence,
REDLOCK_FENCE (the fencing token: larger for every later holder).

With -v, the lock's events are logged on stderr, one line each, for tools to
read: \"lock event: acquired at_unix_us=T valid_until_unix_us=V fence=F\",
\"lock event: extended valid_until_unix_us=V\" (V as the watchdog last
extended it, logged when this process sees it, before it stops or releases),
\"lock event: lost at_unix_us=T\" and \"lock event: released at_unix_us=T\" (CMD
exited; the release follows). Times are microseconds since the Unix epoch.";

/// `redlock lock --help`: the process group, examples, exit statuses.
pub(crate) const AFTER: &str = "\
CMD runs as the leader of its own process group (with the terminal's
foreground when redlock has it). SIGINT, SIGTERM and SIGHUP sent to redlock
are forwarded to that group; the lock is released when CMD exits. If the lock
is lost, the whole group gets SIGTERM and, at the end of the grace period
(cut short as above), SIGKILL. If redlock itself dies, even by SIGKILL, the
whole group gets SIGKILL at once (a small `redlock` process outside the group
watches for that): CMD never runs on without redlock watching its lock.

  redlock lock -w 2m nightly-report -- ./make-report.sh
  redlock lock -n -E 0 cron-job -- ./job.sh  # skip it when it runs elsewhere

Exit statuses: CMD's own (128+N if killed by signal N); 75 (or -E N) held by
someone else; 69 too few servers answered; 70 the lock was lost while CMD ran,
or an internal error; 64 bad usage; 127 CMD not found; 126 CMD could not be run.";

/// How long before the end of the lock's validity a lost lock's command
/// gets SIGKILL at the latest: time for the signal to land and the
/// processes to die, and for this loop to wake up late on a busy machine.
const KILL_MARGIN: Duration = Duration::from_millis(50);

/// When a command whose lock was lost at `now` gets SIGKILL: after the
/// `grace`, but never later than [`KILL_MARGIN`] before `valid_until`, the
/// end of the validity this client computed (another client may hold the
/// lock after it). `now` or earlier: at once.
fn kill_at(now: Instant, grace: Duration, valid_until: Instant) -> Instant {
    let by_validity = valid_until.checked_sub(KILL_MARGIN).unwrap_or(now);
    match now.checked_add(grace) {
        Some(after_grace) => after_grace.min(by_validity),
        None => by_validity,
    }
}

/// Microseconds since the Unix epoch at the monotonic instant `at` (past or
/// future), by this process' wall clock; 0 before the epoch.
fn unix_micros(at: Instant) -> u64 {
    let (now, wall) = (Instant::now(), SystemTime::now());
    let wall_at = if at >= now {
        wall.checked_add(at - now)
    } else {
        wall.checked_sub(now - at)
    };
    wall_at
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// The lock's events, logged at info level (`-v`) in a fixed form that
/// tools can read (see the help): the validity as this process last saw it.
struct Events<'a> {
    resource: &'a str,
    valid_until: Instant,
}

impl Events<'_> {
    fn acquired(&self, at: Instant, fence: Option<u64>) {
        log::info!(
            "lock event: acquired at_unix_us={} valid_until_unix_us={} fence={} resource={:?}",
            unix_micros(at),
            unix_micros(self.valid_until),
            fence.map_or_else(|| "none".to_owned(), |f| f.to_string()),
            self.resource
        );
    }

    /// Logs the validity of `auto`'s lock if an extension moved it.
    fn check(&mut self, auto: &redlock_std::AutoLock) {
        if !log::log_enabled!(log::Level::Info) {
            return;
        }
        let valid_until = auto.lock().valid_until();
        if valid_until != self.valid_until {
            self.valid_until = valid_until;
            log::info!(
                "lock event: extended valid_until_unix_us={} resource={:?}",
                unix_micros(valid_until),
                self.resource
            );
        }
    }

    fn at(&self, what: &str, at: Instant) {
        log::info!(
            "lock event: {what} at_unix_us={} resource={:?}",
            unix_micros(at),
            self.resource
        );
    }
}

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

/// The shell's convention: the exit code, or 128 + the signal that killed it.
fn status_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(EX_SOFTWARE),
        (None, Some(sig)) => u8::try_from(128 + (sig & 0x7f)).unwrap_or(EX_SOFTWARE),
        _ => EX_SOFTWARE,
    }
}

pub(crate) fn lock(args: &LockArgs) -> Result<u8, Failure> {
    let servers = servers(args.client.server())?;
    let (ttl, grace, fence) = (args.ttl, args.grace, args.fence);
    let how = args.wait.acquiring();
    let resource = &args.target.resource;
    // Never empty: clap requires CMD.
    let Some((program, program_args)) = args.command.split_first() else {
        return Err(
            crate::args::usage("missing the command to run (RESOURCE -- CMD [ARGS..])").into(),
        );
    };
    let options = args.client.options()?;
    options.check_against_ttl(ttl)?;
    let client = client(&servers, &options, ttl, fence)?;
    let signals = Signals::register()?;

    let lock = match acquire_lock(&client, resource, ttl, &how, &|| signals.pending()) {
        Ok(lock) => (lock, Instant::now()),
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
    let (lock, acquired_at) = lock;
    if let Some(sig) = signals.take().next() {
        // Interrupted while acquiring: give the lock back, run nothing.
        let _ = client.unlock(&lock);
        return Err(Failure::new(
            u8::try_from(128 + sig).unwrap_or(EX_SOFTWARE),
            format!("interrupted (signal {sig}) before the command started; {resource:?} released"),
        ));
    }
    let (token, fence_token) = (lock.token().to_string(), lock.fence());
    let mut events = Events {
        resource,
        valid_until: lock.valid_until(),
    };
    events.acquired(acquired_at, fence_token);
    let valid_until_ms = unix_micros(lock.valid_until()) / 1000;
    let auto = client
        .auto_extend(lock, ttl, None)
        .map_err(|e| Failure::new(EX_SOFTWARE, format!("cannot start the watchdog: {e}")))?;

    let mut command = Command::new(program);
    command
        .args(program_args)
        .env("REDLOCK_RESOURCE", resource)
        .env("REDLOCK_TOKEN", &token)
        .env("REDLOCK_VALID_UNTIL", valid_until_ms.to_string());
    match fence_token {
        Some(f) => command.env("REDLOCK_FENCE", f.to_string()),
        None => command.env_remove("REDLOCK_FENCE"),
    };
    // Started before the command, so that it knows the command's group
    // before the command runs (see guard.rs).
    let guard = match GroupGuard::start() {
        Ok(guard) => guard,
        Err(e) => {
            let _ = auto.release();
            return Err(Failure::new(
                EX_SOFTWARE,
                format!("cannot start the process that stops the command if redlock dies: {e}"),
            ));
        }
    };
    let mut job = match Job::spawn(&mut command, guard) {
        Ok(job) => job,
        Err(e) => {
            let _ = auto.release();
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            return Err(Failure::new(
                code,
                format!(
                    "cannot run {}: {e}",
                    crate::args::shown(&program.to_string_lossy())
                ),
            ));
        }
    };

    loop {
        events.check(&auto);
        if job.exited() {
            events.check(&auto);
            events.at("released", Instant::now());
            let status = job.reap();
            let started = Instant::now();
            let what = format!("release {resource:?}");
            match auto.release() {
                Ok(r) => crate::tell(
                    &client,
                    &what,
                    started,
                    &format!("deleted on {}", r.deleted()),
                    Some(&r.report),
                ),
                Err(e) => {
                    crate::tell(&client, &what, started, &e.to_string(), e.report());
                    warn_user!("redlock lock: warning: releasing {resource:?} failed: {e}");
                }
            }
            return status.map(status_code).map_err(|e| {
                Failure::new(EX_SOFTWARE, format!("cannot wait for the command: {e}"))
            });
        }
        for sig in signals.take() {
            job.signal(sig);
        }
        if let Some(why) = auto.wait_lost(Duration::from_millis(20)) {
            events.check(&auto);
            events.at("lost", Instant::now());
            // Whatever the reason, the job must be gone before the
            // validity this client computed ends: past it another client
            // may hold the lock (a majority saying the key is not ours does
            // not make the wait any safer).
            let kill_at = kill_at(Instant::now(), grace, auto.lock().valid_until());
            job.stop(kill_at, &signals);
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

/// The command, leader of its own process group: signals reach all of its
/// processes, once. With a terminal, the group gets the terminal's
/// foreground while it runs (so that it can read it, and Ctrl-C reaches it
/// directly).
///
/// The job's group dies with redlock (see guard.rs): dropped without
/// [`Job::reap`], say when redlock panics, the guard kills it.
struct Job {
    child: Child,
    pgid: libc::pid_t,
    terminal: Option<sys::Terminal>,
    guard: Option<GroupGuard>,
}

impl Job {
    fn spawn(command: &mut Command, guard: GroupGuard) -> std::io::Result<Job> {
        guard.protect(command);
        let child = match command.process_group(0).spawn() {
            Ok(child) => child,
            Err(e) => {
                // std has reaped the child that failed to exec.
                guard.done();
                return Err(e);
            }
        };
        let pgid = libc::pid_t::try_from(child.id()).map_err(std::io::Error::other)?;
        let terminal = sys::hand_terminal_to(pgid);
        Ok(Job {
            child,
            pgid,
            terminal,
            guard: Some(guard),
        })
    }

    /// Sends `signal` to every process of the job.
    fn signal(&self, signal: i32) {
        sys::kill_group(self.pgid, signal);
    }

    /// True once the command exited. It is not reaped yet, so its process
    /// group id cannot be reused meanwhile.
    fn exited(&self) -> bool {
        sys::exited_unreaped(self.pgid)
    }

    /// Takes the terminal back, lets the guard go (before reaping: until
    /// then the group id cannot be reused) and reaps the command.
    fn reap(&mut self) -> std::io::Result<ExitStatus> {
        self.terminal = None;
        if let Some(guard) = self.guard.take() {
            guard.done();
        }
        self.child.wait()
    }

    /// SIGTERM to the job (and SIGCONT, so that a stopped job can act on
    /// it), then SIGKILL to whatever is left of it at `kill_at` or once the
    /// command exited; then reaps it.
    fn stop(&mut self, kill_at: Instant, signals: &Signals) {
        self.signal(libc::SIGTERM);
        self.signal(libc::SIGCONT);
        while !self.exited() && Instant::now() < kill_at {
            for sig in signals.take() {
                self.signal(sig);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.signal(libc::SIGKILL);
        let _ = self.reap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_lock_is_killed_after_the_grace_or_before_the_validity_ends() {
        let now = Instant::now();
        let s = Duration::from_secs;
        // The grace ends first.
        assert_eq!(kill_at(now, s(1), now + s(10)), now + s(1));
        // The validity ends first: the margin before it.
        assert_eq!(kill_at(now, s(5), now + s(1)), now + s(1) - KILL_MARGIN);
        // No grace: at once.
        assert_eq!(kill_at(now, Duration::ZERO, now + s(1)), now);
        // The validity is (nearly) over: at once, or already past.
        assert!(kill_at(now, s(5), now + KILL_MARGIN / 2) <= now);
        assert!(kill_at(now, s(5), now) <= now);
        // A grace too long for the clock: the validity decides.
        assert_eq!(
            kill_at(now, Duration::MAX, now + s(1)),
            now + s(1) - KILL_MARGIN
        );
    }
}

/// The few system calls std does not offer.
#[allow(unsafe_code)]
mod sys {
    /// Sends `signal` to every process in the group `pgid`.
    pub(super) fn kill_group(pgid: libc::pid_t, signal: libc::c_int) {
        // SAFETY: kill(2) takes integers and touches no memory of ours.
        // `pgid` is the group of a child we started as its group leader and
        // have not reaped (callers reap last), so the id names that group.
        unsafe {
            libc::kill(-pgid, signal);
        }
    }

    /// True once the child `pid` exited (or cannot be waited for), leaving
    /// it unreaped.
    pub(super) fn exited_unreaped(pid: libc::pid_t) -> bool {
        let Ok(id) = libc::id_t::try_from(pid) else {
            return true;
        };
        // SAFETY: `siginfo_t` is plain data for which all zeroes is valid.
        let mut info: libc::siginfo_t = unsafe { core::mem::zeroed() };
        // SAFETY: `info` is a valid, writable `siginfo_t` that outlives the
        // call; WNOWAIT leaves the child to be reaped by `Child::wait`.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                id,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        // SAFETY: after a successful waitid, `si_pid` is set (zero when the
        // child has not exited yet).
        r != 0 || unsafe { info.si_pid() } != 0
    }

    /// The terminal on stdin was handed to another process group; dropping
    /// this gives it back.
    pub(super) struct Terminal {
        ours: libc::pid_t,
    }

    /// Hands the terminal's foreground to `pgid`, if stdin is a terminal
    /// whose foreground is our group.
    pub(super) fn hand_terminal_to(pgid: libc::pid_t) -> Option<Terminal> {
        // SAFETY: these calls take integers (and SIG_IGN) and touch no
        // memory of ours.
        unsafe {
            if libc::isatty(0) != 1 {
                return None;
            }
            let ours = libc::getpgrp();
            if libc::tcgetpgrp(0) != ours {
                return None;
            }
            // Taking the terminal back from the background must not stop us.
            libc::signal(libc::SIGTTOU, libc::SIG_IGN);
            if libc::tcsetpgrp(0, pgid) != 0 {
                return None;
            }
            // In case it read the terminal before it had it (SIGTTIN).
            libc::kill(-pgid, libc::SIGCONT);
            Some(Terminal { ours })
        }
    }

    impl Drop for Terminal {
        fn drop(&mut self) {
            // SAFETY: integers only; SIGTTOU is ignored (above).
            unsafe {
                libc::tcsetpgrp(0, self.ours);
            }
        }
    }
}
