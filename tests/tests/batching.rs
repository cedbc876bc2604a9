//! One batch in flight per connection (`Session::corked`, the std
//! transport's `flush_all`), against real servers: a request corked behind
//! a batch on its way still goes out within a sixteenth of its time, so
//! that a slow link (a round trip longer than half a request's time) does
//! not make it wait for that batch's answers, or its probe, and time out.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test driver

extern crate alloc;

use alloc::sync::Arc;
use core::net::SocketAddr;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use core::time::Duration;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::Instant;

use redlock_std::{Client, ServerOutcome};
use redlock_tests::RedisServer;

/// A relay to a real server that passes requests at once and delivers
/// each chunk of the server's replies a fixed time after it arrived (a
/// long link that still pipelines: replies keep their order and do not
/// queue behind each other's delay, unlike `FaultProxy`'s `Delay`, which
/// sleeps per chunk in both directions).
struct LagRelay {
    addr: SocketAddr,
    /// The lag on replies (ms), from the next chunk on.
    lag_ms: Arc<AtomicU64>,
    /// Client-to-server bytes forwarded so far.
    upstream: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl LagRelay {
    fn start(server: SocketAddr) -> LagRelay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let relay = LagRelay {
            addr: listener.local_addr().unwrap(),
            lag_ms: Arc::new(AtomicU64::new(0)),
            upstream: Arc::new(AtomicUsize::new(0)),
            stop: Arc::new(AtomicBool::new(false)),
        };
        let (lag, upstream, stop) = (
            relay.lag_ms.clone(),
            relay.upstream.clone(),
            relay.stop.clone(),
        );
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let Ok((client, _)) = listener.accept() else {
                    thread::sleep(Duration::from_millis(2));
                    continue;
                };
                let Ok(server) = TcpStream::connect(server) else {
                    continue;
                };
                client.set_nonblocking(false).unwrap();
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                connect_pair(client, server, lag.clone(), upstream.clone());
            }
        });
        relay
    }

    fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for LagRelay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Three threads per connection: requests forwarded as they come; replies
/// read as they come, and written by a third thread when due. Every thread
/// ends when either side closes.
fn connect_pair(
    client: TcpStream,
    server: TcpStream,
    lag: Arc<AtomicU64>,
    upstream: Arc<AtomicUsize>,
) {
    let (mut from_client, mut to_server) =
        (client.try_clone().unwrap(), server.try_clone().unwrap());
    thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from_client.read(&mut buf) {
                Ok(n) if n > 0 && to_server.write_all(&buf[..n]).is_ok() => {
                    upstream.fetch_add(n, Ordering::Relaxed);
                }
                _ => break,
            }
        }
        let _ = from_client.shutdown(Shutdown::Both);
        let _ = to_server.shutdown(Shutdown::Both);
    });
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    let (mut from_server, mut to_client) = (server, client);
    thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from_server.read(&mut buf) {
                Ok(n) if n > 0 => {
                    let due = Instant::now() + Duration::from_millis(lag.load(Ordering::Relaxed));
                    if tx.send((due, buf[..n].to_vec())).is_err() {
                        break;
                    }
                }
                _ => break,
            }
        }
        let _ = from_server.shutdown(Shutdown::Both);
    });
    thread::spawn(move || {
        for (due, bytes) in rx {
            thread::sleep(due.saturating_duration_since(Instant::now()));
            if to_client.write_all(&bytes).is_err() {
                break;
            }
        }
        let _ = to_client.shutdown(Shutdown::Both);
    });
}

/// The link's one-way lag on replies: longer than half the request
/// timeout (every request is probed before its answer comes) and shorter
/// than the whole of it (a request written at once is answered in time).
const LAG: Duration = Duration::from_millis(220);
const REQUEST_TIMEOUT: Duration = Duration::from_millis(300);

/// A time limit for the whole test: a hang fails it (and its servers are
/// killed as it unwinds), it does not hold the suite.
const LIMIT: Duration = Duration::from_secs(10);

#[test]
fn a_request_corked_behind_a_slow_batch_goes_out_within_its_share_of_its_time() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
    let relays: Vec<LagRelay> = servers.iter().map(|s| LagRelay::start(s.addr())).collect();
    let urls: Vec<String> = relays.iter().map(|r| r.addr().to_string()).collect();
    let upstream: Vec<Arc<AtomicUsize>> = relays.iter().map(|r| r.upstream.clone()).collect();
    let lags: Vec<Arc<AtomicU64>> = relays.iter().map(|r| r.lag_ms.clone()).collect();
    let (done_tx, done_rx) = mpsc::channel();
    thread::spawn(move || {
        let sent = || {
            upstream
                .iter()
                .map(|u| u.load(Ordering::Relaxed))
                .collect::<Vec<_>>()
        };
        let c = Client::builder()
            .servers(&urls)
            .request_timeout(REQUEST_TIMEOUT)
            .connect_timeout(Duration::from_secs(2))
            .retry(0, Duration::ZERO)
            .build()
            .unwrap();
        let ttl = Duration::from_secs(10);
        // Connected and past the handshake on a fast link first.
        c.unlock(&c.lock(b"warm", ttl).unwrap()).unwrap();
        for l in &lags {
            l.store(LAG.as_millis() as u64, Ordering::Relaxed);
        }
        // The first call's batch goes out at once (it runs alone) ...
        let before = sent();
        let first = {
            let c = c.clone();
            thread::spawn(move || c.lock(b"res-0", ttl))
        };
        let waited = Instant::now();
        while sent().iter().zip(&before).any(|(now, then)| now <= then) {
            assert!(
                waited.elapsed() < Duration::from_secs(2),
                "the first SET never left"
            );
            thread::sleep(Duration::from_millis(1));
        }
        // ... and two calls join while it is on its way (its answers 220 ms
        // off, its probe 150 ms): corked behind it, each must be written
        // within 300/16 ms to be answered within its 300 ms.
        let joined = Instant::now();
        let more: Vec<_> = (1..3)
            .map(|k| {
                let c = c.clone();
                thread::spawn(move || c.lock(format!("res-{k}"), ttl))
            })
            .collect();
        let locks: Vec<_> = core::iter::once(first)
            .chain(more)
            .map(|t| t.join().unwrap())
            .collect();
        let took = joined.elapsed();
        let locks: Vec<_> = locks
            .into_iter()
            .enumerate()
            .map(|(k, l)| match l {
                Ok(l) => l,
                Err(e) => panic!("call {k} failed after {took:?} (corked past its time?): {e}"),
            })
            .collect();
        for (k, l) in locks.iter().enumerate() {
            // (A majority decides: the third answer may still be on its way.)
            assert!(l.report().count(ServerOutcome::Ok) >= 2, "call {k}");
            assert_eq!(
                l.report().count(ServerOutcome::TimedOut),
                0,
                "call {k}: no request timed out"
            );
        }
        // The releases, all at once: the first goes out alone, the others
        // corked behind it, each within its share.
        let releases: Vec<_> = locks
            .into_iter()
            .map(|l| {
                let c = c.clone();
                thread::spawn(move || c.unlock(&l))
            })
            .collect();
        for (k, r) in releases.into_iter().enumerate() {
            let released = r.join().unwrap();
            assert_eq!(
                released
                    .unwrap_or_else(|e| panic!("release {k}: {e}"))
                    .deleted(),
                3
            );
        }
        let _ = done_tx.send(());
    });
    match done_rx.recv_timeout(LIMIT) {
        Ok(()) => {}
        // The scenario's thread panicked: its message is above.
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the scenario failed"),
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("the scenario hung past {LIMIT:?}"),
    }
    drop(relays);
    drop(servers);
}
