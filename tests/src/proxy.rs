//! A small TCP fault proxy on 127.0.0.1 for tests: put it between a client
//! and a real server, then switch its [`Fault`] at any time.

use alloc::sync::Arc;
use core::net::SocketAddr;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use core::time::Duration;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Mutex, PoisonError};
use std::thread;

/// What the proxy does to the bytes it forwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forward as they come.
    Pass,
    /// Forward after this delay (both directions, order kept).
    Delay(Duration),
    /// Keep the bytes until the fault changes, then forward them.
    Hold,
    /// Drop the bytes (the connection stays open: a black hole).
    Blackhole,
    /// Close every connection (a reset), and new ones at once.
    Reset,
    /// Forward one byte per interval.
    Drip(Duration),
    /// Forward requests; drop the next bytes a server sends and close that
    /// connection (the request ran, its answer is lost), once: then
    /// [`Fault::Pass`].
    CutReply,
    /// Forward requests as whole commands, but swallow the next command
    /// named so (`b"SET"`, `b"EVALSHA"`; any case) that a client sends, once
    /// for the whole proxy, and keep the connection open (bytes lost on a
    /// live connection, no reset: a request that will never be answered);
    /// then [`Fault::Pass`].
    Swallow(&'static [u8]),
}

#[derive(Debug)]
struct Shared {
    fault: Mutex<Fault>,
    stop: AtomicBool,
    /// Connections accepted so far.
    accepted: AtomicUsize,
    /// Client-to-server bytes held now (under [`Fault::Hold`]).
    held_upstream: AtomicUsize,
}

impl Shared {
    fn fault(&self) -> Fault {
        *self.fault.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Ends [`Fault::Swallow`] of `name`: true for the one caller that
    /// ends it (whose command is swallowed).
    fn swallow_once(&self, name: &[u8]) -> bool {
        let mut fault = self.fault.lock().unwrap_or_else(PoisonError::into_inner);
        let mine = matches!(*fault, Fault::Swallow(n) if n.eq_ignore_ascii_case(name));
        if mine {
            *fault = Fault::Pass;
        }
        mine
    }

    /// Ends [`Fault::CutReply`] once it has cut a reply.
    fn cut_reply_once(&self) {
        let mut fault = self.fault.lock().unwrap_or_else(PoisonError::into_inner);
        if *fault == Fault::CutReply {
            *fault = Fault::Pass;
        }
    }
}

/// A running proxy; stops when dropped.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl FaultProxy {
    /// Starts a proxy to `upstream` on a free loopback port.
    pub fn start(upstream: SocketAddr) -> io::Result<FaultProxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            fault: Mutex::new(Fault::Pass),
            stop: AtomicBool::new(false),
            accepted: AtomicUsize::new(0),
            held_upstream: AtomicUsize::new(0),
        });
        let s = shared.clone();
        thread::spawn(move || {
            while !s.stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        s.accepted.fetch_add(1, Ordering::Relaxed);
                        if s.fault() == Fault::Reset {
                            let _ = client.shutdown(Shutdown::Both);
                            continue;
                        }
                        let Ok(server) = TcpStream::connect(upstream) else {
                            continue;
                        };
                        let _ = client.set_nodelay(true);
                        let _ = server.set_nodelay(true);
                        for (from, to, upstream) in [
                            (client.try_clone(), server.try_clone(), true),
                            (server.try_clone(), client.try_clone(), false),
                        ] {
                            if let (Ok(from), Ok(to)) = (from, to) {
                                let s = s.clone();
                                thread::spawn(move || pump(from, to, &s, upstream));
                            }
                        }
                    }
                    Err(_) => thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        Ok(FaultProxy { addr, shared })
    }

    /// Where clients should connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How many connections the proxy accepted so far.
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::Relaxed)
    }

    /// How many client-to-server bytes are held now (under [`Fault::Hold`]).
    pub fn held_upstream(&self) -> usize {
        self.shared.held_upstream.load(Ordering::Relaxed)
    }

    /// What the proxy does now (a one-shot fault that did its work is
    /// [`Fault::Pass`] again).
    pub fn fault(&self) -> Fault {
        self.shared.fault()
    }

    /// Changes what the proxy does from now on.
    pub fn set(&self, fault: Fault) {
        *self
            .shared
            .fault
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = fault;
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
    }
}

/// Copies `from` to `to`, applying the current fault.
fn pump(mut from: TcpStream, mut to: TcpStream, shared: &Shared, upstream: bool) {
    let count = |n: usize, add: bool| {
        if upstream && add {
            shared.held_upstream.fetch_add(n, Ordering::Relaxed);
        } else if upstream {
            shared.held_upstream.fetch_sub(n, Ordering::Relaxed);
        }
    };
    let _ = from.set_read_timeout(Some(Duration::from_millis(20)));
    let mut held: Vec<u8> = Vec::new();
    // Client bytes not yet forwarded as whole commands (`SwallowSet`).
    let mut framing: Vec<u8> = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        let before = shared.fault();
        if before == Fault::Reset {
            break;
        }
        if before != Fault::Hold && !held.is_empty() {
            count(held.len(), false);
            if to.write_all(&core::mem::take(&mut held)).is_err() {
                break;
            }
        }
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(_) => break,
        };
        // The fault in force when the bytes arrived.
        let mut fault = shared.fault();
        if fault == Fault::CutReply {
            if upstream {
                fault = Fault::Pass;
            } else {
                // Once: the next connection passes.
                shared.cut_reply_once();
                break;
            }
        }
        if fault != Fault::Hold && !held.is_empty() {
            count(held.len(), false);
            if to.write_all(&core::mem::take(&mut held)).is_err() {
                break;
            }
        }
        let data = &buf[..n];
        if upstream && (matches!(fault, Fault::Swallow(_)) || !framing.is_empty()) {
            framing.extend_from_slice(data);
            if forward_commands(&mut framing, &mut to, shared).is_err() {
                break;
            }
            continue;
        }
        let ok = match fault {
            Fault::Pass => to.write_all(data).is_ok(),
            Fault::Delay(d) => {
                thread::sleep(d);
                to.write_all(data).is_ok()
            }
            Fault::Hold => {
                count(data.len(), true);
                held.extend_from_slice(data);
                true
            }
            Fault::Blackhole => true,
            Fault::Drip(every) => data.iter().all(|b| {
                thread::sleep(every);
                to.write_all(&[*b]).is_ok()
            }),
            Fault::Reset | Fault::CutReply => false,
            // Server-to-client bytes pass.
            Fault::Swallow(_) => to.write_all(data).is_ok(),
        };
        if !ok {
            break;
        }
    }
    count(held.len(), false);
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

/// Forwards the complete commands at the front of `framing` (RESP arrays),
/// except the first one [`Fault::Swallow`] names while it is on (once per
/// proxy); an incomplete command stays for the next read. Bytes that do not
/// frame as RESP are forwarded as they are.
fn forward_commands(framing: &mut Vec<u8>, to: &mut TcpStream, shared: &Shared) -> io::Result<()> {
    let limits = redlock_resp::Limits {
        max_bulk_len: 1 << 20,
        max_frame_len: 1 << 22,
        ..redlock_resp::Limits::DEFAULT
    };
    let parser = redlock_resp::Parser::new(limits);
    let mut used = 0;
    while used < framing.len() {
        let (name, len) = match parser.parse(&framing[used..]) {
            Ok(redlock_resp::Status::Complete((reply, len))) => {
                let first = match &reply {
                    redlock_resp::Reply::Aggregate(a) => a.iter().next(),
                    _ => None,
                };
                match first {
                    Some(redlock_resp::Reply::Bulk(name)) => (name, len),
                    _ => (&b""[..], len),
                }
            }
            Ok(redlock_resp::Status::Incomplete) => break,
            Err(_) => (&b""[..], framing.len() - used),
        };
        if !shared.swallow_once(name) {
            to.write_all(&framing[used..used + len])?;
        }
        used += len;
    }
    framing.drain(..used);
    Ok(())
}
