//! Why a call failed: typed errors that name each server by address and
//! carry the servers' own words, never a password.

use alloc::sync::Arc;
use core::fmt;

use redlock_core::{FailureKind, Report, ServerId, ServerOutcome};

use crate::url::UrlError;

/// What each server answered in a failed call: the core's [`Report`], with
/// each server's address and, for a server that was not used (its
/// handshake failed), the server's own error text. Never contains a
/// password. Dereferences to the [`Report`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcomes {
    pub(crate) report: Report,
    /// Per server: its address, and the server's words when it refused.
    pub(crate) notes: Vec<(String, Option<String>)>,
}

impl Outcomes {
    /// The per-server outcomes.
    pub fn report(&self) -> &Report {
        &self.report
    }

    /// How reports name `server`: `host:port[/db]`, no credentials.
    pub fn address(&self, server: ServerId) -> Option<&str> {
        self.notes.get(server.index()).map(|(a, _)| a.as_str())
    }

    /// What `server` said when it refused the handshake, with why it is not
    /// used ("SELECT failed (ERR): ERR DB index is out of range"); for a
    /// failed connection, why, when more is known than that it failed ("no
    /// answer to the TLS handshake within the connect timeout ...").
    pub fn refusal(&self, server: ServerId) -> Option<&str> {
        self.notes.get(server.index())?.1.as_deref()
    }

    /// What `server`'s outcome means, in a few words, with the server's own
    /// error text when it refused the handshake.
    pub fn describe(&self, server: ServerId) -> String {
        match (self.refusal(server), self.report.get(server)) {
            (Some(text), Some(ServerOutcome::Setup(_))) => format!("not used: {text}"),
            (Some(text), Some(o @ ServerOutcome::ConnectionError)) => format!("{o}: {text}"),
            (_, Some(o)) => describe(o),
            (_, None) => "not in the list".into(),
        }
    }
}

impl core::ops::Deref for Outcomes {
    type Target = Report;
    fn deref(&self) -> &Report {
        &self.report
    }
}

impl fmt::Display for Outcomes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (server, _)) in self.report.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            match self.address(server) {
                Some(a) => write!(f, "{a}: {}", self.describe(server))?,
                None => write!(f, "server {}: {}", server.0, self.describe(server))?,
            }
        }
        Ok(())
    }
}

/// Why a call failed. Never contains a password.
///
/// `Debug` prints the same sentence as `Display`, so that `main` returning
/// `Result<(), Error>` shows something a person can read. Causes are typed,
/// and [`source`](core::error::Error::source) gives the underlying error.
#[derive(Clone)]
#[non_exhaustive]
pub enum Error {
    /// The lock is held by someone else (after the retries).
    Conflict(Outcomes),
    /// Too few servers answered usefully (down, timed out, errors, refused
    /// handshakes, votes that did not count).
    Unavailable(Outcomes),
    /// A majority answered, but too late: no validity was left.
    Expired(Outcomes),
    /// Extend: the lock is no longer ours on a majority.
    Lost(Outcomes),
    /// F1: the fence counter is missing on too many servers (they restarted
    /// without persistence) for a safe fencing token: fenced acquisitions
    /// refuse until [`Client::fence_repair`](crate::Client::fence_repair) raised it. Retrying does not
    /// help.
    FenceLost(Outcomes),
    /// Two entries of the server list are one server (the same address and
    /// port, whatever the database or credentials): one process would get
    /// two votes. One server with several databases is not several masters.
    DuplicateServer {
        /// The first entry's address (`host:port[/db]`).
        first: String,
        /// The later entry's address.
        second: String,
    },
    /// A bad argument to an operation: a ttl under 1 ms, a token longer
    /// than 64 bytes, a lock past its extension limit or its validity.
    Argument(redlock_core::ArgumentError),
    /// A server address that does not parse.
    Url(UrlError),
    /// No servers, or more than [`MAX_SERVERS`](redlock_core::MAX_SERVERS).
    ServerCount(usize),
    /// The lock (of a guard) was released already.
    AlreadyReleased,
    /// The operating system's random number generator failed: no token
    /// could be made (there is no weaker fallback).
    Rng(Arc<std::io::Error>),
    /// Setting up the client failed (the poll could not be created, a
    /// thread could not start).
    Io(Arc<std::io::Error>),
    /// The TLS settings cannot be used: a CA, certificate or key file that
    /// cannot be read or parsed, a key that does not match its
    /// certificate, a server name that is not one. The text names the
    /// file and what is wrong, never a key's content.
    TlsSettings(String),
}

impl PartialEq for Error {
    fn eq(&self, other: &Error) -> bool {
        if core::mem::discriminant(self) != core::mem::discriminant(other) {
            return false;
        }
        // Same variant: compare what it carries (exhaustive, so that a new
        // variant must say how it compares).
        match (self, other) {
            (Error::Conflict(a), Error::Conflict(b))
            | (Error::Unavailable(a), Error::Unavailable(b))
            | (Error::Expired(a), Error::Expired(b))
            | (Error::Lost(a), Error::Lost(b))
            | (Error::FenceLost(a), Error::FenceLost(b)) => a == b,
            (
                Error::DuplicateServer {
                    first: a,
                    second: b,
                },
                Error::DuplicateServer {
                    first: c,
                    second: d,
                },
            ) => a == c && b == d,
            (Error::Argument(a), Error::Argument(b)) => a == b,
            (Error::Url(a), Error::Url(b)) => a == b,
            (Error::ServerCount(a), Error::ServerCount(b)) => a == b,
            (Error::AlreadyReleased, Error::AlreadyReleased) => true,
            (Error::TlsSettings(a), Error::TlsSettings(b)) => a == b,
            // I/O errors compare by kind.
            (Error::Rng(a), Error::Rng(b)) | (Error::Io(a), Error::Io(b)) => a.kind() == b.kind(),
            (
                Error::Conflict(_)
                | Error::Unavailable(_)
                | Error::Expired(_)
                | Error::Lost(_)
                | Error::FenceLost(_)
                | Error::DuplicateServer { .. }
                | Error::Argument(_)
                | Error::Url(_)
                | Error::ServerCount(_)
                | Error::AlreadyReleased
                | Error::Rng(_)
                | Error::Io(_)
                | Error::TlsSettings(_),
                _,
            ) => false,
        }
    }
}

impl Eq for Error {}

impl Error {
    pub(crate) fn from_failure(kind: FailureKind, outcomes: Outcomes) -> Error {
        match kind {
            FailureKind::Conflict => Error::Conflict(outcomes),
            FailureKind::Expired => Error::Expired(outcomes),
            FailureKind::Lost => Error::Lost(outcomes),
            FailureKind::FenceLost => Error::FenceLost(outcomes),
            _ => Error::Unavailable(outcomes),
        }
    }

    /// The per-server outcomes, for quorum failures.
    pub fn outcomes(&self) -> Option<&Outcomes> {
        match self {
            Error::Conflict(o)
            | Error::Unavailable(o)
            | Error::Expired(o)
            | Error::Lost(o)
            | Error::FenceLost(o) => Some(o),
            _ => None,
        }
    }

    /// The per-server report, for quorum failures.
    pub fn report(&self) -> Option<&Report> {
        self.outcomes().map(Outcomes::report)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (what, outcomes) = match self {
            Error::Conflict(o) => ("the lock is held by another client", o),
            Error::Unavailable(o) => ("too few servers answered", o),
            Error::Expired(o) => ("a majority answered too late: no validity left", o),
            Error::Lost(o) => ("the lock is no longer ours on a majority of servers", o),
            Error::FenceLost(o) => {
                return write!(f, "{} ({o})", FailureKind::FenceLost);
            }
            Error::DuplicateServer { first, second } => {
                return write!(
                    f,
                    "{first} and {second} are the same server: one server (with any \
                     number of databases) is one master, and would get two votes"
                );
            }
            Error::Argument(e) => return write!(f, "invalid argument: {e}"),
            Error::Url(e) => return write!(f, "invalid server address: {e}"),
            Error::ServerCount(n) => {
                return write!(
                    f,
                    "{n} servers: between 1 and {} are supported",
                    redlock_core::MAX_SERVERS
                );
            }
            Error::AlreadyReleased => return f.write_str("the lock was released already"),
            Error::Rng(e) => return write!(f, "the OS random number generator failed: {e}"),
            Error::Io(e) => return write!(f, "I/O error: {e}"),
            Error::TlsSettings(e) => return write!(f, "TLS settings: {e}"),
        };
        write!(f, "{what} ({outcomes})")
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl core::error::Error for Error {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Error::Argument(e) => Some(e),
            Error::Url(e) => Some(e),
            Error::Rng(e) | Error::Io(e) => Some(&**e),
            _ => None,
        }
    }
}

/// What a server's outcome means, in a few words ("held by another token"):
/// the core's `Display` of [`ServerOutcome`].
pub fn describe(o: ServerOutcome) -> String {
    o.to_string()
}
