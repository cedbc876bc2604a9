//! Server error replies, classified by their first word.

/// What a server error reply is about, from its first word (`NOSCRIPT No
/// matching script` is [`ErrorKind::NoScript`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ErrorKind {
    /// `ERR`: a generic error (wrong arguments, script runtime error, ...).
    Err,
    /// `NOSCRIPT`: `EVALSHA` for a script the server does not have.
    NoScript,
    /// `NOAUTH`: authentication required.
    NoAuth,
    /// `WRONGPASS`: bad user name or password.
    WrongPass,
    /// `NOPERM`: the ACL user may not run this command or touch this key.
    NoPerm,
    /// `READONLY`: the server is a read-only replica.
    ReadOnly,
    /// `LOADING`: the server is loading its dataset.
    Loading,
    /// `BUSY`: a script is running too long.
    Busy,
    /// `OOM`: the command would exceed `maxmemory`.
    Oom,
    /// `WRONGTYPE`: the key holds a value of another type.
    WrongType,
    /// `MASTERDOWN`: the replica lost its master.
    MasterDown,
    /// `CLUSTERDOWN`: the cluster is down.
    ClusterDown,
    /// `MOVED`: the slot lives on another cluster node.
    Moved,
    /// `ASK`: the slot is migrating.
    Ask,
    /// `TRYAGAIN`: retry during resharding.
    TryAgain,
    /// Any other prefix; [`ServerError::message`] has the text verbatim.
    Other,
}

/// Every kind with a prefix of its own.
const KINDS: [ErrorKind; 15] = [
    ErrorKind::Err,
    ErrorKind::NoScript,
    ErrorKind::NoAuth,
    ErrorKind::WrongPass,
    ErrorKind::NoPerm,
    ErrorKind::ReadOnly,
    ErrorKind::Loading,
    ErrorKind::Busy,
    ErrorKind::Oom,
    ErrorKind::WrongType,
    ErrorKind::MasterDown,
    ErrorKind::ClusterDown,
    ErrorKind::Moved,
    ErrorKind::Ask,
    ErrorKind::TryAgain,
];

impl ErrorKind {
    /// Classifies an error by its first word (the text up to the first space).
    pub fn classify(message: &[u8]) -> ErrorKind {
        let code = message.split(|&b| b == b' ').next().unwrap_or_default();
        KINDS
            .iter()
            .find(|k| k.as_str().as_bytes() == code)
            .copied()
            .unwrap_or(ErrorKind::Other)
    }

    /// The prefix this kind stands for (`"OTHER"` for [`ErrorKind::Other`]).
    pub fn as_str(&self) -> &'static str {
        match self {
            ErrorKind::Err => "ERR",
            ErrorKind::NoScript => "NOSCRIPT",
            ErrorKind::NoAuth => "NOAUTH",
            ErrorKind::WrongPass => "WRONGPASS",
            ErrorKind::NoPerm => "NOPERM",
            ErrorKind::ReadOnly => "READONLY",
            ErrorKind::Loading => "LOADING",
            ErrorKind::Busy => "BUSY",
            ErrorKind::Oom => "OOM",
            ErrorKind::WrongType => "WRONGTYPE",
            ErrorKind::MasterDown => "MASTERDOWN",
            ErrorKind::ClusterDown => "CLUSTERDOWN",
            ErrorKind::Moved => "MOVED",
            ErrorKind::Ask => "ASK",
            ErrorKind::TryAgain => "TRYAGAIN",
            ErrorKind::Other => "OTHER",
        }
    }
}

impl core::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error reply (`-...` or RESP3 `!...`), borrowing its text from the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ServerError<'a> {
    message: &'a [u8],
}

impl<'a> ServerError<'a> {
    /// Wraps the text of an error reply.
    pub fn new(message: &'a [u8]) -> Self {
        ServerError { message }
    }

    /// The whole error text as sent, prefix included.
    pub fn message(&self) -> &'a [u8] {
        self.message
    }

    /// The classification by prefix.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::classify(self.message)
    }
}

impl core::fmt::Display for ServerError<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for chunk in self.message.utf8_chunks() {
            f.write_str(chunk.valid())?;
            if !chunk.invalid().is_empty() {
                f.write_str("\u{FFFD}")?;
            }
        }
        Ok(())
    }
}
