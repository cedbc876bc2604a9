//! The client's driver thread, turn by turn: it leads while operations run
//! that no waiting thread or task leads for, watches a task that leads on
//! its runtime's reactor (keeping the time for it, and leading in its place
//! should it not turn), and otherwise steps down and sleeps on its
//! [`Kick`]. See `task.rs` for the tasks' side.

use super::*;

impl<J: Job> Transport<J> {
    /// One turn of the driver thread: it leads one round (polling at most
    /// until `cap`) while operations run that no waiting thread leads for;
    /// otherwise it hands the role back and sleeps until kicked or `cap`.
    ///
    /// With nothing running it also does what the last thread out of a
    /// blocking call does: writes what is still queued (behind a connect or
    /// a handshake, or on a socket that would have blocked) for a bounded
    /// time.
    pub(crate) fn drive(&self, cap: Option<StdInstant>) {
        let mut st = self.lock();
        if st.lead.reactor.is_some() || (!st.lead.leader && st.lead.handed_at.is_some()) {
            self.watch(st, cap);
            return;
        }
        if st.lead.driver
            && bits(st.lead.active).any(|i| {
                let s = &st.slots[i];
                !s.done && ((s.waiting && !s.task) || s.on_reactor)
            })
            && !bits(st.lead.active).any(|i| st.slots[i].task && !st.slots[i].on_reactor)
        {
            // Only calls whose owners can lead run: blocking calls (one of
            // their threads leads, as it would alone, without a wake-up per
            // call) and tasks on a reactor. Not the driver.
            self.step_down(st);
            self.kick.wait(cap);
            return;
        }
        let free_to_lead = !st.lead.leader || st.lead.driver;
        let mut until = cap;
        if st.lead.active != 0 {
            st.lead.drain_since = None;
        } else if free_to_lead {
            let since = *st.lead.drain_since.get_or_insert_with(StdInstant::now);
            let drain = match st.unwritten() {
                Unwritten::Nothing => None,
                Unwritten::Blocked => Some(since + st.config.connect_timeout),
                Unwritten::Release => Some(since + st.config.delivery_grace),
                Unwritten::Held => Some(since + HELD_GRACE),
            };
            match drain.filter(|&d| StdInstant::now() < d) {
                Some(d) => until = Some(until.map_or(d, |c| c.min(d))),
                None => {
                    // Drained, or given up: the next time gets its own grace.
                    st.lead.drain_since = None;
                    until = None;
                }
            }
        }
        if free_to_lead && (st.lead.active != 0 || until.is_some()) {
            st.lead.leader = true;
            st.lead.driver = true;
            let st = self.lead(st, None, until.or(cap));
            if st.lead.active == 0 && st.unwritten() == Unwritten::Nothing {
                self.step_down(st);
            }
            return;
        }
        // Lingering after tasks led: looking again within a watch period.
        let now = StdInstant::now();
        let linger = st.lead.linger_until.filter(|&l| l > now);
        let cap = match linger {
            Some(_) => Some(cap.map_or(now + WATCH_PERIOD, |c| c.min(now + WATCH_PERIOD))),
            None => cap,
        };
        if st.lead.driver {
            self.step_down(st);
        } else {
            drop(st);
        }
        self.kick.wait(cap);
    }

    /// The driver's turn while a task leads on its runtime's reactor, or
    /// was handed the role: it keeps the time (it wakes the leading task
    /// when a deadline is due) and watches: a task owed work that makes no
    /// turn for a whole `WATCH_PERIOD` (no look at the poll, when one is
    /// owed) is not being polled (a future kept but not awaited), and the
    /// driver leads in its place, so that no operation waits for it.
    fn watch(&self, mut st: MutexGuard<'_, State<J>>, cap: Option<StdInstant>) {
        let now = StdInstant::now();
        st.lead.linger_until = Some(now + LINGER);
        let next = st.next_deadline(self.epoch);
        let due = next.is_some_and(|d| d <= now);
        // Work owed to whoever leads: requests queued for its turn (a turn
        // writes them), or a look at the poll: a deadline due, a failed
        // send to tell, the role itself (handed, not taken), or events
        // waiting in the poll (replies to read: looked at without taking
        // them; a turn that only writes leaves them there).
        let look_owed = due
            || st.errors_untold()
            || st.lead.reactor.is_none()
            || relock(self.peek.lock()).waiting(&st.registry);
        let owed = look_owed || st.lead.queued;
        let mut nudge = None;
        if owed {
            let (turns, looks) = (st.lead.turns, st.lead.looks);
            match st.lead.watch {
                // The same kind of work owed, or less (a look then owed
                // counts from now), and no turn (no look) since.
                Some((t, l, looked_for, since))
                    if (looked_for || !look_owed)
                        && (if look_owed { l == looks } else { t == turns }) =>
                {
                    if now >= since + WATCH_PERIOD {
                        log::debug!("redlock: a task that leads does not turn; the driver leads");
                        if let Some(r) = st.lead.reactor.take() {
                            if let Some(s) = st.slots.get_mut(usize::from(r)) {
                                s.on_reactor = false;
                            }
                        }
                        if let Some(at) = st.lead.handed_at.take() {
                            // Handed and never taken: not offered again.
                            let _ = at;
                            for i in bits(st.lead.active) {
                                if st.slots[i].task {
                                    st.slots[i].on_reactor = false;
                                }
                            }
                        }
                        st.lead.watch = None;
                        st.lead.held = false;
                        st.lead.hold_for = 0;
                        st.lead.leader = true;
                        st.lead.driver = true;
                        drop(self.lead(st, None, cap));
                        return;
                    }
                }
                _ => st.lead.watch = Some((turns, looks, look_owed, now)),
            }
            if due {
                nudge = st
                    .lead
                    .reactor
                    .and_then(|r| self.take_waker(usize::from(r)));
            }
        } else {
            st.lead.watch = None;
        }
        let mut until = now + WATCH_PERIOD;
        if let Some(d) = next.filter(|&d| d > now) {
            until = until.min(d);
        }
        if let Some(c) = cap {
            until = until.min(c);
        }
        drop(st);
        if let Some(w) = nudge {
            w.wake();
        }
        self.kick.wait(Some(until));
    }

    /// The driver gives up the role: what is queued is written, the owners
    /// of what finished are woken, and a waiting owner takes over if
    /// operations are left.
    pub(super) fn step_down(&self, mut st: MutexGuard<'_, State<J>>) {
        st.lead.leader = false;
        st.lead.driver = false;
        st.lead.drain_since = None;
        st.flush_all();
        let mut wake = core::mem::take(&mut st.lead.to_wake);
        let kick = self.hand_off(&mut st, &mut wake);
        st.check_leadership();
        drop(st);
        self.wake(wake);
        if kick {
            self.kick.kick();
        }
    }
}
