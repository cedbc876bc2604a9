//! A connection's byte stream: a plain non-blocking TCP socket, or (feature
//! `tls`) rustls' sans-IO client session over one. Both are driven by the
//! same poll: the connection writes and reads plaintext, and the TLS layer
//! moves records between it and the socket as far as the socket lets it,
//! never blocking. What a TLS failure makes of the server is SPEC C9
//! (judged in `wire.rs` during the TLS handshake, in `Conn::fail` after).

use super::*;

/// Where a TLS connection goes: the client's rustls configuration and the
/// name its certificate is checked against (and sent as SNI).
#[cfg(feature = "tls")]
#[derive(Clone)]
pub(crate) struct TlsTarget {
    pub(crate) config: Arc<rustls::ClientConfig>,
    pub(crate) name: rustls::pki_types::ServerName<'static>,
}

#[cfg(feature = "tls")]
impl core::fmt::Debug for TlsTarget {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TlsTarget")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Without the `tls` feature no connection is TLS.
#[cfg(not(feature = "tls"))]
#[derive(Debug, Clone)]
pub(crate) enum TlsTarget {}

/// Why a TLS session failed.
#[derive(Debug, Clone)]
pub(super) struct TlsFailure {
    /// In words for a report (at most [`MAX_ERROR_TEXT`] bytes).
    pub(super) text: String,
    /// The server ended the session with an alert (it refused us: a
    /// client certificate it does not take, say), rather than the client
    /// finding fault with what it received.
    pub(super) alert: bool,
}

/// A connection's socket, with its TLS session if it has one.
pub(super) enum Stream {
    Plain(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<TlsStream>),
}

#[cfg(feature = "tls")]
pub(super) struct TlsStream {
    tcp: TcpStream,
    /// The TCP connect completed (from then on the socket's errors come
    /// through reads, after what the server sent before them, such as an
    /// alert).
    connected: bool,
    tls: rustls::ClientConnection,
    /// What went wrong in the TLS layer, once it failed (the I/O error
    /// returned then only says that it failed).
    failure: Option<TlsFailure>,
}

impl core::fmt::Debug for Stream {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Stream::Plain(_) => f.write_str("Stream::Plain"),
            #[cfg(feature = "tls")]
            Stream::Tls(_) => f.write_str("Stream::Tls"),
        }
    }
}

impl Stream {
    /// Starts a non-blocking connect to `addr`; with a `tls` target, a TLS
    /// session that begins once the socket is connected.
    pub(super) fn connect(addr: SocketAddr, tls: Option<&TlsTarget>) -> io::Result<Stream> {
        let tcp = TcpStream::connect(addr)?;
        // Requests are small and latency is what matters (set before the
        // connect completes, which Linux and the BSDs allow).
        let _ = tcp.set_nodelay(true);
        match tls {
            None => Ok(Stream::Plain(tcp)),
            #[cfg(feature = "tls")]
            Some(t) => {
                let tls = rustls::ClientConnection::new(t.config.clone(), t.name.clone())
                    .map_err(|e| io::Error::other(format!("TLS: {e}")))?;
                Ok(Stream::Tls(Box::new(TlsStream {
                    tcp,
                    connected: false,
                    tls,
                    failure: None,
                })))
            }
            #[cfg(not(feature = "tls"))]
            Some(never) => match *never {},
        }
    }

    /// The TCP connect completed and was seen to (a TLS stream that runs
    /// its handshake). A plain stream is up as soon as it connected.
    pub(super) fn connected(&self) -> bool {
        match self {
            Stream::Plain(_) => false,
            #[cfg(feature = "tls")]
            Stream::Tls(t) => t.connected,
        }
    }

    /// The socket, for the poll's registry and connect checks.
    pub(super) fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            #[cfg(feature = "tls")]
            Stream::Tls(t) => &t.tcp,
        }
    }

    /// The socket, for the poll's registry.
    pub(super) fn tcp_mut(&mut self) -> &mut TcpStream {
        match self {
            Stream::Plain(s) => s,
            #[cfg(feature = "tls")]
            Stream::Tls(t) => &mut t.tcp,
        }
    }

    /// Once the socket is connected: moves the TLS handshake on as far as
    /// the socket allows. `Ok(true)` when the stream is ready for requests
    /// (at once for a plain socket); `Ok(false)` while the handshake waits
    /// for the server; `Err` when it failed ([`Stream::take_failure`] then
    /// says why, if the TLS layer knows).
    pub(super) fn handshake(&mut self) -> io::Result<bool> {
        match self {
            Stream::Plain(_) => Ok(true),
            #[cfg(feature = "tls")]
            Stream::Tls(t) => {
                t.connected = true;
                t.handshake()
            }
        }
    }

    /// Writes plaintext; returns how much was taken (`WouldBlock` when
    /// nothing could be). TLS records the socket could not take wait in
    /// the session ([`Stream::wants_write`]).
    pub(super) fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            #[cfg(feature = "tls")]
            Stream::Tls(t) => t.write(buf),
        }
    }

    /// Writes TLS records waiting in the session, until the socket would
    /// block (plain: nothing to do).
    pub(super) fn flush_records(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(_) => Ok(()),
            #[cfg(feature = "tls")]
            Stream::Tls(t) => t.flush_records(),
        }
    }

    /// TLS records wait for the socket.
    pub(super) fn wants_write(&self) -> bool {
        match self {
            Stream::Plain(_) => false,
            #[cfg(feature = "tls")]
            Stream::Tls(t) => t.tls.wants_write(),
        }
    }

    /// Reads plaintext: `Ok(0)` at the end of the stream, `WouldBlock` when
    /// nothing more has arrived.
    pub(super) fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            #[cfg(feature = "tls")]
            Stream::Tls(t) => t.read(buf),
        }
    }

    /// Whether a read that filled less than its buffer shows the socket
    /// drained, so that the next byte to arrive raises a new event: a plain
    /// socket on mio's epoll or kqueue (edge-triggered: every arrival
    /// raises one; the targets are mio's own lists for those selectors, to
    /// keep in step with it; tokio reads its sockets the same way). Not a
    /// TLS stream (a short read of plaintext says nothing of the records
    /// still on the socket), nor a selector that re-arms only after a
    /// `WouldBlock` (Windows, Solaris's event ports, poll(2), which mio
    /// uses under `--cfg mio_unsupported_force_poll_poll`): those must read
    /// until `WouldBlock`. An EOF or error already queued behind the data
    /// raises no further event: the caller reads on when the event said
    /// the socket was closed (see `Conn::read`).
    pub(super) fn short_read_drains(&self) -> bool {
        match self {
            Stream::Plain(_) => cfg!(all(
                not(mio_unsupported_force_poll_poll),
                any(
                    // epoll
                    target_os = "android",
                    target_os = "illumos",
                    target_os = "linux",
                    target_os = "redox",
                    // kqueue
                    target_os = "dragonfly",
                    target_os = "freebsd",
                    target_os = "ios",
                    target_os = "macos",
                    target_os = "netbsd",
                    target_os = "openbsd",
                    target_os = "tvos",
                    target_os = "visionos",
                    target_os = "watchos",
                )
            )),
            #[cfg(feature = "tls")]
            Stream::Tls(_) => false,
        }
    }

    /// Why the TLS layer failed (once).
    pub(super) fn take_failure(&mut self) -> Option<TlsFailure> {
        match self {
            Stream::Plain(_) => None,
            #[cfg(feature = "tls")]
            Stream::Tls(t) => t.failure.take(),
        }
    }
}

#[cfg(feature = "tls")]
impl TlsStream {
    fn handshake(&mut self) -> io::Result<bool> {
        loop {
            self.flush_records()?;
            if !self.tls.is_handshaking() {
                return Ok(true);
            }
            match self.tls.read_tls(&mut self.tcp) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the server closed the connection during the TLS handshake",
                    ));
                }
                Ok(_) => self.process()?,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Decrypts what was read; a TLS error is kept (in words) and sent to
    /// the server as an alert, as far as the socket takes it.
    fn process(&mut self) -> io::Result<()> {
        match self.tls.process_new_packets() {
            Ok(_) => Ok(()),
            Err(e) => {
                let text = match e {
                    // TLS 1.2 has no certificate_required alert: a server
                    // that ends the handshake with handshake_failure after
                    // it sent (and we checked) its certificate is refusing
                    // our side of it, a missing or refused client
                    // certificate as a rule. Before that (no common cipher
                    // suite, say) it is just an alert.
                    rustls::Error::AlertReceived(rustls::AlertDescription::HandshakeFailure)
                        if self.tls.peer_certificates().is_some() =>
                    {
                        "the server ended the handshake after its certificate was \
                         checked: it requires a client certificate, or refused ours \
                         (alert from the server: HandshakeFailure)"
                            .to_string()
                    }
                    _ => describe(&e),
                };
                log::debug!("redlock: TLS error: {e}");
                let mut text = text;
                if text.len() > MAX_ERROR_TEXT {
                    let mut end = MAX_ERROR_TEXT;
                    while !text.is_char_boundary(end) {
                        end -= 1;
                    }
                    text.truncate(end);
                    text.push_str("...");
                }
                self.failure = Some(TlsFailure {
                    text,
                    alert: matches!(e, rustls::Error::AlertReceived(_)),
                });
                // The alert rustls queued for the server, if the socket takes it.
                let _ = self.tls.write_tls(&mut self.tcp);
                Err(io::Error::new(io::ErrorKind::InvalidData, "TLS error"))
            }
        }
    }

    fn flush_records(&mut self) -> io::Result<()> {
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut self.tcp) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // The session buffers a bounded amount of records (rustls' buffer
        // limit): what it takes is encrypted now, and as much as the socket
        // takes is written.
        self.flush_records()?;
        let taken = self.tls.writer().write(buf)?;
        self.flush_records()?;
        if taken == 0 && !buf.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(taken)
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut closed = false;
        loop {
            // Plaintext decrypted before an error is read out first (the
            // replies that arrived before it are still handed on).
            match self.tls.reader().read(buf) {
                Ok(n) if n > 0 => return Ok(n),
                Ok(_) if self.failure.is_none() => return Ok(0),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if self.failure.is_none() => return Err(e),
                Err(_) => {}
            }
            if self.failure.is_some() {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "TLS error"));
            }
            if closed {
                // (Not reached: after the end of the stream rustls' reader
                // says so; never loop on it.)
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            match self.tls.read_tls(&mut self.tcp) {
                Ok(0) => closed = true,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            // An error is kept in `failure`, and returned once the
            // plaintext before it was read.
            let _ = self.process();
        }
    }
}

/// What a TLS error means, in a few words for a report: what failed, not
/// rustls' internals. Never contains a secret (rustls' errors carry none).
#[cfg(feature = "tls")]
pub(crate) fn describe(e: &rustls::Error) -> String {
    use rustls::{AlertDescription as A, CertificateError as C, Error as E};
    match e {
        E::InvalidCertificate(C::UnknownIssuer) => {
            "the server's certificate is signed by an unknown CA (not in the trusted roots)".into()
        }
        E::InvalidCertificate(C::NotValidForName) => {
            "the server's certificate is not valid for the name".into()
        }
        E::InvalidCertificate(c @ C::NotValidForNameContext { .. }) => {
            format!("the server's certificate is not valid for the name: {c}")
        }
        E::InvalidCertificate(C::Expired) => "the server's certificate has expired".into(),
        E::InvalidCertificate(c @ C::ExpiredContext { .. }) => {
            format!("the server's certificate has expired: {c}")
        }
        E::InvalidCertificate(C::NotValidYet | C::NotValidYetContext { .. }) => {
            "the server's certificate is not valid yet".into()
        }
        E::InvalidCertificate(c) => format!("the server's certificate was refused: {c}"),
        E::AlertReceived(
            a @ (A::CertificateRequired
            | A::BadCertificate
            | A::UnsupportedCertificate
            | A::CertificateRevoked
            | A::CertificateExpired
            | A::CertificateUnknown
            | A::UnknownCA),
        ) => format!(
            "the server refused our client certificate, or required one (alert from the server: {a:?})"
        ),
        E::AlertReceived(a) => format!("alert from the server: {a:?}"),
        E::InvalidMessage(_) | E::InappropriateMessage { .. } => {
            format!("not a TLS server, or a corrupt TLS stream ({e})")
        }
        e => e.to_string(),
    }
}
