//! The fenced resource: a register on a small TCP service that checks the
//! fencing token of every access (Kleppmann's fencing), and records every
//! access it handled as an [`Access`].
//!
//! The line protocol (one request, one answer, each ending in `\n`):
//!
//! | request | answer |
//! |---|---|
//! | `READ <worker> <fence>` | `OK <value>` if `fence >= max_fence` (which then becomes `fence`), else `REJECT <max_fence>` |
//! | `WRITE <worker> <fence> <value> <read> <past_validity 0\|1>` | `OK` if `fence >= max_fence` and `fence` is above the fence of every accepted write (the register becomes `value`, `max_fence` becomes `fence`), else `REJECT <max_fence>` |
//! | anything else | `ERR <why>` |
//!
//! `max_fence` is the largest fence of any accepted access, reads included:
//! a holder paused past its validity cannot write once a newer holder has
//! even read. A line is at most [`MAX_LINE`] bytes; a longer one is answered
//! with `ERR` and the connection is closed. Nothing a client sends can make
//! the server panic or grow without bound (but the record of accesses grows
//! with every access, as it must).

use alloc::sync::Arc;
use core::net::{Ipv4Addr, SocketAddr};
use core::sync::atomic::{AtomicBool, Ordering};
use core::time::Duration;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Instant;

use super::history::{Access, AccessOp, RunClock};

/// The longest line either side sends, `\n` included.
pub const MAX_LINE: usize = 256;

/// How often the server's threads look at the stop flag.
const POLL: Duration = Duration::from_millis(50);

/// How long a client waits to connect, and for each request (its send and
/// its answer together).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(3);

/// How long the server waits to send an answer before it drops the
/// connection (a client that does not read).
const SERVER_WRITE_TIMEOUT: Duration = Duration::from_secs(3);

/// The register and its record.
///
/// Invariants (checked by `debug_assert!` after every access):
/// - `max_fence` is the largest fence of any accepted access (0 before any);
/// - `last_write_fence` is the largest fence of any accepted write, and is
///   at most `max_fence`;
/// - `accesses` is in handling order and its times never decrease.
#[derive(Debug, Default)]
struct Register {
    value: u64,
    max_fence: u64,
    last_write_fence: Option<u64>,
    accesses: Vec<Access>,
}

impl Register {
    /// Handles one access at `now` and records it; returns the answer.
    fn access(&mut self, now: u64, worker: u32, fence: u64, op: AccessOp) -> Answer {
        let max_before = self.max_fence;
        let value_before = self.value;
        let accepted = match op {
            AccessOp::Read => fence >= self.max_fence,
            AccessOp::Write { .. } => {
                fence >= self.max_fence && self.last_write_fence.is_none_or(|w| fence > w)
            }
        };
        if accepted {
            self.max_fence = fence;
            if let AccessOp::Write { value, .. } = op {
                self.value = value;
                self.last_write_fence = Some(fence);
            }
        }
        // Wall-clock readings may step back; the record's times do not.
        let at = self.accesses.last().map_or(now, |last| now.max(last.at));
        self.accesses.push(Access {
            worker,
            fence,
            op: op.clone(),
            at,
            accepted,
            max_fence_before: max_before,
            value_before,
        });
        debug_assert!(self.max_fence >= max_before);
        debug_assert!(self.last_write_fence.is_none_or(|w| w <= self.max_fence));
        match (accepted, op) {
            (false, _) => Answer::Reject(self.max_fence),
            (true, AccessOp::Read) => Answer::Value(value_before),
            (true, AccessOp::Write { .. }) => Answer::Written,
        }
    }
}

/// The server's answer to one line.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Answer {
    /// `OK <value>`.
    Value(u64),
    /// `OK`.
    Written,
    /// `REJECT <max_fence>`.
    Reject(u64),
    /// `ERR <why>`.
    Error(&'static str),
}

impl Answer {
    fn line(&self) -> String {
        match self {
            Answer::Value(v) => format!("OK {v}\n"),
            Answer::Written => "OK\n".to_owned(),
            Answer::Reject(max) => format!("REJECT {max}\n"),
            Answer::Error(why) => format!("ERR {why}\n"),
        }
    }
}

/// A request, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Request {
    worker: u32,
    fence: u64,
    op: AccessOp,
}

/// Parses one line (without its `\n`; a trailing `\r` is allowed).
fn parse(line: &[u8]) -> Result<Request, &'static str> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = core::str::from_utf8(line).map_err(|_| "not UTF-8")?;
    let mut words = line.split_ascii_whitespace();
    let verb = words.next().ok_or("empty line")?;
    let mut number = |what: &'static str| -> Result<u64, &'static str> {
        words.next().ok_or(what)?.parse::<u64>().map_err(|_| what)
    };
    let worker = u32::try_from(number("bad worker")?).map_err(|_| "bad worker")?;
    let fence = number("bad fence")?;
    let op = match verb {
        "READ" => AccessOp::Read,
        "WRITE" => {
            let value = number("bad value")?;
            let read = number("bad read")?;
            let past_validity = match number("bad past_validity")? {
                0 => false,
                1 => true,
                _ => return Err("bad past_validity"),
            };
            AccessOp::Write {
                value,
                read,
                past_validity,
            }
        }
        _ => return Err("unknown command"),
    };
    if words.next().is_some() {
        return Err("too many arguments");
    }
    Ok(Request { worker, fence, op })
}

#[derive(Debug)]
struct Shared {
    clock: RunClock,
    stop: AtomicBool,
    register: Mutex<Register>,
}

impl Shared {
    fn handle(&self, line: &[u8]) -> Answer {
        match parse(line) {
            Ok(r) => {
                let mut register = self.register.lock().unwrap_or_else(PoisonError::into_inner);
                // Read the clock under the lock: times follow handling order.
                let now = self.clock.now();
                register.access(now, r.worker, r.fence, r.op)
            }
            Err(why) => Answer::Error(why),
        }
    }
}

/// A running fenced resource on a free loopback port. [`stop`] (or drop)
/// stops it and waits for its threads.
///
/// [`stop`]: ResourceServer::stop
#[derive(Debug)]
pub struct ResourceServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl ResourceServer {
    /// Starts the resource on `127.0.0.1`, port 0 (a free one); accesses are
    /// timed with `clock`.
    pub fn start(clock: RunClock) -> io::Result<ResourceServer> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            clock,
            stop: AtomicBool::new(false),
            register: Mutex::new(Register::default()),
        });
        let s = shared.clone();
        let accept = thread::Builder::new()
            .name("resource-accept".to_owned())
            .spawn(move || accept_loop(&listener, &s))?;
        Ok(ResourceServer {
            addr,
            shared,
            accept: Some(accept),
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A copy of every access handled so far, in handling order.
    pub fn accesses(&self) -> Vec<Access> {
        self.shared
            .register
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .accesses
            .clone()
    }

    /// Stops accepting, closes every connection and waits for the server's
    /// threads (within a poll interval, or the few seconds an answer may
    /// take to send to a client that does not read).
    /// The record stays readable with [`accesses`](Self::accesses).
    /// Calling it again does nothing.
    pub fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

impl Drop for ResourceServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    let mut connections: Vec<JoinHandle<()>> = Vec::new();
    while !shared.stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                let s = shared.clone();
                if let Ok(handle) = thread::Builder::new()
                    .name("resource-conn".to_owned())
                    .spawn(move || serve(stream, &s))
                {
                    connections.push(handle);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => thread::sleep(POLL),
        }
        // Join what has ended, so the list stays as long as the live ones.
        let (done, live): (Vec<_>, Vec<_>) =
            connections.into_iter().partition(JoinHandle::is_finished);
        connections = live;
        for handle in done {
            let _ = handle.join();
        }
    }
    for handle in connections {
        let _ = handle.join();
    }
}

/// Serves one connection until the client closes it, it errs, it sends a
/// line too long, or the server stops.
fn serve(mut stream: TcpStream, shared: &Shared) {
    let set_up = stream
        .set_nonblocking(false)
        .and_then(|()| stream.set_read_timeout(Some(POLL)))
        .and_then(|()| stream.set_write_timeout(Some(SERVER_WRITE_TIMEOUT)))
        .and_then(|()| stream.set_nodelay(true));
    if set_up.is_err() {
        return;
    }
    let mut pending: Vec<u8> = Vec::with_capacity(MAX_LINE);
    let mut chunk = [0u8; MAX_LINE];
    while !shared.stop.load(Ordering::Relaxed) {
        let n = match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                continue;
            }
            Err(_) => break,
        };
        pending.extend_from_slice(chunk.get(..n).unwrap_or_default());
        let mut answers = String::new();
        let mut start = 0;
        while let Some(pos) = pending
            .get(start..)
            .and_then(|rest| rest.iter().position(|&b| b == b'\n'))
        {
            let end = start + pos;
            if pos + 1 > MAX_LINE {
                answers.push_str(&Answer::Error("line too long").line());
                let _ = stream.write_all(answers.as_bytes());
                let _ = stream.shutdown(Shutdown::Both);
                return;
            }
            answers.push_str(
                &shared
                    .handle(pending.get(start..end).unwrap_or_default())
                    .line(),
            );
            start = end + 1;
        }
        pending.drain(..start);
        let too_long = pending.len() >= MAX_LINE;
        if too_long {
            answers.push_str(&Answer::Error("line too long").line());
        }
        if !answers.is_empty() && stream.write_all(answers.as_bytes()).is_err() {
            break;
        }
        if too_long {
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
}

/// A blocking client of the resource: one request at a time, each bounded
/// by one overall deadline of a few seconds (sending and answer together),
/// so a worker never hangs on it. A read cut short by a signal (`EINTR`: a
/// read with a timeout fails so when its process is stopped and continued,
/// as the nemesis does to workers) is retried within that deadline.
///
/// After any error (a timeout, a closed or broken connection, an `ERR` or
/// malformed answer) the client shuts its connection down, and every later
/// call fails with [`io::ErrorKind::NotConnected`]: an answer still on its
/// way would otherwise be taken for the next request's. The caller must
/// [`connect`](Self::connect) again.
#[derive(Debug)]
pub struct ResourceClient {
    stream: TcpStream,
    pending: Vec<u8>,
    /// The deadline of each request, from its start.
    timeout: Duration,
    /// An earlier request failed: the connection is shut down.
    broken: bool,
}

impl ResourceClient {
    /// Connects to the resource at `addr`.
    pub fn connect(addr: SocketAddr) -> io::Result<ResourceClient> {
        let stream = TcpStream::connect_timeout(&addr, CLIENT_TIMEOUT)?;
        stream.set_read_timeout(Some(CLIENT_TIMEOUT))?;
        stream.set_write_timeout(Some(CLIENT_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(ResourceClient {
            stream,
            pending: Vec::with_capacity(MAX_LINE),
            timeout: CLIENT_TIMEOUT,
            broken: false,
        })
    }

    /// Reads the register with `fence`: `Ok(value)`, or `Err(max_fence)` if
    /// the resource refused the fence. After an error, see the type's docs.
    pub fn read(&mut self, worker: u32, fence: u64) -> io::Result<Result<u64, u64>> {
        match self.request(&format!("READ {worker} {fence}\n"))? {
            Answer::Value(v) => Ok(Ok(v)),
            Answer::Reject(max) => Ok(Err(max)),
            other => Err(self.fail(unexpected(&other))),
        }
    }

    /// Writes `value` with `fence`, having read `read` before;
    /// `past_validity` says the worker's validity had ended when it sent it.
    /// `Ok(())`, or `Err(max_fence)` if the resource refused the fence.
    /// After an error, see the type's docs.
    pub fn write(
        &mut self,
        worker: u32,
        fence: u64,
        value: u64,
        read: u64,
        past_validity: bool,
    ) -> io::Result<Result<(), u64>> {
        let past = u8::from(past_validity);
        match self.request(&format!("WRITE {worker} {fence} {value} {read} {past}\n"))? {
            Answer::Written => Ok(Ok(())),
            Answer::Reject(max) => Ok(Err(max)),
            other => Err(self.fail(unexpected(&other))),
        }
    }

    /// Shuts the connection down for good and returns `e`.
    fn fail(&mut self, e: io::Error) -> io::Error {
        self.broken = true;
        self.pending.clear();
        let _ = self.stream.shutdown(Shutdown::Both);
        e
    }

    fn request(&mut self, line: &str) -> io::Result<Answer> {
        if self.broken {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "resource: the connection failed earlier; connect again",
            ));
        }
        let deadline = Instant::now() + self.timeout;
        match self.exchange(line.as_bytes(), deadline) {
            Ok(answer) => Ok(answer),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Sends `line` and reads one answer line, by `deadline`.
    fn exchange(&mut self, line: &[u8], deadline: Instant) -> io::Result<Answer> {
        let timed_out = || io::Error::new(io::ErrorKind::TimedOut, "resource: no answer in time");
        // The time left, if any (a zero timeout is refused by the socket).
        let left = || {
            deadline
                .checked_duration_since(Instant::now())
                .filter(|d| !d.is_zero())
        };
        let mut sent = 0;
        while let Some(rest) = line.get(sent..).filter(|r| !r.is_empty()) {
            self.stream
                .set_write_timeout(Some(left().ok_or_else(timed_out)?))?;
            match self.stream.write(rest) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => sent += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => return Err(timed_out()),
                Err(e) => return Err(e),
            }
        }
        let mut chunk = [0u8; MAX_LINE];
        loop {
            if let Some(pos) = self.pending.iter().position(|&b| b == b'\n') {
                let answer = parse_answer(self.pending.get(..pos).unwrap_or_default());
                self.pending.drain(..=pos);
                return answer;
            }
            if self.pending.len() >= MAX_LINE {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "resource: answer too long",
                ));
            }
            self.stream
                .set_read_timeout(Some(left().ok_or_else(timed_out)?))?;
            let n = match self.stream.read(&mut chunk) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "resource: connection closed",
                    ));
                }
                Ok(n) => n,
                // A stop and continue (or another signal): wait on.
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if is_timeout(&e) => return Err(timed_out()),
                Err(e) => return Err(e),
            };
            self.pending
                .extend_from_slice(chunk.get(..n).unwrap_or_default());
        }
    }
}

/// A socket timeout (`WouldBlock` on Unix, `TimedOut` on Windows).
fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

fn unexpected(answer: &Answer) -> io::Error {
    match answer {
        Answer::Error(_) => io::Error::new(io::ErrorKind::InvalidInput, "resource: ERR answer"),
        _ => io::Error::new(io::ErrorKind::InvalidData, "resource: unexpected answer"),
    }
}

/// Parses an answer line (without its `\n`).
fn parse_answer(line: &[u8]) -> io::Result<Answer> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "resource: malformed answer");
    let text = core::str::from_utf8(line).map_err(|_| bad())?;
    let text = text.strip_suffix('\r').unwrap_or(text);
    if text == "OK" {
        return Ok(Answer::Written);
    }
    if let Some(v) = text.strip_prefix("OK ") {
        return v.parse().map(Answer::Value).map_err(|_| bad());
    }
    if let Some(m) = text.strip_prefix("REJECT ") {
        return m.parse().map(Answer::Reject).map_err(|_| bad());
    }
    if let Some(why) = text.strip_prefix("ERR") {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("resource: ERR{why}"),
        ));
    }
    Err(bad())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;

    fn raw(addr: SocketAddr) -> (TcpStream, std::io::BufReader<TcpStream>) {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let r = std::io::BufReader::new(s.try_clone().unwrap());
        (s, r)
    }

    fn say(s: &mut TcpStream, r: &mut std::io::BufReader<TcpStream>, line: &str) -> String {
        s.write_all(line.as_bytes()).unwrap();
        let mut answer = String::new();
        r.read_line(&mut answer).unwrap();
        answer
    }

    #[test]
    fn fenced_reads_and_writes() {
        let mut server = ResourceServer::start(RunClock::start()).unwrap();
        let mut a = ResourceClient::connect(server.addr()).unwrap();
        let mut b = ResourceClient::connect(server.addr()).unwrap();
        assert_eq!(a.read(1, 5).unwrap(), Ok(0));
        assert_eq!(a.write(1, 5, 1, 0, false).unwrap(), Ok(()));
        // A second write with the same fence: not above the last write.
        assert_eq!(a.write(1, 5, 2, 1, false).unwrap(), Err(5));
        // A newer holder reads: the old one can neither read nor write.
        assert_eq!(b.read(2, 7).unwrap(), Ok(1));
        assert_eq!(a.read(1, 5).unwrap(), Err(7));
        assert_eq!(a.write(1, 5, 9, 1, true).unwrap(), Err(7));
        assert_eq!(b.write(2, 7, 2, 1, false).unwrap(), Ok(()));
        // An unread higher fence may write (it is above everything seen).
        assert_eq!(a.write(1, 8, 3, 2, false).unwrap(), Ok(()));
        server.stop();
        let acc = server.accesses();
        assert_eq!(acc.len(), 8);
        assert_eq!(
            acc.iter().map(|a| a.accepted).collect::<Vec<_>>(),
            [true, true, false, true, false, false, true, true]
        );
        let stale = &acc[5];
        assert_eq!(stale.fence, 5);
        assert_eq!(stale.max_fence_before, 7);
        assert_eq!(stale.value_before, 1);
        assert_eq!(
            stale.op,
            AccessOp::Write {
                value: 9,
                read: 1,
                past_validity: true
            }
        );
        assert!(acc.windows(2).all(|w| w[0].at <= w[1].at));
        assert_eq!(acc[7].max_fence_before, 7);
        assert_eq!(acc[7].value_before, 2);
    }

    #[test]
    fn bad_lines_get_err_and_never_touch_the_register() {
        let server = ResourceServer::start(RunClock::start()).unwrap();
        let (mut s, mut r) = raw(server.addr());
        for line in [
            "\n",
            "HELLO 1 2\n",
            "READ\n",
            "READ x 2\n",
            "READ 1\n",
            "READ 1 2 3\n",
            "READ 99999999999 2\n",
            "WRITE 1 2 3 4 2\n",
            "WRITE 1 2 3\n",
            "READ 1 -2\n",
            "READ 1 18446744073709551616\n",
        ] {
            assert!(say(&mut s, &mut r, line).starts_with("ERR "), "{line:?}");
        }
        s.write_all(b"\xff\xfe\n").unwrap();
        let mut answer = String::new();
        r.read_line(&mut answer).unwrap();
        assert!(answer.starts_with("ERR "));
        assert_eq!(say(&mut s, &mut r, "READ 1 2\r\n"), "OK 0\n");
        // Two requests in one packet: two answers in order.
        s.write_all(b"WRITE 1 2 7 0 0\nREAD 1 2\n").unwrap();
        let mut answer = String::new();
        r.read_line(&mut answer).unwrap();
        assert_eq!(answer, "OK\n");
        answer.clear();
        r.read_line(&mut answer).unwrap();
        assert_eq!(answer, "OK 7\n");
        assert_eq!(server.accesses().len(), 3);
    }

    #[test]
    fn a_line_too_long_is_refused_and_closed() {
        let server = ResourceServer::start(RunClock::start()).unwrap();
        let (mut s, mut r) = raw(server.addr());
        // Exactly one bound's worth, without `\n` (all of it is read, so the
        // close is a clean one).
        s.write_all(&[b'9'; MAX_LINE]).unwrap();
        let mut answer = String::new();
        r.read_line(&mut answer).unwrap();
        assert_eq!(answer, "ERR line too long\n");
        answer.clear();
        assert_eq!(r.read_line(&mut answer).unwrap_or(0), 0);
        // The server still serves others.
        let mut c = ResourceClient::connect(server.addr()).unwrap();
        assert_eq!(c.read(1, 1).unwrap(), Ok(0));
        assert_eq!(server.accesses().len(), 1);
    }

    #[test]
    fn stop_returns_with_idle_and_half_sent_connections() {
        let mut server = ResourceServer::start(RunClock::start()).unwrap();
        let idle = TcpStream::connect(server.addr()).unwrap();
        let mut half = TcpStream::connect(server.addr()).unwrap();
        half.write_all(b"WRITE 1 2").unwrap();
        thread::sleep(Duration::from_millis(100));
        let began = std::time::Instant::now();
        server.stop();
        server.stop();
        assert!(began.elapsed() < Duration::from_secs(2));
        assert!(server.accesses().is_empty());
        drop((idle, half));
        // A client of a stopped resource gets an error, not a hang.
        assert!(
            ResourceClient::connect(server.addr())
                .and_then(|mut c| c.read(1, 1))
                .is_err()
        );
    }

    #[test]
    fn concurrent_clients_are_serialised() {
        let server = ResourceServer::start(RunClock::start()).unwrap();
        let addr = server.addr();
        let threads: Vec<_> = (1..=4u32)
            .map(|w| {
                thread::spawn(move || {
                    let mut c = ResourceClient::connect(addr).unwrap();
                    for i in 0..50u64 {
                        let fence = i * 4 + u64::from(w);
                        if let Ok(v) = c.read(w, fence).unwrap() {
                            let _ = c.write(w, fence, v + 1, v, false).unwrap();
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let acc = server.accesses();
        assert_eq!(
            acc.iter()
                .filter(|a| matches!(a.op, AccessOp::Read))
                .count(),
            200
        );
        // Accepted writes carry increasing fences.
        let fences: Vec<u64> = acc
            .iter()
            .filter(|a| a.accepted && matches!(a.op, AccessOp::Write { .. }))
            .map(|a| a.fence)
            .collect();
        assert!(fences.windows(2).all(|w| w[0] < w[1]));
    }

    /// A one-connection stand-in for the resource: answers each request
    /// with the next of `answers` after its delay, and reports through the
    /// channel when each request arrived.
    fn scripted(
        answers: Vec<(Duration, &'static str)>,
    ) -> (
        SocketAddr,
        std::sync::mpsc::Receiver<String>,
        JoinHandle<()>,
    ) {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let server = thread::spawn(move || {
            let (s, _) = listener.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let mut w = s.try_clone().unwrap();
            let mut r = std::io::BufReader::new(s);
            for (delay, answer) in answers {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 {
                    let _ = tx.send(String::new());
                    return;
                }
                let _ = tx.send(line);
                thread::sleep(delay);
                if w.write_all(answer.as_bytes()).is_err() {
                    return;
                }
            }
            // Whatever comes next (nothing, if the client gave up).
            let mut line = String::new();
            let _ = r.read_line(&mut line);
            let _ = tx.send(line);
        });
        (addr, rx, server)
    }

    #[test]
    fn after_an_error_the_client_fails_instead_of_reading_a_late_answer() {
        // The first answer comes after the client gave up on it.
        let (addr, rx, server) = scripted(vec![
            (Duration::from_millis(400), "OK 1\n"),
            (Duration::ZERO, "OK 2\n"),
        ]);
        let mut c = ResourceClient::connect(addr).unwrap();
        c.timeout = Duration::from_millis(100);
        let err = c.read(1, 1).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err:?}");
        assert_eq!(rx.recv().unwrap(), "READ 1 1\n");
        thread::sleep(Duration::from_millis(500));
        // Without the fix, this read took the first one's late `OK 1`.
        let err = c.read(1, 2).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotConnected, "{err:?}");
        assert!(c.write(1, 2, 3, 2, false).is_err());
        // Nothing more was sent: the server saw the connection close.
        assert_eq!(rx.recv().unwrap(), "");
        server.join().unwrap();
    }

    #[test]
    fn a_malformed_answer_also_ends_the_connection() {
        let (addr, rx, server) = scripted(vec![(Duration::ZERO, "OK\n")]);
        let mut c = ResourceClient::connect(addr).unwrap();
        // `OK` answers a write, not a read: out of step.
        assert_eq!(c.read(1, 1).unwrap_err().kind(), io::ErrorKind::InvalidData);
        assert_eq!(rx.recv().unwrap(), "READ 1 1\n");
        assert_eq!(
            c.read(1, 1).unwrap_err().kind(),
            io::ErrorKind::NotConnected
        );
        assert_eq!(rx.recv().unwrap(), "");
        server.join().unwrap();
    }

    /// The environment variable that makes [`interrupted_child`] run.
    const EINTR_ADDR: &str = "REDLOCK_TORTURE_EINTR_ADDR";

    /// Run by [`a_stop_and_continue_does_not_fail_a_request`] in a child
    /// process (does nothing otherwise): two reads; the parent stops and
    /// continues this process during the first.
    #[test]
    fn interrupted_child() {
        let Ok(addr) = std::env::var(EINTR_ADDR) else {
            return;
        };
        let mut c = ResourceClient::connect(addr.parse().unwrap()).unwrap();
        let first = c.read(1, 1);
        assert!(matches!(first, Ok(Ok(1))), "first read: {first:?}");
        let second = c.read(1, 2);
        assert!(matches!(second, Ok(Ok(2))), "second read: {second:?}");
    }

    #[test]
    fn a_stop_and_continue_does_not_fail_a_request() {
        // SIGSTOP and SIGCONT make a read with a timeout fail with EINTR
        // (signal(7)); the client must wait on for its answer. Done to a
        // child process (this test binary, running `interrupted_child`
        // alone), so that no other test here is stopped.
        let (addr, rx, server) = scripted(vec![
            (Duration::from_millis(600), "OK 1\n"),
            (Duration::ZERO, "OK 2\n"),
        ]);
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "resource::tests::interrupted_child",
                "--exact",
                "--test-threads=1",
                "--nocapture",
            ])
            .env(EINTR_ADDR, addr.to_string())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(20)).unwrap(),
            "READ 1 1\n"
        );
        // The child is now waiting for the answer.
        thread::sleep(Duration::from_millis(150));
        let kill = |sig: &str| {
            let status = std::process::Command::new("kill")
                .args([sig, &child.id().to_string()])
                .status()
                .unwrap();
            assert!(status.success());
        };
        kill("-STOP");
        thread::sleep(Duration::from_millis(100));
        kill("-CONT");
        let out = child.wait_with_output().unwrap();
        let log = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{log}");
        assert!(log.contains("1 passed"), "{log}");
        assert_eq!(rx.recv().unwrap(), "READ 1 2\n");
        server.join().unwrap();
    }
}
