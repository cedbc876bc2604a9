//! The combining leader: one thread at a time polls and drives every
//! running operation; owners sleep until their call is finished.

use super::*;

/// What waits to be written, for the last thread out of the transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unwritten {
    Nothing,
    /// On a connection that is up, whose socket would have blocked.
    Blocked,
    /// A release held behind a connect or a handshake in progress.
    Release,
    /// Other requests held behind a connect or a handshake in progress.
    Held,
}

/// The combining leader's state, behind the state lock, in one place.
///
/// Invariants, checked by [`State::check_leadership`] after every critical
/// section in debug builds:
/// - only the leader polls (`polling` implies `leader`), and the driver
///   leads only as the leader (`driver` implies `leader`);
/// - the waker is used at most once per poll, while the leader polls
///   (`woken` implies `polling`);
/// - a slot is either running (`active`) or done and waiting to be woken
///   (`to_wake`), never both, and either way it is occupied;
/// - every slot is occupied or on the free list, never both;
/// - a task that leads on a reactor (`reactor`) is the leader, neither the
///   driver nor polling, and its slot is a task's, occupied;
/// - the role is waiting for a task to take it (`handed_at`) only while
///   nobody leads;
/// - the owners a reactor leader waits for (`hold_for`) are those of done
///   operations in occupied slots, and it holds (`held`) only while it
///   leads (`reactor`).
#[derive(Debug, Default)]
pub(super) struct Leadership {
    /// Some thread is the leader.
    pub(super) leader: bool,
    /// The leader is the driver thread (see `watch.rs`).
    pub(super) driver: bool,
    /// The leader is in `Poll::poll` (without the state lock).
    pub(super) polling: bool,
    /// The waker was used since the leader last polled.
    pub(super) woken: bool,
    /// Slots with an operation that is not done (bit i = slot i).
    pub(super) active: u64,
    /// Slots whose operation is done and whose owner waits: to be woken.
    pub(super) to_wake: u64,
    /// Threads waiting for a free slot (not urgent, urgent).
    pub(super) slot_waiters: usize,
    pub(super) slot_waiters_urgent: usize,
    /// Since when the driver, with nothing running, writes what is left
    /// queued (see `Transport::drive`).
    pub(super) drain_since: Option<StdInstant>,
    /// The slot whose task leads on its runtime's reactor (see `task.rs`):
    /// it turns when the poll has events, and nobody polls in between.
    pub(super) reactor: Option<u16>,
    /// Turns made by tasks leading on a reactor, so far.
    pub(super) turns: u64,
    /// Of them, those that looked at the poll (took its events).
    pub(super) looks: u64,
    /// Work is owed to the leader's next turn: requests were queued for it
    /// to write (its task woken for them once per turn, however many
    /// callers queue, so that their requests go out in one write per
    /// socket; or, while owners of done operations have yet to run, by the
    /// last of them), or it holds. The driver's watch counts it as owed.
    pub(super) queued: bool,
    /// Slots of tasks on a reactor whose operations the last turns
    /// finished, whose owners were woken and have not taken their outcomes
    /// yet (about to run, and likely to start their next calls): a reactor
    /// leader lets them run before its next turn
    /// (see `lead_on_reactor`). Emptied at every turn, so that a future
    /// kept without being polled costs one hold at most.
    pub(super) hold_for: u64,
    /// The reactor leader returned without a turn, to let the owners in
    /// `hold_for` run first: the last of them to take its outcome wakes it
    /// (see [`Transport::finish`]), or the driver does when a request
    /// queued meanwhile has waited its share of its time
    /// ([`State::next_deadline`]). Once per hold: polled again, it turns.
    pub(super) held: bool,
    /// What the driver saw when work was first owed to a task that leads
    /// (or was handed the role): `turns` and `looks` then, whether a look
    /// was owed (replies waiting, a deadline due, an error untold, the
    /// role not taken), and when. Still no turn a whole `WATCH_PERIOD`
    /// later (no look, if one is owed since then): the driver leads in its
    /// place.
    pub(super) watch: Option<(u64, u64, bool, StdInstant)>,
    /// The role was handed to a task (woken to take it) at this time, and
    /// it has not taken it yet.
    pub(super) handed_at: Option<StdInstant>,
    /// The driver keeps watching, every `WATCH_PERIOD`, until then (after
    /// tasks last led: so that a task that takes the role again soon
    /// needs no wake-up of the driver).
    pub(super) linger_until: Option<StdInstant>,
}

impl<J: Job> State<J> {
    /// A free slot for an operation, if it may take one: an acquisition
    /// leaves the last `RESERVED_SLOTS` to releases and extensions.
    pub(super) fn take_slot(&mut self, urgent: bool) -> Option<usize> {
        if self.free.len() > RESERVED_SLOTS || (urgent && !self.free.is_empty()) {
            self.free.pop().map(usize::from)
        } else {
            None
        }
    }

    /// The waker of the first task in line that may take a free slot now,
    /// taken out of the line.
    pub(super) fn next_slot_task(&mut self) -> Option<Waker> {
        let any = self.free.len() > RESERVED_SLOTS;
        let at = self
            .slot_tasks
            .iter()
            .position(|t| any || (t.urgent && !self.free.is_empty()))?;
        self.slot_tasks.remove(at).map(|t| t.waker)
    }

    /// The invariants written at [`Leadership`], in debug builds.
    pub(super) fn check_leadership(&self) {
        if !cfg!(debug_assertions) || std::thread::panicking() {
            // Unwinding already: a second panic would abort the process.
            return;
        }
        let lead = &self.lead;
        debug_assert!(!lead.polling || lead.leader, "polling without leading");
        debug_assert!(
            lead.handed_at.is_none() || !lead.leader,
            "the role handed to a task, and someone leads"
        );
        debug_assert!(
            lead.reactor.is_none_or(|r| lead.leader
                && !lead.driver
                && !lead.polling
                && self
                    .slots
                    .get(usize::from(r))
                    .is_some_and(|s| s.serial != 0 && s.task)),
            "a reactor leader that is not a task's running slot"
        );
        debug_assert!(
            !lead.driver || lead.leader,
            "the driver leads without the role"
        );
        debug_assert!(
            self.slots.iter().all(|s| s.serial != 0 || !s.task),
            "a free slot belongs to a task"
        );
        debug_assert!(!lead.woken || lead.polling, "woken outside a poll");
        debug_assert_eq!(lead.active & lead.to_wake, 0, "running and done at once");
        let occupied = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.serial != 0)
            .fold(0u64, |m, (i, _)| m | bit(i));
        debug_assert_eq!(lead.active & !occupied, 0, "a free slot runs");
        debug_assert_eq!(lead.to_wake & !occupied, 0, "a free slot is to be woken");
        debug_assert_eq!(lead.hold_for & !occupied, 0, "held for a free slot");
        debug_assert_eq!(lead.hold_for & lead.active, 0, "held for a running slot");
        debug_assert!(
            !lead.held || lead.reactor.is_some(),
            "a hold without a leader"
        );
        debug_assert_eq!(
            occupied.count_ones() as usize + self.free.len(),
            self.slots.len(),
            "slots lost or doubled"
        );
        debug_assert!(
            self.free
                .iter()
                .all(|&f| occupied & bit(usize::from(f)) == 0),
            "an occupied slot is free"
        );
    }
}

impl<J: Job> Transport<J> {
    /// Runs `op` to its outcome, and until it has sent what it still had to
    /// send (the releases of a failed attempt), then returns the outcome.
    pub(crate) fn run<K: Kind<J>>(&self, op: K) -> K::Out {
        // Name lookups happen here, before the state lock is taken.
        self.resolve_wanted_names();
        // Declared before the state lock's guard, so that when unwinding it
        // is dropped after it (it takes the lock itself).
        let mut guard = SlotGuard {
            transport: self,
            slot: 0,
            leading: false,
            armed: false,
        };
        let mut st = self.lock();
        let urgent = K::URGENT;
        let slot = loop {
            if let Some(s) = st.take_slot(urgent) {
                break s;
            }
            if urgent {
                st.lead.slot_waiters_urgent += 1;
                st.check_leadership();
                st = relock(self.slot_free_urgent.wait(st));
                st.lead.slot_waiters_urgent -= 1;
            } else {
                st.lead.slot_waiters += 1;
                st.check_leadership();
                st = relock(self.slot_free.wait(st));
                st.lead.slot_waiters -= 1;
            }
        };
        st.serial += 1;
        let serial = st.serial;
        let s = &mut st.slots[slot];
        s.serial = serial;
        s.op = Some(op.into_job());
        st.lead.active |= bit(slot);
        guard.slot = slot;
        guard.armed = true;
        // The first requests are queued at once. A leader in `poll` writes
        // them (woken once per poll, for every caller that queues); without
        // a leader, this thread leads and writes them before it polls.
        st.pump(slot, self.now());
        self.wake_poll(&mut st);
        while !st.slots[slot].done {
            // A task that leads on its runtime's reactor, waiting for its
            // events, is relieved: a blocking call never waits for a task
            // (which may be on this very thread's runtime).
            if guard.leading || !st.lead.leader || st.lead.reactor.is_some() {
                if st.lead.reactor.take().is_some() {
                    st.lead.held = false;
                    st.lead.watch = None;
                }
                st.lead.leader = true;
                guard.leading = true;
                st = self.lead(st, Some(slot), None);
            } else {
                st.slots[slot].waiting = true;
                st.check_leadership();
                st = relock(self.wakeups[slot].wait(st));
                st.slots[slot].waiting = false;
            }
        }
        if guard.leading || !st.lead.leader {
            // The last thread out writes what is still queued (a write that
            // would have blocked, or a release behind a connect or a
            // handshake), so that it does not wait for the next call: at
            // most for a connect timeout on a connection that is up, and for
            // about a request's timeout behind a connect or a handshake (a
            // host that drops connects costs that once: a release does not
            // reconnect at once after a failed connect).
            let started = StdInstant::now();
            while st.lead.active == 0 {
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
                st.lead.leader = true;
                guard.leading = true;
                st = self.lead(st, None, Some(until));
            }
        }
        guard.armed = false;
        let s = &mut st.slots[slot];
        let (outcome, panic) = (K::take(&mut s.cell), s.panic.take());
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
    pub(super) fn finish(&self, mut st: MutexGuard<'_, State<J>>, slot: usize, leading: bool) {
        // A task that led on its runtime's reactor gives the role up too.
        let on_reactor = st.lead.reactor == Some(slot as u16);
        let leading = leading || on_reactor;
        if on_reactor {
            st.lead.reactor = None;
            st.lead.held = false;
        }
        if let Some(s) = st.slots.get_mut(slot) {
            s.serial = 0;
            s.op = None;
            s.cell = J::Cell::default();
            s.conn_errors = 0;
            s.deadline = None;
            s.done = false;
            s.panic = None;
            s.waiting = false;
            s.task = false;
            s.on_reactor = false;
        }
        if let Some(w) = self.task_wakers.get(slot) {
            // Under the state lock: the next owner's waker is set under it.
            *relock(w.lock()) = None;
        }
        st.lead.active &= !bit(slot);
        let was_held_for = st.lead.hold_for != 0;
        st.lead.hold_for &= !bit(slot);
        // The last owner the reactor leader waits for to take its outcome:
        // a leader that held its turn for them (or was not woken by their
        // requests, see `submit`) turns now, and writes their next requests
        // with its own in one write per socket.
        let held = if was_held_for && st.lead.hold_for == 0 && st.lead.queued {
            st.lead
                .reactor
                .and_then(|l| self.take_waker(usize::from(l)))
        } else {
            None
        };
        st.free.push(slot as u16);
        // One thread that may take the slot: an acquisition only while more
        // than the reserved slots are free (a woken thread that finds the
        // slot taken means another took it: no wake-up is lost).
        if st.free.len() > RESERVED_SLOTS && st.lead.slot_waiters > 0 {
            self.slot_free.notify_one();
        } else if st.lead.slot_waiters_urgent > 0 {
            self.slot_free_urgent.notify_one();
        }
        // The first task in line that may take the slot tries again (out of
        // the queue: it queues again if another took the slot first).
        let next_task = st.next_slot_task();
        if leading {
            st.lead.leader = false;
            st.lead.driver = false;
            // What the last pass queued goes out now, not when the next
            // leader polls.
            st.flush_all();
        }
        let mut wake = core::mem::take(&mut st.lead.to_wake);
        // Its owner is this thread: it needs no wake-up.
        wake &= !bit(slot);
        let mut kick = self.hand_off(&mut st, &mut wake);
        // A task is not the last thread out of a blocking call, which
        // writes what is still queued (a release behind a handshake): the
        // driver does it.
        kick |= on_reactor && st.lead.active == 0 && st.unwritten() != Unwritten::Nothing;
        st.check_leadership();
        drop(st);
        self.wake(wake);
        if let Some(w) = held {
            w.wake();
        }
        if let Some(w) = next_task {
            w.wake();
        }
        if kick {
            self.kick.kick();
        }
    }

    /// With no leader and operations still running, someone must poll for
    /// them: an owner thread that waits takes the role when it wakes (added
    /// to `wake`), else a task that leads on its runtime's reactor (also
    /// added to `wake`, and watched by the driver); without either, the
    /// driver thread does (true: kick it once the lock is released).
    pub(super) fn hand_off(&self, st: &mut State<J>, wake: &mut u64) -> bool {
        if st.lead.leader || st.lead.active == 0 {
            return false;
        }
        let thread = bits(st.lead.active)
            .find(|&i| st.slots[i].waiting && !st.slots[i].done && !st.slots[i].task);
        if let Some(next) = thread {
            *wake |= bit(next);
            return false;
        }
        // Else a task that leads on its runtime's reactor when woken. (It
        // may be kept without being polled: the driver watches, and leads
        // if it has not taken the role within `WATCH_PERIOD`.)
        let task = bits(st.lead.active).find(|&i| st.slots[i].on_reactor && !st.slots[i].done);
        match task {
            Some(next) => {
                *wake |= bit(next);
                st.lead.handed_at = Some(StdInstant::now());
                // The watch starts afresh for the task the role goes to.
                st.lead.watch = None;
                // The driver, which watches, learns it (a wake-up only if
                // it sleeps longer than a watch period).
                self.kick.wake_by(StdInstant::now() + WATCH_PERIOD);
                false
            }
            None => true,
        }
    }

    /// The waker a task left in `slot`, taken (so that it is woken once).
    pub(super) fn take_waker(&self, slot: usize) -> Option<Waker> {
        self.task_wakers
            .get(slot)
            .and_then(|w| relock(w.lock()).take())
    }

    /// Wakes the owners of the slots in `mask`: a task by its waker, a
    /// thread by its condition variable. (Called without the state lock; a
    /// slot freed and taken again meanwhile gets a spurious wake-up, which
    /// every owner tolerates.)
    pub(super) fn wake(&self, mask: u64) {
        for i in bits(mask) {
            match self.take_waker(i) {
                Some(waker) => waker.wake(),
                None => {
                    if let Some(cv) = self.wakeups.get(i) {
                        cv.notify_one();
                    }
                }
            }
        }
    }

    /// One round as the leader: write what is queued, poll without the state
    /// lock (after waking the owners of finished operations), then finish
    /// connects, hand the replies of ready sockets to their operations, and
    /// let every running operation check its deadlines and send. Returns at
    /// once if the leader's own operation (`own`) is done; polls at most
    /// until `cap`.
    pub(super) fn lead<'a>(
        &'a self,
        mut st: MutexGuard<'a, State<J>>,
        own: Option<usize>,
        cap: Option<StdInstant>,
    ) -> MutexGuard<'a, State<J>> {
        // Whoever leads, the role is no longer waiting for a task to take it.
        st.lead.handed_at = None;
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
        let mut deadline = match (st.next_deadline(self.epoch), cap) {
            (Some(d), Some(c)) => Some(d.min(c)),
            (d, c) => d.or(c),
        };
        st.lead.polling = true;
        // A kick of the driver (work of its own) must end its poll too.
        if self.kick.set_polling(st.lead.driver) && st.lead.driver {
            deadline = Some(StdInstant::now());
        }
        let wake = core::mem::take(&mut st.lead.to_wake);
        st.check_leadership();
        drop(st);
        // Woken once the lock is free, so that they do not wake only to
        // wait for it.
        self.wake(wake);
        let mut ready = 0u64;
        let mut closed = 0u64;
        {
            let mut poller = relock(self.poller.lock());
            let Poller { poll, events, .. } = &mut *poller;
            let timeout = deadline.map(|d| d.saturating_duration_since(StdInstant::now()));
            // Spurious wake-ups and EINTR are harmless: everything is re-checked.
            if let Err(e) = poll.poll(events, timeout) {
                if e.kind() != io::ErrorKind::Interrupted {
                    // Not expected (the poll's descriptor is ours); whatever
                    // it is, the leader must not spin on it: it waits a
                    // little, and the operations' deadlines still end them.
                    log::warn!("redlock: poll failed: {e}");
                    events.clear();
                    std::thread::sleep(timeout.unwrap_or(POLL_RETRY).min(POLL_RETRY));
                }
            }
            for event in events.iter() {
                if event.token() != WAKE {
                    ready |= bit(event.token().0);
                    if event.is_read_closed() || event.is_error() {
                        closed |= bit(event.token().0);
                    }
                }
            }
        }
        let mut st = self.lock();
        st.lead.polling = false;
        st.lead.woken = false;
        let _ = self.kick.set_polling(false);
        let now = self.now();
        st.progress_connects();
        st.read_ready(ready, closed, now);
        // The sessions' deadlines before the operations' (same `now`).
        st.expire_sessions(now);
        st.pump_all(now);
        st.flush_all();
        st.check_leadership();
        st
    }
}

/// Frees the slot (and the leader role) if the caller unwinds.
pub(super) struct SlotGuard<'a, J: Job> {
    pub(super) transport: &'a Transport<J>,
    pub(super) slot: usize,
    pub(super) leading: bool,
    pub(super) armed: bool,
}

impl<J: Job> Drop for SlotGuard<'_, J> {
    fn drop(&mut self) {
        if self.armed {
            let mut st = self.transport.lock();
            if self.leading {
                st.lead.polling = false;
                st.lead.woken = false;
                st.lead.driver = false;
            }
            self.transport.finish(st, self.slot, self.leading);
        }
    }
}
