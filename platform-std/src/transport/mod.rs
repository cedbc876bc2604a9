//! One mio `Poll` over N non-blocking TCP connections, shared by every thread
//! that uses the client, driving core operations.
//!
//! For each operation, every request is written to every server first, then
//! replies are read as they come (SPEC A2), under the deadlines the core hands
//! out. Connections are opened lazily, with a connect timeout, and re-opened
//! with backoff after errors. Each (re)connect pipelines the core's
//! handshake (`AUTH`, `SELECT`, `SCRIPT LOAD` of every script, `INFO
//! server`), and holds the operations' requests until every handshake reply
//! was judged good by the core (fail closed: a `SET` must never run in the
//! wrong database or as the wrong user): a handshake error closes the
//! connection, and the operations waiting on it learn why. Replies are
//! matched to requests in order per connection; a reply for no request, or
//! bytes that do not parse, close that connection.
//!
//! # Many threads, one connection per server (a combining leader)
//!
//! A caller moves its operation into a *slot* of the shared state, queues its
//! first requests on the servers' connections (tagged with the slot and the
//! operation's serial, so requests of many threads are pipelined on one
//! connection and replies are matched in order), and waits. One thread at a
//! time is the *leader*: it waits in `Poll::poll` without holding the state
//! lock, then reads every ready socket and hands each reply straight to the
//! operation it answers, *whoever's it is*; it checks every operation's
//! deadlines, queues what they want to send next, and writes everything
//! queued in one write per socket. An operation's owner is woken once, when
//! its operation is finished, and takes the outcome, in the type of the
//! kind of operation it submitted ([`Kind`]: the slot keeps one place per
//! kind, [`Job::Cell`]). A caller that queues requests while the leader
//! polls wakes it (a `mio::Waker`, once per poll). When the leader's own
//! operation ends it hands the role to a waiting owner.
//!
//! So with many threads, each operation costs its owner one sleep and one
//! wake-up, and the sockets see batches: the work of the protocol is done by
//! one thread at a time, as an event loop would, behind a blocking API.
//!
//! A thread alone is the leader (unless the client's driver thread, see
//! `task.rs`, leads for async calls at that moment): it never waits on a
//! condition variable, never uses the waker, and allocates nothing per
//! operation.
//!
//! An async task may lead too, on its runtime's reactor (`reactor.rs`,
//! features `tokio` and `async-io`): it does not wait in `Poll::poll`, but
//! polls without waiting whenever the runtime says the poll's descriptor
//! is readable (see `task.rs`).
//!
//! An operation that panics (the core's do not) is dropped; its owner's call
//! panics with the same payload, on the owner's own thread.
//!
//! # Layout
//!
//! - `mod.rs`: [`Transport`], the state behind its lock, construction, the
//!   clock, the constants;
//! - `leader.rs`: the combining leader (`run`, `lead`, `finish`, the last
//!   thread out);
//! - `slots.rs`: the slots where running operations live;
//! - `task.rs`: operations owned by tasks (the async API), tasks that lead
//!   on their runtime's reactor, and the driver thread's turns (as the
//!   leader, or watching a task that leads);
//! - `reactor.rs`: the runtime's reactor (tokio, async-io) watching the
//!   poll's descriptor for a task that leads;
//! - `drive.rs`: driving an operation (deadlines, connection errors, what
//!   it sends, which queue a request goes to);
//! - `wire.rs`: connects, the handshake the core plans and judges, writes,
//!   reads, and handing replies to their operations;
//! - `conn.rs`: one connection: its state and buffers, and its own I/O
//!   (write, read, fail), in the manner of rustls' `Connection`: it reports
//!   what it dropped, and routing replies and errors to operations stays
//!   outside it;
//! - `setup.rs`: the std side of the handshake the core plans and
//!   judges, and what is said of a refused server (never its password).

use alloc::collections::VecDeque;
use alloc::sync::Arc;
use core::any::Any;
use core::net::SocketAddr;
use core::panic::AssertUnwindSafe;
use core::sync::atomic::{AtomicU16, Ordering};
use core::task::{Context, Waker};
use std::io::{self, Read, Write};
use std::net::ToSocketAddrs;
use std::panic::{catch_unwind, resume_unwind};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant as StdInstant;

use core::time::Duration as StdDuration;

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Registry, Token};
use redlock_core::handshake::{self, SetupError};
use redlock_core::redlock_resp::{EncodeError, Limits, Parser, Reply, Status};
use redlock_core::session::{
    Close, Credentials, Entry, Event, Policy, Queue, Queued, Session, State as SessionState,
    encode_probe, encode_step,
};
use redlock_core::{Duration as CoreDuration, Instant, ServerId, Servers, Transmit, Unsolicited};

use crate::url::ServerUrl;

/// An operation the transport can run, driven as a core [`Operation`] is
/// (the same methods, which also take what the connections learn about
/// server restarts, with `set_incarnation`, ahead of its requests on that
/// connection). Its outcome is not handed out as one type for every kind of
/// operation: [`deliver`](Job::deliver) moves it into the slot's
/// [`Cell`](Job::Cell), from which the owner takes it in its own type,
/// through the [`Kind`] it submitted.
///
/// The driving methods repeat `Operation`'s (which a job of several kinds
/// cannot implement: it has no one output type): when `Operation` gains
/// one, so do `Job` and `Call`.
///
/// [`Operation`]: redlock_core::Operation
pub(crate) trait Job: core::fmt::Debug {
    /// Where a slot keeps the outcome of whichever kind of operation runs
    /// in it, for its owner to take.
    type Cell: Default + core::fmt::Debug;

    fn poll_transmit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
    ) -> Result<Option<Transmit>, EncodeError>;
    fn handle_reply(
        &mut self,
        now: Instant,
        server: ServerId,
        reply: Reply<'_>,
    ) -> Result<(), Unsolicited>;
    fn handle_connection_error(&mut self, now: Instant, server: ServerId);
    fn handle_setup_error(&mut self, now: Instant, server: ServerId, error: SetupError);
    fn set_incarnation(&mut self, server: ServerId, started: Instant);
    fn handle_timeout(&mut self, now: Instant);
    fn poll_timeout(&self) -> Option<Instant>;
    fn is_finished(&self) -> bool;

    /// Moves its outcome, once it is out, into `cell`. True once `cell`
    /// holds it (delivered now or before).
    fn deliver(&mut self, cell: &mut Self::Cell) -> bool;

    /// Its owner went away before its outcome (a future dropped
    /// mid-flight): wind down as the core says (an acquisition starts no
    /// further attempt and releases what it wins). By default it just runs
    /// to its end.
    fn abandon(&mut self, now: Instant) {
        let _ = now;
    }
}

/// One kind of operation that a [`Job`] can be, with the type of its
/// outcome: what a caller submits, and what it gets back.
pub(crate) trait Kind<J: Job>: Sized {
    /// What the operation ends with.
    type Out;

    /// It keeps a lock alive or gives one back (a release, an extension):
    /// it may take one of the slots that waiting acquisitions may not
    /// (`RESERVED_SLOTS`), so that a crowd of contenders retrying for a
    /// lock never starves its holder's unlock or extension.
    const URGENT: bool = false;

    /// The job that runs it.
    fn into_job(self) -> J;

    /// Its outcome, out of the cell its job delivered it to.
    fn take(cell: &mut J::Cell) -> Option<Self::Out>;
}

/// Connection tunables.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnConfig {
    pub(crate) connect_timeout: StdDuration,
    pub(crate) backoff_min: StdDuration,
    pub(crate) backoff_max: StdDuration,
    pub(crate) limits: Limits,
    /// The restart guard is on: `INFO` must answer, with an uptime.
    pub(crate) info_required: bool,
    /// Which commands the servers get.
    pub(crate) commands: redlock_core::Commands,
    /// How long the last thread out of a call waits for a connect or a
    /// handshake in progress, so that what is queued behind it (the
    /// releases of a failed attempt, or of an unlock, to a server that was
    /// reconnecting) goes out within about a request's timeout.
    pub(crate) delivery_grace: StdDuration,
}

impl ConnConfig {
    /// The core's session policy for these tunables.
    pub(crate) fn policy(&self) -> Policy {
        let d =
            |t: StdDuration| CoreDuration::from_micros(t.as_micros().min(u64::MAX.into()) as u64);
        Policy {
            connect_timeout: d(self.connect_timeout),
            backoff_min: d(self.backoff_min),
            backoff_max: d(self.backoff_max),
        }
    }
}

/// Everything behind the state lock.
#[derive(Debug)]
struct State<J: Job> {
    registry: Registry,
    conns: Vec<Conn>,
    parser: Parser,
    scratch: Vec<u8>,
    serial: u64,
    slots: Vec<Slot<J>>,
    free: Vec<u16>,
    /// Tasks waiting for a free slot, first come first.
    slot_tasks: VecDeque<SlotTask>,
    /// Who leads, who is to be woken.
    lead: Leadership,
    /// Connections whose host name is to be looked up again, outside the
    /// lock, by the next call (bit i = server i); shared with
    /// [`Transport`], which reads it without the lock.
    resolve_wanted: Arc<AtomicU16>,
    config: ConnConfig,
    /// The sessions' policy, from `config` (once, not per request).
    policy: Policy,
    /// The origin of the core's clock (see [`Transport::epoch`]).
    epoch: StdInstant,
}

#[derive(Debug)]
struct Poller {
    poll: Poll,
    events: Events,
    /// The runtime reactor that watches `poll` for a task that leads (see
    /// `reactor.rs`), made by the first task that may lead.
    reactor: Option<Reactor>,
    /// A look at `poll` failed after the reactor's readiness was taken:
    /// the next turn looks, whatever the reactor says.
    missed: bool,
}

/// The N connections, their poll, and the slots of running operations.
#[derive(Debug)]
pub(crate) struct Transport<J: Job> {
    state: Mutex<State<J>>,
    /// Only the leader locks it, without holding the state lock.
    poller: Mutex<Poller>,
    waker: Arc<mio::Waker>,
    /// Slot i's owner waits on `wakeups[i]` (a thread) or is woken by
    /// `task_wakers[i]` (a task, or the driver for an operation it adopted).
    wakeups: Box<[Condvar]>,
    /// Set under the state lock (so that a wake-up after it is not lost),
    /// taken by whoever wakes the slot's owner, outside it.
    task_wakers: Box<[Mutex<Option<Waker>>]>,
    slot_free: Condvar,
    /// Threads with an urgent operation ([`Kind::URGENT`]) wait for a slot
    /// here, the others on `slot_free`: a freed slot wakes one thread
    /// that may take it.
    slot_free_urgent: Condvar,
    /// Wakes the driver thread (see `watch.rs`) when it waits for work.
    kick: Arc<Kick>,
    /// The driver's look at the poll while a task leads (see `reactor.rs`);
    /// only the driver locks it.
    peek: Mutex<Peek>,
    /// The origin of the core's clock.
    epoch: StdInstant,
    /// See `State::resolve_wanted`.
    resolve_wanted: Arc<AtomicU16>,
}

const READ_CHUNK: usize = 16 * 1024;

/// At most this many operations run at once on one client; more threads
/// wait for a slot.
const MAX_SLOTS: usize = 64;

/// Slots only urgent operations (releases, extensions: [`Kind::URGENT`])
/// may take: an acquisition keeps its slot through all its retries, and
/// 64 contenders must not keep the holder from releasing or extending.
const RESERVED_SLOTS: usize = 8;

// Bit i of the slot masks (`active`, `to_wake`, a u64) is slot i: every
// slot has its bit.
const _: () = assert!(MAX_SLOTS <= u64::BITS as usize);
// Bit i of a slot's connection-error mask (a u16) is server i.
const _: () = assert!(redlock_core::MAX_SERVERS <= u16::BITS as usize);

/// How long the leader waits before polling again after the poll failed.
const POLL_RETRY: StdDuration = StdDuration::from_millis(10);

const WAKE: Token = Token(usize::MAX);

/// A host name is resolved again, after connects to all of its addresses
/// failed, at most this often.
const RESOLVE_AGAIN: StdDuration = StdDuration::from_secs(30);

/// How long the last thread out waits for requests other than releases held
/// behind a connect or a handshake (the `SET` to a server the quorum did not
/// wait for): a working server on a LAN passes its handshake much faster; a
/// stalled one must not cost every call more.
const HELD_GRACE: StdDuration = StdDuration::from_millis(20);

/// While tasks lead on their runtime's reactor, the driver looks every
/// this often: a task owed work (requests queued for its turn, a deadline
/// due, the role handed to it) that made no turn for a whole period (no
/// look at the poll, when one is owed) is not
/// being polled (a future kept but not awaited), and the driver leads in
/// its place.
const WATCH_PERIOD: StdDuration = StdDuration::from_millis(10);

/// The driver keeps looking every `WATCH_PERIOD` this long after tasks
/// last led, so that a task taking the role again soon needs no wake-up of
/// the driver (a kick, a cross-thread wake-up, per call otherwise).
const LINGER: StdDuration = StdDuration::from_millis(200);

/// The core's clock reads this many microseconds when the transport is made
/// (20 years), so that instants before it, such as when a server that has
/// been up for months started, are representable for the restart guard.
pub(crate) const CLOCK_ORIGIN_MICROS: u64 = 20 * 365 * 24 * 3600 * 1_000_000;

/// Requests one connection may have unanswered; past this the server is
/// considered stuck and the connection is closed (bounded memory when a
/// server stops answering, e.g. SIGSTOP). Running operations send at most 8
/// each, so 64 slots stay well below it.
const MAX_OUTSTANDING: usize = 1024;

// Operations run under `catch_unwind`, so a lock is poisoned only by a bug
// of the transport itself; its state is still consistent enough to go on
// (every operation re-checks its own).
use crate::relock;

fn bit(i: usize) -> u64 {
    1u64.checked_shl(i as u32).unwrap_or(0)
}

/// The indices of the bits set in `mask`, lowest first.
fn bits(mut mask: u64) -> impl Iterator<Item = usize> {
    core::iter::from_fn(move || {
        if mask == 0 {
            return None;
        }
        let i = mask.trailing_zeros() as usize;
        mask &= mask - 1;
        Some(i)
    })
}

impl<J: Job> Transport<J> {
    /// A transport over plain TCP connections to `urls`.
    #[cfg(test)]
    pub(crate) fn new(urls: &[ServerUrl], config: ConnConfig) -> io::Result<Transport<J>> {
        let servers: Vec<(ServerUrl, Option<TlsTarget>)> =
            urls.iter().map(|u| (u.clone(), None)).collect();
        Transport::with_tls(&servers, config)
    }

    /// [`new`](Transport::new), with each server's TLS target (`None`:
    /// plain TCP).
    pub(crate) fn with_tls(
        servers: &[(ServerUrl, Option<TlsTarget>)],
        mut config: ConnConfig,
    ) -> io::Result<Transport<J>> {
        // `Instant + connect_timeout` must not overflow (`Duration::MAX`).
        config.connect_timeout = config.connect_timeout.min(StdDuration::from_secs(1 << 32));
        let now = StdInstant::now();
        let conns: Vec<Conn> = servers
            .iter()
            .map(|(url, tls)| Conn {
                url: url.clone(),
                // Resolved here, outside the state lock (a name lookup may
                // block); if it fails now, the first call looks it up again.
                addrs: resolve(url).unwrap_or_default(),
                resolved_at: Some(now),
                looked_up: None,
                addr_next: 0,
                stream: None,
                tls: tls.clone(),
                session: Session::new(
                    credentials(url).plan(config.info_required, config.commands),
                    Owed(VecDeque::with_capacity(16)),
                ),
                out: Vec::with_capacity(1024),
                // Room for a chunk read behind a partial reply without growing.
                inbuf: vec![0u8; 2 * READ_CHUNK],
                filled: 0,
                held: Vec::new(),
                releases_held: false,
                writable_interest: false,
                refused: None,
                failure_note: None,
            })
            .collect();
        let poll = Poll::new()?;
        let waker = Arc::new(mio::Waker::new(poll.registry(), WAKE)?);
        let kick = Arc::new(Kick::new(waker.clone()));
        let registry = poll.registry().try_clone()?;
        // Names that did not resolve now are looked up again by the first
        // call (before it takes the lock).
        let unresolved = conns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.addrs.is_empty())
            .fold(0u16, |m, (i, _)| {
                m | 1u16.checked_shl(i as u32).unwrap_or(0)
            });
        let resolve_wanted = Arc::new(AtomicU16::new(unresolved));
        let state = State {
            registry,
            conns,
            parser: Parser::new(config.limits),
            scratch: vec![0u8; 4096],
            serial: 0,
            slots: (0..MAX_SLOTS).map(|_| Slot::new()).collect(),
            free: (0..MAX_SLOTS as u16).rev().collect(),
            slot_tasks: VecDeque::new(),
            lead: Leadership::default(),
            resolve_wanted: resolve_wanted.clone(),
            policy: config.policy(),
            config,
            epoch: now,
        };
        Ok(Transport {
            state: Mutex::new(state),
            poller: Mutex::new(Poller {
                poll,
                events: Events::with_capacity(64),
                reactor: None,
                missed: false,
            }),
            waker,
            wakeups: (0..MAX_SLOTS).map(|_| Condvar::new()).collect(),
            task_wakers: (0..MAX_SLOTS).map(|_| Mutex::new(None)).collect(),
            slot_free: Condvar::new(),
            slot_free_urgent: Condvar::new(),
            kick,
            peek: Mutex::new(Peek::default()),
            epoch: now,
            resolve_wanted,
        })
    }

    /// Ends the leader's poll in progress, once per poll, so that it
    /// learns what was queued meanwhile (new requests, deadlines, connects).
    fn wake_poll(&self, st: &mut State<J>) {
        if st.lead.polling && !st.lead.woken {
            st.lead.woken = true;
            if let Err(e) = self.waker.wake() {
                log::warn!("redlock: cannot wake the poll: {e}");
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<J>> {
        relock(self.state.lock())
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().conns.len()
    }

    /// Looks up again, without holding the state lock, the host names that
    /// connects asked for, and hands the connections what was found. The
    /// client calls it before it reads the clock for an operation, so that
    /// a slow lookup does not eat into a validity.
    pub(crate) fn resolve_wanted_names(&self) {
        // Nothing wanted: no lock taken (the common case).
        let mask = self.resolve_wanted.swap(0, Ordering::Relaxed);
        self.resolve_names(mask);
    }

    /// Looks up the host names of the servers in `mask` (bit i = server
    /// i), without holding the state lock, and hands the connections what
    /// was found.
    pub(crate) fn resolve_names(&self, mask: u16) {
        if mask == 0 {
            return;
        }
        let wanted: Vec<(usize, ServerUrl)> = {
            let st = self.lock();
            bits(u64::from(mask))
                .filter_map(|i| Some((i, st.conns.get(i)?.url.clone())))
                .collect()
        };
        let found: Vec<(usize, io::Result<Vec<SocketAddr>>)> = wanted
            .into_iter()
            .map(|(i, url)| (i, resolve(&url)))
            .collect();
        let mut st = self.lock();
        for (i, addrs) in found {
            let Some(conn) = st.conns.get_mut(i) else {
                continue;
            };
            match addrs {
                Ok(addrs) => {
                    // Adopted by the next connect that has tried every
                    // address, where the duplicate check sees it first.
                    conn.looked_up = Some(addrs);
                }
                Err(e) => log::warn!("redlock: cannot resolve {}: {e}", conn.url),
            }
        }
    }

    /// The std instant at which the core's clock reads [`CLOCK_ORIGIN_MICROS`].
    pub(crate) fn epoch(&self) -> StdInstant {
        self.epoch
    }

    /// The core's clock: microseconds since the transport was made.
    pub(crate) fn now(&self) -> Instant {
        core_instant(self.epoch, StdInstant::now())
    }

    /// The URL of `server`.
    pub(crate) fn url(&self, server: usize) -> Option<ServerUrl> {
        self.lock().conns.get(server).map(|c| c.url.clone())
    }

    /// What a report adds to `outcome` of `server`: the server's own
    /// error text from its last failed handshake while it is refused for
    /// that reason (a `Setup` outcome), or the latest known reason its
    /// connection failed, when more is known than that it did (a
    /// `ConnectionError`; read after the call, so a failure of a reconnect
    /// made meanwhile may be the one said).
    pub(crate) fn note(
        &self,
        server: usize,
        outcome: redlock_core::ServerOutcome,
    ) -> Option<String> {
        let st = self.lock();
        let conn = st.conns.get(server)?;
        match outcome {
            redlock_core::ServerOutcome::Setup(why) => conn
                .refused
                .as_ref()
                .filter(|(now, _)| *now == why && conn.session.refused() == Some(why))
                .map(|(_, text)| text.clone()),
            redlock_core::ServerOutcome::ConnectionError => conn.failure_note.clone(),
            _ => None,
        }
    }

    /// The first two entries that are the same server by the addresses
    /// their names resolved to (or, unresolved, by the same name), with the
    /// address they share.
    pub(crate) fn same_server(&self) -> Option<(usize, usize)> {
        let st = self.lock();
        same_server(&st.conns)
    }

    /// `base` with when each server's current incarnation began, as far as
    /// the connections know, and the commands each server gets.
    pub(crate) fn servers(&self, mut base: Servers) -> Servers {
        let st = self.lock();
        for (i, c) in st.conns.iter().enumerate() {
            if let Some(started) = c.session.incarnation() {
                base.set_incarnation(ServerId(i as u8), started);
            }
            base.set_dialect(ServerId(i as u8), c.session.dialect());
        }
        base
    }
}

/// The handshake's view of `url`'s credentials.
pub(super) fn credentials(url: &ServerUrl) -> Credentials<'_> {
    Credentials {
        user: url.user.as_deref().map(str::as_bytes),
        password: url.password.as_ref().map(|p| p.expose()),
        db: url.db,
    }
}

fn core_instant(epoch: StdInstant, t: StdInstant) -> Instant {
    let since = t.saturating_duration_since(epoch).as_micros() as u64;
    Instant::from_micros(CLOCK_ORIGIN_MICROS.saturating_add(since))
}

fn std_instant(epoch: StdInstant, t: Instant) -> StdInstant {
    epoch + StdDuration::from_micros(t.as_micros().saturating_sub(CLOCK_ORIGIN_MICROS))
}

mod conn;
mod drive;
mod leader;
mod reactor;
mod setup;
mod slots;
mod stream;
mod task;
#[cfg(test)]
mod task_tests;
#[cfg(test)]
mod tests;
mod watch;
mod wire;

use conn::*;
use leader::*;
pub(crate) use reactor::Reactor;
use reactor::*;
use setup::*;
use slots::*;
pub(crate) use stream::TlsTarget;
use stream::*;
pub(crate) use task::{Abandoned, Kick, SlotTask, Ticket};
