//! Slots: where running operations live while any thread drives them.

use super::*;

/// One running operation, owned by the state while it runs.
#[derive(Debug)]
pub(super) struct Slot<J: Job> {
    /// The serial of the operation running here; 0 when free.
    pub(super) serial: u64,
    pub(super) op: Option<J>,
    /// The outcome, once delivered, for its owner to take in its type.
    pub(super) cell: J::Cell,
    /// Servers whose connection failed with requests of this operation on
    /// it, not yet told to the operation (bit i = server i).
    pub(super) conn_errors: u16,
    /// `poll_timeout` of the operation as of its last pump (read by the
    /// leader without calling into the operation).
    pub(super) deadline: Option<Instant>,
    /// The outcome is out and nothing is left to send (or the operation
    /// panicked): the owner may take it.
    pub(super) done: bool,
    /// The payload of a panic of the operation, for its owner to resume.
    pub(super) panic: Option<Box<dyn Any + Send>>,
    /// The owner waits: on its condition variable (a thread), or for its
    /// waker (a task).
    pub(super) waiting: bool,
    /// The owner is a task (woken through `Transport::task_wakers`), not a
    /// thread: it never blocks to lead.
    pub(super) task: bool,
    /// The owner is a task that may lead on its runtime's reactor: set when
    /// it polls its ticket as one, cleared when no reactor serves it (or it
    /// was offered the role and never took it). `hand_off` wakes such a
    /// task to take the role when it is free.
    pub(super) on_reactor: bool,
}

impl<J: Job> Slot<J> {
    pub(super) fn new() -> Slot<J> {
        Slot {
            serial: 0,
            op: None,
            cell: J::Cell::default(),
            conn_errors: 0,
            deadline: None,
            done: false,
            panic: None,
            waiting: false,
            task: false,
            on_reactor: false,
        }
    }

    /// Runs `f` on the operation; a panic in it ends the operation (its
    /// owner resumes the panic) instead of unwinding through the transport.
    pub(super) fn call<R>(&mut self, f: impl FnOnce(&mut J) -> R) -> Option<R> {
        let op = self.op.as_mut()?;
        match catch_unwind(AssertUnwindSafe(|| f(op))) {
            Ok(r) => Some(r),
            Err(payload) => {
                self.poison(payload);
                None
            }
        }
    }

    pub(super) fn poison(&mut self, payload: Box<dyn Any + Send>) {
        self.op = None;
        self.panic = Some(payload);
        self.done = true;
    }
}
