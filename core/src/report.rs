//! Servers, and what each of them answered.

use redlock_resp::ErrorKind;

use crate::handshake::{Dialect, SetupError};
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

    /// A report of `len` servers with `outcomes` (those past `len` must be
    /// `Pending`).
    pub(crate) fn with_outcomes(len: usize, outcomes: [ServerOutcome; MAX_SERVERS]) -> Report {
        Report {
            len: len.min(MAX_SERVERS) as u8,
            outcomes,
        }
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
        // `len` is at most MAX_SERVERS: the `min` tells the compiler so.
        let (used, _) = self.outcomes.split_at(self.len().min(MAX_SERVERS));
        used
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
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Servers {
    len: u8,
    /// Bit i: the incarnation of server i is known.
    known: u16,
    /// Bit i: server i gets the native commands ([`Dialect`]).
    native: u16,
    /// Bit i: server i's incarnation was set to another value since
    /// [`mark_incarnation`](Servers::mark_incarnation).
    changed: u16,
    /// Bit i: server i's dialect was chosen by `Commands::Auto`: one
    /// request refused in its form is sent again in the other
    /// ([`Dialect::NativeOrScripts`], [`Dialect::ScriptsOrNative`]).
    fallback: u16,
    /// When each server's incarnation began; `Instant::ZERO` where not
    /// known (so that equal knowledge compares equal).
    incarnation_start: [Instant; MAX_SERVERS],
}

impl core::fmt::Debug for Servers {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Servers")
            .field("len", &self.len)
            .field("incarnation_start", &self.incarnations())
            .finish()
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Servers {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "Servers {{ len: {=u8}, incarnation_start: {} }}",
            self.len,
            self.incarnations()
        );
    }
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
            known: 0,
            native: 0,
            changed: 0,
            fallback: 0,
            incarnation_start: [Instant::ZERO; MAX_SERVERS],
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
        let bit = Self::bit(server.index());
        if let Some(s) = self.incarnation_start.get_mut(server.index()) {
            // (Read by the native fence write only.)
            if crate::NATIVE
                && cfg!(feature = "fencing")
                && (*s != started_at || self.known & bit == 0)
            {
                self.changed |= bit;
            }
            *s = started_at;
            self.known |= bit;
        }
    }

    /// Records which commands `server` gets: the platform passes its
    /// session's [`dialect`](crate::session::Session::dialect) when it
    /// makes an operation. Until then a server gets the scripts.
    ///
    /// A native fenced acquisition counts a server's fence write only if
    /// its incarnation is known ([`set_incarnation`](Servers::set_incarnation))
    /// and unchanged since its vote (SPEC F1): a platform that gives the
    /// dialect and never the incarnation gets no native fenced lock.
    pub fn set_dialect(&mut self, server: ServerId, dialect: Dialect) {
        if !crate::NATIVE {
            return;
        }
        let bit = Self::bit(server.index());
        let (native, fallback) = match dialect {
            Dialect::Scripts => (false, false),
            Dialect::Native => (true, false),
            Dialect::NativeOrScripts => (true, true),
            Dialect::ScriptsOrNative => (false, true),
        };
        self.native = if native {
            self.native | bit
        } else {
            self.native & !bit
        };
        self.fallback = if fallback {
            self.fallback | bit
        } else {
            self.fallback & !bit
        };
    }

    /// From now on, [`same_incarnation`](Servers::same_incarnation) tells
    /// whether `server`'s incarnation stays as it is now (marked when its
    /// vote is counted).
    pub(crate) fn mark_incarnation(&mut self, server: usize) {
        self.changed &= !Self::bit(server);
    }

    /// True when `server`'s incarnation is known and was not set to
    /// another since [`mark_incarnation`](Servers::mark_incarnation)
    /// (every request goes on a connection whose incarnation the platform
    /// sets first: a new connection computes its own, so this is also false
    /// after a reconnect to the same process, which is the safe side).
    pub(crate) fn same_incarnation(&self, server: usize) -> bool {
        let bit = Self::bit(server);
        self.known & bit != 0 && self.changed & bit == 0
    }

    /// Which commands `server` gets.
    pub fn dialect(&self, server: ServerId) -> Dialect {
        let bit = Self::bit(server.index());
        match (self.native & bit != 0, self.fallback & bit != 0) {
            (false, false) => Dialect::Scripts,
            (false, true) => Dialect::ScriptsOrNative,
            (true, false) => Dialect::Native,
            (true, true) => Dialect::NativeOrScripts,
        }
    }

    /// Bit i: server i gets the native commands; and bit i: it falls back
    /// to the scripts.
    pub(crate) fn native_masks(&self) -> (u16, u16) {
        (self.native, self.fallback)
    }

    fn bit(server: usize) -> u16 {
        1u16.checked_shl(server as u32).unwrap_or(0)
    }

    /// When `server`'s incarnation began, if known.
    fn incarnation(&self, server: usize) -> Option<Instant> {
        let known = self.known & Self::bit(server) != 0;
        self.incarnation_start
            .get(server)
            .copied()
            .filter(|_| known)
    }

    /// What is known of every server's incarnation.
    fn incarnations(&self) -> [Option<Instant>; MAX_SERVERS] {
        core::array::from_fn(|i| self.incarnation(i))
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
        match (guard, self.incarnation(server)) {
            (None, _) => ServerOutcome::Ok,
            (Some(_), None) => ServerOutcome::RestartUnknown,
            (Some(guard), Some(start)) if now < start.saturating_add(guard) => {
                ServerOutcome::Restarted
            }
            (Some(_), Some(_)) => ServerOutcome::Ok,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::arithmetic_side_effects)]
    extern crate std;
    use super::*;
    use std::format;

    #[test]
    fn the_restart_guard_reads_what_is_known() {
        let guard = Some(Duration::from_secs(10));
        let mut s = Servers::new(3).unwrap();
        s.set_incarnation(ServerId(1), Instant::from_millis(100 * 1_000));
        s.set_incarnation(ServerId(9), Instant::from_millis(1_000));
        let at = |secs: u64| Instant::from_millis(secs * 1_000);
        assert_eq!(s.vote(0, None, at(0)), ServerOutcome::Ok);
        assert_eq!(s.vote(0, guard, at(500)), ServerOutcome::RestartUnknown);
        assert_eq!(s.vote(1, guard, at(105)), ServerOutcome::Restarted);
        assert_eq!(s.vote(1, guard, at(110)), ServerOutcome::Ok);
        assert_eq!(s.vote(9, guard, at(500)), ServerOutcome::RestartUnknown);
        // Equal knowledge compares equal, and prints as an array of options.
        let mut t = Servers::new(3).unwrap();
        assert_ne!(s, t);
        t.set_incarnation(ServerId(1), at(100));
        assert_eq!(s, t);
        assert_eq!(
            format!("{s:?}"),
            "Servers { len: 3, incarnation_start: [None, Some(Instant { micros: 100000000 }), \
             None, None, None, None, None, None, None] }"
        );
    }
}
