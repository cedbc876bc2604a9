//! A connection to one server: its state, buffers, the handshake's
//! bookkeeping, and what is said of a refused server.

use super::*;

/// The tag of a request in a connection's session: the operation it is
/// of, running in this slot with this serial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Expect {
    pub(super) slot: u16,
    pub(super) serial: u64,
}

/// The requests a session awaits: a growable queue, bounded at
/// [`MAX_OUTSTANDING`] (the session gives a connection that owes more up:
/// its server is stuck).
#[derive(Debug, Default)]
pub(super) struct Owed(pub(super) VecDeque<Entry<Expect>>);

impl Queue<Expect> for Owed {
    fn push_back(&mut self, entry: Entry<Expect>) -> Result<(), Entry<Expect>> {
        if self.0.len() >= MAX_OUTSTANDING {
            return Err(entry);
        }
        self.0.push_back(entry);
        Ok(())
    }
    fn pop_front(&mut self) -> Option<Entry<Expect>> {
        self.0.pop_front()
    }
    fn front(&self) -> Option<&Entry<Expect>> {
        self.0.front()
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn for_each(&self, f: impl FnMut(&Entry<Expect>)) {
        self.0.iter().for_each(f);
    }
}

/// A connection's session, as the core decides it.
pub(super) type ConnSession = Session<Expect, Owed>;

/// One server's connection: the socket and buffers the platform owns, and
/// the core's session, which decides everything else. Its invariants
/// (checked by [`Conn::check_invariants`]):
/// - `held` is not empty only while the session is connecting or in its
///   handshake: nothing but the handshake is written before the core judged
///   every handshake reply good;
/// - `releases_held` only while `held` is not empty.
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
    /// The core's session: state, handshake, the requests awaited, backoff.
    pub(super) session: ConnSession,
    /// Bytes waiting to be written.
    pub(super) out: Vec<u8>,
    /// Bytes read are `inbuf[..filled]`; the rest is room for reading, kept
    /// initialised so that reads do not clear it each time.
    pub(super) inbuf: Vec<u8>,
    pub(super) filled: usize,
    /// Requests the session holds behind the handshake, written once it
    /// passed.
    pub(super) held: Vec<u8>,
    /// A release is among them: the last thread out waits for it.
    pub(super) releases_held: bool,
    pub(super) writable_interest: bool,
    /// The server's own error text from its last refused handshake, while
    /// the session says it is refused for that reason.
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
            .field("state", &self.session.state())
            .field("failures", &self.session.failures())
            .field("out_len", &self.out.len())
            .field("held_len", &self.held.len())
            .field("filled", &self.filled)
            .field("owed", &self.session.owed())
            .field("incarnation", &self.session.incarnation())
            .field("refused", &self.session.refused())
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
                || matches!(
                    self.session.state(),
                    SessionState::Connecting | SessionState::Handshake
                ),
            "requests held without a handshake to come"
        );
        debug_assert!(!self.releases_held || !self.held.is_empty());
    }
}

impl Conn {
    /// The transport is up (TCP, and TLS): the handshake or requests go
    /// out on it.
    pub(super) fn is_up(&self) -> bool {
        matches!(
            self.session.state(),
            SessionState::Handshake | SessionState::Ready
        )
    }

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
        // Everything queued is on its way from here (a write left
        // unfinished goes on when the socket is writable, corked or not).
        self.session.flushed();
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

    /// Reads until the socket is drained (true: `WouldBlock`, or a short
    /// read where that shows it, see [`Stream::short_read_drains`]), or
    /// until the frame limit is buffered (false: parse, then read again).
    /// `closed`: the poll's event said the peer closed or the socket
    /// failed; it is then read until the end or the error (which no later
    /// event would announce), short reads or not.
    pub(super) fn read(&mut self, limits: Limits, closed: bool) -> io::Result<bool> {
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
            let asked = room.len();
            match stream.read(room) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => {
                    self.filled += n;
                    // Drained (and no EOF or error queued behind the
                    // data): reading again would only return `WouldBlock`,
                    // a syscall per socket and turn.
                    if n < asked && !closed && stream.short_read_drains() {
                        return Ok(true);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Closes the connection because of `why` (the session decides when it
    /// may reconnect), with the server's text when it is refused. Calls
    /// `lost` with the tag of each request of an operation it dropped:
    /// routing them to their operations is the caller's business.
    pub(super) fn fail(
        &mut self,
        registry: &Registry,
        policy: &Policy,
        now: Instant,
        why: Close,
        text: Option<String>,
        lost: impl FnMut(Expect),
    ) {
        if self.stream.is_some() {
            log::warn!("redlock: closing the connection to {} ({why})", self.url);
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
        let handshaking = self.session.state() == SessionState::Handshake;
        let (why, text) = match (why, tls_failure) {
            (Close::Refused(e), _) => (Close::Refused(e), text),
            (_, Some(f)) if f.alert && handshaking => {
                let text = format!("{}: {}", SetupError::Tls, f.text);
                log::warn!("redlock: not using {}: {text}", self.url);
                (Close::Refused(SetupError::Tls), Some(text))
            }
            (why, Some(f)) => {
                let text = format!("{}: {}", SetupError::Tls, f.text);
                log::warn!("redlock: {}: {text}", self.url);
                self.failure_note = Some(text);
                (why, None)
            }
            (why, None) => (why, None),
        };
        if let Some(mut s) = self.stream.take() {
            let _ = registry.deregister(s.tcp_mut());
        }
        if self.session.state() == SessionState::Connecting {
            // This address did not take a connection: the next connect
            // tries the next one.
            self.addr_next = self.addr_next.saturating_add(1);
        }
        self.refused = match why {
            Close::Refused(e) => Some((e, text.unwrap_or_else(|| e.to_string()))),
            _ => None,
        };
        self.session.close(now, why, policy, lost);
        self.out.clear();
        self.held.clear();
        self.releases_held = false;
        self.filled = 0;
        self.writable_interest = false;
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
