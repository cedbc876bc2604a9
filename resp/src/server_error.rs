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

/// The prefixes of [`KINDS`], in the same order, each after its length in
/// one byte (the same text as [`ErrorKind::as_str`]; a test checks it).
const PREFIXES: &[u8] = b"\x03ERR\x08NOSCRIPT\x06NOAUTH\x09WRONGPASS\x06NOPERM\x08READONLY\
    \x07LOADING\x04BUSY\x03OOM\x09WRONGTYPE\x0aMASTERDOWN\x0bCLUSTERDOWN\x05MOVED\x03ASK\
    \x08TRYAGAIN";

impl ErrorKind {
    /// Classifies an error by its first word (the text up to the first space).
    pub fn classify(message: &[u8]) -> ErrorKind {
        let code = match message.iter().position(|&b| b == b' ') {
            Some(end) => message.get(..end).unwrap_or_default(),
            None => message,
        };
        // The prefixes of `KINDS` in order, each after its length: a few
        // bytes of table instead of a pointer and a length per kind.
        let mut rest = PREFIXES;
        for &kind in &KINDS {
            let Some((&len, tail)) = rest.split_first() else {
                break;
            };
            let Some((prefix, tail)) = tail.split_at_checked(usize::from(len)) else {
                break;
            };
            if prefix == code {
                return kind;
            }
            rest = tail;
        }
        ErrorKind::Other
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_table_is_as_str() {
        let mut rest = PREFIXES;
        for kind in KINDS {
            let (&len, tail) = rest.split_first().unwrap_or((&0, &[]));
            let (prefix, tail) = tail.split_at(usize::from(len));
            assert_eq!(prefix, kind.as_str().as_bytes());
            assert_eq!(ErrorKind::classify(prefix), kind);
            rest = tail;
        }
        assert!(rest.is_empty());
        for (message, kind) in [
            (&b""[..], ErrorKind::Other),
            (b" ERR", ErrorKind::Other),
            (b"ERR", ErrorKind::Err),
            (b"ERR ", ErrorKind::Err),
            (b"ERRX y", ErrorKind::Other),
            (b"NOSCRIPT No matching script", ErrorKind::NoScript),
            (b"OTHER x", ErrorKind::Other),
            (b"err x", ErrorKind::Other),
            (b"TRYAGAIN", ErrorKind::TryAgain),
        ] {
            assert_eq!(ErrorKind::classify(message), kind, "{message:?}");
        }
    }
}
