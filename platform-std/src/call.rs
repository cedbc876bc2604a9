//! One call of the client as the transport runs it: the core operation,
//! owning its resource name, so that whichever thread leads can drive it,
//! and its outcome, handed back in its own type.
//!
//! The transport keeps every running operation in one array of slots, so
//! a slot holds a [`Call`], whichever operation it is. Its outcome is not
//! one type for all: the slot's [`Answers`] has a place per kind, the
//! operation delivers its outcome to its own kind's place, and the caller,
//! who submitted an [`Acquire`] (say), takes an acquisition's outcome from
//! the acquisition's place ([`Kind`]). No caller matches an answer of
//! another kind.

use redlock_core::redlock_resp::{EncodeError, Reply};
use redlock_core::{
    Acquire, AcquireError, Extend, ExtendError, FenceRepair, FenceRepairError, FenceRepaired,
    Inspect, Inspection, Instant, Lock, Operation, Release, Released, ServerId, SetupError,
    Transmit, Unsolicited,
};

use crate::Resource;
use crate::transport::{Job, Kind, Ticket};

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

/// Where a slot keeps a call's outcome until its owner takes it: one place
/// per kind of call, each in that kind's type.
#[derive(Debug, Default)]
pub(crate) struct Answers {
    acquired: Option<Result<Lock, AcquireError>>,
    released: Option<Released>,
    extended: Option<Result<Lock, ExtendError>>,
    inspected: Option<Inspection>,
    fence_repaired: Option<Result<FenceRepaired, FenceRepairError>>,
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

/// Moves `op`'s outcome, once out, into `place` (unless it is there
/// already). True once it is there.
fn deliver<O: Operation>(op: &mut O, place: &mut Option<O::Output>) -> bool {
    if place.is_none() {
        *place = op.poll_outcome();
    }
    place.is_some()
}

impl Job for Call {
    type Cell = Answers;

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

    fn set_incarnation(&mut self, server: ServerId, started: Instant) {
        on_op!(self, op => op.set_incarnation(server, started))
    }

    fn handle_timeout(&mut self, now: Instant) {
        on_op!(self, op => op.handle_timeout(now))
    }

    fn poll_timeout(&self) -> Option<Instant> {
        on_op!(self, op => op.poll_timeout())
    }

    fn is_finished(&self) -> bool {
        on_op!(self, op => op.is_finished())
    }

    fn deliver(&mut self, cell: &mut Answers) -> bool {
        match self {
            Call::Acquire(op) => deliver(op, &mut cell.acquired),
            Call::Release(op) => deliver(op, &mut cell.released),
            Call::Extend(op) => deliver(op, &mut cell.extended),
            Call::Inspect(op) => deliver(op, &mut cell.inspected),
            Call::FenceRepair(op) => deliver(op, &mut cell.fence_repaired),
        }
    }

    fn abandon(&mut self, now: Instant) {
        // Only an acquisition has something to give up (further attempts,
        // and votes that still arrive); the others run to their end.
        if let Call::Acquire(op) = self {
            op.abandon(now);
        }
    }
}

/// Each kind of call: the variant it runs as, and its place in
/// [`Answers`].
macro_rules! kind {
    ($op:ident, $variant:ident, $place:ident, $out:ty, urgent: $urgent:expr) => {
        impl Kind<Call> for $op<Resource> {
            type Out = $out;
            const URGENT: bool = $urgent;

            fn into_job(self) -> Call {
                Call::$variant(self)
            }

            fn take(cell: &mut Answers) -> Option<$out> {
                cell.$place.take()
            }
        }
    };
}

kind!(Acquire, Acquire, acquired, Result<Lock, AcquireError>, urgent: false);
kind!(Release, Release, released, Released, urgent: true);
kind!(Extend, Extend, extended, Result<Lock, ExtendError>, urgent: true);
kind!(Inspect, Inspect, inspected, Inspection, urgent: false);
kind!(
    FenceRepair,
    FenceRepair,
    fence_repaired,
    Result<FenceRepaired, FenceRepairError>,
    urgent: false
);

/// What the async face needs to know of each kind of call, beyond its
/// outcome's type.
pub(crate) trait CallKind: Kind<Call> {
    /// For an acquisition: its resource, to release what it may win after
    /// its future is dropped.
    fn resource(&self) -> Option<Resource> {
        None
    }

    /// Dropped unsent, while it waited for a slot: the release that runs
    /// all the same (a release's own; nothing for the others).
    fn unsent(self) -> Option<Release<Resource>> {
        None
    }

    /// What an outcome nobody waits for leaves to give back: the lock an
    /// acquisition won.
    fn won(out: Self::Out) -> Option<Lock> {
        let _ = out;
        None
    }

    /// Its ticket, as the driver keeps the tickets of every kind.
    fn any(ticket: Ticket<Self>) -> AnyTicket;
}

/// A ticket of any kind of call (the driver's, for calls it polls to
/// their end).
#[derive(Debug, Clone, Copy)]
pub(crate) enum AnyTicket {
    Acquire(Ticket<Acquire<Resource>>),
    Release(Ticket<Release<Resource>>),
    Extend(Ticket<Extend<Resource>>),
    Inspect(Ticket<Inspect<Resource>>),
    FenceRepair(Ticket<FenceRepair<Resource>>),
}

impl CallKind for Acquire<Resource> {
    fn resource(&self) -> Option<Resource> {
        Some(Resource::new(Acquire::resource(self)))
    }

    fn won(out: Self::Out) -> Option<Lock> {
        out.ok()
    }

    fn any(ticket: Ticket<Self>) -> AnyTicket {
        AnyTicket::Acquire(ticket)
    }
}

impl CallKind for Release<Resource> {
    fn unsent(self) -> Option<Release<Resource>> {
        Some(self)
    }

    fn any(ticket: Ticket<Self>) -> AnyTicket {
        AnyTicket::Release(ticket)
    }
}

impl CallKind for Extend<Resource> {
    fn any(ticket: Ticket<Self>) -> AnyTicket {
        AnyTicket::Extend(ticket)
    }
}

impl CallKind for Inspect<Resource> {
    fn any(ticket: Ticket<Self>) -> AnyTicket {
        AnyTicket::Inspect(ticket)
    }
}

impl CallKind for FenceRepair<Resource> {
    fn any(ticket: Ticket<Self>) -> AnyTicket {
        AnyTicket::FenceRepair(ticket)
    }
}
