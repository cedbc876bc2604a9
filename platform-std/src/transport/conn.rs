//! A connection to one server: its state, buffers, the handshake's
//! bookkeeping, and what is said of a refused server.

use super::*;

/// What a reply on a connection answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expect {
    /// A handshake step, judged by the core.
    Handshake(Step),
    /// A request of the operation with this serial, running in this slot.
    Op { slot: u16, serial: u64 },
}

#[derive(Debug, PartialEq, Eq)]
pub(super) enum ConnState {
    /// Not connected; may connect from `retry_at` on.
    Down { retry_at: StdInstant },
    /// Non-blocking connect in progress since `since`.
    Connecting { since: StdInstant },
    /// Connected.
    Up,
}

/// One server's connection. Its invariants (checked by
/// [`Conn::check_invariants`]):
/// - `held` is not empty only while the handshake runs (`handshake_left >
///   0`) on a connection that is not down: nothing but the handshake is
///   written before the core judged every handshake reply good;
/// - `releases_held` only while `held` is not empty;
/// - the first `handshake_left` entries of `expect` are handshake steps.
pub(super) struct Conn {
    pub(super) url: ServerUrl,
    pub(super) addrs: Vec<SocketAddr>,
    /// When `addrs` was resolved.
    pub(super) resolved_at: Option<StdInstant>,
    /// Addresses a lookup found (outside the state lock), adopted by the
    /// next connect that has tried every address (and checked there for a
    /// duplicate server before use).
    pub(super) looked_up: Option<Vec<SocketAddr>>,
    /// The address of `addrs` the next connect tries: connects that fail
    /// move on to the next one (a host name with an IPv6 and an IPv4
    /// address, a server listening on one of them), and after all of them
    /// start over, with the name resolved again if the list is older than
    /// [`RESOLVE_AGAIN`].
    pub(super) addr_next: usize,
    pub(super) stream: Option<Stream>,
    /// TLS (`rediss://`): the configuration and the name to check.
    pub(super) tls: Option<TlsTarget>,
    pub(super) state: ConnState,
    pub(super) failures: u32,
    /// Bytes waiting to be written.
    pub(super) out: Vec<u8>,
    /// Bytes read are `inbuf[..filled]`; the rest is room for reading, kept
    /// initialised so that reads do not clear it each time.
    pub(super) inbuf: Vec<u8>,
    pub(super) filled: usize,
    pub(super) expect: VecDeque<Expect>,
    /// Handshake replies still awaited on this connection.
    pub(super) handshake_left: usize,
    /// When the handshake began (the connect completed): it must pass
    /// within a connect timeout.
    pub(super) handshake_since: StdInstant,
    /// Requests queued while the handshake runs, written once it passed.
    pub(super) held: Vec<u8>,
    /// A release is among them: the last thread out waits for it.
    pub(super) releases_held: bool,
    /// A release may reconnect at once, in the backoff: the server was
    /// reachable when the connection last failed. Cleared when a connect
    /// fails, so that a dead host costs a release's wait once, not every
    /// call.
    pub(super) urgent_ok: bool,
    pub(super) writable_interest: bool,
    /// When the server's current incarnation began (core clock), from the
    /// `INFO` of this connection's handshake.
    pub(super) incarnation: Option<Instant>,
    /// The server's `run_id` from its last handshake (its identity), kept
    /// across reconnects until the next `INFO` says otherwise.
    pub(super) run_id: Option<Vec<u8>>,
    /// Why the server may not be used, since its last handshake failed
    /// (with the server's own error text), until one passes.
    pub(super) refused: Option<(SetupError, String)>,
    /// Why the connection last failed, when more is known than that it
    /// failed (a TLS handshake without an answer, a TLS error after the
    /// handshake passed), for reports: cleared by the next connect.
    pub(super) failure_note: Option<String>,
}

/// The longest server error text kept for a report.
pub(super) const MAX_ERROR_TEXT: usize = 200;

impl core::fmt::Debug for Conn {
    // By hand: `out` holds the `AUTH` command (the password) while the
    // handshake is written; buffers show as lengths only.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Conn")
            .field("url", &self.url)
            .field("addrs", &self.addrs)
            .field("state", &self.state)
            .field("failures", &self.failures)
            .field("out_len", &self.out.len())
            .field("held_len", &self.held.len())
            .field("filled", &self.filled)
            .field("expect", &self.expect.len())
            .field("handshake_left", &self.handshake_left)
            .field("incarnation", &self.incarnation)
            .field("refused", &self.refused.as_ref().map(|(why, _)| why))
            .finish_non_exhaustive()
    }
}

impl Conn {
    /// The invariants written at [`Conn`], in debug builds.
    pub(super) fn check_invariants(&self) {
        if std::thread::panicking() {
            // Unwinding already: a second panic would abort the process.
            return;
        }
        debug_assert!(
            self.held.is_empty()
                || (self.handshake_left > 0 && !matches!(self.state, ConnState::Down { .. })),
            "requests held without a handshake running"
        );
        debug_assert!(!self.releases_held || !self.held.is_empty());
        debug_assert!(
            self.expect
                .iter()
                .take(self.handshake_left)
                .all(|e| matches!(e, Expect::Handshake(_))),
            "the handshake is not first"
        );
    }
}

impl Conn {
    /// Bytes wait to be written: requests, or TLS records the socket has
    /// not taken yet.
    pub(super) fn has_unwritten(&self) -> bool {
        !self.out.is_empty() || self.stream.as_ref().is_some_and(Stream::wants_write)
    }

    /// Writes `out` until `WouldBlock`; writable interest only while bytes
    /// (or TLS records) wait.
    pub(super) fn flush(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        let Some(stream) = self.stream.as_mut() else {
            return Ok(());
        };
        let mut written = 0;
        while written < self.out.len() {
            match stream.write(&self.out[written..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        stream.flush_records()?;
        self.out.drain(..written);
        let want = !self.out.is_empty() || stream.wants_write();
        if want != self.writable_interest {
            let interest = if want {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            registry.reregister(stream.tcp_mut(), token, interest)?;
            self.writable_interest = want;
        }
        Ok(())
    }

    /// Reads until `WouldBlock` (true), or until the frame limit is
    /// buffered (false: parse, then read again).
    pub(super) fn read(&mut self, limits: Limits) -> io::Result<bool> {
        let limit = limits
            .max_frame_len
            .saturating_add(limits.max_line_len)
            .saturating_add(READ_CHUNK);
        let Some(stream) = self.stream.as_mut() else {
            return Ok(true);
        };
        loop {
            if self.filled >= limit {
                return Ok(false);
            }
            if self.inbuf.len().saturating_sub(self.filled) < READ_CHUNK {
                // Grows only while a reply larger than the buffer comes in.
                self.inbuf.resize(self.filled + READ_CHUNK, 0);
            }
            let room = self.inbuf.get_mut(self.filled..).unwrap_or_default();
            match stream.read(room) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => self.filled += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Closes the connection after an error (it may reconnect after an
    /// exponential backoff), with why the server is refused, if it is.
    /// Returns the requests of operations it dropped, as `(slot, serial)`:
    /// routing them to their operations is the caller's business.
    #[must_use = "the operations whose requests were dropped must be told"]
    pub(super) fn fail(
        &mut self,
        registry: &Registry,
        config: &ConnConfig,
        refused: Option<(SetupError, String)>,
    ) -> impl Iterator<Item = (u16, u64)> + '_ {
        if self.stream.is_some() {
            log::warn!(
                "redlock: closing the connection to {} after an error",
                self.url
            );
        }
        // C9: the TLS layer's own reason, when it is why the connection
        // failed. An alert from the server before the client's handshake passed
        // refuses the server (TLS 1.3 refuses a client certificate after
        // the client finished its side of the TLS handshake). Anything else
        // once the TLS handshake passed (a corrupt record, a reset) is a
        // connection error, with the reason kept for reports: a release on
        // it is sent again once the connection is back, which must pass TLS
        // again. (Failures during the TLS handshake itself are judged where
        // it runs, `progress_connects`.)
        let tls_failure = self.stream.as_mut().and_then(Stream::take_failure);
        let refused = match (refused, tls_failure) {
            (Some(r), _) => Some(r),
            (None, Some(f)) if f.alert && self.handshake_left > 0 => {
                let text = format!("{}: {}", SetupError::Tls, f.text);
                log::warn!("redlock: not using {}: {text}", self.url);
                Some((SetupError::Tls, text))
            }
            (None, Some(f)) => {
                let text = format!("{}: {}", SetupError::Tls, f.text);
                log::warn!("redlock: {}: {text}", self.url);
                self.failure_note = Some(text);
                None
            }
            (None, None) => None,
        };
        if let Some(mut s) = self.stream.take() {
            let _ = registry.deregister(s.tcp_mut());
        }
        if self.state != ConnState::Up {
            // This address did not take a connection: the next connect tries
            // the next one; a release no longer reconnects at once.
            self.addr_next = self.addr_next.saturating_add(1);
            self.urgent_ok = false;
        }
        self.failures = self.failures.saturating_add(1);
        let shift = self.failures.min(16) - 1;
        let backoff = config
            .backoff_min
            .saturating_mul(1 << shift)
            .min(config.backoff_max);
        self.state = ConnState::Down {
            retry_at: StdInstant::now() + backoff,
        };
        self.out.clear();
        self.held.clear();
        self.releases_held = false;
        self.filled = 0;
        self.handshake_left = 0;
        self.writable_interest = false;
        self.refused = refused;
        self.expect.drain(..).filter_map(|e| match e {
            Expect::Op { slot, serial } => Some((slot, serial)),
            Expect::Handshake(_) => None,
        })
    }
}

/// Who a connection is, for the duplicate check: the addresses its name
/// resolved to, or the name itself while it resolves to nothing.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Identity<'a> {
    Addr(SocketAddr),
    Name(&'a str, u16),
}

pub(super) fn identities(c: &Conn) -> Vec<Identity<'_>> {
    let mut ids: Vec<Identity<'_>> = c.addrs.iter().map(|&a| Identity::Addr(a)).collect();
    ids.push(Identity::Name(c.url.host.as_str(), c.url.port));
    ids
}

/// The first two connections to the same server (the core's rule).
pub(super) fn same_server(conns: &[Conn]) -> Option<(usize, usize)> {
    let ids: Vec<Vec<Identity<'_>>> = conns.iter().map(identities).collect();
    let slices: Vec<&[Identity<'_>]> = ids.iter().map(Vec::as_slice).collect();
    handshake::same_server(&slices).map(|(a, b)| (a.index(), b.index()))
}

/// Another connection to the same server as connection `i`, if any (the
/// core's rule).
pub(super) fn twin_of(conns: &[Conn], i: usize) -> Option<usize> {
    let ids: Vec<Vec<Identity<'_>>> = conns.iter().map(identities).collect();
    let slices: Vec<&[Identity<'_>]> = ids.iter().map(Vec::as_slice).collect();
    handshake::twin_of(&slices, i).map(ServerId::index)
}

/// Why a connect could not start.
#[derive(Debug)]
pub(super) enum ConnectError {
    /// The socket could not be opened, or the name not resolved.
    Io(io::Error),
    /// The server may not be used (with the text for the report).
    Refused(SetupError, String),
}

impl From<io::Error> for ConnectError {
    fn from(e: io::Error) -> ConnectError {
        ConnectError::Io(e)
    }
}

/// Starts a non-blocking connect to `conn`'s address `addr_next`, or the
/// first of the next ones that takes it, registered for readiness. False
/// when none is left (then `addr_next` is past the end of the list).
pub(super) fn open_stream(conn: &mut Conn, registry: &Registry, token: Token) -> bool {
    while let Some(&addr) = conn.addrs.get(conn.addr_next) {
        let opened = Stream::connect(addr, conn.tls.as_ref()).and_then(|mut stream| {
            registry.register(
                stream.tcp_mut(),
                token,
                Interest::READABLE | Interest::WRITABLE,
            )?;
            Ok(stream)
        });
        match opened {
            Ok(stream) => {
                conn.stream = Some(stream);
                conn.writable_interest = true;
                return true;
            }
            Err(e) => {
                log::debug!("redlock: cannot connect to {addr} ({}): {e}", conn.url);
                conn.addr_next = conn.addr_next.saturating_add(1);
            }
        }
    }
    false
}

/// The addresses of `url`'s host (a name lookup for a host name).
pub(super) fn resolve(url: &ServerUrl) -> io::Result<Vec<SocketAddr>> {
    Ok((url.host.as_str(), url.port).to_socket_addrs()?.collect())
}

/// Encodes into the end of `out`, growing it to the size the encoder asks for.
pub(super) fn encode_growing(
    out: &mut Vec<u8>,
    f: impl Fn(&mut [u8]) -> Result<usize, redlock_core::redlock_resp::EncodeError>,
) -> usize {
    let start = out.len();
    out.resize(start + 256, 0);
    let n = match f(&mut out[start..]) {
        Ok(n) => n,
        Err(redlock_core::redlock_resp::EncodeError::BufferTooSmall { needed }) => {
            out.resize(start + needed, 0);
            f(&mut out[start..]).unwrap_or(0)
        }
        Err(_) => 0,
    };
    out.truncate(start + n);
    n
}
