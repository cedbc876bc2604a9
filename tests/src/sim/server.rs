//! The server model: a Redis with keys that expire on its own clock and
//! the product's scripts.

// Test support: a broken invariant of the simulation itself is a panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use alloc::collections::BTreeMap;

use redlock_core::redlock_resp::Command;
use redlock_core::redlock_resp::script::{
    EXTEND, FENCE_WRITE, FENCED_ACQUIRE, INSPECT, RELEASE, Script,
};

use super::clock::Clock;

#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub(super) value: Vec<u8>,
    /// Redis semantics: the key lives while `now_ms <= when` (server clock, ms).
    pub(super) when_ms: Option<u64>,
}

/// A simulated Redis server (public for the differential test against a
/// real `redis-server`).
#[derive(Debug)]
pub struct Server {
    pub(super) clock: Clock,
    pub(super) up: bool,
    pub(super) persistent: bool,
    pub(super) started_real: u64,
    pub(super) data: BTreeMap<Vec<u8>, Entry>,
    pub(super) scripts: Vec<&'static str>,
    pub(super) crashes_since: u64,
}

impl Server {
    pub(super) fn now_ms(&self, real: u64) -> u64 {
        self.clock.local(real) / 1_000
    }

    pub(super) fn get(&mut self, key: &[u8], real: u64) -> Option<Vec<u8>> {
        let now = self.now_ms(real);
        let expired =
            matches!(self.data.get(key), Some(Entry { when_ms: Some(w), .. }) if now > *w);
        if expired {
            self.data.remove(key);
        }
        self.data.get(key).map(|e| e.value.clone())
    }

    pub(super) fn pttl(&mut self, key: &[u8], real: u64) -> i64 {
        let now = self.now_ms(real);
        if self.get(key, real).is_none() {
            return -2;
        }
        match self.data.get(key).and_then(|e| e.when_ms) {
            Some(w) => (w - now) as i64,
            None => -1,
        }
    }

    pub(super) fn set_px(&mut self, key: &[u8], value: &[u8], ttl_ms: Option<u64>, real: u64) {
        let when_ms = ttl_ms.map(|t| self.now_ms(real) + t);
        self.data.insert(
            key.to_vec(),
            Entry {
                value: value.to_vec(),
                when_ms,
            },
        );
    }

    /// A fresh server with a clock at real time, no persistence.
    pub fn new_for_test() -> Server {
        Server {
            clock: Clock { offset: 0, ppm: 0 },
            up: true,
            persistent: false,
            started_real: 0,
            data: BTreeMap::new(),
            scripts: Vec::new(),
            crashes_since: 0,
        }
    }

    /// Executes one command at real time `real` (µs); returns the RESP reply bytes.
    pub fn execute(&mut self, args: &[Vec<u8>], real: u64) -> Vec<u8> {
        let name = args[0].to_ascii_uppercase();
        match name.as_slice() {
            b"SET" => {
                // SET key value NX PX ms
                let ttl: u64 = core::str::from_utf8(&args[5]).unwrap().parse().unwrap();
                if self.get(&args[1], real).is_some() {
                    return b"$-1\r\n".to_vec();
                }
                self.set_px(&args[1], &args[2], Some(ttl), real);
                b"+OK\r\n".to_vec()
            }
            b"DEL" => {
                let existed = self.get(&args[1], real).is_some();
                self.data.remove(&args[1]);
                format!(":{}\r\n", u8::from(existed)).into_bytes()
            }
            b"EVALSHA" | b"EVAL" => {
                let all = [RELEASE, EXTEND, FENCED_ACQUIRE, FENCE_WRITE, INSPECT];
                let script: Option<&Script> = if name == b"EVAL" {
                    let s = all
                        .iter()
                        .find(|s| s.source.as_bytes() == args[1].as_slice());
                    if let Some(s) = s {
                        if !self.scripts.contains(&s.sha1) {
                            self.scripts.push(s.sha1);
                        }
                    }
                    s
                } else {
                    all.iter().find(|s| {
                        s.sha1.as_bytes() == args[1].as_slice() && self.scripts.contains(&s.sha1)
                    })
                };
                let Some(script) = script else {
                    return b"-NOSCRIPT No matching script. Please use EVAL.\r\n".to_vec();
                };
                let nkeys: usize = core::str::from_utf8(&args[2]).unwrap().parse().unwrap();
                let keys = &args[3..3 + nkeys];
                let argv = &args[3 + nkeys..];
                self.run_script(script, keys, argv, real)
            }
            // The session's probe: its text comes back.
            b"PING" => match args.get(1) {
                Some(text) => encode_bulk(text),
                None => b"+PONG\r\n".to_vec(),
            },
            b"SCRIPT" if args.get(1).is_some_and(|a| a.eq_ignore_ascii_case(b"LOAD")) => {
                let all = [RELEASE, EXTEND, FENCED_ACQUIRE, FENCE_WRITE, INSPECT];
                match all
                    .iter()
                    .find(|s| s.source.as_bytes() == args[2].as_slice())
                {
                    Some(script) => {
                        if !self.scripts.contains(&script.sha1) {
                            self.scripts.push(script.sha1);
                        }
                        encode_bulk(script.sha1.as_bytes())
                    }
                    None => b"-ERR unknown script\r\n".to_vec(),
                }
            }
            b"INFO" => {
                // One process per incarnation: its run_id.
                let text = format!(
                    "# Server\r\nrun_id:{:040x}\r\nuptime_in_seconds:{}\r\n",
                    self.crashes_since,
                    real.saturating_sub(self.started_real) / 1_000_000
                );
                encode_bulk(text.as_bytes())
            }
            _ => b"-ERR unknown command\r\n".to_vec(),
        }
    }

    /// The scripts of `redlock-resp`, evaluated as Redis' Lua would.
    pub(super) fn run_script(
        &mut self,
        script: &Script,
        keys: &[Vec<u8>],
        argv: &[Vec<u8>],
        real: u64,
    ) -> Vec<u8> {
        let int = |n: i64| format!(":{n}\r\n").into_bytes();
        let num = |b: &[u8]| core::str::from_utf8(b).unwrap().parse::<u64>().unwrap();
        if script.sha1 == RELEASE.sha1 {
            if self.get(&keys[0], real).as_deref() == Some(&argv[0][..]) {
                self.data.remove(&keys[0]);
                return int(1);
            }
            int(0)
        } else if script.sha1 == EXTEND.sha1 {
            if self.get(&keys[0], real).as_deref() == Some(&argv[0][..]) {
                let value = argv[0].clone();
                self.set_px(&keys[0], &value, Some(num(&argv[1])), real);
                return int(1);
            }
            int(0)
        } else if script.sha1 == FENCED_ACQUIRE.sha1 {
            let counter = self.get(&keys[1], real);
            let set = self.get(&keys[0], real).is_none();
            if set {
                self.set_px(&keys[0], &argv[0], Some(num(&argv[1])), real);
            }
            let mut out = format!("*2\r\n:{}\r\n", u8::from(set)).into_bytes();
            match counter {
                Some(c) => {
                    out.extend_from_slice(format!("${}\r\n", c.len()).as_bytes());
                    out.extend_from_slice(&c);
                    out.extend_from_slice(b"\r\n");
                }
                None => out.extend_from_slice(b"$-1\r\n"),
            }
            out
        } else if script.sha1 == FENCE_WRITE.sha1 {
            if self.get(&keys[0], real).as_deref() == Some(&argv[0][..]) {
                let current = self.get(&keys[1], real).map_or(0, |c| num(&c));
                if current < num(&argv[1]) {
                    let t = argv[1].clone();
                    self.set_px(&keys[1], &t, None, real);
                }
                return int(1);
            }
            int(0)
        } else {
            // INSPECT
            let value = self.get(&keys[0], real);
            let pttl = self.pttl(&keys[0], real);
            let mut out = b"*2\r\n".to_vec();
            match value {
                Some(v) => {
                    out.extend_from_slice(format!("${}\r\n", v.len()).as_bytes());
                    out.extend_from_slice(&v);
                    out.extend_from_slice(b"\r\n");
                }
                None => out.extend_from_slice(b"$-1\r\n"),
            }
            out.extend_from_slice(format!(":{pttl}\r\n").as_bytes());
            out
        }
    }
}

/// Encodes a command for tests of the simulated server.
pub fn encode_args(args: &[&[u8]]) -> Vec<u8> {
    let mut buf = vec![0u8; 4096];
    let mut cmd = Command::new(&mut buf, args.len());
    for a in args {
        cmd.arg(a);
    }
    let n = cmd.finish().unwrap();
    buf.truncate(n);
    buf
}

/// The RESP bulk string of `bytes`.
fn encode_bulk(bytes: &[u8]) -> Vec<u8> {
    let mut out = format!("${}\r\n", bytes.len()).into_bytes();
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
    out
}
