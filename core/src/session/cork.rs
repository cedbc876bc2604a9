//! One batch in flight per connection (feature `batching`): the requests
//! pushed while a written one is unanswered may wait in the platform's
//! buffer, so that a server busy with many callers reads them as one
//! batch. Without the feature the cork is never on, and none of it is
//! linked (a firmware writes each request at once).

use super::{Queue, Session, State};
use crate::time::{Duration, Instant};

/// The longest a request may wait corked: this share of its time (1/16:
/// a round trip longer than the time allows costs it at most 6%).
#[cfg(feature = "batching")]
const SHARE_SHIFT: u32 = 4;

/// What the session knows of the platform's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Cork {
    /// The newest requests awaited that the platform has not written yet;
    /// at most the requests awaited.
    #[cfg(feature = "batching")]
    unsent: u16,
    /// The buffer goes out at the next write, corked or not: a probe is in
    /// it, or a request in it has waited its share of its time.
    #[cfg(feature = "batching")]
    urgent: bool,
    /// When the first unsent request has waited its share (the earliest,
    /// of all of them).
    #[cfg(feature = "batching")]
    until: Instant,
}

impl Cork {
    pub(super) const NEW: Cork = Cork {
        #[cfg(feature = "batching")]
        unsent: 0,
        #[cfg(feature = "batching")]
        urgent: false,
        #[cfg(feature = "batching")]
        until: Instant::ZERO,
    };

    /// A request allowed `allowed` (from `now`) is to be written.
    pub(super) fn pushed(&mut self, now: Instant, allowed: Duration) {
        #[cfg(feature = "batching")]
        {
            let share = Duration::from_micros(allowed.as_micros() >> SHARE_SHIFT);
            let until = now.saturating_add(share);
            if self.unsent == 0 || until < self.until {
                self.until = until;
            }
            self.unsent = self.unsent.saturating_add(1);
        }
        #[cfg(not(feature = "batching"))]
        let _ = (now, allowed);
    }

    /// `owed` requests are awaited (after a reply, or when the held ones
    /// are to be written: `all`).
    pub(super) fn owed(&mut self, owed: usize, all: bool) {
        #[cfg(feature = "batching")]
        {
            let owed = u16::try_from(owed).unwrap_or(u16::MAX);
            self.unsent = if all { owed } else { self.unsent.min(owed) };
            if all {
                // Held behind a handshake: due at once.
                self.until = Instant::ZERO;
            }
        }
        #[cfg(not(feature = "batching"))]
        let _ = (owed, all);
    }

    /// The buffer is to go out at the next write (a probe is in it).
    pub(super) fn urgent(&mut self) {
        #[cfg(feature = "batching")]
        {
            self.urgent = true;
        }
    }

    /// Everything in the buffer was written (or the connection closed).
    pub(super) fn clear(&mut self) {
        *self = Cork::NEW;
    }

    /// Whether the buffer may wait, `owed` requests being awaited.
    pub(super) fn corked(&self, owed: usize) -> bool {
        #[cfg(feature = "batching")]
        {
            self.unsent > 0
                && self.unsent < u16::MAX
                && !self.urgent
                && owed > usize::from(self.unsent)
        }
        #[cfg(not(feature = "batching"))]
        {
            let _ = owed;
            false
        }
    }

    /// When a corked request has waited its share, if one waits.
    #[cfg(feature = "batching")]
    pub(super) fn deadline(&self, owed: usize) -> Option<Instant> {
        self.corked(owed).then_some(self.until)
    }

    /// When the first request pushed since the last write has waited its
    /// share of its time, if one was pushed (corked or not).
    #[cfg(feature = "batching")]
    pub(super) fn unsent_until(&self) -> Option<Instant> {
        (self.unsent > 0).then_some(self.until)
    }

    /// Time has passed: a request that waited its share uncorks the buffer.
    pub(super) fn expire(&mut self, now: Instant, owed: usize) {
        #[cfg(feature = "batching")]
        if self.corked(owed) && now >= self.until {
            self.urgent = true;
        }
        #[cfg(not(feature = "batching"))]
        let _ = (now, owed);
    }
}

/// The session's side of the cork (see the module's docs).
impl<T, Q: Queue<T>> Session<T, Q> {
    /// True while the requests pushed since the platform last wrote may
    /// wait in its buffer (feature `batching`; always false without it): a
    /// batch written earlier is still unanswered, no probe waits to go
    /// out, and none of them has waited a sixteenth of its time yet.
    /// Optional (a platform that writes every request at once may ignore
    /// it): a platform that pipelines several callers' requests writes its
    /// buffer when this is false, or when a write it began is unfinished,
    /// and calls [`flushed`](Session::flushed) as it does. The answers to
    /// the batch on the way then find the next one gathered, so the server
    /// reads and answers it as one (one batch in flight per connection, as
    /// Nagle's algorithm keeps one small segment in flight). A request
    /// waits for that batch's answers at most a sixteenth of its time:
    /// [`poll_timeout`](Session::poll_timeout) is due then, and
    /// [`handle_timeout`](Session::handle_timeout) uncorks the buffer.
    pub fn corked(&self) -> bool {
        self.state == State::Ready && self.cork.corked(self.owed.len())
    }

    /// The platform wrote (or began to write) everything it had queued for
    /// this connection: requests, and the probe if one was sent.
    pub fn flushed(&mut self) {
        self.cork.clear();
    }

    /// When the first request pushed since the platform last wrote
    /// ([`flushed`](Session::flushed)) has waited a sixteenth of its time,
    /// corked or not; `None` if none was pushed (feature `batching`). The
    /// requests held behind the handshake are due at once when it passes
    /// (a time in the past). For a platform that holds its buffer for
    /// reasons of its own (waiting for more callers to queue) and must not
    /// hold it longer than the cork would.
    #[cfg(feature = "batching")]
    pub fn unsent_until(&self) -> Option<Instant> {
        if self.state != State::Ready {
            return None;
        }
        self.cork.unsent_until()
    }

    /// When a request corked in the platform's buffer has waited its
    /// share of its time (then the buffer goes out).
    #[cfg(feature = "batching")]
    pub(super) fn cork_deadline(&self) -> Option<Instant> {
        if self.state != State::Ready {
            return None;
        }
        self.cork.deadline(self.owed.len())
    }
}
