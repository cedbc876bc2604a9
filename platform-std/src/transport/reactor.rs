//! The readiness of the transport's poll, from an async runtime's own
//! reactor (features `tokio` and `async-io`).
//!
//! The transport's mio `Poll` is an epoll instance: its descriptor is
//! readable while any of its sockets has an event. Registered with the
//! runtime's reactor (a duplicate of it: tokio's `AsyncFd`, async-io's
//! `Async`), it wakes the task that leads the transport when a reply
//! arrives, on the runtime's own thread: no driver thread between a reply
//! and the task that awaits it. The task then polls the mio `Poll` without
//! waiting and drives every operation, as a blocking leader would.
//!
//! Only readiness comes from the runtime, not time: the deadlines are kept
//! by the client's driver thread, which wakes the leading task when one is
//! due (see `task.rs`). So a runtime built without timers works too, and
//! the hot path (a reply, then the task) has no timer in it.

//!
//! Without either feature the type has no value, and the transport never
//! leads from a task: the driver thread does.

#[cfg(any(feature = "tokio", feature = "async-io"))]
use std::os::fd::{AsFd, OwnedFd};

#[cfg(any(feature = "tokio", feature = "async-io"))]
use core::task::Poll as TaskPoll;

use super::*;

/// The runtime reactor a task leads the transport from.
#[derive(Debug)]
pub(crate) enum Reactor {
    /// tokio's, for a task on a tokio runtime with IO enabled: the
    /// runtime it is registered with, by id.
    #[cfg(feature = "tokio")]
    Tokio(tokio::io::unix::AsyncFd<OwnedFd>, tokio::runtime::Id),
    /// async-io's (smol's), for a task on any other executor.
    #[cfg(feature = "async-io")]
    AsyncIo(async_io::Async<OwnedFd>),
}

impl Reactor {
    /// The reactor of the runtime the calling task runs on, watching the
    /// poll behind `registry`. `None` when there is none this build
    /// supports (no tokio runtime is current, and async-io is not built
    /// in), or when registering failed (logged): the driver thread serves
    /// the task then.
    pub(crate) fn current(registry: &Registry) -> Option<Reactor> {
        #[cfg(feature = "tokio")]
        let runtime = tokio::runtime::Handle::try_current().ok();
        #[cfg(feature = "tokio")]
        if let Some(runtime) = runtime {
            if without_io::has(runtime.id()) {
                return None;
            }
            // (Deprecated in tokio 1.54 for descriptors that may be closed
            // while registered; an `OwnedFd` is closed only when the
            // `AsyncFd` drops it, after deregistering, which is what the
            // unsafe `register_with_interest` asks of its caller, and this
            // crate has no unsafe code.)
            #[allow(deprecated)]
            let register = || {
                registry.as_fd().try_clone_to_owned().and_then(|fd| {
                    tokio::io::unix::AsyncFd::with_interest(fd, tokio::io::Interest::READABLE)
                })
            };
            // tokio panics when the runtime has no IO enabled (it has no
            // way to ask first). `available`, which a task asks before it
            // may lead, has found that out already, before the task
            // submitted; should a task get here all the same, the same
            // answer: the driver thread serves that runtime's tasks, from
            // now on without asking again. Nothing of ours is half-done
            // then: the panic is in tokio's handle lookup.
            let Ok(made) = std::panic::catch_unwind(core::panic::AssertUnwindSafe(register)) else {
                without_io::add(runtime.id());
                log::warn!(
                    "redlock: a tokio runtime without IO enabled: the driver thread serves its \
                     tasks"
                );
                return None;
            };
            return match made {
                Ok(fd) => Some(Reactor::Tokio(fd, runtime.id())),
                // Not async-io's either, on a tokio runtime (a second
                // reactor thread): the driver thread serves.
                Err(e) => {
                    // Said once (asked again at each call, it would repeat).
                    static SAID: core::sync::atomic::AtomicBool =
                        core::sync::atomic::AtomicBool::new(false);
                    if !SAID.swap(true, core::sync::atomic::Ordering::Relaxed) {
                        log::warn!(
                            "redlock: tokio's reactor cannot watch the poll ({e}); \
                             the driver thread serves"
                        );
                    }
                    None
                }
            };
        }
        #[cfg(feature = "async-io")]
        {
            let made = registry
                .as_fd()
                .try_clone_to_owned()
                .and_then(async_io::Async::new_nonblocking);
            match made {
                Ok(fd) => return Some(Reactor::AsyncIo(fd)),
                Err(e) => log::warn!("redlock: async-io's reactor cannot watch the poll: {e}"),
            }
        }
        let _ = registry;
        None
    }

    /// Whether a reactor could serve the calling task: a tokio runtime with
    /// IO is current, or none is and async-io is built in. Cheap (a
    /// thread-local, no lock, no registration) but for the first ask on a
    /// thread about a tokio runtime (see `without_io::has_io`), made
    /// before the task submits anything and with no lock of the client
    /// held.
    pub(crate) fn available() -> bool {
        #[cfg(feature = "tokio")]
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            // Whether it has IO: known on this thread after the first ask.
            return without_io::has_io(runtime.id());
        }
        cfg!(feature = "async-io")
    }

    /// Whether this reactor is the one for the calling task: tokio's while
    /// the runtime it is registered with is current (another one's, even
    /// alive, may not be turning: a current-thread runtime whose
    /// `block_on` returned), async-io's while no tokio runtime is (on
    /// tokio, tokio's own reactor is preferred: no second reactor thread).
    pub(crate) fn serves_current(&self) -> bool {
        #[cfg(feature = "tokio")]
        let runtime = tokio::runtime::Handle::try_current().ok().map(|h| h.id());
        #[cfg(feature = "tokio")]
        let on_tokio = runtime.is_some();
        #[cfg(not(feature = "tokio"))]
        let on_tokio = false;
        #[cfg(not(feature = "async-io"))]
        let _ = on_tokio;
        match self {
            #[cfg(feature = "tokio")]
            Reactor::Tokio(_, id) => runtime == Some(*id),
            #[cfg(feature = "async-io")]
            Reactor::AsyncIo(_) => !on_tokio,
            #[cfg(not(any(feature = "tokio", feature = "async-io")))]
            _ => {
                let _ = on_tokio;
                match *self {}
            }
        }
    }

    /// Whether [`poll_ready`](Reactor::poll_ready) says true of every event
    /// of the poll after the one before it returned (tokio: its readiness
    /// is edge-triggered and cleared by tick, so an event after the clear
    /// sets it again). async-io's is not: it may say "not yet" of an event
    /// it delivered in the tick the task registered in (its oneshot
    /// interest then re-armed, level-triggered, on a poll the caller may
    /// have emptied meanwhile), so its callers also ask the poll.
    pub(crate) fn reports_every_event(&self) -> bool {
        match self {
            #[cfg(feature = "tokio")]
            Reactor::Tokio(..) => true,
            #[cfg(feature = "async-io")]
            Reactor::AsyncIo(..) => false,
            #[cfg(not(any(feature = "tokio", feature = "async-io")))]
            _ => match *self {},
        }
    }

    /// True if the poll has had events since the last call that returned
    /// false (its readiness is then taken: the caller polls the events
    /// now); false once `cx` is registered to be woken when it has. An
    /// error means the reactor is gone (its runtime shut down).
    pub(crate) fn poll_ready(&self, cx: &mut Context<'_>) -> io::Result<bool> {
        match self {
            #[cfg(feature = "tokio")]
            Reactor::Tokio(fd, _) => match fd.poll_read_ready(cx) {
                TaskPoll::Ready(Ok(mut guard)) => {
                    // Taken before the caller polls: an event after this
                    // sets it again (tokio compares its ticks), so none is
                    // lost.
                    guard.clear_ready();
                    Ok(true)
                }
                TaskPoll::Ready(Err(e)) => Err(e),
                TaskPoll::Pending => Ok(false),
            },
            #[cfg(feature = "async-io")]
            Reactor::AsyncIo(fd) => match fd.poll_readable(cx) {
                TaskPoll::Ready(Ok(())) => Ok(true),
                TaskPoll::Ready(Err(e)) => Err(e),
                TaskPoll::Pending => Ok(false),
            },
            #[cfg(not(any(feature = "tokio", feature = "async-io")))]
            _ => {
                let _ = cx;
                match *self {}
            }
        }
    }
}

/// The tokio runtimes found without IO enabled (registering with their
/// reactor panics), by id: the driver thread serves their tasks. The
/// newest few are kept (a runtime's id is never reused; one forgotten is
/// asked again, and tokio's message printed again).
#[cfg(feature = "tokio")]
mod without_io {
    use core::cell::Cell;
    use core::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;

    use tokio::runtime::Id;

    std::thread_local! {
        /// The last runtime this thread found with IO, and the last one it
        /// found without.
        static LAST: Cell<[Option<Id>; 2]> = const { Cell::new([None, None]) };
    }

    /// Whether the tokio runtime `id`, current on this thread, has IO
    /// enabled. The first ask on a thread about a runtime registers a
    /// throwaway epoll descriptor with it, and catches tokio's panic if it
    /// has no IO: before a task submits, with no lock of the client held,
    /// so tokio's panic message (and a backtrace, if asked for, which may
    /// take long to print) delays no request and no other task of the
    /// client. The answer is kept on the thread (the last runtime found
    /// with IO, and the last found without: a thread that moves between
    /// more runtimes asks again), and a runtime without IO is listed for
    /// every thread (tokio's message printed once). A registration that
    /// fails without a panic (a runtime shutting down) says yes: `current`
    /// then tells why the driver thread serves. With no descriptor to
    /// register, the answer is yes, and not kept.
    pub(super) fn has_io(id: Id) -> bool {
        let [with, without] = LAST.with(Cell::get);
        if with == Some(id) {
            return true;
        }
        if without == Some(id) {
            return false;
        }
        let Some(answer) = ask(id) else {
            return true;
        };
        LAST.with(|c| {
            let mut last = c.get();
            last[usize::from(!answer)] = Some(id);
            c.set(last);
        });
        answer
    }

    /// Asks tokio (see `has_io`); `None` if no answer (no descriptor to
    /// register).
    fn ask(id: Id) -> Option<bool> {
        if has(id) {
            return Some(false);
        }
        // One ask at a time, so that tokio's message for a runtime without
        // IO is printed once (a thread that waits here finds the runtime
        // listed). Held while it prints: a first ask of another thread
        // waits that long, before its task submits anything.
        let probing = crate::relock(PROBING.lock());
        if has(id) {
            return Some(false);
        }
        let poll = match mio::Poll::new() {
            Ok(poll) => poll,
            Err(e) => {
                log::debug!("redlock: no descriptor to ask tokio about IO: {e}");
                return None;
            }
        };
        // (Deprecated in tokio 1.54 for descriptors that may be closed
        // while registered: the `Poll` is closed only when the `AsyncFd`
        // drops it, after deregistering.)
        #[allow(deprecated)]
        let register =
            move || tokio::io::unix::AsyncFd::with_interest(poll, tokio::io::Interest::READABLE);
        let with_io = std::panic::catch_unwind(core::panic::AssertUnwindSafe(register)).is_ok();
        if !with_io {
            add(id);
            log::warn!(
                "redlock: a tokio runtime without IO enabled: the driver thread serves its tasks"
            );
        }
        drop(probing);
        Some(with_io)
    }

    /// Held while a thread asks tokio.
    static PROBING: Mutex<()> = Mutex::new(());

    /// How many are kept.
    const KEPT: usize = 16;

    static IDS: Mutex<Vec<Id>> = Mutex::new(Vec::new());
    /// Whether there are any (so that a process without such a runtime
    /// never locks).
    static ANY: AtomicBool = AtomicBool::new(false);

    pub(super) fn has(id: Id) -> bool {
        ANY.load(Ordering::Acquire) && crate::relock(IDS.lock()).contains(&id)
    }

    pub(super) fn add(id: Id) {
        let mut ids = crate::relock(IDS.lock());
        if ids.len() == KEPT {
            ids.remove(0);
        }
        ids.push(id);
        ANY.store(true, Ordering::Release);
    }
}

/// Whether the transport's poll has events that nobody has taken yet,
/// looked at without taking them: a second epoll instance (the driver's)
/// watching the first one's descriptor. The driver asks it while a task
/// leads (`Transport::watch`): replies waiting for a task that is not
/// polled are work owed.
#[derive(Debug, Default)]
pub(crate) struct Peek {
    /// Made at the first look (only a client whose tasks lead needs it).
    watcher: Option<(Poll, Events)>,
}

impl Peek {
    /// True if the poll behind `registry` has events waiting. A failure to
    /// look (not expected) says no: the deadlines still bound the wait.
    pub(crate) fn waiting(&mut self, registry: &Registry) -> bool {
        #[cfg(unix)]
        {
            use mio::unix::SourceFd;
            use std::os::fd::AsRawFd;
            let fd = registry.as_raw_fd();
            let looked = (|| -> io::Result<bool> {
                let (poll, events) = match &mut self.watcher {
                    Some(w) => {
                        // Re-armed (`EPOLL_CTL_MOD` checks the readiness
                        // anew: the watch is edge-triggered).
                        w.0.registry()
                            .reregister(&mut SourceFd(&fd), PEEK, Interest::READABLE)?;
                        w
                    }
                    None => {
                        let poll = Poll::new()?;
                        poll.registry()
                            .register(&mut SourceFd(&fd), PEEK, Interest::READABLE)?;
                        self.watcher.insert((poll, Events::with_capacity(1)))
                    }
                };
                poll.poll(events, Some(StdDuration::ZERO))?;
                Ok(!events.is_empty())
            })();
            match looked {
                Ok(waiting) => waiting,
                Err(e) => {
                    log::debug!("redlock: cannot look at the poll: {e}");
                    false
                }
            }
        }
        #[cfg(not(unix))]
        {
            let _ = registry;
            false
        }
    }
}

/// The token of the transport's poll in the driver's [`Peek`].
const PEEK: Token = Token(0);
