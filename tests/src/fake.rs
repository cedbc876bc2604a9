//! Deliberately broken fake servers for tests of bad input: each accepts
//! connections on a free loopback port and answers every read with one
//! misbehaviour. [`CASES`] lists the ones every client must survive.

// A fake that cannot bind or accept fails the test that uses it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use alloc::sync::Arc;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use core::time::Duration;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;

/// How a fake server answers what it read.
pub type Behaviour = fn(&mut TcpStream, &[u8], &AtomicBool);

/// A fake server: accepts connections and answers every read with `behave`.
#[derive(Debug)]
pub struct Fake {
    /// `host:port` to connect to.
    pub addr: String,
    stop: Arc<AtomicBool>,
    /// Connections accepted so far.
    pub accepted: Arc<AtomicUsize>,
}

impl Fake {
    /// Starts a fake that answers every read with `behave`.
    pub fn start(behave: Behaviour) -> Fake {
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

/// Answers with an HTTP error: not RESP at all.
pub fn garbage(c: &mut TcpStream, _: &[u8], _: &AtomicBool) {
    let _ = c.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
}

/// Announces a 100 MB bulk and sends 1 MiB of it.
pub fn too_large(c: &mut TcpStream, _: &[u8], _: &AtomicBool) {
    let _ = c.write_all(b"$100000000\r\n");
    let _ = c.write_all(&vec![b'x'; 1 << 20]);
}

/// What a good server answers to every command it read (the handshake
/// passes; `+OK` to the rest), then one reply more that answers nothing.
pub fn unsolicited(c: &mut TcpStream, data: &[u8], _: &AtomicBool) {
    let mut rest = data;
    while let Ok(redlock_core::redlock_resp::Status::Complete((_, used))) =
        redlock_core::redlock_resp::parse_reply(rest)
    {
        let _ = c.write_all(&crate::fake_answer(&rest[..used], 1));
        rest = &rest[used..];
    }
    let _ = c.write_all(b"+OK\r\n");
}

/// Sends half a reply and closes.
pub fn close_mid_reply(c: &mut TcpStream, _: &[u8], _: &AtomicBool) {
    let _ = c.write_all(b"$10\r\nabc");
    let _ = c.shutdown(std::net::Shutdown::Both);
}

/// Sends `+OK` one byte per 100 ms.
pub fn drip(c: &mut TcpStream, _: &[u8], stop: &AtomicBool) {
    for &b in b"+OK\r\n".iter().cycle().take(200) {
        if stop.load(Ordering::Relaxed) || c.write_all(&[b]).is_err() {
            return;
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// Never answers.
pub fn silent(_: &mut TcpStream, _: &[u8], _: &AtomicBool) {}

/// Sends 100,000 nested one-element arrays.
pub fn deep_nesting(c: &mut TcpStream, _: &[u8], _: &AtomicBool) {
    let _ = c.write_all(&b"*1\r\n".repeat(100_000));
}

/// The bad servers every client must survive, by name.
pub const CASES: [(&str, Behaviour); 6] = [
    ("garbage", garbage),
    ("too large", too_large),
    ("close mid-reply", close_mid_reply),
    ("drip", drip),
    ("silent", silent),
    ("deep nesting", deep_nesting),
];

/// The handshake answers of a Valkey 9 (its `INFO` reports the native
/// commands), then `rest` for every other command: each command read is
/// answered in turn.
fn as_valkey_9(c: &mut TcpStream, data: &[u8], rest: fn(&[u8]) -> Vec<u8>) {
    let mut left = data;
    while let Ok(redlock_core::redlock_resp::Status::Complete((_, used))) =
        redlock_core::redlock_resp::parse_reply(left)
    {
        let command = &left[..used];
        let has = |word: &[u8]| command.windows(word.len()).any(|w| w == word);
        let answer = if has(b"INFO") {
            let body = "# Server\r\nserver_name:valkey\r\nvalkey_version:9.1.2\r\n\
                        run_id:fakefakefakefakefakefakefakefakefake9999\r\n\
                        uptime_in_seconds:86400\r\n";
            format!("${}\r\n{body}\r\n", body.len()).into_bytes()
        } else if has(b"SCRIPT") || has(b"PING") {
            crate::fake_answer(command, 9)
        } else {
            rest(command)
        };
        let _ = c.write_all(&answer);
        left = &left[used..];
    }
}

/// Says it is a Valkey 9, then `+OK` to every command: `DELIFEQ` wants an
/// integer, `EXEC` an array.
pub fn native_ok_to_all(c: &mut TcpStream, data: &[u8], _: &AtomicBool) {
    as_valkey_9(c, data, |_| b"+OK\r\n".to_vec());
}

/// Says it is a Valkey 9, queues every `MULTI` block and aborts it (`EXEC`
/// answers nil, as after a failed `WATCH`); 0 to the rest.
pub fn native_exec_nil(c: &mut TcpStream, data: &[u8], _: &AtomicBool) {
    as_valkey_9(c, data, |command| {
        let has = |word: &[u8]| command.windows(word.len()).any(|w| w == word);
        if has(b"MULTI") {
            b"+OK\r\n".to_vec()
        } else if has(b"EXEC") {
            b"*-1\r\n".to_vec()
        } else if command.starts_with(b"*3\r\n$3\r\nGET")
            || command.starts_with(b"*2\r\n$3\r\nGET")
            || has(b"NX")
            || has(b"PTTL")
        {
            b"+QUEUED\r\n".to_vec()
        } else {
            b":0\r\n".to_vec()
        }
    });
}

/// Says it is a Valkey 9 and answers every command with `EXECABORT`.
pub fn native_execabort(c: &mut TcpStream, data: &[u8], _: &AtomicBool) {
    as_valkey_9(c, data, |_| {
        b"-EXECABORT Transaction discarded because of previous errors.\r\n".to_vec()
    });
}

/// Says it is a Valkey 9, then answers every command with an array of
/// two integers (the shape of no native reply but `EXEC`'s, with the wrong
/// types in it).
pub fn native_wrong_arrays(c: &mut TcpStream, data: &[u8], _: &AtomicBool) {
    as_valkey_9(c, data, |_| b"*2\r\n:1\r\n:1\r\n".to_vec());
}

/// Says it is a Valkey 9 but does not know the native commands: a plain
/// `ERR unknown command` to everything (scripts included).
pub fn native_unknown(c: &mut TcpStream, data: &[u8], _: &AtomicBool) {
    as_valkey_9(c, data, |_| {
        b"-ERR unknown command 'DELIFEQ', with args beginning with:\r\n".to_vec()
    });
}

/// Says it is a Valkey 9 and answers a `MULTI` block with two replies
/// instead of four (`+OK` and `EXEC`'s array): the stream falls out of
/// step.
pub fn native_short_block(c: &mut TcpStream, data: &[u8], _: &AtomicBool) {
    as_valkey_9(c, data, |command| {
        let has = |word: &[u8]| command.windows(word.len()).any(|w| w == word);
        if has(b"MULTI") {
            b"+OK\r\n".to_vec()
        } else if has(b"EXEC") {
            b"*2\r\n+OK\r\n$1\r\n7\r\n".to_vec()
        } else if has(b"GET") || has(b"PTTL") || has(b"NX") {
            Vec::new()
        } else {
            b":1\r\n".to_vec()
        }
    });
}

/// Bad servers that claim the native commands (Valkey 9 in `INFO`), by
/// name: every client must survive them too.
pub const NATIVE_CASES: [(&str, Behaviour); 6] = [
    ("native: +OK to all", native_ok_to_all),
    ("native: EXEC nil", native_exec_nil),
    ("native: EXECABORT", native_execabort),
    ("native: wrong arrays", native_wrong_arrays),
    ("native: unknown command", native_unknown),
    ("native: short MULTI block", native_short_block),
];
