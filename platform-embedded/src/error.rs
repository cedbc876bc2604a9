//! What an operation fails with.

use redlock_core::{ArgumentError, FailureKind, Released, Report};

/// Why an operation failed. The variants with a [`Report`] say, per server,
/// what it answered (or why it was not asked: a refused handshake shows as
/// [`ServerOutcome::Setup`](redlock_core::ServerOutcome::Setup)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Error {
    /// The lock is held by someone else (after the retries).
    Conflict(Report),
    /// Too few servers answered usefully: down, timed out, errors, refused
    /// handshakes, votes that did not count.
    Unavailable(Report),
    /// A majority answered, but too late: no validity was left.
    Expired(Report),
    /// Extend: the lock is no longer ours on a majority.
    Lost(Report),
    /// F1: the fence counter is missing on too many servers for a safe
    /// fencing token; fenced acquisitions refuse until
    /// [`Client::fence_repair`](crate::Client::fence_repair) raised it.
    FenceLost(Report),
    /// Unlock: fewer than a majority confirmed the release; the key may
    /// stay until its ttl ends.
    NotReleased(Released),
    /// A bad argument: a ttl under 1 ms, a token over 64 bytes, a lock
    /// past its extension limit or its validity.
    Argument(ArgumentError),
    /// The resource name does not fit the client's output buffer (`OUT`):
    /// at most `max` bytes.
    ResourceTooLong {
        /// The longest resource name this client can send.
        max: usize,
    },
    /// The client's buffers are too small for the handshake: `OUT` must
    /// hold the largest `SCRIPT LOAD` (`needed` bytes).
    BufferTooSmall {
        /// The smallest `OUT` that works.
        needed: usize,
    },
    /// An operation ended without an outcome: a bug (of this crate or the
    /// core), reported rather than hidden.
    NoOutcome,
    /// The client was made with 0 or more than
    /// [`MAX_SERVERS`](redlock_core::MAX_SERVERS) servers.
    ServerCount(usize),
}

impl Error {
    pub(crate) fn from_failure(kind: FailureKind, report: Report) -> Error {
        match kind {
            FailureKind::Conflict => Error::Conflict(report),
            FailureKind::Expired => Error::Expired(report),
            FailureKind::Lost => Error::Lost(report),
            FailureKind::FenceLost => Error::FenceLost(report),
            _ => Error::Unavailable(report),
        }
    }

    /// The per-server report, for the errors that have one.
    pub fn report(&self) -> Option<&Report> {
        match self {
            Error::Conflict(r)
            | Error::Unavailable(r)
            | Error::Expired(r)
            | Error::Lost(r)
            | Error::FenceLost(r) => Some(r),
            Error::NotReleased(r) => Some(&r.report),
            _ => None,
        }
    }
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let why = match self {
            Error::Conflict(_) => "the lock is held by another client",
            Error::Unavailable(_) => "too few servers answered usefully",
            Error::Expired(_) => "a majority answered, but no validity was left",
            Error::Lost(_) => "the lock is no longer held on a majority",
            Error::FenceLost(_) => "the fence counter is lost on too many servers",
            Error::NotReleased(_) => "fewer than a majority confirmed the release",
            Error::Argument(e) => return write!(f, "{e}"),
            Error::ResourceTooLong { max } => {
                return write!(f, "resource name too long: at most {max} bytes");
            }
            Error::BufferTooSmall { needed } => {
                return write!(f, "output buffer too small: at least {needed} bytes needed");
            }
            Error::ServerCount(n) => return write!(f, "{}", redlock_core::ServerCountError(*n)),
            Error::NoOutcome => "the operation ended without an outcome (a bug)",
        };
        f.write_str(why)?;
        if let Some(report) = self.report() {
            for (i, (_, outcome)) in report.iter().enumerate() {
                write!(
                    f,
                    "{}server {i}: {outcome}",
                    if i == 0 { ": " } else { ", " }
                )?;
            }
        }
        Ok(())
    }
}

impl core::error::Error for Error {}

impl From<ArgumentError> for Error {
    fn from(e: ArgumentError) -> Error {
        Error::Argument(e)
    }
}
