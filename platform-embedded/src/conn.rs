//! One server's connection: its state, fixed buffers, the replies it owes,
//! and the handshake the core plans.

use heapless::{Deque, Vec};
use redlock_core::handshake::{self, Plan, SetupError, Step};
use redlock_core::redlock_resp::{EncodeError, encode, script};
use redlock_core::{Duration, Instant};

use crate::net::Credentials;

/// Replies a connection can owe at once: the handshake (at most 8 steps)
/// and a few requests of the running operation, plus late ones of earlier
/// operations. A connection that owes more is failed (its server stopped
/// answering).
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

/// What the next reply on a connection answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expect {
    /// A handshake step, judged by the core.
    Step(Step),
    /// A request of the running operation.
    Op,
    /// A request of an operation that has ended: the reply is dropped.
    Stale,
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
    pub(crate) expect: Deque<Expect, EXPECT>,
    /// Handshake steps written so far, and in all.
    pub(crate) next_step: usize,
    pub(crate) steps: usize,
    /// Connect and handshake must be done by then.
    pub(crate) deadline: Instant,
    /// When a new connect may start (backoff after failed ones).
    pub(crate) retry_at: Instant,
    /// Failed connection attempts in a row.
    pub(crate) failures: u32,
    /// Why the last handshake was refused, shown in reports until the
    /// server is used again.
    pub(crate) refused: Option<SetupError>,
    /// When the server's current process started (client clock), from the
    /// handshake's `INFO`.
    pub(crate) incarnation: Option<Instant>,
    /// The server's `run_id` from its last handshake (its identity).
    pub(crate) run_id: Vec<u8, RUN_ID_LEN>,
}

impl<const IN: usize, const OUT: usize> Conn<IN, OUT> {
    pub(crate) fn new() -> Self {
        Conn {
            state: State::Down,
            inbuf: [0; IN],
            filled: 0,
            out: [0; OUT],
            out_len: 0,
            out_sent: 0,
            expect: Deque::new(),
            next_step: 0,
            steps: 0,
            deadline: Instant::ZERO,
            retry_at: Instant::ZERO,
            failures: 0,
            refused: None,
            incarnation: None,
            run_id: Vec::new(),
        }
    }

    /// Forgets everything of the current connection (not its history:
    /// failures, refusal, identity).
    pub(crate) fn reset(&mut self) {
        self.state = State::Down;
        self.filled = 0;
        self.out_len = 0;
        self.out_sent = 0;
        self.expect.clear();
        self.next_step = 0;
        self.steps = 0;
        self.incarnation = None;
    }

    /// Whether the running operation has requests on this connection.
    pub(crate) fn owes_op(&self) -> bool {
        self.expect.iter().any(|e| *e == Expect::Op)
    }

    /// Appends `bytes` to the output and records what its reply answers.
    /// `false` (and nothing queued) when the buffer or the queue is full.
    pub(crate) fn queue(&mut self, bytes: &[u8], expect: Expect) -> bool {
        let Some(end) = self.out_len.checked_add(bytes.len()) else {
            return false;
        };
        let Some(dst) = self.out.get_mut(self.out_len..end) else {
            return false;
        };
        if self.expect.is_full() {
            return false;
        }
        dst.copy_from_slice(bytes);
        self.out_len = end;
        let _ = self.expect.push_back(expect);
        true
    }

    /// Makes room at the front of the output once everything was sent.
    pub(crate) fn compact_out(&mut self) {
        if self.out_sent >= self.out_len {
            self.out_len = 0;
            self.out_sent = 0;
        }
    }

    /// Starts the handshake of a connection that just came up.
    pub(crate) fn start_handshake(&mut self, creds: &Credentials<'_>, info_required: bool) {
        self.state = State::Handshake;
        self.next_step = 0;
        self.steps = handshake::steps(plan(creds, info_required)).count();
    }

    /// Queues as many handshake steps as the output buffer takes now.
    /// `Err` if a step can never fit (checked when the client is made).
    pub(crate) fn pump_handshake(
        &mut self,
        creds: &Credentials<'_>,
        info_required: bool,
    ) -> Result<(), EncodeError> {
        self.compact_out();
        while self.next_step < self.steps {
            let Some(step) = handshake::steps(plan(creds, info_required)).nth(self.next_step)
            else {
                break;
            };
            let free = self.out.get_mut(self.out_len..).unwrap_or_default();
            let len = match encode_step(free, step, self.next_step, creds) {
                Ok(len) => len,
                // Room later, once the buffer drained; never if it is empty.
                Err(EncodeError::BufferTooSmall { .. }) if self.out_len > 0 => break,
                Err(e) => return Err(e),
            };
            if self.expect.push_back(Expect::Step(step)).is_err() {
                break;
            }
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

/// The handshake plan of a server with `creds`.
pub(crate) fn plan(creds: &Credentials<'_>, info_required: bool) -> Plan {
    Plan {
        auth: creds.password.is_some(),
        select: creds.db != 0,
        info_required,
    }
}

/// Encodes handshake step number `k` (`step`) of a server with `creds`.
pub(crate) fn encode_step(
    buf: &mut [u8],
    step: Step,
    k: usize,
    creds: &Credentials<'_>,
) -> Result<usize, EncodeError> {
    let password = creds.password.unwrap_or_default();
    match step {
        Step::Auth => match creds.user {
            Some(user) => encode::auth_user(buf, user, password),
            None => encode::auth(buf, password),
        },
        Step::Select => encode::select(buf, u64::from(creds.db)),
        Step::ScriptLoad => {
            // The scripts follow AUTH and SELECT, in the order of script::ALL.
            let before =
                usize::from(creds.password.is_some()).saturating_add(usize::from(creds.db != 0));
            let source = script::ALL
                .get(k.saturating_sub(before))
                .map_or("", |s| s.source);
            encode::script_load(buf, source.as_bytes())
        }
        _ => encode::info(buf, Some(b"server")),
    }
}
