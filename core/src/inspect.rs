//! Inspect (F3): who holds a resource on each server, and for how long.

use heapless::Vec;
use redlock_resp::{EncodeError, Reply};

use crate::handshake::SetupError;
use crate::operation::Operation;
use crate::report::{MAX_SERVERS, ServerId, ServerOutcome, Servers};
use crate::round::{
    Disposition, Engine, Request, Subject, Transmit, Unsolicited, outcome_of_other,
};
use crate::time::{Duration, Instant};

/// The longest holder value kept by an inspection; longer values are cut.
pub const HOLDER_CAPACITY: usize = 64;

/// What one server holds for the resource.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Holding {
    /// `Ok` when the server answered; otherwise why it did not.
    pub outcome: ServerOutcome,
    /// The value of the key (the holder's token), cut to
    /// [`HOLDER_CAPACITY`] bytes; `None` when the key is absent.
    pub holder: Option<Vec<u8, HOLDER_CAPACITY>>,
    /// The full length of the value (more than `holder` holds if cut).
    pub holder_len: usize,
    /// `PTTL`: remaining milliseconds, -1 for no expiry, -2 when absent.
    pub pttl_ms: i64,
}

impl Holding {
    const UNKNOWN: Holding = Holding {
        outcome: ServerOutcome::Pending,
        holder: None,
        holder_len: 0,
        pttl_ms: -2,
    };

    /// The remaining time to live, when the key exists and expires.
    pub fn ttl(&self) -> Option<Duration> {
        u64::try_from(self.pttl_ms).ok().map(Duration::from_millis)
    }
}

/// Per-server holdings of a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Inspection {
    len: usize,
    entries: [Holding; MAX_SERVERS],
}

impl Inspection {
    /// Holdings in server order.
    pub fn entries(&self) -> &[Holding] {
        self.entries.get(..self.len).unwrap_or_default()
    }

    /// The token held by a majority of servers, if any.
    pub fn majority_holder(&self) -> Option<&[u8]> {
        let quorum = crate::config::majority(self.len);
        self.entries()
            .iter()
            .filter_map(|e| e.holder.as_deref())
            .find(|&h| {
                self.entries()
                    .iter()
                    .filter(|e| e.holder.as_deref() == Some(h))
                    .count()
                    >= quorum
            })
    }
}

/// Reads the lock key and its `PTTL` on every server, atomically per server.
///
/// `R` is the resource name: any bytes, borrowed (`&[u8]`) or owned (a
/// `heapless::Vec`, a boxed slice), so that an operation can be kept in
/// long-lived state (a static on a microcontroller, a shared transport).
#[derive(Debug, Clone)]
pub struct Inspect<R> {
    resource: R,
    engine: Engine,
    entries: [Holding; MAX_SERVERS],
    outcome_taken: bool,
}

impl<R: AsRef<[u8]>> Inspect<R> {
    /// Starts inspecting `resource`; each server gets `timeout` to answer.
    pub fn new(servers: &Servers, resource: R, timeout: Duration) -> Inspect<R> {
        let mut engine = Engine::for_servers(servers, timeout);
        engine.start_round(Request::Inspect);
        Inspect {
            resource,
            engine,
            entries: [Holding::UNKNOWN; MAX_SERVERS],
            outcome_taken: false,
        }
    }

    fn finish_entries(&mut self) -> Inspection {
        let report = self.engine.report();
        let mut entries = self.entries.clone();
        for (entry, outcome) in entries.iter_mut().zip(report.outcomes()) {
            entry.outcome = *outcome;
        }
        Inspection {
            len: self.engine.len(),
            entries,
        }
    }
}

impl<R: AsRef<[u8]>> Operation for Inspect<R> {
    type Output = Inspection;

    fn poll_transmit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
    ) -> Result<Option<Transmit>, EncodeError> {
        let subject = Subject {
            resource: self.resource.as_ref(),
            token: &[],
            #[cfg(feature = "mutants")]
            bare_del_release: false,
        };
        self.engine.poll_transmit(now, &subject, buf)
    }

    fn handle_reply(
        &mut self,
        _now: Instant,
        server: ServerId,
        reply: Reply<'_>,
    ) -> Result<(), Unsolicited> {
        if self.engine.handle_reply(server, &reply)? == Disposition::Current {
            let mut outcome = outcome_of_other(&reply);
            if let (Some(agg), Some(entry)) =
                (reply.as_aggregate(), self.entries.get_mut(server.index()))
            {
                let mut items = agg.iter();
                match (agg.len(), items.next(), items.next()) {
                    (2, Some(value), Some(Reply::Integer(pttl)))
                        if matches!(value, Reply::Bulk(_) | Reply::Nil) =>
                    {
                        let bytes = value.as_bytes();
                        entry.holder_len = bytes.map_or(0, <[u8]>::len);
                        entry.holder = bytes.map(|b| {
                            let cut = b.get(..HOLDER_CAPACITY).unwrap_or(b);
                            Vec::from_slice(cut).unwrap_or_default()
                        });
                        entry.pttl_ms = pttl;
                        outcome = ServerOutcome::Ok;
                    }
                    _ => outcome = ServerOutcome::UnexpectedReply,
                }
            }
            self.engine.settle(server, outcome, 0);
        }
        Ok(())
    }

    fn handle_connection_error(&mut self, now: Instant, server: ServerId) {
        self.engine.handle_connection_error(now, server);
    }

    fn handle_setup_error(&mut self, now: Instant, server: ServerId, error: SetupError) {
        self.engine
            .server_unusable(server, ServerOutcome::Setup(error));
        let _ = now;
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.engine.handle_timeout(now);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.engine.poll_timeout()
    }

    fn poll_outcome(&mut self) -> Option<Inspection> {
        if self.outcome_taken || self.engine.pending() > 0 {
            return None;
        }
        self.outcome_taken = true;
        Some(self.finish_entries())
    }

    fn is_finished(&self) -> bool {
        self.engine.pending() == 0 && !self.engine.has_unsent()
    }
}
