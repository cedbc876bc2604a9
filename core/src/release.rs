//! Release (R3, A7).

use heapless::Vec;
use redlock_resp::{EncodeError, Reply};

use crate::config::Config;
use crate::handshake::SetupError;
use crate::lock::{ArgumentError, Lock};
use crate::operation::Operation;
use crate::report::{Report, ServerId, ServerOutcome, Servers};
use crate::round::{Engine, Request, Subject, Transmit, Unsolicited};
use crate::time::{Duration, Instant};

/// The longest token [`Release`] accepts (ours are 40 bytes; this leaves
/// room for other implementations' tokens).
pub const TOKEN_CAPACITY: usize = 64;

/// What a release did on each server.
///
/// Releasing is idempotent: a server where the key had already expired (or
/// was never set) answers [`ServerOutcome::NotHeld`], a normal outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Released {
    /// Per server: `Ok` (deleted our key), `NotHeld` (no key of ours), or
    /// the reason it could not be asked.
    pub report: Report,
    /// How many confirmations make the release count (a majority).
    pub quorum: usize,
}

impl Released {
    /// How many servers deleted our key.
    pub fn deleted(&self) -> usize {
        self.report.count(ServerOutcome::Ok)
    }

    /// How many servers answered (deleted our key, or had none of ours):
    /// past these, the key of ours is gone for sure.
    pub fn confirmed(&self) -> usize {
        self.report
            .outcomes()
            .iter()
            .filter(|o| matches!(o, ServerOutcome::Ok | ServerOutcome::NotHeld))
            .count()
    }

    /// True when a majority confirmed (deleted our key or had none): the
    /// release counts. Otherwise our key may stay on the others until its
    /// ttl runs out, and nobody can take the lock before.
    pub fn is_confirmed(&self) -> bool {
        self.confirmed() >= self.quorum
    }

    /// True when every server answered (deleted, or had no key of ours).
    pub fn complete(&self) -> bool {
        self.report
            .outcomes()
            .iter()
            .all(|o| matches!(o, ServerOutcome::Ok | ServerOutcome::NotHeld))
    }
}

/// The release of a lock: the token-checking script on every server (A7),
/// whether or not the client believes it holds the key there. Ends when
/// every server answered or timed out.
///
/// `R` is the resource name: any bytes, borrowed (`&[u8]`) or owned (a
/// `heapless::Vec`, a boxed slice), so that an operation can be kept in
/// long-lived state (a static on a microcontroller, a shared transport).
#[derive(Debug, Clone)]
pub struct Release<R> {
    config: Config,
    resource: R,
    token: Vec<u8, TOKEN_CAPACITY>,
    engine: Engine,
    outcome_taken: bool,
}

impl<R: AsRef<[u8]>> Release<R> {
    /// Starts releasing `resource` held with `token` (any bytes, up to
    /// [`TOKEN_CAPACITY`]). `timeout` bounds each server's answer (see
    /// [`Config::request_timeout_for`]).
    pub fn new(
        config: &Config,
        servers: &Servers,
        resource: R,
        token: &[u8],
        timeout: Duration,
    ) -> Result<Release<R>, ArgumentError> {
        let token = Vec::from_slice(token).map_err(|_| ArgumentError::Token)?;
        let mut engine = Engine::for_servers(servers, timeout);
        engine.start_round(Request::Release);
        Ok(Release {
            config: *config,
            resource,
            token,
            engine,
            outcome_taken: false,
        })
    }

    /// Starts releasing a lock this client acquired.
    pub fn for_lock(config: &Config, servers: &Servers, resource: R, lock: &Lock) -> Release<R> {
        let mut engine = Engine::for_servers(servers, config.request_timeout_for(lock.ttl()));
        engine.start_round(Request::Release);
        let token = Vec::from_slice(lock.token().as_bytes()).unwrap_or_default();
        Release {
            config: *config,
            resource,
            token,
            engine,
            outcome_taken: false,
        }
    }
}

impl<R: AsRef<[u8]>> Operation for Release<R> {
    type Output = Released;

    fn poll_transmit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
    ) -> Result<Option<Transmit>, EncodeError> {
        let subject = Subject {
            resource: self.resource.as_ref(),
            token: &self.token,
            #[cfg(feature = "mutants")]
            bare_del_release: self.config.mutants.bare_del_release,
        };
        self.engine.poll_transmit(now, &subject, buf)
    }

    fn handle_reply(
        &mut self,
        _now: Instant,
        server: ServerId,
        reply: Reply<'_>,
    ) -> Result<(), Unsolicited> {
        self.engine.handle_flag_reply(server, &reply)?;
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

    fn poll_outcome(&mut self) -> Option<Released> {
        if self.outcome_taken || self.engine.pending() > 0 {
            return None;
        }
        self.outcome_taken = true;
        Some(Released {
            report: self.engine.report(),
            quorum: self.config.quorum(self.engine.len()),
        })
    }

    fn is_finished(&self) -> bool {
        self.engine.pending() == 0 && !self.engine.has_unsent()
    }
}
