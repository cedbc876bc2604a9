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
//! another kind: each kind names its place once ([`Kind::place`]), and
//! both the delivery and the taking go through it.
//!
//! [`CallKind`] and [`AnyTicket`] are what the async face needs beyond
//! that: an acquisition's resource, the release a dropped call still
//! owes, the lock an abandoned acquisition won, and tickets of every kind
//! in one list (the driver's).

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
/// per kind of call, each in that kind's type. (A struct, not an enum, so
/// that each kind's place is a field the compiler checks: it costs the
/// slot about 290 B more than one enum of the five outcomes would, 18 KiB
/// over a client's 64 slots.)
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
fn deliver_into<O: Operation>(op: &mut O, place: &mut Option<O::Output>) -> bool {
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
        // Each to the place its kind takes it from.
        on_op!(self, op => deliver_into(op, place_of(op, cell)))
    }

    fn abandon(&mut self, now: Instant) {
        // Only an acquisition has something to give up (further attempts,
        // and votes that still arrive); the others run to their end.
        if let Call::Acquire(op) = self {
            op.abandon(now);
        }
    }
}

/// `op`'s place in `cell`: its kind's.
fn place_of<'c, K: Place>(_op: &K, cell: &'c mut Answers) -> &'c mut Option<K::Out> {
    K::place(cell)
}

/// Each kind of call: the variant it runs as, its place in [`Answers`],
/// and whether it is urgent. Its outcome's type is its operation's.
macro_rules! kind {
    ($op:ident, $place:ident, urgent: $urgent:expr) => {
        impl Kind<Call> for $op<Resource> {
            type Out = <$op<Resource> as Operation>::Output;
            const URGENT: bool = $urgent;

            fn into_job(self) -> Call {
                Call::$op(self)
            }

            fn take(cell: &mut Answers) -> Option<Self::Out> {
                Self::place(cell).take()
            }
        }

        impl Place for $op<Resource> {
            fn place(cell: &mut Answers) -> &mut Option<Self::Out> {
                &mut cell.$place
            }
        }
    };
}

/// Where a kind's outcome waits in [`Answers`]: written once per kind,
/// read by both [`Job::deliver`] and [`Kind::take`].
trait Place: Kind<Call> {
    fn place(cell: &mut Answers) -> &mut Option<Self::Out>;
}

kind!(Acquire, acquired, urgent: false);
kind!(Release, released, urgent: true);
kind!(Extend, extended, urgent: true);
kind!(Inspect, inspected, urgent: false);
kind!(FenceRepair, fence_repaired, urgent: false);

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

    /// Its ticket, as the driver keeps the tickets of every kind, with
    /// what [`resource`](CallKind::resource) said (an acquisition's).
    fn any(ticket: Ticket<Self>, resource: Option<Resource>) -> AnyTicket;
}

/// A ticket of any kind of call (the driver's, for calls it polls to
/// their end); an acquisition's with its resource, to release what it may
/// still win.
#[derive(Debug)]
pub(crate) enum AnyTicket {
    Acquire(Ticket<Acquire<Resource>>, Option<Resource>),
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

    fn any(ticket: Ticket<Self>, resource: Option<Resource>) -> AnyTicket {
        AnyTicket::Acquire(ticket, resource)
    }
}

impl CallKind for Release<Resource> {
    fn unsent(self) -> Option<Release<Resource>> {
        Some(self)
    }

    fn any(ticket: Ticket<Self>, _: Option<Resource>) -> AnyTicket {
        AnyTicket::Release(ticket)
    }
}

impl CallKind for Extend<Resource> {
    fn any(ticket: Ticket<Self>, _: Option<Resource>) -> AnyTicket {
        AnyTicket::Extend(ticket)
    }
}

impl CallKind for Inspect<Resource> {
    fn any(ticket: Ticket<Self>, _: Option<Resource>) -> AnyTicket {
        AnyTicket::Inspect(ticket)
    }
}

impl CallKind for FenceRepair<Resource> {
    fn any(ticket: Ticket<Self>, _: Option<Resource>) -> AnyTicket {
        AnyTicket::FenceRepair(ticket)
    }
}
