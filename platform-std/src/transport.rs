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
//! its operation is finished, and takes the outcome. A caller that queues
//! requests while the leader polls wakes it (a `mio::Waker`, once per poll).
//! When the leader's own operation ends it hands the role to a waiting owner.
//!
//! So with many threads, each operation costs its owner one sleep and one
//! wake-up, and the sockets see batches: the work of the protocol is done by
//! one thread at a time, as an event loop would, behind a blocking API.
//!
//! A thread alone is always the leader: it never waits on a condition
//! variable, never uses the waker, and allocates nothing per operation.
//!
//! An operation that panics (the core's do not) is dropped; its owner's call
//! panics with the same payload, on the owner's own thread.

use alloc::collections::VecDeque;
use core::any::Any;
use core::net::SocketAddr;
use core::panic::AssertUnwindSafe;
use std::io::{self, Read, Write};
use std::net::ToSocketAddrs;
use std::panic::{catch_unwind, resume_unwind};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant as StdInstant;

use core::time::Duration as StdDuration;

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Registry, Token, Waker};
use redlock_core::handshake::{self, Plan, SetupError, Step, Verdict};
use redlock_core::redlock_resp::script;
use redlock_core::redlock_resp::{EncodeError, Limits, Parser, Reply, Status, encode};
use redlock_core::{Instant, Operation, ServerId, Servers};

use crate::url::ServerUrl;

/// An operation the transport can run: a core [`Operation`] that also takes
/// what the connections learn about server restarts.
pub(crate) trait Job: Operation<Output: core::fmt::Debug> + core::fmt::Debug {
    /// `server`'s current incarnation began at `started` (core clock), as
    /// read from `INFO server` on (re)connect, ahead of this operation's
    /// requests on that connection.
    fn set_incarnation(&mut self, server: ServerId, started: Instant);
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
    /// How long the last thread out of a call waits for a connect or a
    /// handshake in progress, so that what is queued behind it (the
    /// releases of a failed attempt, or of an unlock, to a server that was
    /// reconnecting) goes out within about a request's timeout.
    pub(crate) delivery_grace: StdDuration,
}

/// What a reply on a connection answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// A handshake step, judged by the core.
    Handshake(Step),
    /// A request of the operation with this serial, running in this slot.
    Op { slot: u16, serial: u64 },
}

#[derive(Debug, PartialEq, Eq)]
enum ConnState {
    /// Not connected; may connect from `retry_at` on.
    Down { retry_at: StdInstant },
    /// Non-blocking connect in progress since `since`.
    Connecting { since: StdInstant },
    /// Connected.
    Up,
}

/// One server's connection. Its invariants (checked by
/// [`Conn::check_invariants`]):
/// - `held` is not empty only while the handshake runs (`handshake_left >
///   0`) on a connection that is not down: nothing but the handshake is
///   written before the core judged every handshake reply good;
/// - `releases_held` only while `held` is not empty;
/// - the first `handshake_left` entries of `expect` are handshake steps.
struct Conn {
    url: ServerUrl,
    addrs: Vec<SocketAddr>,
    /// When `addrs` was resolved.
    resolved_at: Option<StdInstant>,
    /// The address of `addrs` the next connect tries: connects that fail
    /// move on to the next one (a host name with an IPv6 and an IPv4
    /// address, a server listening on one of them), and after all of them
    /// start over, with the name resolved again if the list is older than
    /// [`RESOLVE_AGAIN`].
    addr_next: usize,
    stream: Option<TcpStream>,
    state: ConnState,
    failures: u32,
    /// Bytes waiting to be written.
    out: Vec<u8>,
    /// Bytes read are `inbuf[..filled]`; the rest is room for reading, kept
    /// initialised so that reads do not clear it each time.
    inbuf: Vec<u8>,
    filled: usize,
    expect: VecDeque<Expect>,
    /// Handshake replies still awaited on this connection.
    handshake_left: usize,
    /// When the handshake began (the connect completed): it must pass
    /// within a connect timeout.
    handshake_since: StdInstant,
    /// Requests queued while the handshake runs, written once it passed.
    held: Vec<u8>,
    /// A release is among them: the last thread out waits for it.
    releases_held: bool,
    /// A release may reconnect at once, in the backoff: the server was
    /// reachable when the connection last failed. Cleared when a connect
    /// fails, so that a dead host costs a release's wait once, not every
    /// call.
    urgent_ok: bool,
    writable_interest: bool,
    /// When the server's current incarnation began (core clock), from the
    /// `INFO` of this connection's handshake.
    incarnation: Option<Instant>,
    /// The server's `run_id` from its last handshake (its identity), kept
    /// across reconnects until the next `INFO` says otherwise.
    run_id: Option<Vec<u8>>,
    /// Why the server may not be used, since its last handshake failed
    /// (with the server's own error text), until one passes.
    refused: Option<(SetupError, String)>,
}

/// The longest server error text kept for a report.
const MAX_ERROR_TEXT: usize = 200;

impl core::fmt::Debug for Conn {
    // By hand: `out` holds the `AUTH` command (the password) while the
    // handshake is written; buffers show as lengths only.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Conn")
            .field("url", &self.url)
            .field("addrs", &self.addrs)
            .field("state", &self.state)
            .field("failures", &self.failures)
            .field("out_len", &self.out.len())
            .field("held_len", &self.held.len())
            .field("filled", &self.filled)
            .field("expect", &self.expect.len())
            .field("handshake_left", &self.handshake_left)
            .field("incarnation", &self.incarnation)
            .field("refused", &self.refused.as_ref().map(|(why, _)| why))
            .finish_non_exhaustive()
    }
}

impl Conn {
    /// The invariants written at [`Conn`], in debug builds.
    fn check_invariants(&self) {
        debug_assert!(
            self.held.is_empty()
                || (self.handshake_left > 0 && !matches!(self.state, ConnState::Down { .. })),
            "requests held without a handshake running"
        );
        debug_assert!(!self.releases_held || !self.held.is_empty());
        debug_assert!(
            self.expect
                .iter()
                .take(self.handshake_left)
                .all(|e| matches!(e, Expect::Handshake(_))),
            "the handshake is not first"
        );
    }
}

/// What waits to be written, for the last thread out of the transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unwritten {
    Nothing,
    /// On a connection that is up, whose socket would have blocked.
    Blocked,
    /// A release held behind a connect or a handshake in progress.
    Release,
    /// Other requests held behind a connect or a handshake in progress.
    Held,
}

/// One running operation, owned by the state while it runs.
#[derive(Debug)]
struct Slot<J: Job> {
    /// The serial of the operation running here; 0 when free.
    serial: u64,
    op: Option<J>,
    outcome: Option<J::Output>,
    /// Servers whose connection failed with requests of this operation on
    /// it, not yet told to the operation (bit i = server i).
    conn_errors: u16,
    /// `poll_timeout` of the operation as of its last pump (read by the
    /// leader without calling into the operation).
    deadline: Option<Instant>,
    /// The outcome is out and nothing is left to send (or the operation
    /// panicked): the owner may take it.
    done: bool,
    /// The payload of a panic of the operation, for its owner to resume.
    panic: Option<Box<dyn Any + Send>>,
    /// The owner waits on its condition variable.
    waiting: bool,
}

impl<J: Job> Slot<J> {
    fn new() -> Slot<J> {
        Slot {
            serial: 0,
            op: None,
            outcome: None,
            conn_errors: 0,
            deadline: None,
            done: false,
            panic: None,
            waiting: false,
        }
    }

    /// Runs `f` on the operation; a panic in it ends the operation (its
    /// owner resumes the panic) instead of unwinding through the transport.
    fn call<R>(&mut self, f: impl FnOnce(&mut J) -> R) -> Option<R> {
        let op = self.op.as_mut()?;
        match catch_unwind(AssertUnwindSafe(|| f(op))) {
            Ok(r) => Some(r),
            Err(payload) => {
                self.poison(payload);
                None
            }
        }
    }

    fn poison(&mut self, payload: Box<dyn Any + Send>) {
        self.op = None;
        self.panic = Some(payload);
        self.done = true;
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
    /// Slots with an operation that is not done (bit i = slot i).
    active: u64,
    /// Slots whose operation is done and whose owner waits: to be woken.
    to_wake: u64,
    /// Threads waiting for a free slot.
    slot_waiters: usize,
    /// Some thread is the leader.
    leader: bool,
    /// The leader is in `Poll::poll` (without the state lock).
    polling: bool,
    /// The waker was used since the leader last polled.
    woken: bool,
    config: ConnConfig,
}

#[derive(Debug)]
struct Poller {
    poll: Poll,
    events: Events,
}

/// The N connections, their poll, and the slots of running operations.
#[derive(Debug)]
pub(crate) struct Transport<J: Job> {
    state: Mutex<State<J>>,
    /// Only the leader locks it, without holding the state lock.
    poller: Mutex<Poller>,
    waker: Waker,
    /// Slot i's owner waits on `wakeups[i]`.
    wakeups: Box<[Condvar]>,
    slot_free: Condvar,
    /// The origin of the core's clock.
    epoch: StdInstant,
}

const READ_CHUNK: usize = 16 * 1024;

/// At most this many operations run at once on one client; more threads
/// wait for a slot.
const MAX_SLOTS: usize = 64;

const WAKE: Token = Token(usize::MAX);

/// A host name is resolved again, after connects to all of its addresses
/// failed, at most this often.
const RESOLVE_AGAIN: StdDuration = StdDuration::from_secs(30);

/// How long the last thread out waits for requests other than releases held
/// behind a connect or a handshake (the `SET` to a server the quorum did not
/// wait for): a working server on a LAN passes its handshake much faster; a
/// stalled one must not cost every call more.
const HELD_GRACE: StdDuration = StdDuration::from_millis(20);

/// The core's clock reads this many microseconds when the transport is made
/// (20 years), so that instants before it, such as when a server that has
/// been up for months started, are representable for the restart guard.
pub(crate) const CLOCK_ORIGIN_MICROS: u64 = 20 * 365 * 24 * 3600 * 1_000_000;

/// Requests one connection may have unanswered; past this the server is
/// considered stuck and the connection is closed (bounded memory when a
/// server stops answering, e.g. SIGSTOP). Running operations send at most 8
/// each, so 64 slots stay well below it.
const MAX_OUTSTANDING: usize = 1024;

fn relock<T>(r: Result<T, PoisonError<T>>) -> T {
    // Operations run under `catch_unwind`, so the lock is poisoned only by a
    // bug of the transport itself; its state is still consistent enough to
    // go on (every operation re-checks its own).
    r.unwrap_or_else(PoisonError::into_inner)
}

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
    pub(crate) fn new(urls: &[ServerUrl], mut config: ConnConfig) -> io::Result<Transport<J>> {
        // `Instant + connect_timeout` must not overflow (`Duration::MAX`).
        config.connect_timeout = config.connect_timeout.min(StdDuration::from_secs(1 << 32));
        let now = StdInstant::now();
        let conns = urls
            .iter()
            .map(|url| Conn {
                url: url.clone(),
                // Resolved here, outside the state lock (a name lookup may
                // block); if it fails now, the first connect tries again.
                addrs: resolve(url).unwrap_or_default(),
                resolved_at: Some(now),
                addr_next: 0,
                stream: None,
                state: ConnState::Down { retry_at: now },
                failures: 0,
                out: Vec::with_capacity(1024),
                // Room for a chunk read behind a partial reply without growing.
                inbuf: vec![0u8; 2 * READ_CHUNK],
                filled: 0,
                expect: VecDeque::with_capacity(16),
                handshake_left: 0,
                handshake_since: now,
                held: Vec::new(),
                releases_held: false,
                urgent_ok: true,
                writable_interest: false,
                incarnation: None,
                run_id: None,
                refused: None,
            })
            .collect();
        let poll = Poll::new()?;
        let waker = Waker::new(poll.registry(), WAKE)?;
        let registry = poll.registry().try_clone()?;
        let state = State {
            registry,
            conns,
            parser: Parser::new(config.limits),
            scratch: vec![0u8; 4096],
            serial: 0,
            slots: (0..MAX_SLOTS).map(|_| Slot::new()).collect(),
            free: (0..MAX_SLOTS as u16).rev().collect(),
            active: 0,
            to_wake: 0,
            slot_waiters: 0,
            leader: false,
            polling: false,
            woken: false,
            config,
        };
        Ok(Transport {
            state: Mutex::new(state),
            poller: Mutex::new(Poller {
                poll,
                events: Events::with_capacity(64),
            }),
            waker,
            wakeups: (0..MAX_SLOTS).map(|_| Condvar::new()).collect(),
            slot_free: Condvar::new(),
            epoch: now,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State<J>> {
        relock(self.state.lock())
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().conns.len()
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

    /// The server's own error text from the last failed handshake of
    /// `server`, while it is refused.
    pub(crate) fn refusal(&self, server: usize) -> Option<String> {
        let st = self.lock();
        let conn = st.conns.get(server)?;
        conn.refused.as_ref().map(|(_, text)| text.clone())
    }

    /// The first two entries that are the same server by the addresses
    /// their names resolved to (or, unresolved, by the same name), with the
    /// address they share.
    pub(crate) fn same_server(&self) -> Option<(usize, usize)> {
        let st = self.lock();
        same_server(&st.conns)
    }

    /// `base` with when each server's current incarnation began, as far as
    /// the connections know.
    pub(crate) fn servers(&self, mut base: Servers) -> Servers {
        let st = self.lock();
        for (i, c) in st.conns.iter().enumerate() {
            if let Some(started) = c.incarnation {
                base.set_incarnation(ServerId(i as u8), started);
            }
        }
        base
    }

    /// Runs `op` to its outcome, and until it has sent what it still had to
    /// send (the releases of a failed attempt), then returns the outcome.
    pub(crate) fn run(&self, op: J) -> J::Output {
        // Declared before the state lock's guard, so that when unwinding it
        // is dropped after it (it takes the lock itself).
        let mut guard = SlotGuard {
            transport: self,
            slot: 0,
            leading: false,
            armed: false,
        };
        let mut st = self.lock();
        let slot = loop {
            if let Some(s) = st.free.pop() {
                break usize::from(s);
            }
            st.slot_waiters += 1;
            st = relock(self.slot_free.wait(st));
            st.slot_waiters -= 1;
        };
        st.serial += 1;
        let serial = st.serial;
        let s = &mut st.slots[slot];
        s.serial = serial;
        s.op = Some(op);
        st.active |= bit(slot);
        guard.slot = slot;
        guard.armed = true;
        // The first requests are queued at once. A leader in `poll` writes
        // them (woken once per poll, for every caller that queues); without
        // a leader, this thread leads and writes them before it polls.
        st.pump(slot, self.now());
        if st.polling && !st.woken {
            st.woken = true;
            let _ = self.waker.wake();
        }
        while !st.slots[slot].done {
            if guard.leading || !st.leader {
                st.leader = true;
                guard.leading = true;
                st = self.lead(st, Some(slot), None);
            } else {
                st.slots[slot].waiting = true;
                st = relock(self.wakeups[slot].wait(st));
                st.slots[slot].waiting = false;
            }
        }
        if guard.leading || !st.leader {
            // The last thread out writes what is still queued (a write that
            // would have blocked, or a release behind a connect or a
            // handshake), so that it does not wait for the next call: at
            // most for a connect timeout on a connection that is up, and for
            // about a request's timeout behind a connect or a handshake (a
            // host that drops connects costs that once: a release does not
            // reconnect at once after a failed connect).
            let started = StdInstant::now();
            while st.active == 0 {
                // What can be written now is, first: a pass as the leader
                // would write it and then sleep until some event.
                st.flush_all();
                let until = match st.unwritten() {
                    Unwritten::Nothing => break,
                    Unwritten::Blocked => started + st.config.connect_timeout,
                    Unwritten::Release => started + st.config.delivery_grace,
                    Unwritten::Held => started + HELD_GRACE,
                };
                if StdInstant::now() >= until {
                    break;
                }
                st.leader = true;
                guard.leading = true;
                st = self.lead(st, None, Some(until));
            }
        }
        guard.armed = false;
        let s = &mut st.slots[slot];
        let (outcome, panic) = (s.outcome.take(), s.panic.take());
        self.finish(st, slot, guard.leading);
        match (outcome, panic) {
            (_, Some(payload)) => resume_unwind(payload),
            (Some(outcome), None) => outcome,
            // `done` is set with an outcome or a panic.
            (None, None) => unreachable!("an operation done without an outcome"),
        }
    }

    /// Frees `slot`, hands the leader role on if this thread had it, and
    /// wakes whoever must run: owners of finished operations, and an owner
    /// to lead if operations are left without a leader.
    fn finish(&self, mut st: MutexGuard<'_, State<J>>, slot: usize, leading: bool) {
        if let Some(s) = st.slots.get_mut(slot) {
            s.serial = 0;
            s.op = None;
            s.outcome = None;
            s.conn_errors = 0;
            s.deadline = None;
            s.done = false;
            s.panic = None;
            s.waiting = false;
        }
        st.active &= !bit(slot);
        st.free.push(slot as u16);
        if st.slot_waiters > 0 {
            self.slot_free.notify_one();
        }
        if leading {
            st.leader = false;
            // What the last pass queued goes out now, not when the next
            // leader polls.
            st.flush_all();
        }
        let mut wake = core::mem::take(&mut st.to_wake);
        if !st.leader {
            // Someone must poll for the operations still running: an owner
            // that waits takes the role when it wakes.
            let waiting = bits(st.active).find(|&i| st.slots[i].waiting && !st.slots[i].done);
            if let Some(next) = waiting {
                wake |= bit(next);
            }
        }
        drop(st);
        self.wake(wake);
    }

    /// Wakes the owners of the slots in `mask`.
    fn wake(&self, mask: u64) {
        for i in bits(mask) {
            if let Some(cv) = self.wakeups.get(i) {
                cv.notify_one();
            }
        }
    }

    /// One round as the leader: write what is queued, poll without the state
    /// lock (after waking the owners of finished operations), then finish
    /// connects, hand the replies of ready sockets to their operations, and
    /// let every running operation check its deadlines and send. Returns at
    /// once if the leader's own operation (`own`) is done; polls at most
    /// until `cap`.
    fn lead<'a>(
        &'a self,
        mut st: MutexGuard<'a, State<J>>,
        own: Option<usize>,
        cap: Option<StdInstant>,
    ) -> MutexGuard<'a, State<J>> {
        loop {
            st.flush_all();
            if !st.errors_untold() {
                break;
            }
            // A connection failed since the last pass (a caller's send, the
            // last write of the previous pass, or the write just above; a
            // failed socket is deregistered, so no event would tell): its
            // operations learn it now, not at their next deadline. Each turn
            // needs a new failure, and a failed connection stays down for a
            // backoff: this ends.
            st.pump_all(self.now());
            if own.is_some_and(|o| st.slots[o].done) {
                return st;
            }
        }
        let deadline = match (st.next_deadline(self.epoch), cap) {
            (Some(d), Some(c)) => Some(d.min(c)),
            (d, c) => d.or(c),
        };
        st.polling = true;
        let wake = core::mem::take(&mut st.to_wake);
        drop(st);
        // Woken once the lock is free, so that they do not wake only to
        // wait for it.
        self.wake(wake);
        let mut ready = 0u64;
        {
            let mut poller = relock(self.poller.lock());
            let Poller { poll, events } = &mut *poller;
            let timeout = deadline.map(|d| d.saturating_duration_since(StdInstant::now()));
            // Spurious wake-ups and EINTR are harmless: everything is re-checked.
            let _ = poll.poll(events, timeout);
            for event in events.iter() {
                if event.token() != WAKE {
                    ready |= bit(event.token().0);
                }
            }
        }
        let mut st = self.lock();
        st.polling = false;
        st.woken = false;
        let now = self.now();
        st.progress_connects();
        st.read_ready(ready, now);
        st.pump_all(now);
        st.flush_all();
        st
    }
}

/// Frees the slot (and the leader role) if the caller unwinds.
struct SlotGuard<'a, J: Job> {
    transport: &'a Transport<J>,
    slot: usize,
    leading: bool,
    armed: bool,
}

impl<J: Job> Drop for SlotGuard<'_, J> {
    fn drop(&mut self) {
        if self.armed {
            let mut st = self.transport.lock();
            if self.leading {
                st.polling = false;
                st.woken = false;
            }
            self.transport.finish(st, self.slot, self.leading);
        }
    }
}

fn core_instant(epoch: StdInstant, t: StdInstant) -> Instant {
    let since = t.saturating_duration_since(epoch).as_micros() as u64;
    Instant::from_micros(CLOCK_ORIGIN_MICROS.saturating_add(since))
}

fn std_instant(epoch: StdInstant, t: Instant) -> StdInstant {
    epoch + StdDuration::from_micros(t.as_micros().saturating_sub(CLOCK_ORIGIN_MICROS))
}

impl<J: Job> State<J> {
    /// The earliest deadline of any running operation or connect.
    fn next_deadline(&self, epoch: StdInstant) -> Option<StdInstant> {
        let ops = bits(self.active)
            .filter_map(|i| self.slots.get(i)?.deadline)
            .min()
            .map(|t| std_instant(epoch, t));
        match (ops, self.connect_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// [`pump`](State::pump) for every running operation.
    fn pump_all(&mut self, now: Instant) {
        for i in bits(self.active) {
            self.pump(i, now);
        }
    }

    /// Lets the operation in `slot` take its connection errors and expired
    /// deadlines, queues what it wants to send, and marks it done once its
    /// outcome is out and nothing is left to send.
    fn pump(&mut self, slot: usize, now: Instant) {
        let Some(s) = self.slots.get_mut(slot) else {
            return;
        };
        let serial = s.serial;
        if let Some(mut op) = s.op.take() {
            // Out of its slot while it sends, so that a connection failing
            // meanwhile can still be recorded for it (in `conn_errors`).
            let pumped = catch_unwind(AssertUnwindSafe(|| {
                self.drive(&mut op, slot, serial, now);
                (op.poll_outcome(), op.is_finished(), op.poll_timeout())
            }));
            let s = &mut self.slots[slot];
            match pumped {
                Ok((outcome, finished, deadline)) => {
                    if s.outcome.is_none() {
                        s.outcome = outcome;
                    }
                    s.deadline = deadline;
                    s.done = s.outcome.is_some() && finished;
                    // Dropped once done: later replies for it are stragglers.
                    if !s.done {
                        s.op = Some(op);
                    }
                }
                Err(payload) => s.poison(payload),
            }
        }
        let s = &mut self.slots[slot];
        if s.done {
            self.active &= !bit(slot);
            if s.waiting {
                self.to_wake |= bit(slot);
            }
        }
    }

    fn drive(&mut self, op: &mut J, slot: usize, serial: u64, now: Instant) {
        loop {
            let errors = core::mem::take(&mut self.slots[slot].conn_errors);
            for server in bits(u64::from(errors)) {
                self.tell_down(op, server, now);
            }
            if op.poll_timeout().is_some_and(|d| now >= d) {
                op.handle_timeout(now);
            }
            self.transmit(op, slot, serial, now);
            // A connection that failed while sending: tell it, then go on.
            if self.slots[slot].conn_errors == 0 {
                break;
            }
        }
    }

    /// Queues what `op` wants to send.
    fn transmit(&mut self, op: &mut J, slot: usize, serial: u64, now: Instant) {
        loop {
            let t = match op.poll_transmit(now, &mut self.scratch) {
                Ok(Some(t)) => t,
                Ok(None) => break,
                Err(EncodeError::BufferTooSmall { needed }) => {
                    self.scratch.resize(needed, 0);
                    continue;
                }
                Err(_) => break,
            };
            let i = t.server.index();
            if self.conns[i].expect.len() >= MAX_OUTSTANDING {
                log::warn!("redlock: {} stopped answering", self.conns[i].url);
                self.fail(i);
            }
            // A release is delivered even to a server in its reconnect
            // backoff: a key left there would block everyone until its ttl.
            if !self.ensure_connecting(i, t.release) {
                self.tell_down(op, i, now);
                continue;
            }
            let conn = &mut self.conns[i];
            // C1, fail closed: nothing but the handshake is written before the
            // core judged every handshake reply good.
            let queue = if conn.handshake_left > 0 {
                conn.releases_held |= t.release;
                &mut conn.held
            } else {
                // The operation is judged by the incarnation of the
                // connection its request goes on (another call may have
                // reconnected since the operation began). Behind a
                // handshake, its INFO tells it.
                if let Some(started) = conn.incarnation {
                    op.set_incarnation(t.server, started);
                }
                &mut conn.out
            };
            queue.extend_from_slice(&self.scratch[..t.len]);
            conn.expect.push_back(Expect::Op {
                slot: slot as u16,
                serial,
            });
        }
    }

    /// Tells `op` that server `i` is down: refused (its handshake failed,
    /// or it is a duplicate), or its connection failed.
    fn tell_down(&self, op: &mut J, i: usize, now: Instant) {
        let server = ServerId(i as u8);
        match self.conns.get(i).and_then(|c| c.refused.as_ref()) {
            Some((why, _)) => op.handle_setup_error(now, server, *why),
            None => op.handle_connection_error(now, server),
        }
    }

    /// Makes sure server `i` is connected or connecting (starting a connect,
    /// with its handshake queued, if allowed; `urgent` ignores the reconnect
    /// backoff). False if it is down and may not be retried yet, or the
    /// connect failed at once.
    fn ensure_connecting(&mut self, i: usize, urgent: bool) -> bool {
        let now = StdInstant::now();
        match self.conns[i].state {
            ConnState::Up | ConnState::Connecting { .. } => return true,
            // A refused server waits for its backoff whatever the request
            // (no AUTH storm), and so does one whose last connect failed.
            ConnState::Down { retry_at }
                if now < retry_at
                    && !(urgent && self.conns[i].urgent_ok && self.conns[i].refused.is_none()) =>
            {
                return false;
            }
            ConnState::Down { .. } => {}
        }
        match self.connect(i) {
            Ok(()) => {
                // A leader in `poll` is woken (a request is queued behind
                // the handshake) and learns the connect deadline.
                log::debug!("redlock: connecting to {}", self.conns[i].url);
                true
            }
            Err(ConnectError::Io(e)) => {
                log::warn!("redlock: cannot connect to {}: {e}", self.conns[i].url);
                self.fail(i);
                false
            }
            Err(ConnectError::Refused(why, text)) => {
                log::warn!("redlock: not using {}: {text}", self.conns[i].url);
                self.fail_because(i, Some((why, text)));
                false
            }
        }
    }

    fn connect(&mut self, i: usize) -> Result<(), ConnectError> {
        let conn = &mut self.conns[i];
        if conn.addr_next >= conn.addrs.len() {
            conn.addr_next = 0;
            // Resolved again under the state lock (a name lookup blocks
            // every caller meanwhile): only when there is no address, or
            // rarely.
            let stale = conn
                .resolved_at
                .is_none_or(|t| t.elapsed() >= RESOLVE_AGAIN);
            if conn.addrs.is_empty() || stale {
                conn.resolved_at = Some(StdInstant::now());
                conn.addrs = resolve(&conn.url)?;
            }
        }
        // A name that now resolves to another entry's server must not give
        // that server a second vote (checked on every connect: a refused
        // entry keeps its addresses until it resolves again).
        if let Some(other) = twin_of(&self.conns, i) {
            let text = format!(
                "{} resolves to the same server as {}",
                self.conns[i].url.address(),
                self.conns[other].url.address()
            );
            return Err(ConnectError::Refused(
                SetupError::SameServer(ServerId(other as u8)),
                text,
            ));
        }
        let conn = &mut self.conns[i];
        if conn.addrs.is_empty() {
            return Err(io::Error::new(io::ErrorKind::NotFound, "no address").into());
        }
        if !open_stream(conn, &self.registry, Token(i)) {
            return Err(io::Error::other("no address took a connection").into());
        }
        let conn = &mut self.conns[i];
        conn.state = ConnState::Connecting {
            since: StdInstant::now(),
        };
        conn.out.clear();
        conn.held.clear();
        conn.releases_held = false;
        conn.filled = 0;
        conn.expect.clear();
        // A new connection may be a new incarnation: known again once its
        // INFO is read.
        conn.incarnation = None;
        // The handshake goes first on the new connection, as the core plans it.
        let url = conn.url.clone();
        let plan = Plan {
            auth: url.password.is_some(),
            select: url.db != 0,
            info_required: self.config.info_required,
        };
        let mut scripts = script::ALL.iter();
        for step in handshake::steps(plan) {
            let source = match step {
                Step::ScriptLoad => scripts.next().map_or("", |s| s.source),
                _ => "",
            };
            encode_growing(&mut conn.out, |b| match step {
                Step::Auth => {
                    let pw = url.password.as_ref().map_or(&[][..], |p| p.expose());
                    match &url.user {
                        Some(user) => encode::auth_user(b, user.as_bytes(), pw),
                        None => encode::auth(b, pw),
                    }
                }
                Step::Select => encode::select(b, u64::from(url.db)),
                Step::ScriptLoad => encode::script_load(b, source.as_bytes()),
                _ => encode::info(b, Some(b"server")),
            });
            conn.expect.push_back(Expect::Handshake(step));
        }
        conn.handshake_left = conn.expect.len();
        Ok(())
    }

    /// A connect that failed moves on to the host's next address at once,
    /// with the handshake and the requests queued behind it (nothing was
    /// written yet); with no address left, the connection fails.
    fn fail_connect(&mut self, i: usize) {
        let conn = &mut self.conns[i];
        if let Some(mut s) = conn.stream.take() {
            let _ = self.registry.deregister(&mut s);
        }
        conn.addr_next = conn.addr_next.saturating_add(1);
        if open_stream(conn, &self.registry, Token(i)) {
            log::debug!("redlock: connecting to the next address of {}", conn.url);
            conn.state = ConnState::Connecting {
                since: StdInstant::now(),
            };
        } else {
            self.fail(i);
        }
    }

    /// Closes server `i`'s connection after an error; it may reconnect after
    /// an exponential backoff. Every operation with requests on it is told
    /// (at its next pump).
    fn fail(&mut self, i: usize) {
        self.fail_because(i, None);
    }

    /// [`fail`](State::fail), with why the server is refused (its handshake
    /// failed, with the server's text), if it is.
    fn fail_because(&mut self, i: usize, refused: Option<(SetupError, String)>) {
        let State {
            conns,
            slots,
            registry,
            config,
            ..
        } = self;
        let Some(conn) = conns.get_mut(i) else {
            return;
        };
        if conn.stream.is_some() {
            log::warn!(
                "redlock: closing the connection to {} after an error",
                conn.url
            );
        }
        if let Some(mut s) = conn.stream.take() {
            let _ = registry.deregister(&mut s);
        }
        for e in &conn.expect {
            if let Expect::Op { slot, serial } = *e {
                if let Some(s) = slots.get_mut(usize::from(slot)) {
                    if s.serial == serial {
                        s.conn_errors |= 1u16.checked_shl(i as u32).unwrap_or(0);
                    }
                }
            }
        }
        if conn.state != ConnState::Up {
            // This address did not take a connection: the next connect tries
            // the next one; a release no longer reconnects at once.
            conn.addr_next = conn.addr_next.saturating_add(1);
            conn.urgent_ok = false;
        }
        conn.failures = conn.failures.saturating_add(1);
        let shift = conn.failures.min(16) - 1;
        let backoff = config
            .backoff_min
            .saturating_mul(1 << shift)
            .min(config.backoff_max);
        conn.state = ConnState::Down {
            retry_at: StdInstant::now() + backoff,
        };
        conn.out.clear();
        conn.held.clear();
        conn.releases_held = false;
        conn.filled = 0;
        conn.expect.clear();
        conn.handshake_left = 0;
        conn.writable_interest = false;
        conn.refused = refused;
        conn.check_invariants();
    }

    /// What the last thread out must still write: bytes on a connection
    /// that is up (its socket would have blocked), a release held behind a
    /// connect or a handshake, or other requests held there (given a short
    /// grace: a working server passes its handshake within a round trip;
    /// what a stalled one holds goes out with a later call, in order, so a
    /// release still follows its `SET`).
    fn unwritten(&self) -> Unwritten {
        if self
            .conns
            .iter()
            .any(|c| c.state == ConnState::Up && !c.out.is_empty())
        {
            Unwritten::Blocked
        } else if self.conns.iter().any(|c| c.releases_held) {
            Unwritten::Release
        } else if self.conns.iter().any(|c| !c.held.is_empty()) {
            Unwritten::Held
        } else {
            Unwritten::Nothing
        }
    }

    /// True when some running operation has a connection error to learn.
    fn errors_untold(&self) -> bool {
        bits(self.active).any(|i| self.slots.get(i).is_some_and(|s| s.conn_errors != 0))
    }

    fn flush_all(&mut self) {
        for i in 0..self.conns.len() {
            if self.conns[i].state == ConnState::Up
                && !self.conns[i].out.is_empty()
                && self.flush(i).is_err()
            {
                self.fail(i);
            }
        }
    }

    /// Writes until `WouldBlock`; writable interest only while bytes wait.
    fn flush(&mut self, i: usize) -> io::Result<()> {
        let conn = &mut self.conns[i];
        let Some(stream) = conn.stream.as_mut() else {
            return Ok(());
        };
        let mut written = 0;
        while written < conn.out.len() {
            match stream.write(&conn.out[written..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        conn.out.drain(..written);
        let want = !conn.out.is_empty();
        if want != conn.writable_interest {
            let interest = if want {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            self.registry.reregister(stream, Token(i), interest)?;
            conn.writable_interest = want;
        }
        Ok(())
    }

    /// The earliest connect timeout of a connect in progress.
    fn connect_deadline(&self) -> Option<StdInstant> {
        self.conns
            .iter()
            .filter_map(|c| match c.state {
                ConnState::Connecting { since } => Some(since + self.config.connect_timeout),
                ConnState::Up if c.handshake_left > 0 => {
                    Some(c.handshake_since + self.config.connect_timeout)
                }
                _ => None,
            })
            .min()
    }

    /// Finishes non-blocking connects (`take_error`, `peer_addr`), and
    /// fails those past the connect timeout, and handshakes that did not
    /// pass within a connect timeout (a server that takes connections but
    /// does not answer).
    fn progress_connects(&mut self) {
        for i in 0..self.conns.len() {
            let conn = &self.conns[i];
            if conn.state == ConnState::Up
                && conn.handshake_left > 0
                && StdInstant::now() >= conn.handshake_since + self.config.connect_timeout
            {
                log::warn!("redlock: {} did not answer its handshake in time", conn.url);
                self.fail(i);
                continue;
            }
            let ConnState::Connecting { since } = self.conns[i].state else {
                continue;
            };
            let stream = self.conns[i].stream.as_ref();
            let done = match stream.map(|s| (s.take_error(), s.peer_addr())) {
                Some((Ok(None), Ok(_))) => Some(true),
                Some((Ok(Some(_)) | Err(_), _)) => Some(false),
                Some((Ok(None), Err(e))) if e.kind() == io::ErrorKind::NotConnected => None,
                _ => Some(false),
            };
            match done {
                Some(true) => {
                    let conn = &mut self.conns[i];
                    log::debug!("redlock: connected to {}", conn.url);
                    conn.state = ConnState::Up;
                    conn.handshake_since = StdInstant::now();
                    if let Some(s) = conn.stream.as_ref() {
                        let _ = s.set_nodelay(true);
                    }
                    if self.flush(i).is_err() {
                        self.fail(i);
                    }
                }
                Some(false) => self.fail_connect(i),
                None if StdInstant::now() >= since + self.config.connect_timeout => {
                    self.fail_connect(i)
                }
                None => {}
            }
        }
    }

    /// Reads the sockets the poll reported ready and hands their replies to
    /// the operations they answer.
    fn read_ready(&mut self, ready: u64, now: Instant) {
        for i in 0..self.conns.len() {
            // Only sockets the poll reported: each is read until WouldBlock
            // (mio is edge-triggered), the others would read nothing.
            if self.conns[i].state != ConnState::Up || ready & bit(i) == 0 {
                continue;
            }
            loop {
                let read = self.read(i);
                // Parse what arrived, even before an error, then close on error.
                let before = self.conns[i].filled;
                let routed = self.dispatch(i, now);
                if let Err(refused) = routed {
                    self.fail_because(i, refused);
                    break;
                }
                if read.is_err() {
                    self.fail(i);
                    break;
                }
                if matches!(read, Ok(true)) {
                    break;
                }
                // The read stopped at the frame limit, before `WouldBlock`:
                // more may wait (and no new edge would announce it). If no
                // reply completed, a frame is larger than the limit.
                if self.conns[i].filled == before {
                    log::warn!(
                        "redlock: {} sent a reply over the size limit",
                        self.conns[i].url
                    );
                    self.fail(i);
                    break;
                }
            }
        }
    }

    /// Reads until `WouldBlock` (true), or until the frame limit is
    /// buffered (false: parse, then read again).
    fn read(&mut self, i: usize) -> io::Result<bool> {
        let limits = self.config.limits;
        let limit = limits
            .max_frame_len
            .saturating_add(limits.max_line_len)
            .saturating_add(READ_CHUNK);
        let conn = &mut self.conns[i];
        let Some(stream) = conn.stream.as_mut() else {
            return Ok(true);
        };
        loop {
            if conn.filled >= limit {
                return Ok(false);
            }
            if conn.inbuf.len().saturating_sub(conn.filled) < READ_CHUNK {
                // Grows only while a reply larger than the buffer comes in.
                conn.inbuf.resize(conn.filled + READ_CHUNK, 0);
            }
            let room = conn.inbuf.get_mut(conn.filled..).unwrap_or_default();
            match stream.read(room) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => conn.filled += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Parses every complete reply on connection `i` and hands each to the
    /// operation it answers, or to the core's judge of the handshake. `Err`
    /// when the connection must be closed: the stream is out of step or
    /// does not parse (`None`), or the handshake failed (why, with the
    /// server's text).
    fn dispatch(&mut self, i: usize, now: Instant) -> Result<(), Option<(SetupError, String)>> {
        let State {
            conns,
            parser,
            slots,
            config,
            ..
        } = self;
        let plan = Plan {
            auth: false,
            select: false,
            info_required: config.info_required,
        };
        let (before, rest) = conns.split_at_mut(i);
        let Some((conn, after)) = rest.split_first_mut() else {
            return Ok(());
        };
        let server = ServerId(i as u8);
        let mut used_total = 0;
        let result = loop {
            let input = conn.inbuf.get(used_total..conn.filled).unwrap_or(&[]);
            let (reply, used) = match parser.parse(input) {
                Ok(Status::Complete(x)) => x,
                Ok(Status::Incomplete) => break Ok(()),
                Err(e) => {
                    log::warn!("redlock: bad reply from {}: {e}", conn.url);
                    break Err(None);
                }
            };
            used_total += used;
            if reply.is_push() {
                continue;
            }
            let Some(expect) = conn.expect.pop_front() else {
                // A reply for no request: the stream is out of step.
                log::warn!("redlock: {} sent a reply for no request", conn.url);
                break Err(None);
            };
            let step = match expect {
                Expect::Op { slot, serial } => {
                    // Else: a reply to an operation that is done already.
                    let Some(s) = slots.get_mut(usize::from(slot)) else {
                        continue;
                    };
                    if s.serial != serial {
                        continue;
                    }
                    if let Some(Err(_)) = s.call(|op| op.handle_reply(now, server, reply)) {
                        // The operation had asked this server nothing.
                        log::warn!("redlock: {} answered a request it was not sent", conn.url);
                        break Err(None);
                    }
                    continue;
                }
                Expect::Handshake(step) => {
                    conn.handshake_left = conn.handshake_left.saturating_sub(1);
                    step
                }
            };
            // Fail closed: any error to the handshake, and the server is
            // not used until a later handshake passes.
            let info = match handshake::judge(step, &reply, plan) {
                Ok(Verdict::Ok) => None,
                Ok(Verdict::Info(info)) => Some(info),
                Err(why) => {
                    let password = conn.url.password.as_ref().map(|p| p.expose());
                    let text = refusal_text(why, &reply, password);
                    log::warn!("redlock: not using {}: {text}", conn.url);
                    break Err(Some((why, text)));
                }
            };
            if let Some(info) = info {
                if let Some(id) = info.run_id {
                    // One process behind two entries (another name, a proxy)
                    // must not vote twice.
                    // Against every entry's last known run_id, whatever the
                    // state of its connection (a restart changes it).
                    let ids: Vec<&[u8]> = before
                        .iter()
                        .map(|c| c.run_id.as_deref().unwrap_or_default())
                        .chain(core::iter::once(id))
                        .chain(
                            after
                                .iter()
                                .map(|c| c.run_id.as_deref().unwrap_or_default()),
                        )
                        .collect();
                    let lists: Vec<&[&[u8]]> = ids
                        .iter()
                        .map(|id| {
                            if id.is_empty() {
                                &[][..]
                            } else {
                                core::slice::from_ref(id)
                            }
                        })
                        .collect();
                    let twin = handshake::twin_of(&lists, i).map(ServerId::index);
                    if let Some(k) = twin {
                        let twin = if k < i { &before[k] } else { &after[k - i - 1] };
                        let text = format!("the same server (run_id) as {}", twin.url.address());
                        break Err(Some((SetupError::SameServer(ServerId(k as u8)), text)));
                    }
                    conn.run_id = Some(id.to_vec());
                }
                if let Some(uptime) = info.uptime_secs {
                    let started = now.saturating_sub(redlock_core::Duration::from_secs(uptime));
                    conn.incarnation = Some(started);
                    // The operations with requests behind it learn it first.
                    for e in &conn.expect {
                        let Expect::Op { slot, serial } = *e else {
                            continue;
                        };
                        if let Some(s) = slots.get_mut(usize::from(slot)) {
                            if s.serial == serial {
                                s.call(|op| op.set_incarnation(server, started));
                            }
                        }
                    }
                }
            }
            if conn.handshake_left == 0 {
                // Every step passed: the requests held behind it go out.
                conn.failures = 0;
                conn.refused = None;
                conn.urgent_ok = true;
                conn.releases_held = false;
                let held = core::mem::take(&mut conn.held);
                conn.out.extend_from_slice(&held);
                conn.held = held;
                conn.held.clear();
            }
        };
        let used = used_total.min(conn.filled);
        conn.inbuf.copy_within(used..conn.filled, 0);
        conn.filled -= used;
        if result.is_ok() {
            // (On an error the connection is failed next, which resets it.)
            conn.check_invariants();
        }
        result
    }
}

/// C4: what a report says of a refused handshake: the core's reason, and the
/// server's own error text (printable ASCII, cut to [`MAX_ERROR_TEXT`]).
/// Never the password: a server may quote the arguments of a command it
/// refuses (`ERR unknown command 'AUTH', with args beginning with: ...`),
/// so the text stops at its first quote, and the password's bytes are
/// blanked wherever they appear.
fn refusal_text(why: SetupError, reply: &Reply<'_>, password: Option<&[u8]>) -> String {
    let Some(e) = reply.as_error() else {
        return why.to_string();
    };
    let mut message = e.message().to_vec();
    if let Some(quote) = message.iter().position(|&b| b == b'\'' || b == b'"') {
        message.truncate(quote);
    }
    if let Some(pw) = password.filter(|p| !p.is_empty()) {
        let mut k = 0;
        while k + pw.len() <= message.len() {
            if message[k..].starts_with(pw) {
                message.splice(k..k + pw.len(), *b"***");
                k += 3;
            } else {
                k += 1;
            }
        }
    }
    let text: String = message
        .iter()
        .take(MAX_ERROR_TEXT)
        .map(|&b| {
            if (0x20..0x7f).contains(&b) {
                b as char
            } else {
                '?'
            }
        })
        .collect();
    format!("{why}: {}", text.trim_end())
}

/// Who a connection is, for the duplicate check: the addresses its name
/// resolved to, or the name itself while it resolves to nothing.
#[derive(Debug, PartialEq, Eq)]
enum Identity<'a> {
    Addr(SocketAddr),
    Name(&'a str, u16),
}

fn identities(c: &Conn) -> Vec<Identity<'_>> {
    let mut ids: Vec<Identity<'_>> = c.addrs.iter().map(|&a| Identity::Addr(a)).collect();
    ids.push(Identity::Name(c.url.host.as_str(), c.url.port));
    ids
}

/// The first two connections to the same server (the core's rule).
fn same_server(conns: &[Conn]) -> Option<(usize, usize)> {
    let ids: Vec<Vec<Identity<'_>>> = conns.iter().map(identities).collect();
    let slices: Vec<&[Identity<'_>]> = ids.iter().map(Vec::as_slice).collect();
    handshake::same_server(&slices).map(|(a, b)| (a.index(), b.index()))
}

/// Another connection to the same server as connection `i`, if any (the
/// core's rule).
fn twin_of(conns: &[Conn], i: usize) -> Option<usize> {
    let ids: Vec<Vec<Identity<'_>>> = conns.iter().map(identities).collect();
    let slices: Vec<&[Identity<'_>]> = ids.iter().map(Vec::as_slice).collect();
    handshake::twin_of(&slices, i).map(ServerId::index)
}

/// Why a connect could not start.
#[derive(Debug)]
enum ConnectError {
    /// The socket could not be opened, or the name not resolved.
    Io(io::Error),
    /// The server may not be used (with the text for the report).
    Refused(SetupError, String),
}

impl From<io::Error> for ConnectError {
    fn from(e: io::Error) -> ConnectError {
        ConnectError::Io(e)
    }
}

/// Starts a non-blocking connect to `conn`'s address `addr_next`, or the
/// first of the next ones that takes it, registered for readiness. False
/// when none is left (then `addr_next` is past the end of the list).
fn open_stream(conn: &mut Conn, registry: &Registry, token: Token) -> bool {
    while let Some(&addr) = conn.addrs.get(conn.addr_next) {
        let opened = TcpStream::connect(addr).and_then(|mut stream| {
            registry.register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)?;
            Ok(stream)
        });
        match opened {
            Ok(stream) => {
                conn.stream = Some(stream);
                conn.writable_interest = true;
                return true;
            }
            Err(e) => {
                log::debug!("redlock: cannot connect to {addr} ({}): {e}", conn.url);
                conn.addr_next = conn.addr_next.saturating_add(1);
            }
        }
    }
    false
}

/// The addresses of `url`'s host (a name lookup for a host name).
fn resolve(url: &ServerUrl) -> io::Result<Vec<SocketAddr>> {
    Ok((url.host.as_str(), url.port).to_socket_addrs()?.collect())
}

/// Encodes into the end of `out`, growing it to the size the encoder asks for.
fn encode_growing(
    out: &mut Vec<u8>,
    f: impl Fn(&mut [u8]) -> Result<usize, redlock_core::redlock_resp::EncodeError>,
) -> usize {
    let start = out.len();
    out.resize(start + 256, 0);
    let n = match f(&mut out[start..]) {
        Ok(n) => n,
        Err(redlock_core::redlock_resp::EncodeError::BufferTooSmall { needed }) => {
            out.resize(start + needed, 0);
            f(&mut out[start..]).unwrap_or(0)
        }
        Err(_) => 0,
    };
    out.truncate(start + n);
    n
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use alloc::sync::Arc;
    use core::cell::Cell;
    use redlock_core::redlock_resp::Reply;
    use redlock_core::{Transmit, Unsolicited};
    use std::net::TcpListener;
    use std::sync::mpsc;

    const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";

    /// A scripted operation. It sends `pings` PINGs to server 0, each after
    /// the reply to the one before, and is decided by the last reply (or,
    /// `fire_and_forget`, once the last PING is handed out, as the releases
    /// of a failed acquisition are), by a connection error (outcome 1), or
    /// at `until` (outcome 7; a panic instead with `panics`). With neither
    /// PINGs nor a deadline it is decided at once. The outcome is 7 unless
    /// a connection failed.
    #[derive(Debug, Default)]
    struct TestOp {
        pings: u8,
        fire_and_forget: bool,
        /// Its first reply takes this long to handle.
        slow_first_reply: Option<StdDuration>,
        until: Option<Instant>,
        panics: bool,
        /// Set: `is_finished` says false once, then panics.
        finish_calls: Option<Cell<u8>>,
        sent: u8,
        replies: u8,
        errored: bool,
        timed_out: bool,
        taken: bool,
    }

    impl TestOp {
        /// One PING, awaited until `ms` after now.
        fn ping(t: &Transport<TestOp>, ms: u64) -> TestOp {
            TestOp {
                pings: 1,
                ..TestOp::after(t, ms, false)
            }
        }

        /// Decided at `ms` after now (or panics then).
        fn after(t: &Transport<TestOp>, ms: u64, panics: bool) -> TestOp {
            TestOp {
                until: Some(
                    t.now()
                        .saturating_add(redlock_core::Duration::from_millis(ms)),
                ),
                panics,
                ..TestOp::default()
            }
        }

        fn decided(&self) -> bool {
            let answered = if self.fire_and_forget {
                self.sent == self.pings
            } else {
                self.replies == self.pings
            };
            self.errored
                || self.timed_out
                || (self.pings > 0 && answered)
                || (self.pings == 0 && self.until.is_none())
        }
    }

    impl Operation for TestOp {
        type Output = u8;
        fn poll_transmit(
            &mut self,
            _: Instant,
            buf: &mut [u8],
        ) -> Result<Option<Transmit>, EncodeError> {
            let waiting = !self.fire_and_forget && self.sent > self.replies;
            if self.errored || self.sent == self.pings || waiting {
                return Ok(None);
            }
            buf[..PING.len()].copy_from_slice(PING);
            self.sent += 1;
            Ok(Some(Transmit {
                server: ServerId(0),
                len: PING.len(),
                // As the releases of a failed acquisition are.
                release: self.fire_and_forget,
            }))
        }
        fn handle_reply(
            &mut self,
            _: Instant,
            _: ServerId,
            _: Reply<'_>,
        ) -> Result<(), Unsolicited> {
            if self.replies == 0 {
                if let Some(d) = self.slow_first_reply {
                    std::thread::sleep(d);
                }
            }
            self.replies += 1;
            Ok(())
        }
        fn handle_connection_error(&mut self, _: Instant, _: ServerId) {
            self.errored = true;
        }
        fn handle_timeout(&mut self, now: Instant) {
            if self.until.is_some_and(|u| now >= u) {
                assert!(!self.panics, "a broken operation");
                self.timed_out = true;
            }
        }
        fn poll_timeout(&self) -> Option<Instant> {
            self.until.filter(|_| !self.decided())
        }
        fn poll_outcome(&mut self) -> Option<u8> {
            if self.taken || !self.decided() {
                return None;
            }
            self.taken = true;
            Some(if self.errored { 1 } else { 7 })
        }
        fn is_finished(&self) -> bool {
            if let Some(calls) = &self.finish_calls {
                let n = calls.get();
                calls.set(n.saturating_add(1));
                assert!(n == 0, "a broken is_finished");
                return false;
            }
            self.decided() && (self.errored || self.sent == self.pings)
        }
    }

    impl Job for TestOp {
        fn set_incarnation(&mut self, _: ServerId, _: Instant) {}
    }

    fn config() -> ConnConfig {
        ConnConfig {
            connect_timeout: StdDuration::from_secs(1),
            backoff_min: StdDuration::from_millis(10),
            backoff_max: StdDuration::from_secs(1),
            limits: Limits::DEFAULT,
            info_required: false,
            delivery_grace: StdDuration::from_millis(20),
        }
    }

    /// A transport over one listening socket (nobody accepts unless the
    /// test does).
    fn transport() -> (Arc<Transport<TestOp>>, TcpListener) {
        transport_with(config())
    }

    fn transport_with(config: ConnConfig) -> (Arc<Transport<TestOp>>, TcpListener) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url: ServerUrl = listener.local_addr().unwrap().to_string().parse().unwrap();
        (Arc::new(Transport::new(&[url], config).unwrap()), listener)
    }

    /// Runs `op` on its own thread: its outcome, or `None` if it panicked.
    fn spawn_run(t: &Arc<Transport<TestOp>>, op: TestOp) -> mpsc::Receiver<Option<u8>> {
        let (tx, rx) = mpsc::channel();
        let t = t.clone();
        std::thread::spawn(move || {
            let joined = std::thread::spawn(move || t.run(op)).join();
            let _ = tx.send(joined.ok());
        });
        rx
    }

    fn wait_until_led(t: &Transport<TestOp>) {
        let give_up = StdInstant::now() + StdDuration::from_secs(10);
        while !t.lock().leader {
            assert!(StdInstant::now() < give_up, "nobody led");
            std::thread::sleep(StdDuration::from_millis(1));
        }
    }

    fn assert_idle(t: &Transport<TestOp>) {
        let st = t.lock();
        assert_eq!(st.free.len(), MAX_SLOTS);
        assert_eq!(st.active, 0);
        assert!(!st.leader);
    }

    const WITHIN: StdDuration = StdDuration::from_secs(10);

    #[test]
    fn a_panicking_operation_leaves_the_transport_usable() {
        let (t, _listener) = transport();
        let op = TestOp::after(&t, 5, true);
        // Unwinding must not deadlock on the state lock.
        assert_eq!(spawn_run(&t, op).recv_timeout(WITHIN), Ok(None));
        // The slot and the leader role were given back: another call runs.
        let ran = spawn_run(&t, TestOp::default());
        assert_eq!(ran.recv_timeout(WITHIN), Ok(Some(7)));
        assert_idle(&t);
    }

    #[test]
    fn an_operation_that_panics_under_another_leader_panics_its_own_caller() {
        let (t, _listener) = transport();
        // A leads (its operation runs for 300 ms); B's operation, driven by
        // A as the leader, panics after 20 ms.
        let a = spawn_run(&t, TestOp::after(&t, 300, false));
        wait_until_led(&t);
        let b = std::thread::spawn({
            let (t, op) = (t.clone(), TestOp::after(&t, 20, true));
            move || t.run(op)
        });
        let payload = b.join().expect_err("B's call panics");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"a broken operation"));
        // A, the leader that ran B's code, went on.
        assert_eq!(a.recv_timeout(WITHIN), Ok(Some(7)));
        assert_idle(&t);
    }

    // Found by a review of the combining leader: each failed before its fix.

    /// The write of the second PING fails (ECONNRESET) in the leader's last
    /// `flush_all`; the operation learns it at the top of the next `lead`
    /// and is done: the leader must return, not poll with no deadline.
    #[test]
    fn leader_does_not_poll_after_its_operation_is_done() {
        let (t, listener) = transport();
        // Answers the handshake (5 SCRIPT LOAD, INFO) and the first PING
        // without reading anything, then closes with the bytes unread: the
        // kernel resets the connection.
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.write_all(&[handshake_ok(), b"+OK\r\n".to_vec()].concat())
                .unwrap();
            std::thread::sleep(StdDuration::from_millis(100));
            drop(s);
            std::thread::sleep(StdDuration::from_secs(60));
        });
        let op = TestOp {
            pings: 2,
            // The reset comes meanwhile.
            slow_first_reply: Some(StdDuration::from_millis(300)),
            until: Some(
                t.now()
                    .saturating_add(redlock_core::Duration::from_secs(30)),
            ),
            ..TestOp::default()
        };
        let ran = spawn_run(&t, op);
        assert_eq!(ran.recv_timeout(StdDuration::from_secs(5)), Ok(Some(1)));
    }

    /// B's `is_finished` panics (outside the operation's pump proper) while
    /// A leads: A's call still returns, and B's call panics.
    #[test]
    fn a_panic_in_is_finished_stays_with_its_owner() {
        let (t, _listener) = transport();
        let a = spawn_run(&t, TestOp::after(&t, 1500, false));
        wait_until_led(&t);
        let b = TestOp {
            finish_calls: Some(Cell::new(0)),
            ..TestOp::default()
        };
        let b = spawn_run(&t, b);
        assert_eq!(b.recv_timeout(WITHIN), Ok(None), "B's call panics");
        assert_eq!(a.recv_timeout(WITHIN), Ok(Some(7)), "A's call");
        assert_idle(&t);
    }

    /// `run` promises the operation's last requests are sent, also when
    /// they are queued behind a connect in progress and nobody calls again.
    #[test]
    fn what_a_finished_operation_queued_is_sent() {
        let (t, listener) = transport_with(ConnConfig {
            delivery_grace: StdDuration::from_secs(5),
            ..config()
        });
        // The server answers the handshake once it has read it, then
        // reports everything it read.
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.set_read_timeout(Some(StdDuration::from_secs(5))).unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            let mut answered = false;
            while let Ok(n) = s.read(&mut buf) {
                got.extend_from_slice(&buf[..n]);
                if !answered && got.windows(4).any(|w| w == b"INFO") {
                    s.write_all(&handshake_ok()).unwrap();
                    answered = true;
                }
                if n == 0 || got.ends_with(PING) {
                    break;
                }
            }
            got
        });
        let op = TestOp {
            pings: 1,
            fire_and_forget: true,
            ..TestOp::default()
        };
        assert_eq!(t.run(op), 7);
        let got = server.join().unwrap();
        assert!(
            got.ends_with(PING),
            "the server received {} bytes",
            got.len()
        );
    }

    // Found by a second review.

    /// The connection was reset while the client was idle; the next call's
    /// first write (at the top of `lead`) fails. The operation must learn it
    /// at once, not at its deadline.
    #[test]
    fn a_write_failing_before_the_poll_is_told_at_once() {
        let (t, listener) = transport();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.write_all(&[handshake_ok(), b"+OK\r\n".to_vec()].concat())
                .unwrap();
            std::thread::sleep(StdDuration::from_millis(100));
            drop(s); // unread bytes: a reset
            std::thread::sleep(StdDuration::from_secs(60));
        });
        let op = TestOp {
            pings: 1,
            ..TestOp::default()
        };
        assert_eq!(t.run(op), 7);
        std::thread::sleep(StdDuration::from_millis(300)); // the reset arrives
        let op = TestOp::ping(&t, 30_000);
        let started = StdInstant::now();
        assert_eq!(t.run(op), 1);
        let took = started.elapsed();
        assert!(took < StdDuration::from_secs(10), "told after {took:?}");
    }

    /// An operation done in its caller's own first pump (requests queued,
    /// nothing awaited): the last thread out writes them and must not then
    /// sleep until some event or the connect timeout.
    #[test]
    fn the_last_thread_out_does_not_sleep_after_writing_everything() {
        let (t, listener) = transport_with(ConnConfig {
            connect_timeout: StdDuration::from_secs(60),
            ..config()
        });
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            // The handshake and the first PING; later PINGs go unanswered.
            s.write_all(&[handshake_ok(), b"+OK\r\n".to_vec()].concat())
                .unwrap();
            std::thread::sleep(StdDuration::from_secs(120));
        });
        let op = TestOp {
            pings: 1,
            ..TestOp::default()
        };
        assert_eq!(t.run(op), 7);
        let started = StdInstant::now();
        let op = TestOp {
            pings: 1,
            fire_and_forget: true,
            ..TestOp::default()
        };
        assert_eq!(t.run(op), 7);
        let took = started.elapsed();
        assert!(took < StdDuration::from_secs(10), "took {took:?}");
    }

    #[test]
    fn a_huge_connect_timeout_does_not_overflow() {
        let (t, _listener) = transport_with(ConnConfig {
            connect_timeout: StdDuration::MAX,
            ..config()
        });
        let op = TestOp::ping(&t, 200);
        assert_eq!(t.run(op), 7);
    }

    /// Replies in odd fragments, one a 30 KB bulk (INFO) across the read
    /// chunk, then the PING's reply.
    #[test]
    fn fragmented_and_large_replies_are_put_together() {
        let (t, listener) = transport();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut all = b"$40\r\nb70c2384248f88e6b75b9f89241a180f856ad852\r\n".repeat(5);
            let body = vec![b'x'; 30_000];
            all.extend_from_slice(format!("${}\r\n", body.len()).as_bytes());
            all.extend_from_slice(&body);
            all.extend_from_slice(b"\r\n+PONG\r\n");
            for (k, c) in all.chunks(7_001).enumerate() {
                for piece in c.chunks(if k % 2 == 0 { 3 } else { 7_001 }) {
                    s.write_all(piece).unwrap();
                }
                std::thread::sleep(StdDuration::from_millis(5));
            }
            std::thread::sleep(StdDuration::from_secs(60));
        });
        let op = TestOp::ping(&t, 30_000);
        assert_eq!(t.run(op), 7);
    }

    /// Far more than the read limit arrives at once (900 replies of 1 KB
    /// to finished operations), then the reply of a running one: it is read
    /// although no new data would announce it.
    #[test]
    fn replies_past_the_read_limit_are_all_read() {
        let (t, listener) = transport();
        let (tx, rx) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.write_all(&handshake_ok()).unwrap();
            rx.recv().unwrap();
            let mut all = Vec::new();
            for _ in 0..900 {
                all.extend_from_slice(b"$1000\r\n");
                all.extend_from_slice(&[b'y'; 1000]);
                all.extend_from_slice(b"\r\n");
            }
            all.extend_from_slice(b"+PONG\r\n");
            s.write_all(&all).unwrap();
            std::thread::sleep(StdDuration::from_secs(60));
        });
        // 900 requests whose replies nobody waits for.
        for pings in [200, 200, 100, 100, 100, 100, 100] {
            let op = TestOp {
                pings,
                fire_and_forget: true,
                ..TestOp::default()
            };
            assert_eq!(t.run(op), 7);
        }
        let op = TestOp::ping(&t, 60_000);
        let started = StdInstant::now();
        let ran = spawn_run(&t, op);
        std::thread::sleep(StdDuration::from_millis(100));
        tx.send(()).unwrap();
        assert_eq!(ran.recv_timeout(StdDuration::from_secs(90)), Ok(Some(7)));
        let took = started.elapsed();
        assert!(took < StdDuration::from_secs(20), "took {took:?}");
    }

    const SCRIPT_LOADED: &[u8] = b"$40\r\nb70c2384248f88e6b75b9f89241a180f856ad852\r\n";
    const INFO: &[u8] = b"$37\r\nrun_id:fake\r\nuptime_in_seconds:9999\r\n\r\n";

    /// What a good server answers to the handshake: every `SCRIPT LOAD`
    /// and `INFO`.
    fn handshake_ok() -> Vec<u8> {
        [SCRIPT_LOADED.repeat(script::ALL.len()), INFO.to_vec()].concat()
    }

    /// A good server's answer to `command` (encoded): the digest to
    /// `SCRIPT LOAD`, the server section to `INFO`, +OK to anything else.
    fn fake_answer(command: &[u8]) -> &'static [u8] {
        let has = |word: &[u8]| command.windows(word.len()).any(|w| w == word);
        if has(b"SCRIPT") {
            SCRIPT_LOADED
        } else if has(b"INFO") {
            INFO
        } else {
            b"+OK\r\n"
        }
    }

    /// A server that answers every command as a good server would (+OK to
    /// anything but the handshake), on any connection.
    fn serve_ok(listener: TcpListener) {
        std::thread::spawn(move || {
            for s in listener.incoming() {
                let Ok(mut s) = s else { return };
                std::thread::spawn(move || {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 65536];
                    loop {
                        let n = match s.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        buf.extend_from_slice(&chunk[..n]);
                        let mut out = Vec::new();
                        while let Ok(Status::Complete((_, used))) =
                            redlock_core::redlock_resp::parse_reply(&buf)
                        {
                            out.extend_from_slice(fake_answer(&buf[..used]));
                            buf.drain(..used);
                        }
                        if s.write_all(&out).is_err() {
                            return;
                        }
                    }
                });
            }
        });
    }

    /// More threads than slots, each making many calls of every shape.
    #[test]
    fn a_hundred_threads_make_many_calls() {
        let (t, listener) = transport();
        serve_ok(listener);
        let (tx, rx) = mpsc::channel();
        let t2 = t.clone();
        std::thread::spawn(move || {
            let handles: Vec<_> = (0..100u64)
                .map(|k| {
                    let t = t2.clone();
                    std::thread::spawn(move || {
                        (0..50u64).all(|j| {
                            let op = TestOp {
                                pings: ((k + j) % 3 + 1) as u8,
                                fire_and_forget: (k + j) % 5 == 0,
                                until: Some(
                                    t.now()
                                        .saturating_add(redlock_core::Duration::from_secs(60)),
                                ),
                                ..TestOp::default()
                            };
                            t.run(op) == 7
                        })
                    })
                })
                .collect();
            let all = handles.into_iter().all(|h| h.join().unwrap_or(false));
            let _ = tx.send(all);
        });
        assert_eq!(rx.recv_timeout(StdDuration::from_secs(120)), Ok(true));
        assert_idle(&t);
    }

    /// A host with two addresses, the first refusing connects (a name that
    /// resolves to `::1` and `127.0.0.1`, a server on one of them): the
    /// first call already goes through, on the second address.
    #[test]
    fn a_refused_address_moves_the_connect_to_the_next_one() {
        let (t, listener) = transport();
        let live = listener.local_addr().unwrap();
        serve_ok(listener);
        let dead = {
            let gone = TcpListener::bind("127.0.0.1:0").unwrap();
            gone.local_addr().unwrap()
        };
        {
            let mut st = t.lock();
            st.conns[0].addrs = vec![dead, live];
            st.conns[0].addr_next = 0;
        }
        let op = TestOp::ping(&t, 30_000);
        assert_eq!(t.run(op), 7, "no connection error on the first call");
        assert_eq!(t.lock().conns[0].addr_next, 1);
    }

    /// A name that resolves again (every address failed, or none was
    /// known) to the server of another entry is not used: one server, one
    /// vote, also after the client was built.
    #[test]
    fn a_name_that_now_resolves_to_another_entry_is_refused() {
        let a = TcpListener::bind("127.0.0.1:0").unwrap();
        let b = TcpListener::bind("127.0.0.1:0").unwrap();
        let urls: Vec<ServerUrl> = [&a, &b]
            .iter()
            .map(|l| l.local_addr().unwrap().to_string().parse().unwrap())
            .collect();
        let t = Arc::new(Transport::<TestOp>::new(&urls, config()).unwrap());
        assert_eq!(t.same_server(), None);
        {
            // Entry 0's name now stands for entry 1's server, and its
            // addresses are to be looked up again.
            let mut st = t.lock();
            st.conns[0].url = format!("localhost:{}", b.local_addr().unwrap().port())
                .parse()
                .unwrap();
            st.conns[0].addrs.clear();
        }
        let op = TestOp::ping(&t, 30_000);
        assert_eq!(t.run(op), 1, "server 0 is not used");
        let st = t.lock();
        assert!(
            matches!(
                st.conns[0].refused,
                Some((SetupError::SameServer(ServerId(1)), _))
            ),
            "{:?}",
            st.conns[0].refused
        );
        assert!(st.conns[0].stream.is_none());
    }

    /// Nothing but the handshake is written before the handshake passed,
    /// and a refused handshake sends nothing more (fail closed).
    #[test]
    fn requests_wait_for_the_handshake_and_a_refusal_drops_them() {
        let (t, listener) = transport();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.set_read_timeout(Some(StdDuration::from_millis(300)))
                .unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            // Everything the client sends before it hears anything.
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            let before = got.clone();
            // The first SCRIPT LOAD is refused.
            s.write_all(b"-NOPERM no scripts for you\r\n").unwrap();
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            (before, got)
        });
        let op = TestOp::ping(&t, 30_000);
        assert_eq!(t.run(op), 1, "told the server is not used");
        let (before, after) = server.join().unwrap();
        assert!(
            before.windows(6).any(|w| w == b"SCRIPT"),
            "the handshake went out"
        );
        assert!(!before.ends_with(PING) && !after.windows(PING.len()).any(|w| w == PING));
        let st = t.lock();
        let (why, text) = st.conns[0].refused.clone().unwrap();
        assert_eq!(
            why,
            SetupError::Refused {
                step: Step::ScriptLoad,
                kind: redlock_core::redlock_resp::ErrorKind::NoPerm
            }
        );
        assert!(text.contains("NOPERM no scripts for you"), "{text}");
    }

    /// A server's error text never carries the password, even when the
    /// server quotes the arguments it refused.
    #[test]
    fn refusal_texts_never_carry_the_password() {
        let why = SetupError::Refused {
            step: Step::Auth,
            kind: redlock_core::redlock_resp::ErrorKind::Err,
        };
        let quoted = Reply::Error(redlock_core::redlock_resp::ServerError::new(
            b"ERR unknown command 'AUTH', with args beginning with: 'user' 'hunter2' ",
        ));
        let text = refusal_text(why, &quoted, Some(b"hunter2"));
        assert_eq!(text, "AUTH failed (ERR): ERR unknown command");
        let bare = Reply::Error(redlock_core::redlock_resp::ServerError::new(
            b"ERR bad password hunter2 here",
        ));
        let text = refusal_text(why, &bare, Some(b"hunter2"));
        assert!(!text.contains("hunter2") && text.contains("***"), "{text}");
    }

    /// A server that takes the connection but never answers its handshake
    /// is given up on after a connect timeout, and a call does not wait for
    /// requests (other than releases) held behind it.
    #[test]
    fn a_handshake_that_never_answers_times_out() {
        let (t, listener) = transport_with(ConnConfig {
            connect_timeout: StdDuration::from_millis(300),
            delivery_grace: StdDuration::from_secs(5),
            ..config()
        });
        // Accepted by the kernel (backlog), never read.
        let op = TestOp::ping(&t, 30_000);
        let started = StdInstant::now();
        assert_eq!(t.run(op), 1, "told when the handshake timed out");
        let took = started.elapsed();
        assert!(took >= StdDuration::from_millis(300), "{took:?}");
        assert!(took < StdDuration::from_secs(5), "{took:?}");
        drop(listener);
    }

    /// `Debug` of the transport never shows the password, even while the
    /// `AUTH` of a connect waits to be written.
    #[test]
    fn debug_never_shows_the_auth_bytes() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url: ServerUrl = format!("redis://u:sekret@{}", listener.local_addr().unwrap())
            .parse()
            .unwrap();
        let t = Transport::<TestOp>::new(&[url], config()).unwrap();
        let mut st = t.lock();
        assert!(st.ensure_connecting(0, false));
        assert!(st.conns[0].out.windows(6).any(|w| w == b"sekret"));
        let shown = format!("{:?} {:?}", *st, st.conns[0]);
        assert!(!shown.contains("sekret"), "{shown}");
        // As bytes, too.
        let as_bytes = format!("{:?}", b"sekret".to_vec());
        let inner = as_bytes.trim_matches(|c| c == '[' || c == ']');
        assert!(!shown.contains(inner), "{shown}");
    }
}
