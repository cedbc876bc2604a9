//! The group guard: the command of `redlock lock` dies with redlock, with
//! every process of its group, even when redlock is killed with SIGKILL
//! (the OOM killer, `kill -9`) and cannot clean up.
//!
//! The command's leader gets `PR_SET_PDEATHSIG(SIGKILL)` (Linux), which
//! kills that one process only. The rest of its process group (`sh -c
//! 'work & wait'`) is the guard's: a second `redlock` process, started
//! before the command and outside its group, that reads a pipe whose write
//! end only redlock holds (every other copy closes on exec):
//!
//! - `p` and 4 bytes: the command's process group, written by the command's
//!   own process between fork and exec (after `setpgid`, after
//!   `PR_SET_PDEATHSIG`). It is in the pipe before the command runs a
//!   single instruction of its own, and so before any end of file: when
//!   the guard sees redlock gone, it knows the group. If redlock dies
//!   earlier, the command's process never execs (the death signal, or the
//!   parent check after setting it) and the guard has nothing to kill.
//! - `d`: done. The command was reaped or is about to be (redlock sends
//!   this before it reaps, so the group id cannot have been reused); the
//!   guard exits without killing anything.
//! - end of file before `d`: redlock is gone (killed, or it panicked). The
//!   guard sends SIGKILL to the group and exits.
//!
//! The guard is in a process group of its own, so that signals to the
//! command's group (forwarded, or the terminal's) and to redlock's group
//! (Ctrl-C at a shell) do not reach it; it ignores the terminal's signals
//! besides.

use core::time::Duration;
use std::io::{PipeWriter, Read as _, Write as _};
use std::os::fd::AsRawFd as _;
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// The hidden subcommand that runs the guard.
pub(crate) const SUBCOMMAND: &str = "__group-guard";

/// The message that gives the guard the group to kill.
const GROUP: u8 = b'p';
/// The message that tells the guard to exit without killing.
const DONE: u8 = b'd';

/// The guard process, seen from redlock. Dropped without
/// [`GroupGuard::done`], its pipe closes and the guard kills the command's
/// group: redlock failing takes the command with it.
#[derive(Debug)]
pub(crate) struct GroupGuard {
    child: Child,
    /// The write end of the guard's pipe.
    pipe: PipeWriter,
}

impl GroupGuard {
    /// Starts the guard: this program again, with [`SUBCOMMAND`].
    pub(crate) fn start() -> std::io::Result<GroupGuard> {
        // Both ends close on exec (std opens every descriptor that way): no
        // child but the guard gets the read end, as its stdin, and only
        // redlock keeps the write end once its children have exec'd.
        let (reader, writer) = std::io::pipe()?;
        let child = Command::new(own_executable()?)
            .arg0("redlock")
            .arg(SUBCOMMAND)
            .stdin(Stdio::from(reader))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()?;
        Ok(GroupGuard {
            child,
            pipe: writer,
        })
    }

    /// Makes `command`, to be spawned with `process_group(0)` by this
    /// thread (which must live as long as the command: see
    /// `sys::in_child`), tell the guard its group before it execs, and
    /// die with redlock.
    pub(crate) fn protect(&self, command: &mut Command) {
        sys::before_exec(command, self.pipe.as_raw_fd(), GROUP);
    }

    /// Tells the guard to exit without killing anything, and reaps it
    /// (waiting a second at most: a guard stopped with SIGSTOP must not
    /// hold up the release of the lock). Call it before reaping the
    /// command.
    pub(crate) fn done(self) {
        let GroupGuard {
            mut child,
            mut pipe,
        } = self;
        // If the guard is gone already there is nobody to tell.
        let _ = pipe.write_all(&[DONE]);
        drop(pipe);
        let give_up = Instant::now() + Duration::from_secs(1);
        while matches!(child.try_wait(), Ok(None)) && Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// The path that runs this program: on Linux the kernel's link, which
/// works even if the file was replaced or removed since (an upgrade while
/// a command runs).
fn own_executable() -> std::io::Result<std::path::PathBuf> {
    if cfg!(target_os = "linux") {
        Ok("/proc/self/exe".into())
    } else {
        std::env::current_exe()
    }
}

/// The guard process: reads its stdin as described in the module docs.
/// Returns its exit status (nobody looks at it).
pub(crate) fn serve() -> u8 {
    sys::ignore_terminal_signals();
    let mut pipe = std::io::stdin().lock();
    let mut group: Option<libc::pid_t> = None;
    loop {
        let mut tag = [0u8; 1];
        match pipe.read(&mut tag) {
            Ok(0) => break,
            Ok(_) if tag[0] == DONE => return 0,
            Ok(_) if tag[0] == GROUP => {
                let mut pid = [0u8; 4];
                if pipe.read_exact(&mut pid).is_err() {
                    break;
                }
                group = Some(libc::pid_t::from_ne_bytes(pid));
            }
            // Anything else is not redlock talking: fail closed.
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    // Redlock is gone without saying done: the command must not outlive it.
    // A group id of 0 or 1 would mean our own group or every process: never.
    if let Some(pgid) = group.filter(|&g| g > 1) {
        sys::kill_group(pgid);
    }
    0
}

/// The system calls std does not offer.
#[allow(unsafe_code)]
mod sys {
    use std::os::fd::RawFd;
    use std::os::unix::process::CommandExt as _;
    use std::process::Command;

    /// Sets up `command` to run [`in_child`] between fork and exec.
    pub(super) fn before_exec(command: &mut Command, pipe: RawFd, tag: u8) {
        // Read in the parent, before the fork: the process the child must
        // die with.
        // SAFETY: getpid(2) takes nothing and cannot fail.
        let parent = unsafe { libc::getpid() };
        // SAFETY: the closure runs in the child between fork and exec. It
        // only makes async-signal-safe system calls (prctl, getppid,
        // getpid, signal, write), allocates nothing, takes no lock, and
        // touches only its own copies of `pipe`, `parent` and `tag`.
        unsafe {
            command.pre_exec(move || in_child(pipe, parent, tag));
        }
    }

    /// In the command's process, after fork and `setpgid`, before exec:
    /// die with `parent`, then tell the guard (over `pipe`, still open: it
    /// closes on exec) the process group, whose id is our pid.
    ///
    /// Only for the child between fork and exec (see [`before_exec`]): in
    /// redlock itself it would tie redlock to its parent.
    fn in_child(pipe: RawFd, parent: libc::pid_t, tag: u8) -> std::io::Result<()> {
        #[cfg(target_os = "linux")]
        // SAFETY: prctl(2) and getppid(2) take integers only. The death
        // signal is tied to the thread that forked us: redlock spawns the
        // command from its main thread, which lives as long as redlock.
        unsafe {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Redlock died before the prctl took effect: do not start.
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = parent;
        // SAFETY: getpid(2) takes nothing and cannot fail.
        let pid = unsafe { libc::getpid() };
        let mut message = [tag, 0, 0, 0, 0];
        message[1..].copy_from_slice(&pid.to_ne_bytes());
        // SAFETY: `message` is a live local array of 5 bytes, the length
        // passed; 5 bytes are below PIPE_BUF, so the write is atomic and
        // never interleaves with redlock's. SIGPIPE (reset to its default
        // by std just before) is ignored around the write, so that a guard
        // that is gone is an error here rather than a silent death, and
        // restored for the program we exec.
        let written = unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
            let n = libc::write(pipe, message.as_ptr().cast(), message.len());
            let error = std::io::Error::last_os_error();
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            if n < 0 { Err(error) } else { Ok(n) }
        };
        match written? {
            5 => Ok(()),
            _ => Err(std::io::Error::from_raw_os_error(libc::EIO)),
        }
    }

    /// Sends SIGKILL to every process of the group `pgid`.
    pub(super) fn kill_group(pgid: libc::pid_t) {
        // SAFETY: kill(2) takes integers and touches no memory of ours.
        // `pgid` (> 1, checked by the caller) is the command's group, as
        // its own process wrote it. Redlock, its parent, is gone, so the
        // leader may have been reaped already; the id stays in use while
        // any process of the group lives, which is what we kill. Should the
        // group be empty, the id could only name another group after the
        // kernel handed out every other pid first: we act at once.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }

    /// The guard outlives terminal hang-ups and keyboard signals (it is
    /// not in the terminal's foreground group anyway).
    pub(super) fn ignore_terminal_signals() {
        for sig in [libc::SIGHUP, libc::SIGINT, libc::SIGQUIT, libc::SIGTSTP] {
            // SAFETY: signal(2) with SIG_IGN installs no handler of ours.
            unsafe {
                libc::signal(sig, libc::SIG_IGN);
            }
        }
    }
}
