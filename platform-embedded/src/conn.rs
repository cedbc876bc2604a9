//! One server's connection: its state, fixed buffers, the replies it owes,
//! and the handshake the core plans.

use heapless::Vec;
use redlock_core::handshake::{self, Plan, SetupError, Step};
use redlock_core::redlock_resp::{EncodeError, Script, encode};
use redlock_core::{Duration, Instant};

use crate::net::Credentials;

/// Requests a connection can have unanswered at once besides its handshake:
/// a few of the running operation, plus late ones of earlier operations. A
/// connection that owes more is failed (its server stopped answering).
pub(crate) const EXPECT: usize = 16;

/// The longest `run_id` kept (Redis uses 40 hex characters).
pub(crate) const RUN_ID_LEN: usize = 40;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// Not connected; a connect may start at `retry_at`.
    Down,
    /// A connect was started; it must be up and through the handshake by
    /// `deadline`.
    Connecting,
    /// Up; the handshake is being written and judged.
    Handshake,
    /// Every handshake reply was judged good: requests may go out.
    Ready,
}

/// What the next reply on a connection answers. Replies come in the order
/// of the requests, and the requests of a connection are always its
/// handshake steps, then requests of ended operations, then requests of the
/// running one: so three counts say it all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expect {
    /// A handshake step, judged by the core.
    Step(Step),
    /// A request of the running operation.
    Op,
    /// A request of an operation that has ended: the reply is dropped.
    Stale,
}

/// `Option<SetupError>` whose `None` is all zero bits, so that fresh
/// [`Buffers`] are zero: a static of them goes to `.bss` and needs no code
/// or flash to set up (an `Option` would put `None` in a niche, making the
/// whole initial value a template in flash).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, u8)]
pub(crate) enum Refusal {
    None,
    Some(SetupError),
}

impl Refusal {
    #[inline(never)]
    pub(crate) fn get(self) -> Option<SetupError> {
        match self {
            Refusal::None => None,
            Refusal::Some(e) => Some(e),
        }
    }
}

/// What the replies still to come on a connection answer: its handshake
/// steps (up to the ones written), then requests of ended operations, then
/// requests of the running one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Owed {
    /// Handshake steps judged so far.
    pub(crate) judged: usize,
    pub(crate) stale: usize,
    pub(crate) ops: usize,
}

impl Owed {
    pub(crate) const NONE: Owed = Owed {
        judged: 0,
        stale: 0,
        ops: 0,
    };

    /// Requests sent and not answered, besides the handshake.
    pub(crate) fn requests(&self) -> usize {
        self.stale.saturating_add(self.ops)
    }

    /// What the next reply answers (and it is counted as answered), with
    /// `written` handshake steps of `plan` sent; `None` when nothing was
    /// asked.
    #[inline(always)]
    pub(crate) fn next(&mut self, plan: Plan, written: usize) -> Option<Expect> {
        if self.judged < written {
            let step = handshake::step(plan, self.judged)?;
            self.judged = self.judged.saturating_add(1);
            return Some(Expect::Step(step));
        }
        if self.stale > 0 {
            self.stale = self.stale.saturating_sub(1);
            return Some(Expect::Stale);
        }
        if self.ops > 0 {
            self.ops = self.ops.saturating_sub(1);
            return Some(Expect::Op);
        }
        None
    }
}

/// Why a connection is being closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fail {
    /// An I/O error, end of stream, a reply that does not parse or is too
    /// large, a stream out of step, a timeout, a full buffer.
    Broken,
    /// The handshake was refused or the server is another entry's twin.
    Refused(SetupError),
}

pub(crate) struct Conn<const IN: usize, const OUT: usize> {
    pub(crate) state: State,
    pub(crate) inbuf: [u8; IN],
    pub(crate) filled: usize,
    pub(crate) out: [u8; OUT],
    pub(crate) out_len: usize,
    pub(crate) out_sent: usize,
    /// A release held until the handshake passes, in the last `held`
    /// bytes of `out`; `held_stale` once its operation has ended.
    pub(crate) held: usize,
    pub(crate) held_stale: bool,
    /// Handshake steps written so far.
    pub(crate) next_step: usize,
    /// The handshake of this server (set by the client from its
    /// credentials and config), and its number of steps.
    pub(crate) plan: Plan,
    pub(crate) steps: usize,
    /// What the replies still to come answer.
    pub(crate) owed: Owed,
    /// Connect and handshake must be done by then.
    pub(crate) deadline: Instant,
    /// When a new connect may start (backoff after failed ones).
    pub(crate) retry_at: Instant,
    /// When the connection passed its handshake.
    pub(crate) ready_at: Instant,
    /// Failed connection attempts in a row.
    pub(crate) failures: u32,
    /// Why the last handshake was refused, shown in reports until the
    /// server is used again.
    pub(crate) refused: Refusal,
    /// When the server's current process started (client clock), from the
    /// handshake's `INFO`.
    pub(crate) incarnation: Option<Instant>,
    /// The server's `run_id` from its last handshake (its identity).
    pub(crate) run_id: Vec<u8, RUN_ID_LEN>,
    /// The most bytes a handshake step of this server takes (set by the
    /// client from its credentials): a held release leaves them free.
    pub(crate) reserve: usize,
}

impl<const IN: usize, const OUT: usize> Conn<IN, OUT> {
    pub(crate) const fn new() -> Self {
        Conn {
            state: State::Down,
            inbuf: [0; IN],
            filled: 0,
            out: [0; OUT],
            out_len: 0,
            out_sent: 0,
            held: 0,
            held_stale: false,
            next_step: 0,
            plan: Plan {
                auth: false,
                select: false,
                info_required: false,
            },
            steps: 0,
            owed: Owed::NONE,
            deadline: Instant::ZERO,
            retry_at: Instant::ZERO,
            ready_at: Instant::ZERO,
            failures: 0,
            refused: Refusal::None,
            incarnation: None,
            run_id: Vec::new(),
            reserve: 0,
        }
    }

    /// Forgets everything, history included (a new client).
    pub(crate) fn clear(&mut self) {
        self.reset();
        self.retry_at = Instant::ZERO;
        self.failures = 0;
        self.refused = Refusal::None;
        self.run_id.clear();
    }

    /// Forgets everything of the current connection (not its history:
    /// failures, refusal, identity).
    #[inline(never)]
    pub(crate) fn reset(&mut self) {
        self.state = State::Down;
        self.filled = 0;
        self.out_len = 0;
        self.out_sent = 0;
        self.held = 0;
        self.held_stale = false;
        self.next_step = 0;
        self.owed = Owed::NONE;
        self.incarnation = None;
    }

    /// Whether the running operation has requests on this connection.
    pub(crate) fn owes_op(&self) -> bool {
        (self.held > 0 && !self.held_stale) || self.owed.ops > 0
    }

    /// The operation ended: replies still owed to it are dropped when they
    /// come.
    pub(crate) fn end_op(&mut self) {
        self.owed.stale = self.owed.stale.saturating_add(self.owed.ops);
        self.owed.ops = 0;
        self.held_stale = true;
    }

    /// A new connect, to be up and through its handshake by `deadline`.
    pub(crate) fn begin_connect(&mut self, deadline: Instant) {
        let (held, stale) = (self.held, self.held_stale);
        self.reset();
        // A release waiting for this connection stays.
        self.held = held;
        self.held_stale = stale;
        self.state = State::Connecting;
        self.deadline = deadline;
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
        self.held_stale = false;
        true
    }

    /// The handshake passed: the held request joins the output.
    pub(crate) fn release_held(&mut self) {
        if self.held == 0 || self.owed.requests() >= EXPECT {
            self.held = 0;
            return;
        }
        move_down(
            &mut self.out,
            OUT.saturating_sub(self.held),
            self.out_len,
            self.held,
        );
        self.out_len = self.out_len.saturating_add(self.held).min(OUT);
        if self.held_stale {
            self.owed.stale = self.owed.stale.saturating_add(1);
        } else {
            self.owed.ops = self.owed.ops.saturating_add(1);
        }
        self.held = 0;
        self.held_stale = false;
    }

    /// Appends `bytes` to the output, a request of the running operation.
    /// `false` (and nothing queued) when the buffer or the queue is full.
    pub(crate) fn queue(&mut self, bytes: &[u8]) -> bool {
        if self.owed.requests() >= EXPECT {
            return false;
        }
        let Some(end) = self.out_len.checked_add(bytes.len()) else {
            return false;
        };
        if end > OUT.saturating_sub(self.held) {
            return false;
        }
        let Some(dst) = self.out.get_mut(self.out_len..end) else {
            return false;
        };
        dst.copy_from_slice(bytes);
        self.out_len = end;
        self.owed.ops = self.owed.ops.saturating_add(1);
        true
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

    /// Sets the handshake plan of this server (a new client).
    pub(crate) fn set_plan(&mut self, plan: Plan) {
        self.plan = plan;
        self.steps = handshake::step_count(plan);
    }

    /// Starts the handshake of a connection that just came up.
    pub(crate) fn start_handshake(&mut self) {
        self.state = State::Handshake;
        self.next_step = 0;
    }

    /// Queues as many handshake steps as the output buffer takes now.
    /// `Err` if a step can never fit (checked when the client is made).
    pub(crate) fn pump_handshake(&mut self, creds: &Credentials<'_>) -> Result<(), EncodeError> {
        self.compact_out();
        while self.next_step < self.steps {
            let Some((step, script)) = handshake::step_and_script(self.plan, self.next_step) else {
                break;
            };
            let room = OUT.saturating_sub(self.held);
            let free = self.out.get_mut(self.out_len..room).unwrap_or_default();
            let len = match encode_step(free, step, script, creds) {
                Ok(len) => len,
                // Room later, once the buffer drained; never if it is empty.
                Err(EncodeError::BufferTooSmall { .. }) if self.out_len > 0 => break,
                Err(e) => return Err(e),
            };
            self.out_len = self.out_len.saturating_add(len);
            self.next_step = self.next_step.saturating_add(1);
        }
        Ok(())
    }

    /// Backoff before the next connect after `failures` failed ones.
    pub(crate) fn backoff(&self, min: Duration, max: Duration) -> Duration {
        let shift = self.failures.saturating_sub(1).min(16);
        Duration::from_micros(min.as_micros().saturating_mul(1u64 << shift)).min(max)
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

/// The handshake plan of a server with `creds`.
pub(crate) fn plan(creds: &Credentials<'_>, info_required: bool) -> Plan {
    Plan {
        auth: creds.password.is_some(),
        select: creds.db != 0,
        info_required,
    }
}

/// Encodes handshake step `step` (loading `script`, for a `SCRIPT LOAD`) of
/// a server with `creds`.
pub(crate) fn encode_step(
    buf: &mut [u8],
    step: Step,
    script: Option<&Script>,
    creds: &Credentials<'_>,
) -> Result<usize, EncodeError> {
    let password = creds.password.unwrap_or_default();
    let source = script.map_or("", |s| s.source).as_bytes();
    // One `command` call for the steps that are all bytes.
    let (args, argc): ([&[u8]; 3], usize) = match step {
        Step::Auth => match creds.user {
            Some(user) => ([b"AUTH", user, password], 3),
            None => ([b"AUTH", password, b""], 2),
        },
        Step::Select => return encode::select(buf, u64::from(creds.db)),
        Step::ScriptLoad => ([b"SCRIPT", b"LOAD", source], 3),
        _ => ([b"INFO", b"server", b""], 2),
    };
    encode::command(buf, args.get(..argc).unwrap_or_default())
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
