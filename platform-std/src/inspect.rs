//! F3 inspection in std types: who holds a resource on each server.

use core::time::Duration;

use redlock_core::ServerOutcome;

/// What one server holds for a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holding {
    /// `Ok` when the server answered; otherwise why it did not.
    pub outcome: ServerOutcome,
    /// The value of the key (the holder's token), cut to
    /// [`HOLDER_CAPACITY`](redlock_core::HOLDER_CAPACITY) bytes; `None`
    /// when the key is absent.
    pub holder: Option<Vec<u8>>,
    /// The full length of the value (more than `holder` holds if cut).
    pub holder_len: usize,
    /// `PTTL`: remaining milliseconds, -1 for no expiry, -2 when absent.
    pub pttl_ms: i64,
    /// For a server not used (its handshake or TLS failed): why, with the
    /// server's own words ("TLS failed: the server's certificate has
    /// expired"); for a failed connection, why when more is known than
    /// that it failed. Never a password.
    pub refusal: Option<String>,
}

impl Holding {
    /// The remaining time to live, when the key exists and expires.
    pub fn ttl(&self) -> Option<Duration> {
        u64::try_from(self.pttl_ms).ok().map(Duration::from_millis)
    }

    /// What the outcome means, in a few words, with the reason a server
    /// was not used when it is known.
    pub fn describe(&self) -> String {
        match (&self.refusal, self.outcome) {
            (Some(text), ServerOutcome::Setup(_)) => format!("not used: {text}"),
            (Some(text), o @ ServerOutcome::ConnectionError) => format!("{o}: {text}"),
            (_, o) => o.to_string(),
        }
    }

    /// The holder's token as text, when it is UTF-8 (ours always are).
    pub fn holder_str(&self) -> Option<&str> {
        core::str::from_utf8(self.holder.as_deref()?).ok()
    }
}

/// Per-server holdings of a resource, in server order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspection {
    entries: Vec<Holding>,
    majority: Option<usize>,
}

impl Inspection {
    /// The core's inspection, with the reasons servers were not used or
    /// their connections failed (`note(i, outcome)`, server i's).
    pub(crate) fn from_core(
        inspection: &redlock_core::Inspection,
        note: impl Fn(usize, ServerOutcome) -> Option<String>,
    ) -> Inspection {
        let entries: Vec<Holding> = inspection
            .entries()
            .iter()
            .enumerate()
            .map(|(i, h)| Holding {
                refusal: note(i, h.outcome),
                outcome: h.outcome,
                holder: h.holder.as_deref().map(<[u8]>::to_vec),
                holder_len: h.holder_len,
                pttl_ms: h.pttl_ms,
            })
            .collect();
        let majority = inspection
            .majority_holder()
            .and_then(|m| entries.iter().position(|e| e.holder.as_deref() == Some(m)));
        Inspection { entries, majority }
    }

    /// Holdings in server order.
    pub fn entries(&self) -> &[Holding] {
        &self.entries
    }

    /// The token held by a majority of the servers, if any.
    pub fn majority_holder(&self) -> Option<&[u8]> {
        self.entries.get(self.majority?)?.holder.as_deref()
    }
}
