//! One call of the client as the transport runs it: the core operation,
//! owning its resource name, so that whichever thread leads can drive it.

use redlock_core::redlock_resp::{EncodeError, Reply};
use redlock_core::{
    Acquire, AcquireError, Extend, ExtendError, FenceRepair, FenceRepairError, FenceRepaired,
    Inspect, Inspection, Instant, Lock, Operation, Release, Released, ServerId, SetupError,
    Transmit, Unsolicited,
};

use crate::Resource;
use crate::transport::Job;

/// A running call.
// Kept by value in the transport's preallocated slots: boxing the larger
// variants would allocate on every call.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Call {
    Acquire(Acquire<Resource>),
    Release(Release<Resource>),
    Extend(Extend<Resource>),
    Inspect(Inspect<Resource>),
    FenceRepair(FenceRepair<Resource>),
}

/// What a call ended with: the output of its operation.
#[allow(clippy::large_enum_variant)] // as `Call`
#[derive(Debug)]
pub(crate) enum Answer {
    Acquired(Result<Lock, AcquireError>),
    Released(Released),
    Extended(Result<Lock, ExtendError>),
    Inspected(Inspection),
    FenceRepaired(Result<FenceRepaired, FenceRepairError>),
}

/// `$body` with `$op` bound to the operation, whichever it is.
macro_rules! on_op {
    ($call:expr, $op:ident => $body:expr) => {
        match $call {
            Call::Acquire($op) => $body,
            Call::Release($op) => $body,
            Call::Extend($op) => $body,
            Call::Inspect($op) => $body,
            Call::FenceRepair($op) => $body,
        }
    };
}

impl Operation for Call {
    type Output = Answer;

    fn poll_transmit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
    ) -> Result<Option<Transmit>, EncodeError> {
        on_op!(self, op => op.poll_transmit(now, buf))
    }

    fn handle_reply(
        &mut self,
        now: Instant,
        server: ServerId,
        reply: Reply<'_>,
    ) -> Result<(), Unsolicited> {
        on_op!(self, op => op.handle_reply(now, server, reply))
    }

    fn handle_connection_error(&mut self, now: Instant, server: ServerId) {
        on_op!(self, op => op.handle_connection_error(now, server))
    }

    fn handle_setup_error(&mut self, now: Instant, server: ServerId, error: SetupError) {
        on_op!(self, op => op.handle_setup_error(now, server, error))
    }

    fn handle_timeout(&mut self, now: Instant) {
        on_op!(self, op => op.handle_timeout(now))
    }

    fn poll_timeout(&self) -> Option<Instant> {
        on_op!(self, op => op.poll_timeout())
    }

    fn poll_outcome(&mut self) -> Option<Answer> {
        match self {
            Call::Acquire(op) => op.poll_outcome().map(Answer::Acquired),
            Call::Release(op) => op.poll_outcome().map(Answer::Released),
            Call::Extend(op) => op.poll_outcome().map(Answer::Extended),
            Call::Inspect(op) => op.poll_outcome().map(Answer::Inspected),
            Call::FenceRepair(op) => op.poll_outcome().map(Answer::FenceRepaired),
        }
    }

    fn is_finished(&self) -> bool {
        on_op!(self, op => op.is_finished())
    }

    fn set_incarnation(&mut self, server: ServerId, started: Instant) {
        // Only acquisitions count votes (the restart guard).
        if let Call::Acquire(op) = self {
            op.set_incarnation(server, started);
        }
    }
}

impl Job for Call {
    fn urgent(&self) -> bool {
        matches!(self, Call::Release(_) | Call::Extend(_))
    }

    fn abandon(&mut self, now: Instant) {
        // Only an acquisition has something to give up (further attempts,
        // and votes that still arrive); the others run to their end.
        if let Call::Acquire(op) = self {
            op.abandon(now);
        }
    }
}

/// Runs one kind of call and unwraps its kind of answer.
impl crate::transport::Transport<Call> {
    pub(crate) fn acquire(&self, op: Acquire<Resource>) -> Result<Lock, AcquireError> {
        match self.run(Call::Acquire(op)) {
            Answer::Acquired(out) => out,
            other => unreachable!("an acquisition answered {other:?}"),
        }
    }

    pub(crate) fn release(&self, op: Release<Resource>) -> Released {
        match self.run(Call::Release(op)) {
            Answer::Released(out) => out,
            other => unreachable!("a release answered {other:?}"),
        }
    }

    pub(crate) fn extend(&self, op: Extend<Resource>) -> Result<Lock, ExtendError> {
        match self.run(Call::Extend(op)) {
            Answer::Extended(out) => out,
            other => unreachable!("an extension answered {other:?}"),
        }
    }

    pub(crate) fn fence_repair(
        &self,
        op: FenceRepair<Resource>,
    ) -> Result<FenceRepaired, FenceRepairError> {
        match self.run(Call::FenceRepair(op)) {
            Answer::FenceRepaired(out) => out,
            other => unreachable!("a fence repair answered {other:?}"),
        }
    }

    pub(crate) fn inspect(&self, op: Inspect<Resource>) -> Inspection {
        match self.run(Call::Inspect(op)) {
            Answer::Inspected(out) => out,
            other => unreachable!("an inspection answered {other:?}"),
        }
    }
}
