//! Tests of the transport with scripted operations and fake servers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use alloc::sync::Arc;
use core::cell::Cell;
use redlock_core::handshake::Step;
use redlock_core::redlock_resp::Reply;
use redlock_core::{Transmit, Unsolicited};
use std::net::TcpListener;
use std::sync::mpsc;

const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";

/// A scripted operation. It sends `pings` PINGs to server 0, each after
/// the reply to the one before, and is decided by the last reply (or,
/// `fire_and_forget`, once the last PING is handed out, as the releases
/// of a failed acquisition are), by a connection error (outcome 1), or
/// at `until` (outcome 7; a panic instead with `panics`). With neither
/// PINGs nor a deadline it is decided at once. The outcome is 7 unless
/// a connection failed.
#[derive(Debug, Default)]
pub(super) struct TestOp {
    pub(super) pings: u8,
    pub(super) fire_and_forget: bool,
    /// Its first reply takes this long to handle.
    pub(super) slow_first_reply: Option<StdDuration>,
    pub(super) until: Option<Instant>,
    pub(super) panics: bool,
    /// Set: `is_finished` says false once, then panics.
    pub(super) finish_calls: Option<Cell<u8>>,
    pub(super) sent: u8,
    pub(super) replies: u8,
    pub(super) errored: bool,
    pub(super) timed_out: bool,
    pub(super) taken: bool,
}

impl TestOp {
    /// One PING, awaited until `ms` after now.
    pub(super) fn ping(t: &Transport<TestOp>, ms: u64) -> TestOp {
        TestOp {
            pings: 1,
            ..TestOp::after(t, ms, false)
        }
    }

    /// Decided at `ms` after now (or panics then).
    pub(super) fn after(t: &Transport<TestOp>, ms: u64, panics: bool) -> TestOp {
        TestOp {
            until: Some(
                t.now()
                    .saturating_add(redlock_core::Duration::from_millis(ms)),
            ),
            panics,
            ..TestOp::default()
        }
    }

    fn decided(&self) -> bool {
        let answered = if self.fire_and_forget {
            self.sent == self.pings
        } else {
            self.replies == self.pings
        };
        self.errored
            || self.timed_out
            || (self.pings > 0 && answered)
            || (self.pings == 0 && self.until.is_none())
    }
}

impl Job for TestOp {
    type Cell = Option<u8>;
    fn poll_transmit(
        &mut self,
        _: Instant,
        buf: &mut [u8],
    ) -> Result<Option<Transmit>, EncodeError> {
        let waiting = !self.fire_and_forget && self.sent > self.replies;
        if self.errored || self.sent == self.pings || waiting {
            return Ok(None);
        }
        buf[..PING.len()].copy_from_slice(PING);
        self.sent += 1;
        Ok(Some(Transmit {
            server: ServerId(0),
            len: PING.len(),
            // As the releases of a failed acquisition are.
            release: self.fire_and_forget,
            // Awaited until the operation is decided at `until`.
            deadline: self.until.unwrap_or(Instant::from_micros(u64::MAX)),
            replies: 1,
        }))
    }
    fn handle_reply(&mut self, _: Instant, _: ServerId, _: Reply<'_>) -> Result<(), Unsolicited> {
        if self.replies == 0 {
            if let Some(d) = self.slow_first_reply {
                std::thread::sleep(d);
            }
        }
        self.replies += 1;
        Ok(())
    }
    fn handle_connection_error(&mut self, _: Instant, _: ServerId) {
        self.errored = true;
    }
    fn handle_setup_error(&mut self, now: Instant, server: ServerId, _: SetupError) {
        self.handle_connection_error(now, server);
    }
    fn set_incarnation(&mut self, _: ServerId, _: Instant) {}
    fn handle_timeout(&mut self, now: Instant) {
        if self.until.is_some_and(|u| now >= u) {
            assert!(!self.panics, "a broken operation");
            self.timed_out = true;
        }
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.until.filter(|_| !self.decided())
    }
    fn deliver(&mut self, cell: &mut Option<u8>) -> bool {
        if !self.taken && self.decided() {
            self.taken = true;
            *cell = Some(if self.errored { 1 } else { 7 });
        }
        cell.is_some()
    }
    fn is_finished(&self) -> bool {
        if let Some(calls) = &self.finish_calls {
            let n = calls.get();
            calls.set(n.saturating_add(1));
            assert!(n == 0, "a broken is_finished");
            return false;
        }
        self.decided() && (self.errored || self.sent == self.pings)
    }
}

impl Kind<TestOp> for TestOp {
    type Out = u8;
    fn into_job(self) -> TestOp {
        self
    }
    fn take(cell: &mut Option<u8>) -> Option<u8> {
        cell.take()
    }
}

pub(super) fn config() -> ConnConfig {
    ConnConfig {
        connect_timeout: StdDuration::from_secs(1),
        backoff_min: StdDuration::from_millis(10),
        backoff_max: StdDuration::from_secs(1),
        limits: Limits::DEFAULT,
        info_required: false,
        // The fake servers here answer as the scripts' servers do.
        commands: redlock_core::Commands::Scripts,
        delivery_grace: StdDuration::from_millis(20),
    }
}

/// A transport over one listening socket (nobody accepts unless the
/// test does).
pub(super) fn transport() -> (Arc<Transport<TestOp>>, TcpListener) {
    transport_with(config())
}

pub(super) fn transport_with(config: ConnConfig) -> (Arc<Transport<TestOp>>, TcpListener) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url: ServerUrl = listener.local_addr().unwrap().to_string().parse().unwrap();
    (Arc::new(Transport::new(&[url], config).unwrap()), listener)
}

/// Runs `op` on its own thread: its outcome, or `None` if it panicked.
pub(super) fn spawn_run(t: &Arc<Transport<TestOp>>, op: TestOp) -> mpsc::Receiver<Option<u8>> {
    let (tx, rx) = mpsc::channel();
    let t = t.clone();
    std::thread::spawn(move || {
        let joined = std::thread::spawn(move || t.run(op)).join();
        let _ = tx.send(joined.ok());
    });
    rx
}

pub(super) fn wait_until_led(t: &Transport<TestOp>) {
    let give_up = StdInstant::now() + StdDuration::from_secs(10);
    while !t.lock().lead.leader {
        assert!(StdInstant::now() < give_up, "nobody led");
        std::thread::sleep(StdDuration::from_millis(1));
    }
}

pub(super) fn assert_idle(t: &Transport<TestOp>) {
    let st = t.lock();
    assert_eq!(st.free.len(), MAX_SLOTS);
    assert_eq!(st.lead.active, 0);
    assert!(!st.lead.leader);
}

pub(super) const WITHIN: StdDuration = StdDuration::from_secs(10);

#[test]
fn a_panicking_operation_leaves_the_transport_usable() {
    let (t, _listener) = transport();
    let op = TestOp::after(&t, 5, true);
    // Unwinding must not deadlock on the state lock.
    assert_eq!(spawn_run(&t, op).recv_timeout(WITHIN), Ok(None));
    // The slot and the leader role were given back: another call runs.
    let ran = spawn_run(&t, TestOp::default());
    assert_eq!(ran.recv_timeout(WITHIN), Ok(Some(7)));
    assert_idle(&t);
}

#[test]
fn an_operation_that_panics_under_another_leader_panics_its_own_caller() {
    let (t, _listener) = transport();
    // A leads (its operation runs for 300 ms); B's operation, driven by
    // A as the leader, panics after 20 ms.
    let a = spawn_run(&t, TestOp::after(&t, 300, false));
    wait_until_led(&t);
    let b = std::thread::spawn({
        let (t, op) = (t.clone(), TestOp::after(&t, 20, true));
        move || t.run(op)
    });
    let payload = b.join().expect_err("B's call panics");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"a broken operation"));
    // A, the leader that ran B's code, went on.
    assert_eq!(a.recv_timeout(WITHIN), Ok(Some(7)));
    assert_idle(&t);
}

// Found by a review of the combining leader: each failed before its fix.

/// The write of the second PING fails (ECONNRESET) in the leader's last
/// `flush_all`; the operation learns it at the top of the next `lead`
/// and is done: the leader must return, not poll with no deadline.
#[test]
fn leader_does_not_poll_after_its_operation_is_done() {
    let (t, listener) = transport();
    // Answers the handshake (5 SCRIPT LOAD, INFO) and the first PING
    // without reading anything, then closes with the bytes unread: the
    // kernel resets the connection.
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.write_all(&[handshake_ok(), b"+OK\r\n".to_vec()].concat())
            .unwrap();
        std::thread::sleep(StdDuration::from_millis(100));
        drop(s);
        std::thread::sleep(StdDuration::from_secs(60));
    });
    let op = TestOp {
        pings: 2,
        // The reset comes meanwhile.
        slow_first_reply: Some(StdDuration::from_millis(300)),
        until: Some(
            t.now()
                .saturating_add(redlock_core::Duration::from_secs(30)),
        ),
        ..TestOp::default()
    };
    let ran = spawn_run(&t, op);
    assert_eq!(ran.recv_timeout(StdDuration::from_secs(5)), Ok(Some(1)));
}

/// B's `is_finished` panics (outside the operation's pump proper) while
/// A leads: A's call still returns, and B's call panics.
#[test]
fn a_panic_in_is_finished_stays_with_its_owner() {
    let (t, _listener) = transport();
    let a = spawn_run(&t, TestOp::after(&t, 1500, false));
    wait_until_led(&t);
    let b = TestOp {
        finish_calls: Some(Cell::new(0)),
        ..TestOp::default()
    };
    let b = spawn_run(&t, b);
    assert_eq!(b.recv_timeout(WITHIN), Ok(None), "B's call panics");
    assert_eq!(a.recv_timeout(WITHIN), Ok(Some(7)), "A's call");
    assert_idle(&t);
}

/// `run` promises the operation's last requests are sent, also when
/// they are queued behind a connect in progress and nobody calls again.
#[test]
fn what_a_finished_operation_queued_is_sent() {
    let (t, listener) = transport_with(ConnConfig {
        delivery_grace: StdDuration::from_secs(5),
        ..config()
    });
    // The server answers the handshake once it has read it, then
    // reports everything it read.
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(StdDuration::from_secs(5))).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        let mut answered = false;
        while let Ok(n) = s.read(&mut buf) {
            got.extend_from_slice(&buf[..n]);
            if !answered && got.windows(4).any(|w| w == b"INFO") {
                s.write_all(&handshake_ok()).unwrap();
                answered = true;
            }
            if n == 0 || got.ends_with(PING) {
                break;
            }
        }
        got
    });
    let op = TestOp {
        pings: 1,
        fire_and_forget: true,
        ..TestOp::default()
    };
    assert_eq!(t.run(op), 7);
    let got = server.join().unwrap();
    assert!(
        got.ends_with(PING),
        "the server received {} bytes",
        got.len()
    );
}

// Found by a second review.

/// The connection was reset while the client was idle; the next call's
/// first write (at the top of `lead`) fails. The operation must learn it
/// at once, not at its deadline.
#[test]
fn a_write_failing_before_the_poll_is_told_at_once() {
    let (t, listener) = transport();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.write_all(&[handshake_ok(), b"+OK\r\n".to_vec()].concat())
            .unwrap();
        std::thread::sleep(StdDuration::from_millis(100));
        drop(s); // unread bytes: a reset
        std::thread::sleep(StdDuration::from_secs(60));
    });
    let op = TestOp {
        pings: 1,
        ..TestOp::default()
    };
    assert_eq!(t.run(op), 7);
    std::thread::sleep(StdDuration::from_millis(300)); // the reset arrives
    let op = TestOp::ping(&t, 30_000);
    let started = StdInstant::now();
    assert_eq!(t.run(op), 1);
    let took = started.elapsed();
    assert!(took < StdDuration::from_secs(10), "told after {took:?}");
}

/// An operation done in its caller's own first pump (requests queued,
/// nothing awaited): the last thread out writes them and must not then
/// sleep until some event or the connect timeout.
#[test]
fn the_last_thread_out_does_not_sleep_after_writing_everything() {
    let (t, listener) = transport_with(ConnConfig {
        connect_timeout: StdDuration::from_secs(60),
        ..config()
    });
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        // The handshake and the first PING; later PINGs go unanswered.
        s.write_all(&[handshake_ok(), b"+OK\r\n".to_vec()].concat())
            .unwrap();
        std::thread::sleep(StdDuration::from_secs(120));
    });
    let op = TestOp {
        pings: 1,
        ..TestOp::default()
    };
    assert_eq!(t.run(op), 7);
    let started = StdInstant::now();
    let op = TestOp {
        pings: 1,
        fire_and_forget: true,
        ..TestOp::default()
    };
    assert_eq!(t.run(op), 7);
    let took = started.elapsed();
    assert!(took < StdDuration::from_secs(10), "took {took:?}");
}

#[test]
fn a_huge_connect_timeout_does_not_overflow() {
    let (t, _listener) = transport_with(ConnConfig {
        connect_timeout: StdDuration::MAX,
        ..config()
    });
    let op = TestOp::ping(&t, 200);
    assert_eq!(t.run(op), 7);
}

/// Replies in odd fragments, one a 30 KB bulk (INFO) across the read
/// chunk, then the PING's reply.
#[test]
fn fragmented_and_large_replies_are_put_together() {
    let (t, listener) = transport();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut all = b"$40\r\nb70c2384248f88e6b75b9f89241a180f856ad852\r\n".repeat(5);
        let body = vec![b'x'; 30_000];
        all.extend_from_slice(format!("${}\r\n", body.len()).as_bytes());
        all.extend_from_slice(&body);
        all.extend_from_slice(b"\r\n+PONG\r\n");
        for (k, c) in all.chunks(7_001).enumerate() {
            for piece in c.chunks(if k % 2 == 0 { 3 } else { 7_001 }) {
                s.write_all(piece).unwrap();
            }
            std::thread::sleep(StdDuration::from_millis(5));
        }
        std::thread::sleep(StdDuration::from_secs(60));
    });
    let op = TestOp::ping(&t, 30_000);
    assert_eq!(t.run(op), 7);
}

/// Far more than the read limit arrives at once (900 replies of 1 KB
/// to finished operations), then the reply of a running one: it is read
/// although no new data would announce it.
#[test]
fn replies_past_the_read_limit_are_all_read() {
    let (t, listener) = transport();
    let (tx, rx) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.write_all(&handshake_ok()).unwrap();
        rx.recv().unwrap();
        let mut all = Vec::new();
        for _ in 0..900 {
            all.extend_from_slice(b"$1000\r\n");
            all.extend_from_slice(&[b'y'; 1000]);
            all.extend_from_slice(b"\r\n");
        }
        all.extend_from_slice(b"+PONG\r\n");
        s.write_all(&all).unwrap();
        std::thread::sleep(StdDuration::from_secs(60));
    });
    // 900 requests whose replies nobody waits for.
    for pings in [200, 200, 100, 100, 100, 100, 100] {
        let op = TestOp {
            pings,
            fire_and_forget: true,
            ..TestOp::default()
        };
        assert_eq!(t.run(op), 7);
    }
    let op = TestOp::ping(&t, 60_000);
    let started = StdInstant::now();
    let ran = spawn_run(&t, op);
    std::thread::sleep(StdDuration::from_millis(100));
    tx.send(()).unwrap();
    assert_eq!(ran.recv_timeout(StdDuration::from_secs(90)), Ok(Some(7)));
    let took = started.elapsed();
    assert!(took < StdDuration::from_secs(20), "took {took:?}");
}

const SCRIPT_LOADED: &[u8] = b"$40\r\nb70c2384248f88e6b75b9f89241a180f856ad852\r\n";
const INFO: &[u8] = b"$37\r\nrun_id:fake\r\nuptime_in_seconds:9999\r\n\r\n";

/// What a good server answers to the handshake: `INFO` and every
/// `SCRIPT LOAD`.
pub(super) fn handshake_ok() -> Vec<u8> {
    [
        INFO.to_vec(),
        SCRIPT_LOADED.repeat(handshake::SCRIPTS.len()),
    ]
    .concat()
}

/// A good server's answer to `command` (encoded): the digest to
/// `SCRIPT LOAD`, the server section to `INFO`, +OK to anything else.
pub(super) fn fake_answer(command: &[u8]) -> &'static [u8] {
    let has = |word: &[u8]| command.windows(word.len()).any(|w| w == word);
    if has(b"SCRIPT") {
        SCRIPT_LOADED
    } else if has(b"INFO") {
        INFO
    } else {
        b"+OK\r\n"
    }
}

/// A server that answers every command as a good server would (+OK to
/// anything but the handshake), on any connection.
pub(super) fn serve_ok(listener: TcpListener) {
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 65536];
                loop {
                    let n = match s.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    buf.extend_from_slice(&chunk[..n]);
                    let mut out = Vec::new();
                    while let Ok(Status::Complete((_, used))) =
                        redlock_core::redlock_resp::parse_reply(&buf)
                    {
                        out.extend_from_slice(fake_answer(&buf[..used]));
                        buf.drain(..used);
                    }
                    if s.write_all(&out).is_err() {
                        return;
                    }
                }
            });
        }
    });
}

/// More threads than slots, each making many calls of every shape.
#[test]
fn a_hundred_threads_make_many_calls() {
    let (t, listener) = transport();
    serve_ok(listener);
    let (tx, rx) = mpsc::channel();
    let t2 = t.clone();
    std::thread::spawn(move || {
        let handles: Vec<_> = (0..100u64)
            .map(|k| {
                let t = t2.clone();
                std::thread::spawn(move || {
                    (0..50u64).all(|j| {
                        let op = TestOp {
                            pings: ((k + j) % 3 + 1) as u8,
                            fire_and_forget: (k + j) % 5 == 0,
                            until: Some(
                                t.now()
                                    .saturating_add(redlock_core::Duration::from_secs(60)),
                            ),
                            ..TestOp::default()
                        };
                        t.run(op) == 7
                    })
                })
            })
            .collect();
        let all = handles.into_iter().all(|h| h.join().unwrap_or(false));
        let _ = tx.send(all);
    });
    assert_eq!(rx.recv_timeout(StdDuration::from_secs(120)), Ok(true));
    assert_idle(&t);
}

/// A host with two addresses, the first refusing connects (a name that
/// resolves to `::1` and `127.0.0.1`, a server on one of them): the
/// first call already goes through, on the second address.
#[test]
fn a_refused_address_moves_the_connect_to_the_next_one() {
    let (t, listener) = transport();
    let live = listener.local_addr().unwrap();
    serve_ok(listener);
    let dead = {
        let gone = TcpListener::bind("127.0.0.1:0").unwrap();
        gone.local_addr().unwrap()
    };
    {
        let mut st = t.lock();
        st.conns[0].addrs = vec![dead, live];
        st.conns[0].addr_next = 0;
    }
    let op = TestOp::ping(&t, 30_000);
    assert_eq!(t.run(op), 7, "no connection error on the first call");
    assert_eq!(t.lock().conns[0].addr_next, 1);
}

/// A name that resolves again (every address failed, or none was
/// known) to the server of another entry is not used: one server, one
/// vote, also after the client was built.
#[test]
fn a_name_that_now_resolves_to_another_entry_is_refused() {
    let a = TcpListener::bind("127.0.0.1:0").unwrap();
    let b = TcpListener::bind("127.0.0.1:0").unwrap();
    let urls: Vec<ServerUrl> = [&a, &b]
        .iter()
        .map(|l| l.local_addr().unwrap().to_string().parse().unwrap())
        .collect();
    let t = Arc::new(Transport::<TestOp>::new(&urls, config()).unwrap());
    assert_eq!(t.same_server(), None);
    {
        // Entry 0's name now stands for entry 1's server, and its
        // addresses are to be looked up again.
        let mut st = t.lock();
        st.conns[0].url = format!("localhost:{}", b.local_addr().unwrap().port())
            .parse()
            .unwrap();
        st.conns[0].addrs.clear();
    }
    // The first call finds no address and asks for the name to be looked
    // up (not under the state lock); the next call looks it up before it
    // takes the lock, and its connect finds the twin.
    let op = TestOp::ping(&t, 30_000);
    assert_eq!(t.run(op), 1, "no address yet");
    assert_eq!(t.resolve_wanted.load(Ordering::Relaxed), 1);
    std::thread::sleep(StdDuration::from_millis(50)); // past the backoff
    let op = TestOp::ping(&t, 30_000);
    assert_eq!(t.run(op), 1, "server 0 is not used");
    let st = t.lock();
    assert!(
        matches!(
            st.conns[0].refused,
            Some((SetupError::SameServer(ServerId(1)), _))
        ),
        "{:?}",
        st.conns[0].refused
    );
    assert!(st.conns[0].stream.is_none());
}

/// Nothing but the handshake is written before the handshake passed,
/// and a refused handshake sends nothing more (fail closed).
#[test]
fn requests_wait_for_the_handshake_and_a_refusal_drops_them() {
    let (t, listener) = transport();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(StdDuration::from_millis(300)))
            .unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        // Everything the client sends before it hears anything.
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        let before = got.clone();
        // `INFO` passes, the first SCRIPT LOAD is refused.
        s.write_all(INFO).unwrap();
        s.write_all(b"-NOPERM no scripts for you\r\n").unwrap();
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        (before, got)
    });
    let op = TestOp::ping(&t, 30_000);
    assert_eq!(t.run(op), 1, "told the server is not used");
    let (before, after) = server.join().unwrap();
    assert!(
        before.windows(6).any(|w| w == b"SCRIPT"),
        "the handshake went out"
    );
    assert!(!before.ends_with(PING) && !after.windows(PING.len()).any(|w| w == PING));
    let st = t.lock();
    let (why, text) = st.conns[0].refused.clone().unwrap();
    assert_eq!(
        why,
        SetupError::Refused {
            step: Step::ScriptLoad,
            kind: redlock_core::redlock_resp::ErrorKind::NoPerm
        }
    );
    assert!(text.contains("NOPERM no scripts for you"), "{text}");
}

/// A server's error text never carries the password, even when the
/// server quotes the arguments it refused.
#[test]
fn refusal_texts_never_carry_the_password() {
    let why = SetupError::Refused {
        step: Step::Auth,
        kind: redlock_core::redlock_resp::ErrorKind::Err,
    };
    let quoted = Reply::Error(redlock_core::redlock_resp::ServerError::new(
        b"ERR unknown command 'AUTH', with args beginning with: 'user' 'hunter2' ",
    ));
    let text = refusal_text(why, &quoted, Some(b"hunter2"));
    assert_eq!(text, "AUTH failed (ERR): ERR unknown command");
    let bare = Reply::Error(redlock_core::redlock_resp::ServerError::new(
        b"ERR bad password hunter2 here",
    ));
    let text = refusal_text(why, &bare, Some(b"hunter2"));
    assert!(!text.contains("hunter2") && text.contains("***"), "{text}");
}

/// A server that takes the connection but never answers its handshake
/// is given up on after a connect timeout, and a call does not wait for
/// requests (other than releases) held behind it.
#[test]
fn a_handshake_that_never_answers_times_out() {
    let (t, listener) = transport_with(ConnConfig {
        connect_timeout: StdDuration::from_millis(300),
        delivery_grace: StdDuration::from_secs(5),
        ..config()
    });
    // Accepted by the kernel (backlog), never read.
    let op = TestOp::ping(&t, 30_000);
    let started = StdInstant::now();
    assert_eq!(t.run(op), 1, "told when the handshake timed out");
    let took = started.elapsed();
    assert!(took >= StdDuration::from_millis(300), "{took:?}");
    assert!(took < StdDuration::from_secs(5), "{took:?}");
    drop(listener);
}

/// `Debug` of the transport never shows the password, even while the
/// `AUTH` of a connect waits to be written.
#[test]
fn debug_never_shows_the_auth_bytes() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url: ServerUrl = format!("redis://u:sekret@{}", listener.local_addr().unwrap())
        .parse()
        .unwrap();
    let t = Transport::<TestOp>::new(&[url], config()).unwrap();
    let mut st = t.lock();
    assert!(st.ensure_connecting(0, false));
    // As once the connect completes: the handshake is queued.
    let (now, policy) = (st.now(), st.policy);
    st.conns[0].start_handshake(now, &policy);
    assert!(st.conns[0].out.windows(6).any(|w| w == b"sekret"));
    let shown = format!("{:?} {:?}", *st, st.conns[0]);
    assert!(!shown.contains("sekret"), "{shown}");
    // As bytes, too.
    let as_bytes = format!("{:?}", b"sekret".to_vec());
    let inner = as_bytes.trim_matches(|c| c == '[' || c == ']');
    assert!(!shown.contains(inner), "{shown}");
}

/// A name that did not resolve when the client was built is looked up by
/// the first call, before it takes the lock, and that call goes through.
#[test]
fn a_name_unresolved_at_build_is_looked_up_by_the_first_call() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    serve_ok(listener);
    let url: ServerUrl = format!("localhost:{port}").parse().unwrap();
    let t = Arc::new(Transport::<TestOp>::new(&[url], config()).unwrap());
    {
        // As if the lookup had failed in `new`, which then asks for one.
        let mut st = t.lock();
        st.conns[0].addrs.clear();
        t.resolve_wanted.store(1, Ordering::Relaxed);
    }
    assert_eq!(t.run(TestOp::ping(&t, 30_000)), 7, "the first call works");
}

/// A lookup that lands while a connect to an old address is in progress
/// is not used by that connect's fallback to its next address: it is
/// adopted only where the duplicate check sees it first (review finding).
#[test]
fn a_lookup_landing_during_a_connect_is_checked_before_use() {
    let b = TcpListener::bind("127.0.0.1:0").unwrap();
    let bport = b.local_addr().unwrap().port();
    serve_ok(b);
    let dead = |_: u8| {
        let gone = TcpListener::bind("127.0.0.1:0").unwrap();
        gone.local_addr().unwrap()
    };
    let urls: Vec<ServerUrl> = vec![
        format!("localhost:{bport}").parse().unwrap(),
        format!("127.0.0.1:{bport}").parse().unwrap(),
    ];
    let t = Arc::new(Transport::<TestOp>::new(&urls, config()).unwrap());
    {
        let mut st = t.lock();
        // Entry 0's name used to stand for another server (now gone).
        st.conns[0].addrs = vec![dead(0)];
        st.conns[0].addr_next = 0;
        assert!(st.connect(0).is_ok());
        // A call's lookup finds entry 1's server behind the name.
        st.conns[0].looked_up = Some(vec![dead(1), format!("127.0.0.1:{bport}").parse().unwrap()]);
        // The old connect fails: no address of the old list is left, and
        // the new list is not used here.
        st.fail_connect(0);
        assert_eq!(st.conns[0].session.state(), SessionState::Down);
    }
    std::thread::sleep(StdDuration::from_millis(50)); // past the backoff
    assert_eq!(t.run(TestOp::ping(&t, 2_000)), 1, "not used");
    let st = t.lock();
    assert!(
        matches!(
            st.conns[0].refused,
            Some((SetupError::SameServer(ServerId(1)), _))
        ),
        "{:?}",
        st.conns[0].refused
    );
}

/// A reply and the server's FIN both arrive while the leader is busy
/// (handling another reply), so the poll reports them in one event, flagged
/// read-closed. The short read of the reply must not hide the EOF behind
/// it (no further event would announce it): the connection goes down, and
/// the next request reconnects instead of going out on a closed socket.
#[test]
fn an_eof_behind_a_short_read_is_seen() {
    let (t, listener) = transport();
    let (tx, rx) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.write_all(&handshake_ok()).unwrap();
        let mut seen = Vec::new();
        let mut chunk = [0u8; 65536];
        while seen.windows(4).filter(|w| w == b"PING").count() < 2 {
            let n = s.read(&mut chunk).unwrap();
            assert!(n > 0);
            seen.extend_from_slice(&chunk[..n]);
        }
        s.write_all(b"+PONG\r\n").unwrap();
        // The client handles that reply for 300 ms (`slow_first_reply`).
        std::thread::sleep(StdDuration::from_millis(100));
        s.write_all(b"+PONG\r\n").unwrap();
        s.shutdown(std::net::Shutdown::Both).unwrap();
        drop(s);
        tx.send(()).unwrap();
        // Any later connection is served.
        serve_ok(listener);
        std::thread::sleep(StdDuration::from_secs(60));
    });
    let slow = |t: &Arc<Transport<TestOp>>| TestOp {
        slow_first_reply: Some(StdDuration::from_millis(300)),
        ..TestOp::ping(t, 5_000)
    };
    let a = spawn_run(&t, slow(&t));
    let b = spawn_run(&t, slow(&t));
    assert_eq!(a.recv_timeout(StdDuration::from_secs(10)), Ok(Some(7)));
    assert_eq!(b.recv_timeout(StdDuration::from_secs(10)), Ok(Some(7)));
    rx.recv().unwrap();
    std::thread::sleep(StdDuration::from_millis(200));
    let state = t.lock().conns[0].session.state();
    assert_ne!(
        state,
        SessionState::Ready,
        "EOF unseen: the connection still counts as up"
    );
    // 7: replied (1 would be a connection error).
    assert_eq!(t.run(TestOp::ping(&t, 2_000)), 7);
}
