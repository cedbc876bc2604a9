//! Hostile and broken servers next to real ones: each misbehaviour gives a
//! typed per-server outcome within the deadline, with no panic and bounded
//! memory, and the real servers keep the lock working.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

extern crate alloc;

use alloc::sync::Arc;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use core::time::Duration;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::Instant;

use redlock_std::{Client, ServerOutcome};
use redlock_tests::RedisServer;

/// How a fake server answers what it read.
type Behaviour = fn(&mut TcpStream, &[u8], &AtomicBool);

/// A fake server: accepts connections and answers every read with `behave`.
struct Fake {
    addr: String,
    stop: Arc<AtomicBool>,
    accepted: Arc<AtomicUsize>,
}

impl Fake {
    fn start(behave: Behaviour) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(AtomicUsize::new(0));
        let (flag, count) = (stop.clone(), accepted.clone());
        thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut conn, _)) => {
                        count.fetch_add(1, Ordering::Relaxed);
                        let flag = flag.clone();
                        thread::spawn(move || {
                            conn.set_read_timeout(Some(Duration::from_millis(50)))
                                .unwrap();
                            let mut buf = [0u8; 65536];
                            while !flag.load(Ordering::Relaxed) {
                                match conn.read(&mut buf) {
                                    Ok(0) => return,
                                    Ok(n) => behave(&mut conn, &buf[..n], &flag),
                                    Err(_) => continue,
                                }
                            }
                        });
                    }
                    Err(_) => thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Fake {
            addr,
            stop,
            accepted,
        }
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn garbage(c: &mut TcpStream, _: &[u8], _: &AtomicBool) {
    let _ = c.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
}

fn too_large(c: &mut TcpStream, _: &[u8], _: &AtomicBool) {
    // Announces 100 MB, then sends a lot of it.
    let _ = c.write_all(b"$100000000\r\n");
    let _ = c.write_all(&vec![b'x'; 1 << 20]);
}

/// What a good server answers to every command it read (the handshake
/// passes; `+OK` to the rest), then one reply more that answers nothing.
fn unsolicited(c: &mut TcpStream, data: &[u8], _: &AtomicBool) {
    let mut rest = data;
    while let Ok(redlock_core::redlock_resp::Status::Complete((_, used))) =
        redlock_core::redlock_resp::parse_reply(rest)
    {
        let _ = c.write_all(&redlock_tests::fake_answer(&rest[..used], 1));
        rest = &rest[used..];
    }
    let _ = c.write_all(b"+OK\r\n");
}

fn close_mid_reply(c: &mut TcpStream, _: &[u8], _: &AtomicBool) {
    let _ = c.write_all(b"$10\r\nabc");
    let _ = c.shutdown(std::net::Shutdown::Both);
}

fn drip(c: &mut TcpStream, _: &[u8], stop: &AtomicBool) {
    for &b in b"+OK\r\n".iter().cycle().take(200) {
        if stop.load(Ordering::Relaxed) || c.write_all(&[b]).is_err() {
            return;
        }
        thread::sleep(Duration::from_millis(100));
    }
}

fn silent(_: &mut TcpStream, _: &[u8], _: &AtomicBool) {}

fn deep_nesting(c: &mut TcpStream, _: &[u8], _: &AtomicBool) {
    let _ = c.write_all(&b"*1\r\n".repeat(100_000));
}

/// The ttl of the locks here, and a bound far below it for "fast": a bad
/// server costs a request timeout (100 ms), never the ttl. The bound leaves
/// room for a loaded 2-core machine.
const TTL: Duration = Duration::from_secs(30);
const FAST: Duration = Duration::from_secs(3);

#[test]
fn every_bad_server_fails_alone_and_fast() {
    let real: Vec<RedisServer> = (0..4).map(|_| RedisServer::start().unwrap()).collect();
    let cases: [(&str, Behaviour); 6] = [
        ("garbage", garbage),
        ("too large", too_large),
        ("close mid-reply", close_mid_reply),
        ("drip", drip),
        ("silent", silent),
        ("deep nesting", deep_nesting),
    ];
    for (name, behave) in cases {
        let fake = Fake::start(behave);
        let mut urls: Vec<String> = real.iter().map(|s| s.addr().to_string()).collect();
        urls.insert(2, fake.addr.clone());
        let c = Client::builder()
            .servers(&urls)
            .request_timeout(Duration::from_millis(100))
            .retry(0, Duration::ZERO)
            .build()
            .unwrap();
        for round in 0..3 {
            let started = Instant::now();
            let lock = c
                .lock(b"res", TTL)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let took = started.elapsed();
            assert!(took < FAST, "{name} round {round}: {took:?}");
            let outcome = lock.report().get(redlock_std::ServerId(2)).unwrap();
            assert!(
                matches!(
                    outcome,
                    ServerOutcome::ConnectionError
                        | ServerOutcome::TimedOut
                        | ServerOutcome::Pending
                        // A handshake answered wrongly: not used at all.
                        | ServerOutcome::Setup(_)
                ),
                "{name}: {outcome:?}"
            );
            assert_eq!(lock.report().count(ServerOutcome::Ok), 3, "{name}");
            c.unlock(&lock).unwrap();
        }
        // With bad servers in the majority's way the lock fails, fast and typed.
        let twin = Fake::start(behave);
        let urls = [
            fake.addr.clone(),
            real[0].addr().to_string(),
            twin.addr.clone(),
        ];
        let c = Client::builder()
            .servers(&urls)
            .request_timeout(Duration::from_millis(100))
            .retry(0, Duration::ZERO)
            .build()
            .unwrap();
        let started = Instant::now();
        let err = c.lock(b"res2", TTL).unwrap_err();
        assert!(started.elapsed() < FAST, "{name}");
        assert!(
            matches!(err, redlock_std::Error::Unavailable(_)),
            "{name}: {err}"
        );
    }
}

#[test]
fn an_unsolicited_reply_closes_the_connection() {
    // The fake answers +OK to each command (a vote a client cannot tell from
    // a real one), then sends one reply more: the client must drop that
    // connection and open a new one for the next call.
    let real: Vec<RedisServer> = (0..2).map(|_| RedisServer::start().unwrap()).collect();
    let fake = Fake::start(unsolicited);
    let urls = [
        real[0].addr().to_string(),
        fake.addr.clone(),
        real[1].addr().to_string(),
    ];
    let c = Client::builder()
        .servers(&urls)
        .request_timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    // The surplus reply is seen when the client next reads that socket,
    // which may be a call later (an operation decided by the two real
    // servers does not wait for the fake): within a few rounds the client
    // must have dropped the connection and reconnected, twice, with every
    // lock still working.
    let mut rounds = 0;
    while fake.accepted.load(Ordering::Relaxed) < 3 {
        rounds += 1;
        assert!(rounds <= 10, "no reconnect after {rounds} rounds");
        let lock = c.lock(b"res", Duration::from_secs(5)).unwrap();
        c.unlock(&lock).unwrap();
        thread::sleep(Duration::from_millis(30));
    }
}
