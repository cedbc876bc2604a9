//! Operations owned by tasks (the async API) rather than threads, tasks
//! that lead on their runtime's reactor, and the driver thread's turns.
//!
//! A task must never block. It moves its operation into a slot, queues its
//! first requests, and writes them on its own thread when nothing else is
//! in flight (no wake-up stands between a lone call and its requests on
//! the wire; with other operations in flight the leader writes them in one
//! batch per socket, and so does its own turn while owners of operations
//! just done have yet to run), leaves a [`Waker`] in the slot and returns
//! `Pending`.
//!
//! - **On a reactor** (`reactor.rs`; features `tokio`, `async-io`): a task
//!   that polls its ticket while nobody leads takes the role without
//!   blocking: each poll makes turns (a zero-timeout poll, every operation
//!   driven) while there is something to do, then registers its waker with
//!   the runtime's reactor. Tasks that submit meanwhile wake it once per
//!   turn. While the owners of the operations its last turns finished have
//!   yet to run (`hold_for`; on a multi-thread runtime, on other workers
//!   too), it holds: it returns without a turn, the last of them wakes it,
//!   and their next requests leave with the rest in one write per socket
//!   (the driver ends a hold when a request queued meanwhile has waited a
//!   sixteenth of its time). When its own call ends (or its future is
//!   dropped) the role goes to a waiting thread, else to another task
//!   (`hand_off`).
//! - **Otherwise** whoever leads (a blocking caller of the same client, or
//!   else the client's driver thread) drives the task's operation with
//!   every other one and wakes the task once, when it is done.
//!
//! The task's next poll takes the outcome and frees the slot.
//!
//! The driver thread leads while operations run that no waiting thread or
//! task would lead for, and otherwise sleeps on its [`Kick`]: a task that
//! submits with nobody leading kicks it (unless it leads itself), a leader
//! polling is woken through the mio waker (once per poll, however many
//! tasks submit), and a blocking leader whose own call ends with only
//! tasks' operations running hands the role on (`hand_off`). While a task
//! leads on a reactor (or was handed the role), the driver keeps the time
//! and watches (`watch`, in `watch.rs`): it wakes the task when a deadline is due, and
//! leads in its place if it owes work and makes no turn for a whole
//! `WATCH_PERIOD` (no look at the poll, when replies, a deadline or the
//! role are owed: a future kept but not awaited).

use alloc::sync::Arc;
use alloc::task::Wake;
use core::marker::PhantomData;
use core::sync::atomic::AtomicBool;
use core::task::Poll as TaskPoll;

use super::*;

/// An operation of kind `K` submitted by a task: its slot and the serial
/// it runs under. Its outcome comes back as `K`'s.
pub(crate) struct Ticket<K> {
    slot: u16,
    serial: u64,
    kind: PhantomData<fn() -> K>,
}

// By hand: derived, they would ask the same of `K`.
impl<K> Clone for Ticket<K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for Ticket<K> {}

impl<K> PartialEq for Ticket<K> {
    fn eq(&self, other: &Self) -> bool {
        (self.slot, self.serial) == (other.slot, other.serial)
    }
}

impl<K> Eq for Ticket<K> {}

impl<K> core::fmt::Debug for Ticket<K> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Ticket")
            .field("slot", &self.slot)
            .field("serial", &self.serial)
            .finish()
    }
}

/// What became of an operation whose task went away.
#[derive(Debug)]
pub(crate) enum Abandoned<O> {
    /// It was done already: its output, for the caller to clean up after
    /// (an acquired lock to release).
    Done(O),
    /// It runs on, told to wind down; its slot now wakes the adopter's
    /// waker, and the adopter polls the ticket to its end.
    Adopted,
    /// It had panicked: nothing is left of it.
    Gone,
}

/// A task waiting for a free slot.
#[derive(Debug)]
pub(crate) struct SlotTask {
    /// The waiter's id (queued once, however often it asks).
    id: u64,
    /// Its operation may take a reserved slot ([`Kind::URGENT`]).
    pub(super) urgent: bool,
    pub(super) waker: Waker,
}

/// Wakes the driver thread when it sleeps waiting for work (a condition
/// variable with a flag, so that a kick before the wait is not lost), or
/// polls as the leader (through the poll's waker). As a [`Waker`] it is
/// the waker of what the driver waits for: the operations it adopted, a
/// free slot.
#[derive(Debug)]
pub(crate) struct Kick {
    kicked: Mutex<Kicked>,
    cv: Condvar,
    /// The driver polls as the leader.
    polling: AtomicBool,
    poll_waker: Arc<mio::Waker>,
}

/// The kick's flag, and how long the driver waits.
#[derive(Debug, Default)]
struct Kicked {
    kicked: bool,
    /// The driver waits in [`Kick::wait`]: until this (`None`: until
    /// kicked). `None` while it does not wait.
    waiting: Option<Option<StdInstant>>,
}

impl Kick {
    pub(super) fn new(poll_waker: Arc<mio::Waker>) -> Kick {
        Kick {
            kicked: Mutex::new(Kicked::default()),
            cv: Condvar::new(),
            polling: AtomicBool::new(false),
            poll_waker,
        }
    }

    /// Set by the leader around its poll: whether it is the driver. True if
    /// the driver was kicked meanwhile (it then polls without waiting).
    pub(super) fn set_polling(&self, driver: bool) -> bool {
        // Under the kick's lock: a kick either sees `polling` or is seen here.
        let kicked = relock(self.kicked.lock());
        self.polling.store(driver, Ordering::SeqCst);
        kicked.kicked
    }

    /// Takes a pending kick (the driver, before it reads its inbox).
    pub(crate) fn take(&self) -> bool {
        core::mem::take(&mut relock(self.kicked.lock()).kicked)
    }

    /// Wakes the driver if it waits or polls (or makes its next wait return
    /// at once).
    pub(crate) fn kick(&self) {
        let polling = {
            let mut kicked = relock(self.kicked.lock());
            kicked.kicked = true;
            // Read under the kick's lock: a kick either sees the driver
            // polling, or is seen by `set_polling` before it polls.
            self.polling.load(Ordering::SeqCst)
        };
        self.cv.notify_one();
        if polling {
            // A spurious end of the poll at worst: everything is re-checked.
            if let Err(e) = self.poll_waker.wake() {
                log::warn!("redlock: cannot wake the poll: {e}");
            }
        }
    }

    /// Makes the driver look at the time again if it would otherwise wake
    /// after `at` (a deadline of an operation that a task leads on its
    /// runtime's reactor: the driver keeps its time). Costs a wake-up of
    /// the driver only when the deadline is earlier than its own, or when
    /// it does not wait (it then looks again before it waits).
    pub(crate) fn wake_by(&self, at: StdInstant) {
        let mut kicked = relock(self.kicked.lock());
        let later = match kicked.waiting {
            None => true,
            Some(None) => true,
            Some(Some(until)) => at < until,
        };
        if later && !kicked.kicked {
            kicked.kicked = true;
            drop(kicked);
            self.cv.notify_one();
        }
    }

    /// Waits until kicked (taking the kick) or until `until`.
    pub(crate) fn wait(&self, until: Option<StdInstant>) {
        let mut kicked = relock(self.kicked.lock());
        kicked.waiting = Some(until);
        while !kicked.kicked {
            match until {
                None => kicked = relock(self.cv.wait(kicked)),
                Some(t) => {
                    let now = StdInstant::now();
                    if now >= t {
                        break;
                    }
                    kicked = relock(self.cv.wait_timeout(kicked, t - now)).0;
                }
            }
        }
        kicked.kicked = false;
        kicked.waiting = None;
    }
}

impl Wake for Kick {
    fn wake(self: Arc<Self>) {
        self.kick();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.kick();
    }
}

impl<J: Job> Transport<J> {
    /// The driver thread's kick, also the waker of what it adopts.
    pub(crate) fn kick(&self) -> &Arc<Kick> {
        &self.kick
    }

    /// Wakes the driver thread for new work of its own (an operation to
    /// start, a timer that changed): also out of a poll, if it leads.
    pub(crate) fn kick_driver(&self) {
        self.kick.kick();
    }

    /// Host names are to be looked up again (see
    /// [`resolve_wanted_names`](Transport::resolve_wanted_names)).
    pub(crate) fn lookups_wanted(&self) -> bool {
        self.resolve_wanted.load(Ordering::Relaxed) != 0
    }

    /// The host names to look up again (bit i = server i), taken: whoever
    /// takes them looks them up with
    /// [`resolve_names`](Transport::resolve_names).
    pub(crate) fn take_lookups(&self) -> u16 {
        self.resolve_wanted.swap(0, Ordering::Relaxed)
    }

    /// Asks for the host names in `mask` to be looked up again.
    pub(crate) fn want_lookups(&self, mask: u16) {
        self.resolve_wanted.fetch_or(mask, Ordering::Relaxed);
    }

    /// The driver's turn failed (a waker that panicked while it led): the
    /// poll flags are reset, the role kept, so that the next turn goes on.
    pub(crate) fn driver_turn_failed(&self) {
        let mut st = self.lock();
        if st.lead.driver {
            st.lead.polling = false;
            st.lead.woken = false;
            let _ = self.kick.set_polling(false);
        }
    }

    /// The driver thread is gone (it failed): it gives up the role if it
    /// had it, so that a blocking caller or a new driver takes over.
    pub(crate) fn driver_gone(&self) {
        let mut st = self.lock();
        if st.lead.driver {
            st.lead.polling = false;
            st.lead.woken = false;
            let _ = self.kick.set_polling(false);
            self.step_down(st);
        }
    }

    /// Nothing runs and nobody leads.
    pub(crate) fn idle(&self) -> bool {
        let st = self.lock();
        st.lead.active == 0 && !st.lead.leader
    }

    /// Starts `op` for a task: its first requests are queued, and written
    /// now from this thread when nothing else is in flight and no owner of
    /// a done operation has yet to run (else by the leader's next turn, see
    /// the module's docs). `Err(op)` when every slot is taken: then
    /// `waker` is woken when one is freed (queued once per `waiter`, the
    /// caller's id, however often it asks).
    ///
    /// `may_lead`: the task will poll its ticket with
    /// [`poll_ticket`](Transport::poll_ticket) at once, and may lead there
    /// on its runtime's reactor; the driver is not woken for it.
    pub(crate) fn submit<K: Kind<J>>(
        &self,
        op: K,
        waker: &Waker,
        waiter: u64,
        may_lead: bool,
    ) -> Result<Ticket<K>, K> {
        let mut st = self.lock();
        let urgent = K::URGENT;
        let Some(slot) = st.take_slot(urgent) else {
            match st.slot_tasks.iter_mut().find(|t| t.id == waiter) {
                Some(t) => t.waker.clone_from(waker),
                None => st.slot_tasks.push_back(SlotTask {
                    id: waiter,
                    urgent,
                    waker: waker.clone(),
                }),
            }
            return Err(op);
        };
        if !st.slot_tasks.is_empty() {
            st.slot_tasks.retain(|t| t.id != waiter);
        }
        st.serial += 1;
        let serial = st.serial;
        let s = &mut st.slots[slot];
        s.serial = serial;
        s.op = Some(op.into_job());
        s.task = true;
        s.waiting = true;
        *relock(self.task_wakers[slot].lock()) = Some(waker.clone());
        st.lead.active |= bit(slot);
        st.pump(slot, self.now());
        let mut kick = false;
        let mut deadline = None;
        let mut leader_waker = None;
        if st.lead.polling {
            // Operations are in flight: the requests stay queued, and the
            // leader, woken once per poll however many tasks submit,
            // writes them with the others in one write per socket (as it
            // does for blocking callers); it also learns the new deadlines.
            self.wake_poll(&mut st);
        } else if let Some(leader) = st.lead.reactor {
            // A task leads on its runtime's reactor, and waits for events:
            // it is woken (once per turn, however many tasks queue) to
            // write what is queued with the rest, in one write per socket,
            // as the leader of `lead` does. The driver, which keeps the
            // time, learns the deadline.
            // While owners of done operations have yet to take their
            // outcomes (woken by the same replies, about to queue their
            // next requests), the last of them wakes the leader instead
            // (`finish`): one wake-up, and one write, for all of them.
            let mut wake_leader = false;
            if !st.lead.queued {
                st.lead.queued = true;
                wake_leader = st.lead.hold_for == 0;
            }
            deadline = st.slots[slot].deadline.map(|d| std_instant(self.epoch, d));
            if st.holding() {
                // The driver, which keeps the time, ends the hold when this
                // request has waited its share (a wake-up only if it sleeps
                // longer); past that, this task wakes the leader itself.
                match st.unsent_until(self.epoch) {
                    Some(at) if at <= StdInstant::now() => wake_leader = true,
                    at => deadline = [deadline, at].into_iter().flatten().min(),
                }
            }
            if wake_leader {
                leader_waker = self.take_waker(usize::from(leader));
            }
        } else if !st.lead.leader {
            // Nothing in flight: written now, from this thread (no wake-up
            // before the requests are on the wire); the driver only reads,
            // unless the task leads itself when it polls its ticket. Not
            // while other tasks' operations are done and their owners have
            // yet to run (woken by the same replies, about to queue their
            // next requests): the task leads when it polls its ticket, and
            // lets them run first (`lead_on_reactor`), so that all go out
            // in one write per socket. The requests are owed to its turn
            // then (`queued`: it turns, whether it holds first or not).
            if may_lead && st.lead.hold_for != 0 {
                st.lead.queued = true;
            } else {
                st.flush_all();
            }
            kick = !st.slots[slot].done && !may_lead;
        }
        // (A leader between two polls writes what was queued before its
        // next poll.)
        st.check_leadership();
        drop(st);
        if kick {
            self.kick.kick();
        }
        if let Some(w) = leader_waker {
            w.wake();
        }
        if let Some(at) = deadline {
            self.kick.wake_by(at);
        }
        Ok(Ticket {
            slot: slot as u16,
            serial,
            kind: PhantomData,
        })
    }

    /// The outcome of `ticket`'s operation once it is done (its slot is
    /// then freed, and the ticket is spent); until then the waker of `cx`
    /// is kept to be woken when it is. A panic of the operation resumes
    /// here.
    ///
    /// `may_lead`: the task may lead the transport on its runtime's
    /// reactor (a task of the async API; not the driver thread). It then
    /// drives every operation whose replies arrived, its own and others',
    /// whenever it is polled while nobody else leads, and is woken by the
    /// runtime when the poll has events (see `reactor.rs`).
    pub(crate) fn poll_ticket<K: Kind<J>>(
        &self,
        ticket: Ticket<K>,
        cx: &mut Context<'_>,
        may_lead: bool,
    ) -> TaskPoll<K::Out> {
        let slot = usize::from(ticket.slot);
        let mut st = self.lock();
        if st.slots.get(slot).is_none_or(|s| s.serial != ticket.serial) {
            unreachable!("a ticket polled after its outcome was taken");
        }
        let mut kick = false;
        if may_lead && !st.slots[slot].done {
            // A task that may lead: the role may be handed to it when it is
            // free (`hand_off`), whoever leads now.
            st.slots[slot].on_reactor = true;
            (st, kick) = self.lead_on_reactor(st, slot, cx);
        }
        let leading = st.lead.reactor == Some(slot as u16);
        let s = &mut st.slots[slot];
        if !s.done {
            {
                let mut w = relock(self.task_wakers[slot].lock());
                if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    *w = Some(cx.waker().clone());
                }
            }
            // The owners of what the turns finished.
            let wake = core::mem::take(&mut st.lead.to_wake);
            let deadline = if leading {
                st.next_deadline(self.epoch)
            } else {
                None
            };
            st.check_leadership();
            drop(st);
            self.wake(wake);
            if kick {
                self.kick.kick();
            }
            if let Some(at) = deadline {
                self.kick.wake_by(at);
            }
            return TaskPoll::Pending;
        }
        let (outcome, panic) = (K::take(&mut s.cell), s.panic.take());
        self.finish(st, slot, leading);
        match (outcome, panic) {
            (_, Some(payload)) => resume_unwind(payload),
            (Some(outcome), None) => TaskPoll::Ready(outcome),
            (None, None) => unreachable!("an operation done without an outcome"),
        }
    }

    /// The task that owns `ticket` went away. A done operation hands back
    /// its output; a running one is told to wind down ([`Job::abandon`]),
    /// and from now on its slot wakes `adopter`, which must poll the ticket
    /// to its end (so that what it still sends, the releases of an
    /// abandoned acquisition, goes out and its slot is freed).
    pub(crate) fn abandon<K: Kind<J>>(
        &self,
        ticket: Ticket<K>,
        adopter: &Waker,
    ) -> Abandoned<K::Out> {
        let slot = usize::from(ticket.slot);
        let mut st = self.lock();
        let Some(s) = st.slots.get_mut(slot).filter(|s| s.serial == ticket.serial) else {
            unreachable!("a ticket abandoned after its outcome was taken");
        };
        if s.done {
            let (outcome, panic) = (K::take(&mut s.cell), s.panic.take());
            self.finish(st, slot, false);
            return match (outcome, panic) {
                (Some(outcome), None) => Abandoned::Done(outcome),
                _ => Abandoned::Gone,
            };
        }
        let now = self.now();
        s.call(|op| op.abandon(now));
        // The driver adopts it: it cannot lead on a reactor.
        s.on_reactor = false;
        *relock(self.task_wakers[slot].lock()) = Some(adopter.clone());
        st.pump(slot, now);
        st.flush_all();
        // Its deadlines changed (a backoff ended early): a poll in progress
        // learns them.
        self.wake_poll(&mut st);
        let mut wake = 0;
        if st.lead.reactor == Some(slot as u16) {
            // Its task led on its runtime's reactor, and goes away: the
            // role is handed on (to a waiting thread, another task, or the
            // driver), so that no operation waits for a task that left.
            st.lead.reactor = None;
            st.lead.held = false;
            st.lead.leader = false;
            wake = core::mem::take(&mut st.lead.to_wake);
            let _ = self.hand_off(&mut st, &mut wake);
        }
        let kick = !st.lead.leader;
        st.check_leadership();
        drop(st);
        self.wake(wake);
        if kick {
            self.kick.kick();
        }
        Abandoned::Adopted
    }

    /// The task of `slot` leads on its runtime's reactor, if nobody else
    /// leads and it has a reactor this build supports: while the poll has
    /// events (or a deadline is due), it makes turns as a blocking leader
    /// would (without waiting), until its own operation is done or nothing
    /// is left to do now; then its waker is registered with the reactor.
    /// Or it holds (once, without a turn, not registered with the reactor)
    /// while the owners its last turns woke have yet to run: the last of
    /// them wakes it, or the driver when a deadline (a request's cork
    /// share among them) is due.
    /// True with the guard: the driver must lead instead (no reactor
    /// serves this task, or it failed).
    fn lead_on_reactor<'a>(
        &'a self,
        mut st: MutexGuard<'a, State<J>>,
        slot: usize,
        cx: &mut Context<'_>,
    ) -> (MutexGuard<'a, State<J>>, bool) {
        let me = slot as u16;
        if st.lead.leader && st.lead.reactor != Some(me) {
            // A thread, the driver or another task leads.
            return (st, false);
        }
        // Only the leader uses the poller: nobody else holds it now.
        let mut poller = relock(self.poller.lock());
        let Poller {
            poll,
            events,
            reactor,
            missed,
        } = &mut *poller;
        // The reactor there if it serves this task, else one made for it;
        // none: the driver leads for it (the one there, if any, is kept
        // for the tasks it serves).
        let served = reactor.as_ref().is_some_and(Reactor::serves_current)
            || Reactor::current(&st.registry)
                .map(|new| *reactor = Some(new))
                .is_some();
        let (true, Some(r)) = (served, reactor.as_ref()) else {
            st.slots[slot].on_reactor = false;
            let driver = self.give_up_reactor(&mut st, me);
            return (st, driver);
        };
        st.slots[slot].on_reactor = true;
        let fresh = st.lead.reactor != Some(me);
        if fresh {
            // Taking the role: the driver watches from now on (a wake-up
            // only if it is not watching already), and what it saw of the
            // last leader is moot.
            self.kick.wake_by(StdInstant::now() + WATCH_PERIOD);
            st.lead.watch = None;
            st.lead.held = false;
        }
        st.lead.leader = true;
        st.lead.reactor = Some(me);
        st.lead.handed_at = None;
        let now = StdInstant::now();
        if st.lead.hold_for != 0
            && !st.lead.held
            && !st.errors_untold()
            && [st.next_deadline(self.epoch), st.unsent_until(self.epoch)]
                .into_iter()
                .flatten()
                .all(|d| d > now)
        {
            // Tasks whose operations are done have yet to run (woken by the
            // replies of the last turn, they are about to queue their next
            // requests): they run first. The last of them to take its
            // outcome wakes this task (`finish`), which then turns, whoever
            // has queued by then, so that their requests and this one's go
            // out in one write per socket and the servers read them as one
            // batch. On a multi-thread runtime they run on other workers
            // too: only that wake-up says they all have. Once per hold: a
            // deadline (the driver, which keeps the time, wakes this task)
            // or an error is seen to at the next poll. (Work owed: should
            // this task, or one of them, not be polled again, the driver,
            // which watches, leads in its place.)
            st.lead.held = true;
            st.lead.queued = true;
            if let Some(at) = st.unsent_until(self.epoch) {
                self.kick.wake_by(at);
            }
            return (st, false);
        }
        st.lead.held = false;
        let exact = r.reports_every_event();
        loop {
            // First the reactor's word (registering the task when it has
            // none), then a turn. A reactor that reports every event (see
            // `Reactor::reports_every_event`) is believed: no turn when it
            // has none, unless work is owed (requests others queued, a
            // failed send, a due deadline; such a turn writes and drives,
            // and reads only as said below). Another one may say "not yet"
            // of an event it has just delivered (async-io, for one of the
            // tick it was registered in): after it, the poll itself is
            // asked (a turn, whatever the reactor said): what arrived
            // before the registration is taken now, and what arrives after
            // it wakes the task.
            let ready = match r.poll_ready(cx) {
                Ok(ready) => ready,
                Err(e) => {
                    log::warn!("redlock: the runtime's reactor failed ({e}); the driver leads");
                    *reactor = None;
                    st.slots[slot].on_reactor = false;
                    let driver = self.give_up_reactor(&mut st, me);
                    return (st, driver);
                }
            };
            // The poll is asked when the reactor has news or cannot be
            // believed, before a deadline or an error is acted on (a reply
            // that arrived in time is read first), and after a look that
            // failed. Otherwise it is not: an exact reactor that says
            // "nothing yet" has delivered nothing since its readiness was
            // last taken (just before the last look), any event in the
            // poll since then is queued in the reactor's own epoll, and it
            // wakes this task (registered just now) for it. So a turn for
            // queued work only writes, and what has arrived is read when
            // the reactor delivers it (one `epoll_wait` less per call).
            // (The deadlines are looked at only when the reactor's word
            // does not decide.)
            let look = ready
                || !exact
                || *missed
                || st.errors_untold()
                || st
                    .next_deadline(self.epoch)
                    .is_some_and(|d| d <= StdInstant::now());
            if !look && !st.lead.queued {
                break;
            }
            let events = self.turn(&mut st, poll, events, look.then_some(missed));
            if st.slots[slot].done || (!ready && !events) {
                // Done, or registered with nothing pending: the reactor
                // wakes this task on an event, the driver when a deadline
                // is due.
                break;
            }
        }
        (st, false)
    }

    /// The task of slot `me` no longer leads (or never did): true if the
    /// driver must lead instead.
    fn give_up_reactor(&self, st: &mut State<J>, me: u16) -> bool {
        if st.lead.reactor == Some(me) {
            st.lead.reactor = None;
            st.lead.held = false;
            st.lead.leader = false;
        }
        if !st.lead.leader {
            // Had the role been handed to this task, it is not taken: the
            // driver leads (at once, not a watch period later).
            st.lead.handed_at = None;
        }
        !st.lead.leader && st.lead.active != 0
    }

    /// One turn of a task leading on its runtime's reactor: as a round of
    /// [`lead`](Transport::lead), with the poll's events taken without
    /// waiting if it may `look` (else none are taken: the reactor has
    /// delivered none since the last look, and wakes the task for any).
    /// A look that fails sets the flag it is given (a look is owed: the
    /// reactor's readiness was taken), one that succeeds clears it. True if
    /// there were events.
    fn turn(
        &self,
        st: &mut State<J>,
        poll: &mut Poll,
        events: &mut Events,
        look: Option<&mut bool>,
    ) -> bool {
        st.lead.queued = false;
        // A hold is over (see `lead_on_reactor`): the owners this turn
        // finishes are the next one's.
        st.lead.hold_for = 0;
        st.flush_all();
        if st.errors_untold() {
            st.pump_all(self.now());
        }
        let mut mask = 0u64;
        let mut closed = 0u64;
        let mut any = false;
        // One event per socket and the waker at most (16 servers): the 64
        // events hold them all, so a look leaves none behind the readiness
        // the reactor took.
        let polled = if look.is_some() {
            poll.poll(events, Some(StdDuration::ZERO))
        } else {
            events.clear();
            Ok(())
        };
        if let Some(missed) = look {
            *missed = polled.is_err();
            if !*missed {
                st.lead.looks = st.lead.looks.wrapping_add(1);
            }
        }
        match polled {
            Ok(()) => {
                for event in events.iter() {
                    any = true;
                    if event.token() != WAKE {
                        mask |= bit(event.token().0);
                        if event.is_read_closed() || event.is_error() {
                            closed |= bit(event.token().0);
                        }
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => any = true,
            Err(e) => log::warn!("redlock: poll failed: {e}"),
        }
        let now = self.now();
        st.progress_connects();
        st.read_ready(mask, closed, now);
        st.expire_sessions(now);
        st.pump_all(now);
        st.flush_all();
        st.lead.turns = st.lead.turns.wrapping_add(1);
        any
    }

    /// A task that waited for a slot went away: the next one in line tries
    /// in its place if a slot is free (the wake-up it may have been given,
    /// out of the queue, is not lost with it).
    pub(crate) fn cancel_wait(&self, waiter: u64) {
        let mut st = self.lock();
        if !st.slot_tasks.is_empty() {
            st.slot_tasks.retain(|t| t.id != waiter);
        }
        let next = st.next_slot_task();
        drop(st);
        if let Some(w) = next {
            w.wake();
        }
    }
}
