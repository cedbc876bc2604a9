//! The floor: a minimal raw client, what one lock round-trip costs on the
//! wire with as little client as possible.

use core::net::SocketAddr;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Instant;

use redlock_resp::{Arg, Reply, Status, encode, parse_reply, script::RELEASE};

use crate::latency::{Latency, Samples, nanos};
use crate::throughput::Outcome;
use crate::{SERVERS, TTL_MS};

/// One blocking connection of the floor client.
struct FloorConn {
    stream: TcpStream,
    inbuf: [u8; 512],
    len: usize,
}

impl FloorConn {
    fn connect(addr: SocketAddr) -> FloorConn {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_nodelay(true).unwrap();
        FloorConn {
            stream,
            inbuf: [0; 512],
            len: 0,
        }
    }

    /// Reads until one reply parses and hands it to `f`.
    fn read_reply<R>(&mut self, f: impl FnOnce(Reply<'_>) -> R) -> R {
        loop {
            if let Status::Complete((reply, used)) =
                parse_reply(&self.inbuf[..self.len]).expect("a reply that parses")
            {
                let r = f(reply);
                self.inbuf.copy_within(used..self.len, 0);
                self.len -= used;
                return r;
            }
            let n = self.stream.read(&mut self.inbuf[self.len..]).unwrap();
            assert!(n > 0, "server closed the connection");
            self.len += n;
        }
    }
}

/// The floor: what one lock round-trip costs on the wire, with as little
/// client as possible. Five blocking `TcpStream`s (`TCP_NODELAY`); acquire
/// writes `SET key token NX PX ttl` to all five, then reads the five replies;
/// release does the same with `EVALSHA` of the release script, on all five
/// servers (also after a failed acquire, as the three clients do). Tokens are
/// a counter, not random bytes; no validity arithmetic, no timeouts.
pub(crate) struct Floor {
    conns: Vec<FloorConn>,
    buf: [u8; 256],
    id: u64,
    seq: u64,
}

impl Floor {
    pub(crate) fn connect(addrs: &[SocketAddr], id: u64) -> Floor {
        let mut conns: Vec<FloorConn> = addrs.iter().map(|&a| FloorConn::connect(a)).collect();
        let mut buf = [0u8; 256];
        let n = encode::script_load(&mut buf, RELEASE.source.as_bytes()).unwrap();
        for c in &mut conns {
            c.stream.write_all(&buf[..n]).unwrap();
            let sha = c.read_reply(|r| r.as_bytes().map(<[u8]>::to_vec));
            assert_eq!(sha.as_deref(), Some(RELEASE.sha1.as_bytes()));
        }
        Floor {
            conns,
            buf,
            id,
            seq: 0,
        }
    }

    /// A 40-hex-digit token: the floor's id and a counter.
    fn next_token(&mut self) -> [u8; 40] {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        self.seq += 1;
        let mut t = [b'0'; 40];
        for (i, shift) in (0..16).rev().map(|k| k * 4).enumerate() {
            t[8 + i] = HEX[usize::try_from((self.id >> shift) & 0xf).unwrap()];
            t[24 + i] = HEX[usize::try_from((self.seq >> shift) & 0xf).unwrap()];
        }
        t
    }

    /// `SET NX PX` on every server; the number of servers that said `+OK`.
    fn acquire(&mut self, resource: &[u8], token: &[u8]) -> usize {
        let n = encode::set_nx_px(&mut self.buf, resource, token, TTL_MS).unwrap();
        for c in &mut self.conns {
            c.stream.write_all(&self.buf[..n]).unwrap();
        }
        self.conns
            .iter_mut()
            .map(|c| c.read_reply(|r| r.is_ok()))
            .filter(|&ok| ok)
            .count()
    }

    /// `EVALSHA` of the release script on every server; how many deleted.
    fn release(&mut self, resource: &[u8], token: &[u8]) -> usize {
        let n = encode::evalsha_script(&mut self.buf, &RELEASE, &[resource], &[Arg::Bytes(token)])
            .unwrap();
        for c in &mut self.conns {
            c.stream.write_all(&self.buf[..n]).unwrap();
        }
        self.conns
            .iter_mut()
            .map(|c| c.read_reply(|r| r.as_integer() == Some(1)))
            .filter(|&ok| ok)
            .count()
    }

    /// One try: acquire, and release (on every server) whether or not a
    /// majority said yes.
    pub(crate) fn cycle(&mut self, resource: &[u8]) -> Outcome {
        let token = self.next_token();
        let won = self.acquire(resource, &token) > SERVERS / 2;
        self.release(resource, &token);
        if won { Outcome::Ok } else { Outcome::Conflict }
    }
}

impl Latency for Floor {
    fn name(&self) -> &'static str {
        "floor"
    }

    fn cycles(&mut self, resource: &[u8], n: usize, out: &mut Samples) {
        for _ in 0..n {
            let token = self.next_token();
            let t0 = Instant::now();
            let votes = self.acquire(resource, &token);
            out.acquire.push(nanos(t0.elapsed()));
            let t0 = Instant::now();
            self.release(resource, &token);
            if votes > SERVERS / 2 {
                out.release.push(nanos(t0.elapsed()));
            } else {
                out.failures += 1;
            }
        }
    }
}
