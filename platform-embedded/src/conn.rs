//! One server's connection: the core's session (what the connection
//! decides) and the fixed buffers it moves bytes through.

use heapless::Deque;
use redlock_core::Instant;
use redlock_core::redlock_resp::EncodeError;
use redlock_core::session::{
    Credentials, Entry, Policy, Session, State, encode_probe, encode_step,
};

/// Requests a connection can have unanswered at once besides its handshake:
/// the running operation's (at most 8 to one server), plus late ones of
/// earlier operations. A connection that owes more is given up
/// ([`Close::Stuck`](redlock_core::session::Close::Stuck)).
pub(crate) const EXPECT: usize = 12;

/// The requests a session awaits, tagged with their operation's number.
pub(crate) type Owed = Deque<Entry<u16>, EXPECT>;

// The fields in the order written: the lengths, then the session, near the
// start (where a 32-bit MCU reaches them with 2-byte instructions: see the
// LAYOUT note of the core's `Session`), the buffers last.
#[repr(C)]
pub(crate) struct Conn<const IN: usize, const OUT: usize> {
    pub(crate) out_len: usize,
    pub(crate) out_sent: usize,
    pub(crate) filled: usize,
    /// A release held until the handshake passes, in the last `held`
    /// bytes of `out`.
    pub(crate) held: usize,
    /// The most bytes a handshake step of this server takes (set by the
    /// client from its credentials): a held release leaves them free.
    pub(crate) reserve: usize,
    /// The core's session: the connection's state and every decision.
    pub(crate) session: Session<u16, Owed>,
    pub(crate) inbuf: [u8; IN],
    pub(crate) out: [u8; OUT],
}

impl<const IN: usize, const OUT: usize> Conn<IN, OUT> {
    pub(crate) const fn new() -> Self {
        Conn {
            session: Session::new(
                redlock_core::handshake::Plan {
                    commands: redlock_core::Commands::Auto,
                    auth: false,
                    select: false,
                    info_required: false,
                },
                Deque::new(),
            ),
            inbuf: [0; IN],
            filled: 0,
            out: [0; OUT],
            out_len: 0,
            out_sent: 0,
            held: 0,
            reserve: 0,
        }
    }

    /// Forgets the bytes of the current connection.
    #[inline(never)]
    pub(crate) fn clear_buffers(&mut self) {
        self.filled = 0;
        self.out_len = 0;
        self.out_sent = 0;
        self.held = 0;
    }

    /// Keeps a request (a release) at the end of the output buffer until the
    /// handshake passes. `false` if one is held already or it does not fit.
    /// [`reserve`](Conn::reserve) bytes stay free for the largest handshake
    /// step.
    pub(crate) fn hold(&mut self, bytes: &[u8]) -> bool {
        let free = OUT.saturating_sub(self.out_len);
        let room = OUT.saturating_sub(self.reserve).min(free);
        if self.held > 0 || bytes.is_empty() || bytes.len() > room {
            return false;
        }
        let Some(dst) = self.out.get_mut(OUT.saturating_sub(bytes.len())..) else {
            return false;
        };
        dst.copy_from_slice(bytes);
        self.held = bytes.len();
        true
    }

    /// The handshake passed: the held request joins the output.
    pub(crate) fn release_held(&mut self) {
        move_down(
            &mut self.out,
            OUT.saturating_sub(self.held),
            self.out_len,
            self.held,
        );
        self.out_len = self.out_len.saturating_add(self.held).min(OUT);
        self.held = 0;
    }

    /// Whether `len` more bytes fit the output now.
    pub(crate) fn fits(&self, len: usize) -> bool {
        self.out_len
            .checked_add(len)
            .is_some_and(|end| end <= OUT.saturating_sub(self.held))
    }

    /// Appends `bytes` to the output, behind the session's probe if
    /// `probe_first` (room for both was checked with [`fits`](Conn::fits)).
    /// Out of line: the caller keeps fewer values live across it.
    #[inline(never)]
    pub(crate) fn queue(&mut self, bytes: &[u8], probe_first: bool) {
        if probe_first {
            let free = self.out.get_mut(self.out_len..).unwrap_or_default();
            if let Ok(n) = encode_probe(free) {
                self.out_len = self.out_len.saturating_add(n);
            }
        }
        let end = self.out_len.saturating_add(bytes.len());
        if let Some(dst) = self.out.get_mut(self.out_len..end) {
            dst.copy_from_slice(bytes);
            self.out_len = end;
        }
    }

    /// Moves what is not sent yet to the front of the output.
    pub(crate) fn compact_out(&mut self) {
        let rest = self.out_len.saturating_sub(self.out_sent);
        if self.out_sent > 0 {
            move_down(&mut self.out, self.out_sent, 0, rest);
        }
        self.out_len = rest;
        self.out_sent = 0;
    }

    /// Queues what the session asks for and the output buffer takes now:
    /// the handshake's steps, or the probe of a ready connection (asked
    /// again while it does not fit). `Err` if a step can never fit
    /// (checked when the client is made). One loop for both, so that its
    /// code exists once.
    pub(crate) fn pump_session(
        &mut self,
        creds: &Credentials<'_>,
        now: Instant,
        policy: &Policy,
    ) -> Result<(), EncodeError> {
        self.compact_out();
        loop {
            let step = self.session.poll_step();
            if step.is_none() && !self.session.poll_probe() {
                return Ok(());
            }
            let room = OUT.saturating_sub(self.held);
            let free = self.out.get_mut(self.out_len..room).unwrap_or_default();
            let written = match step {
                Some((step, script)) => encode_step(free, step, script, creds),
                None => encode_probe(free),
            };
            let len = match written {
                Ok(len) => len,
                // Room later, once the buffer drained; never if it is empty.
                Err(EncodeError::BufferTooSmall { .. }) if self.out_len > 0 => return Ok(()),
                Err(e) => return Err(e),
            };
            self.out_len = self.out_len.saturating_add(len);
            match step {
                Some(_) => self.session.step_written(),
                None => self.session.probe_written(now, policy),
            }
        }
    }

    /// True while the connection has bytes to write or read.
    pub(crate) fn is_open(&self) -> bool {
        self.session.state() != State::Down
    }
}

/// Moves the `len` bytes of `buf` at `from` to `to` (`to <= from`; the
/// ranges may overlap): forwards, byte by byte, not `copy_within`, which
/// would link a 1.5 KiB `memmove` for the few bytes moved.
pub(crate) fn move_down(buf: &mut [u8], from: usize, mut to: usize, len: usize) {
    for from in from..from.saturating_add(len) {
        let Some(&byte) = buf.get(from) else {
            return;
        };
        if let Some(b) = buf.get_mut(to) {
            *b = byte;
        }
        to = to.wrapping_add(1);
    }
}

/// The per-server state of a [`Client`](crate::Client): its reply (`IN`)
/// and request (`OUT`) buffers and its connection's state, for `SERVERS`
/// servers.
///
/// Kept by the caller, so that the large part of a client lives where the
/// caller wants it (a static, made at compile time by the `const fn`
/// [`Buffers::new`]) and is never copied: the [`Client`](crate::Client)
/// itself is a few hundred bytes.
pub struct Buffers<const SERVERS: usize, const IN: usize = 1024, const OUT: usize = 640> {
    pub(crate) conns: [Conn<IN, OUT>; SERVERS],
    /// Where the running operation encodes its next request.
    pub(crate) request: [u8; OUT],
}

impl<const SERVERS: usize, const IN: usize, const OUT: usize> Buffers<SERVERS, IN, OUT> {
    /// Empty buffers (`const`: a static needs no code to set them up).
    pub const fn new() -> Self {
        Buffers {
            conns: [const { Conn::new() }; SERVERS],
            request: [0; OUT],
        }
    }
}

impl<const SERVERS: usize, const IN: usize, const OUT: usize> Default
    for Buffers<SERVERS, IN, OUT>
{
    fn default() -> Self {
        Buffers::new()
    }
}

impl<const SERVERS: usize, const IN: usize, const OUT: usize> core::fmt::Debug
    for Buffers<SERVERS, IN, OUT>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Buffers")
            .field("servers", &SERVERS)
            .field("in", &IN)
            .field("out", &OUT)
            .finish()
    }
}
