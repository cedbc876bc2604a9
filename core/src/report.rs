//! Servers, and what each of them answered.

use redlock_resp::ErrorKind;

use crate::handshake::SetupError;
use crate::time::{Duration, Instant};

/// The most servers one operation can span (a compile-time capacity).
pub const MAX_SERVERS: usize = 9;

/// The index of a server in the list the operation was given (0-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ServerId(pub u8);

impl ServerId {
    /// As an index.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

/// What one server answered in an operation's last round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ServerOutcome {
    /// No answer yet: the operation decided without waiting for it.
    Pending,
    /// The server did what was asked: voted for us, released, extended.
    Ok,
    /// The key is held by another token (`SET NX` refused).
    Held,
    /// Release, extend or fence: the key does not hold our token (expired,
    /// released, or taken by another client).
    NotHeld,
    /// No answer within the per-request timeout.
    TimedOut,
    /// An error reply, by kind (`NOAUTH`, `READONLY`, `OOM`, ...).
    ServerError(ErrorKind),
    /// The connection failed (refused, reset, closed, or a protocol error).
    ConnectionError,
    /// A reply of the wrong shape for the request.
    UnexpectedReply,
    /// The server voted for us, but restarted less than the restart guard
    /// ago, so its vote was not counted.
    Restarted,
    /// The server voted for us, but the restart guard is on and when it
    /// last restarted is not known, so its vote was not counted (fail
    /// closed).
    RestartUnknown,
    /// The server was not used: its connection's handshake failed, or it is
    /// the same server as another entry (see [`SetupError`]).
    Setup(SetupError),
}

impl core::fmt::Display for ServerOutcome {
    /// What the outcome means, in a few words ("held by another token").
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ServerOutcome::Ok => f.write_str("ok"),
            ServerOutcome::Held => f.write_str("held by another token"),
            ServerOutcome::NotHeld => f.write_str("not held by us"),
            ServerOutcome::TimedOut => f.write_str("no answer within the request timeout"),
            ServerOutcome::ServerError(k) => write!(f, "error {k}"),
            ServerOutcome::ConnectionError => f.write_str("connection failed"),
            ServerOutcome::UnexpectedReply => f.write_str("unexpected reply"),
            ServerOutcome::Restarted => f.write_str("restarted recently (vote not counted)"),
            ServerOutcome::RestartUnknown => f.write_str("restart time unknown (vote not counted)"),
            ServerOutcome::Setup(why) => write!(f, "not used: {why}"),
            ServerOutcome::Pending => f.write_str("not asked (a majority had already decided)"),
        }
    }
}

impl ServerOutcome {
    /// True when the server answered at all (whatever it said).
    pub fn answered(self) -> bool {
        matches!(
            self,
            ServerOutcome::Ok
                | ServerOutcome::Held
                | ServerOutcome::NotHeld
                | ServerOutcome::Restarted
                | ServerOutcome::RestartUnknown
        )
    }
}

/// Per-server outcomes of an operation, indexed by [`ServerId`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Report {
    len: u8,
    outcomes: [ServerOutcome; MAX_SERVERS],
}

impl Report {
    pub(crate) fn new(len: usize) -> Report {
        Report {
            len: len.min(MAX_SERVERS) as u8,
            outcomes: [ServerOutcome::Pending; MAX_SERVERS],
        }
    }

    /// The outcomes, in server order, to fill in (those past
    /// [`len`](Report::len) stay `Pending`).
    pub(crate) fn outcomes_mut(&mut self) -> &mut [ServerOutcome] {
        &mut self.outcomes
    }

    /// The number of servers.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// True when there are no servers (never, for a report from an operation).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// What `server` answered.
    pub fn get(&self, server: ServerId) -> Option<ServerOutcome> {
        self.outcomes().get(server.index()).copied()
    }

    /// All outcomes in server order.
    pub fn outcomes(&self) -> &[ServerOutcome] {
        self.outcomes.get(..self.len()).unwrap_or_default()
    }

    /// `(server, outcome)` pairs.
    pub fn iter(&self) -> impl Iterator<Item = (ServerId, ServerOutcome)> + '_ {
        self.outcomes()
            .iter()
            .enumerate()
            .map(|(i, &o)| (ServerId(i as u8), o))
    }

    /// How many servers had `outcome`.
    pub fn count(&self, outcome: ServerOutcome) -> usize {
        self.outcomes().iter().filter(|&&o| o == outcome).count()
    }
}

/// The servers an operation spans, and what is known of their restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Servers {
    len: u8,
    incarnation_start: [Option<Instant>; MAX_SERVERS],
}

/// The number of servers is 0 or above [`MAX_SERVERS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ServerCountError(pub usize);

impl core::fmt::Display for ServerCountError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{} servers: between 1 and {MAX_SERVERS} are supported",
            self.0
        )
    }
}

impl core::error::Error for ServerCountError {}

impl Servers {
    /// `n` servers, 1 to [`MAX_SERVERS`].
    pub fn new(n: usize) -> Result<Servers, ServerCountError> {
        if n == 0 || n > MAX_SERVERS {
            return Err(ServerCountError(n));
        }
        Ok(Servers {
            len: n as u8,
            incarnation_start: [None; MAX_SERVERS],
        })
    }

    /// The number of servers.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Never true.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Records when `server`'s current incarnation (process) began: on
    /// connect the platform reads `uptime_in_seconds` from `INFO server` and
    /// passes `now - uptime`. Used by [`Config::restart_guard`](crate::Config::restart_guard).
    pub fn set_incarnation(&mut self, server: ServerId, started_at: Instant) {
        if let Some(s) = self.incarnation_start.get_mut(server.index()) {
            *s = Some(started_at);
        }
    }

    /// C2: whether a vote of `server` at `now` counts under the restart guard:
    /// `Ok` when it does, `Restarted` when the server began its incarnation
    /// less than `guard` before `now`, `RestartUnknown` when the guard is
    /// on and that time is not known (fail closed: the vote does not count).
    pub(crate) fn vote(
        &self,
        server: usize,
        guard: Option<Duration>,
        now: Instant,
    ) -> ServerOutcome {
        match (guard, self.incarnation_start.get(server).copied().flatten()) {
            (None, _) => ServerOutcome::Ok,
            (Some(_), None) => ServerOutcome::RestartUnknown,
            (Some(guard), Some(start)) if now < start.saturating_add(guard) => {
                ServerOutcome::Restarted
            }
            (Some(_), Some(_)) => ServerOutcome::Ok,
        }
    }
}
