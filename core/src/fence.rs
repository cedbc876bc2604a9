//! F1 repair: raise a resource's fence counter after servers lost it.

use redlock_resp::{EncodeError, Reply};

use crate::config::Config;
use crate::handshake::{SetupError, parse_u64};
use crate::lock::FailureKind;
use crate::operation::Operation;
use crate::report::{Report, ServerId, ServerOutcome, Servers};
use crate::round::{
    Disposition, Engine, Request, Subject, Transmit, Unsolicited, outcome_of_other,
};
use crate::time::{Duration, Instant, U64};

/// A fence repair that a majority of the servers confirmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FenceRepaired {
    /// Per server: `Ok` (the counter is now at least the floor), or why not.
    pub report: Report,
    /// The highest counter a server reported after the repair (at least
    /// the floor; higher where a server's counter already was).
    pub counter: u64,
}

impl FenceRepaired {
    /// True when every server confirmed (not just a majority).
    pub fn complete(&self) -> bool {
        self.report.count(ServerOutcome::Ok) == self.report.len()
    }
}

/// A fence repair that fewer than a majority confirmed: fenced acquisitions
/// may still refuse. Running it again is safe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct FenceRepairError {
    /// Always [`FailureKind::Unavailable`].
    pub kind: FailureKind,
    /// What each server answered.
    pub report: Report,
}

impl core::fmt::Display for FenceRepairError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "fence counter not repaired: {}", self.kind)
    }
}

impl core::error::Error for FenceRepairError {}

/// Raises the fence counter of a resource to at least `floor` on every
/// server, never lowering it, whoever holds the lock.
///
/// For an operator, after a majority of servers restarted without
/// persistence and fenced acquisitions refuse with
/// [`FailureKind::FenceLost`]: `floor` is the highest fence the protected
/// resource has accepted, which only the operator (or the resource) knows.
/// Every fence handed out afterwards is larger than `floor`. A floor that is
/// too low is still safe (the resource rejects the smaller tokens) but not
/// live; a higher floor only skips numbers.
///
/// The outcome counts once every server answered or timed out: success
/// when a majority confirmed.
#[derive(Debug, Clone)]
pub struct FenceRepair<R> {
    config: Config,
    resource: R,
    engine: Engine,
    outcome_taken: bool,
    /// The floor.
    floor: U64,
}

impl<R> FenceRepair<R> {
    /// Once every server answered the first step: the native servers whose
    /// counter was below the floor get `INCRBY counter (floor - read)`
    /// (counters only rise: it ends at the floor or above).
    fn top_up(&mut self) {
        if crate::NATIVE
            && matches!(self.engine.request(), Request::FenceRaise(_))
            && self.engine.tally().pending == 0
            && self.engine.pending() > 0
        {
            self.engine.start_round(Request::FenceTopUp(self.floor));
        }
    }
}

impl<R: AsRef<[u8]>> FenceRepair<R> {
    /// Starts raising `resource`'s fence counter to at least `floor`;
    /// `timeout` bounds each server's answer.
    pub fn new(
        config: &Config,
        servers: &Servers,
        resource: R,
        floor: u64,
        timeout: Duration,
    ) -> FenceRepair<R> {
        // The script as EVAL (it is not loaded by the handshake); on a
        // server with the native commands, `GET` the counter, then
        // `INCRBY` where it is below the floor (`top_up`).
        let mut engine = Engine::for_servers(servers, timeout);
        engine.start_round_eval(Request::FenceRaise(U64(floor)));
        FenceRepair {
            config: *config,
            resource,
            engine,
            outcome_taken: false,
            floor: U64(floor),
        }
    }
}

impl<R: AsRef<[u8]>> Operation for FenceRepair<R> {
    type Output = Result<FenceRepaired, FenceRepairError>;

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
            let floor = self.floor.0;
            let read = matches!(self.engine.request(), Request::FenceRaise(_))
                && self.engine.is_native(server);
            // The script's and `INCRBY`'s answer: the counter afterwards, a
            // bulk string or an integer; the `GET` of the native first
            // step: the counter, or nil.
            let counter = match reply {
                Reply::Integer(c) if !read => u64::try_from(c).ok(),
                Reply::Nil if read => Some(0),
                ref r => r.as_bytes().and_then(parse_u64),
            };
            let (outcome, value) = match counter {
                Some(c) if c >= floor => (ServerOutcome::Ok, i64::try_from(c).unwrap_or(i64::MAX)),
                // Below the floor: raised in the second step (kept pending
                // until then, with what it read).
                Some(c) if read => (ServerOutcome::Pending, i64::try_from(c).unwrap_or(0)),
                Some(_) => (ServerOutcome::UnexpectedReply, 0),
                None => (outcome_of_other(&reply), 0),
            };
            if read && outcome == ServerOutcome::Pending {
                self.engine.park(server, value);
            } else {
                self.engine.settle(server, outcome, value);
            }
            self.top_up();
        }
        Ok(())
    }

    fn handle_connection_error(&mut self, now: Instant, server: ServerId) {
        self.engine.handle_connection_error(now, server);
        self.top_up();
    }

    fn handle_setup_error(&mut self, _now: Instant, server: ServerId, error: SetupError) {
        self.engine
            .server_unusable(server, ServerOutcome::Setup(error));
        self.top_up();
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.engine.handle_timeout(now);
        self.top_up();
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.engine.poll_timeout()
    }

    fn poll_outcome(&mut self) -> Option<Self::Output> {
        if self.outcome_taken || self.engine.pending() > 0 {
            return None;
        }
        self.outcome_taken = true;
        let report = self.engine.report();
        // A3: a majority of the servers.
        let t = self.engine.tally();
        if t.ok >= self.config.quorum(t.servers) {
            let counter = u64::try_from(t.max_value).unwrap_or(0);
            Some(Ok(FenceRepaired { report, counter }))
        } else {
            Some(Err(FenceRepairError {
                kind: FailureKind::Unavailable,
                report,
            }))
        }
    }

    fn is_finished(&self) -> bool {
        self.engine.pending() == 0 && !self.engine.has_unsent()
    }
}
