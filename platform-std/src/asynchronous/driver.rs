//! The driver thread: one per client, started by its first async use.
//!
//! It leads the transport while tasks' operations run and neither a
//! blocking caller nor a task on its runtime's reactor leads (without the
//! `tokio`/`async-io` features a task never polls a socket), keeps the time
//! of a task that leads and takes over from one that is no longer polled
//! (see `transport/task.rs`), runs what nobody waits for (the release of a
//! dropped guard, the end of a dropped call), and keeps the watched locks
//! of the async API alive: their timers live here, so a watched lock costs
//! no thread of its own. It ends once every handle of the client is gone
//! and nothing of its own is left to do.

use alloc::sync::Arc;
use core::sync::atomic::{AtomicBool, Ordering};
use core::task::{Context, Poll, Waker};
use core::time::Duration;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant as StdInstant;

use crate::call::{AnyTicket, CallKind};
use crate::transport::{Abandoned, Ticket};
use crate::watchdog::Lost;
use crate::{Client, Error, Lock, Resource, Shared, core_duration, relock};
use redlock_core::{Extend, Extension, Lock as CoreLock, Release, WatchAction, Watchdog};

use super::watch::WatchShared;

/// The waiter id the driver submits under (tasks take theirs from 1 up).
const DRIVER_WAITER: u64 = 0;

/// The driver's side of a client: what it is handed, and whether it runs.
#[derive(Debug, Default)]
pub(crate) struct Driver {
    inbox: Mutex<Inbox>,
    /// A name lookup runs (on its own thread).
    looking_up: AtomicBool,
}

/// What the API hands the driver, taken by it on each turn.
#[derive(Debug, Default)]
struct Inbox {
    /// The driver thread runs.
    running: bool,
    /// Every handle of the client is gone: end once idle.
    shutdown: bool,
    /// Releases to run that nobody waits for.
    releases: Vec<Release<Resource>>,
    /// Operations whose task went away mid-flight.
    adopted: Vec<AnyTicket>,
    /// Locks to keep alive.
    watches: Vec<Arc<WatchShared>>,
}

impl Driver {
    fn inbox(&self) -> MutexGuard<'_, Inbox> {
        relock(self.inbox.lock())
    }
}

impl Client {
    /// Starts the driver thread if it does not run yet.
    pub(crate) fn ensure_driver(&self) -> Result<(), Error> {
        let mut inbox = self.shared.driver.inbox();
        if inbox.running {
            return Ok(());
        }
        let shared = self.shared.clone();
        std::thread::Builder::new()
            .name("redlock-driver".into())
            .spawn(move || run(&shared))
            .map_err(|e| Error::Io(Arc::new(e)))?;
        inbox.running = true;
        inbox.shutdown = false;
        Ok(())
    }

    /// Runs `release` in the background: nobody waits for it.
    pub(crate) fn run_in_background(&self, release: Release<Resource>) {
        self.shared.driver.inbox().releases.push(release);
        self.shared.transport.kick_driver();
    }

    /// Hands the driver an operation whose task went away, or, if it was
    /// done, cleans up after it (releases a lock it acquired).
    pub(crate) fn abandon<K: CallKind>(&self, ticket: Ticket<K>, resource: Option<Resource>) {
        let transport = &self.shared.transport;
        let adopter = Waker::from(transport.kick().clone());
        match transport.abandon(ticket, &adopter) {
            Abandoned::Done(out) => {
                if let Some(release) = self.shared.clean_up(K::won(out), resource) {
                    self.run_in_background(release);
                }
            }
            Abandoned::Adopted => {
                self.shared
                    .driver
                    .inbox()
                    .adopted
                    .push(K::any(ticket, resource));
                transport.kick_driver();
            }
            Abandoned::Gone => {}
        }
    }

    /// Keeps the lock of `watch` alive from the driver.
    pub(crate) fn drive_watch(&self, watch: Arc<WatchShared>) {
        self.shared.driver.inbox().watches.push(watch);
        self.shared.transport.kick_driver();
    }
}

impl Shared {
    /// What an operation nobody waits for leaves to do: the release of a
    /// lock it acquired (the resource is the acquisition's).
    fn clean_up(
        &self,
        won: Option<CoreLock>,
        resource: Option<Resource>,
    ) -> Option<Release<Resource>> {
        let (lock, resource) = (won?, resource?);
        Some(Release::for_lock(
            &self.config,
            &self.transport.servers(self.servers),
            resource,
            &lock,
        ))
    }

    /// The last handle of the client is gone: the driver ends once idle.
    pub(crate) fn shut_down_driver(&self) {
        self.driver.inbox().shutdown = true;
        self.transport.kick_driver();
    }
}

/// A watched lock as the driver keeps it: the core's watchdog decides,
/// the driver runs its extensions.
#[derive(Debug)]
struct Watched {
    shared: Arc<WatchShared>,
    dog: Watchdog,
    /// The extension that runs, if one does.
    extending: Option<Ticket<Extend<Resource>>>,
    /// Its extension waits for a free slot.
    needs_slot: bool,
    /// When the driver looks at it again (unless woken first).
    next: Option<StdInstant>,
}

/// The driver thread's loop: its turns, each under `catch_unwind`, so that
/// a waker that panics (the driver wakes tasks) costs one turn, not the
/// watched locks, the adopted operations and the releases it holds.
fn run(shared: &Arc<Shared>) {
    // Should the driver itself ever unwind all the same (a bug), the
    // client is not left with a leader that never polls, nor with a
    // driver said to run.
    let _exit = ExitGuard(shared);
    let waker = Waker::from(shared.transport.kick().clone());
    let mut work = Work::default();
    loop {
        let turn =
            std::panic::catch_unwind(core::panic::AssertUnwindSafe(|| work.turn(shared, &waker)));
        match turn {
            Ok(true) => {}
            Ok(false) => return,
            Err(_) => {
                log::error!("redlock: a turn of the driver thread panicked (a waker?); going on");
                shared.transport.driver_turn_failed();
            }
        }
    }
}

/// What the driver holds between its turns.
#[derive(Debug, Default)]
struct Work {
    /// Releases nobody waits for, not started yet (no slot was free).
    releases: Vec<Release<Resource>>,
    /// Operations it polls to their end.
    adopted: Vec<AnyTicket>,
    /// Locks it keeps alive.
    watched: Vec<Watched>,
    /// The driver is in line for a slot (for a call or an extension).
    queued: bool,
}

impl Work {
    /// One turn; false once the driver is to end.
    fn turn(&mut self, shared: &Arc<Shared>, waker: &Waker) -> bool {
        let transport = &shared.transport;
        let Work {
            releases,
            adopted,
            watched,
            queued,
        } = self;
        // Kicks from here on are for what this turn may not see.
        transport.kick().take();
        {
            let mut inbox = shared.driver.inbox();
            releases.append(&mut inbox.releases);
            adopted.append(&mut inbox.adopted);
            for w in inbox.watches.drain(..) {
                let request_timeout = shared.config.request_timeout_for(core_duration(w.ttl));
                watched.push(Watched {
                    dog: Watchdog::new(&w.lock().inner, request_timeout),
                    shared: w,
                    extending: None,
                    needs_slot: false,
                    next: None,
                });
            }
        }
        // Name lookups block: on a thread of their own, never here (the
        // driver may lead) nor in a task; one at a time.
        if transport.lookups_wanted() && !shared.driver.looking_up.load(Ordering::SeqCst) {
            look_up_names(shared);
        }
        let mut wants_slot = false;
        // What nobody waits for starts as soon as a slot is free.
        while let Some(release) = releases.pop() {
            match transport.submit(release, waker, DRIVER_WAITER, false) {
                Ok(ticket) => adopted.push(AnyTicket::Release(ticket)),
                Err(release) => {
                    // Kicked when a slot frees.
                    releases.push(release);
                    wants_slot = true;
                    break;
                }
            }
        }
        let mut i = 0;
        while i < adopted.len() {
            match poll_any(shared, &adopted[i], waker) {
                Poll::Pending => i += 1,
                Poll::Ready(won) => {
                    let resource = match adopted.swap_remove(i) {
                        AnyTicket::Acquire(_, resource) => resource,
                        _ => None,
                    };
                    if let Some(release) = shared.clean_up(won, resource) {
                        releases.push(release);
                    }
                }
            }
        }
        let now = StdInstant::now();
        let mut next: Option<StdInstant> = None;
        watched.retain_mut(|w| {
            let keep = tend(shared, w, waker, now, adopted);
            if keep {
                wants_slot |= w.needs_slot;
                if let Some(at) = w.next {
                    next = Some(next.map_or(at, |n| n.min(at)));
                }
            }
            keep
        });
        if wants_slot {
            // In line for a slot: a freed one kicks; this bounds a missed one.
            let bound = now + SLOT_RETRY;
            next = Some(next.map_or(bound, |n| n.min(bound)));
        } else if *queued {
            // No longer in line: the place goes to the next task.
            transport.cancel_wait(DRIVER_WAITER);
        }
        *queued = wants_slot;
        {
            // Every handle gone, and nothing left of its own: it ends (after
            // this turn's tickets were polled, with nothing new handed in).
            let mut inbox = shared.driver.inbox();
            if inbox.shutdown
                && inbox.releases.is_empty()
                && inbox.adopted.is_empty()
                && inbox.watches.is_empty()
                && releases.is_empty()
                && adopted.is_empty()
                && watched.is_empty()
                && transport.idle()
            {
                inbox.running = false;
                return false;
            }
        }
        transport.drive(next);
        true
    }
}

/// How soon the driver tries again for a slot when all are taken (a freed
/// slot wakes it before that).
const SLOT_RETRY: Duration = Duration::from_millis(10);

/// Ends the driver's part if its thread unwinds.
struct ExitGuard<'a>(&'a Arc<Shared>);

impl Drop for ExitGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            log::error!("redlock: the driver thread failed; the next async call starts another");
            self.0.transport.driver_gone();
            self.0.driver.inbox().running = false;
        }
    }
}

/// Looks up host names on a short-lived thread (a lookup may block for
/// seconds; the driver must go on leading meanwhile).
fn look_up_names(shared: &Arc<Shared>) {
    let mask = shared.transport.take_lookups();
    if mask == 0 {
        return;
    }
    shared.driver.looking_up.store(true, Ordering::SeqCst);
    let for_lookup = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("redlock-lookup".into())
        .spawn(move || {
            for_lookup.transport.resolve_names(mask);
            for_lookup.driver.looking_up.store(false, Ordering::SeqCst);
            for_lookup.transport.kick_driver();
        });
    if let Err(e) = spawned {
        // Asked for again, for the next blocking call or a later turn here.
        log::warn!("redlock: cannot start a name lookup: {e}");
        shared.transport.want_lookups(mask);
        shared.driver.looking_up.store(false, Ordering::SeqCst);
    }
}

/// [`Transport::poll_ticket`] for the driver: an operation that panicked
/// (the core's do not) is done with no output, instead of unwinding the
/// driver.
///
/// [`Transport::poll_ticket`]: crate::transport::Transport::poll_ticket
fn poll_quietly<K: CallKind>(
    shared: &Shared,
    ticket: Ticket<K>,
    waker: &Waker,
) -> Poll<Option<K::Out>> {
    let polled = std::panic::catch_unwind(core::panic::AssertUnwindSafe(|| {
        // The driver never leads on a reactor: it is the fallback.
        let mut cx = Context::from_waker(waker);
        shared.transport.poll_ticket(ticket, &mut cx, false)
    }));
    match polled {
        Ok(Poll::Ready(out)) => Poll::Ready(Some(out)),
        Ok(Poll::Pending) => Poll::Pending,
        Err(_) => {
            log::error!("redlock: an operation run in the background panicked");
            Poll::Ready(None)
        }
    }
}

/// [`poll_quietly`] for a ticket of any kind: once done, the lock it won
/// (an acquisition's), to release.
fn poll_any(shared: &Shared, ticket: &AnyTicket, waker: &Waker) -> Poll<Option<CoreLock>> {
    fn won<K: CallKind>(shared: &Shared, t: Ticket<K>, waker: &Waker) -> Poll<Option<CoreLock>> {
        poll_quietly(shared, t, waker).map(|out| out.and_then(K::won))
    }
    match *ticket {
        AnyTicket::Acquire(t, _) => won(shared, t, waker),
        AnyTicket::Release(t) => won(shared, t, waker),
        AnyTicket::Extend(t) => won(shared, t, waker),
        AnyTicket::Inspect(t) => won(shared, t, waker),
        AnyTicket::FenceRepair(t) => won(shared, t, waker),
    }
}

/// One turn of a watched lock; false once the driver is done with it.
fn tend(
    shared: &Arc<Shared>,
    w: &mut Watched,
    waker: &Waker,
    now: StdInstant,
    adopted: &mut Vec<AnyTicket>,
) -> bool {
    let transport = &shared.transport;
    if w.shared.stopped() {
        if let Some(ticket) = w.extending {
            // Released meanwhile: the extension ends on its own (a
            // token-checked PEXPIRE of a deleted key does nothing).
            adopted.push(AnyTicket::Extend(ticket));
        }
        return false;
    }
    w.needs_slot = false;
    if let Some(ticket) = w.extending {
        let answer = match poll_quietly(shared, ticket, waker) {
            Poll::Pending => {
                // A backstop for the loss: the extension's outcome wakes
                // the driver before it (past it, its own end does).
                let give_up_at = w.shared.lock().std_instant(w.dog.give_up_at());
                w.next = Some(give_up_at).filter(|&g| g > now);
                return true;
            }
            Poll::Ready(answer) => answer,
        };
        w.extending = None;
        let outcome = match answer {
            Some(outcome) => outcome.map_err(|e| e.kind),
            // It panicked (not the core's): as a failed round.
            None => Err(redlock_core::FailureKind::Unavailable),
        };
        let at = w.shared.lock().core_now();
        match outcome {
            Ok(extended) => {
                w.shared.update(|lock| lock.inner = extended);
                w.dog.handle_extension(at, Extension::Extended(&extended));
            }
            Err(redlock_core::FailureKind::Lost) => {
                w.dog.handle_extension(at, Extension::NotHeld);
            }
            // Unavailable, or a round that came too late: again shortly,
            // while there is time.
            Err(_) => w.dog.handle_extension(at, Extension::Failed),
        }
    }
    // The policy is the core's (F2), as for the blocking watchdog.
    loop {
        let lock: Lock = w.shared.lock();
        let at = lock.core_now();
        match w.dog.poll(at) {
            WatchAction::Wait(until) => {
                w.next = Some(lock.std_instant(until));
                return true;
            }
            WatchAction::Lost(why) => {
                w.shared.lose(Lost::from(why));
                return false;
            }
            WatchAction::Extend => match shared.extend_op(&lock, w.shared.ttl) {
                Ok(op) => match transport.submit(op, waker, DRIVER_WAITER, false) {
                    Ok(ticket) => {
                        w.extending = Some(ticket);
                        // It may be over already (every server down at
                        // once): judged now, not at some later wake-up.
                        return tend(shared, w, waker, now, adopted);
                    }
                    // No slot free: kicked when one is (SLOT_RETRY bounds
                    // the wait).
                    Err(_) => {
                        w.dog.handle_extension(at, Extension::NotStarted);
                        w.needs_slot = true;
                        w.next = Some(lock.std_instant(w.dog.give_up_at()));
                        return true;
                    }
                },
                Err(Error::Argument(redlock_core::ArgumentError::ExtensionLimit)) => {
                    w.dog.handle_extension(at, Extension::LimitReached);
                }
                Err(_) => w.dog.handle_extension(at, Extension::Failed),
            },
        }
    }
}
