//! Shared inputs for the codec benchmarks in `benches/`.
//!
//! The constants are one lock round-trip as a Redlock client sees it: the
//! `SET key token NX PX ttl` that acquires, the `EVALSHA` that releases, and
//! the replies a server sends to them. The benchmarks feed the same bytes to
//! `redlock-resp`, `redis-protocol` and `redis-rs`; the tests below check that
//! the three agree on them, so that a benchmark never times an error path.
#![no_std]

/// The lock key.
pub const KEY: &[u8] = b"resource:orders:42";

/// A lock token: 40 hex characters (20 random bytes).
pub const TOKEN: &[u8] = b"8f3a2c1e9b7d4f60a5c3e2d1b0a9f8e7d6c5b4a3";

/// The lock's time to live, in milliseconds.
pub const TTL_MS: u64 = 30_000;

/// `SET KEY TOKEN NX PX 30000`, as all three encoders write it.
pub const SET_NX_PX_WIRE: &[u8] = b"*6\r\n$3\r\nSET\r\n$18\r\nresource:orders:42\r\n$40\r\n8f3a2c1e9b7d4f60a5c3e2d1b0a9f8e7d6c5b4a3\r\n$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n30000\r\n";

/// `EVALSHA <release sha1> 1 KEY TOKEN`, as all three encoders write it.
pub const EVALSHA_RELEASE_WIRE: &[u8] = b"*5\r\n$7\r\nEVALSHA\r\n$40\r\nb70c2384248f88e6b75b9f89241a180f856ad852\r\n$1\r\n1\r\n$18\r\nresource:orders:42\r\n$40\r\n8f3a2c1e9b7d4f60a5c3e2d1b0a9f8e7d6c5b4a3\r\n";

/// The reply to a `SET ... NX` that acquired the lock.
pub const REPLY_OK: &[u8] = b"+OK\r\n";

/// The reply to a `SET ... NX` that found the key taken.
pub const REPLY_NIL: &[u8] = b"$-1\r\n";

/// The reply to a release (or extend) that deleted (or extended) the key.
pub const REPLY_ONE: &[u8] = b":1\r\n";

/// A small array: a bulk string, an integer and a null.
pub const REPLY_ARRAY3: &[u8] = b"*3\r\n$3\r\nfoo\r\n:1\r\n$-1\r\n";

/// A 40-byte bulk string: the reply to `GET KEY` while the lock is held.
pub const REPLY_BULK40: &[u8] = b"$40\r\n8f3a2c1e9b7d4f60a5c3e2d1b0a9f8e7d6c5b4a3\r\n";

/// Every parse input, with the name its benchmark group uses.
pub const REPLIES: [(&str, &[u8]); 5] = [
    ("ok", REPLY_OK),
    ("nil", REPLY_NIL),
    ("int", REPLY_ONE),
    ("array3", REPLY_ARRAY3),
    ("bulk40", REPLY_BULK40),
];

#[cfg(test)]
mod tests {
    extern crate alloc;
    extern crate std;

    use alloc::vec::Vec;

    use redis_protocol::resp2::types::BorrowedFrame;
    use redlock_resp::{Arg, Reply, Status, encode, parse_reply, script::RELEASE};

    use super::*;

    #[test]
    fn ours_encodes_the_wire_bytes() {
        let mut buf = [0u8; 256];
        let n = encode::set_nx_px(&mut buf, KEY, TOKEN, TTL_MS).unwrap();
        assert_eq!(&buf[..n], SET_NX_PX_WIRE);
        let n = encode::evalsha_script(&mut buf, &RELEASE, &[KEY], &[Arg::Bytes(TOKEN)]).unwrap();
        assert_eq!(&buf[..n], EVALSHA_RELEASE_WIRE);
    }

    #[test]
    fn peers_encode_the_same_bytes() {
        let mut out = Vec::new();
        redis::cmd("SET")
            .arg(KEY)
            .arg(TOKEN)
            .arg("NX")
            .arg("PX")
            .arg(TTL_MS)
            .write_packed_command(&mut out);
        assert_eq!(out, SET_NX_PX_WIRE);
        out.clear();
        redis::cmd("EVALSHA")
            .arg(RELEASE.sha1)
            .arg(1u64)
            .arg(KEY)
            .arg(TOKEN)
            .write_packed_command(&mut out);
        assert_eq!(out, EVALSHA_RELEASE_WIRE);

        let mut buf = [0u8; 256];
        let set = [
            BorrowedFrame::BulkString(b"SET"),
            BorrowedFrame::BulkString(KEY),
            BorrowedFrame::BulkString(TOKEN),
            BorrowedFrame::BulkString(b"NX"),
            BorrowedFrame::BulkString(b"PX"),
            BorrowedFrame::Integer(30_000),
        ];
        let n = redis_protocol::resp2::encode::encode_borrowed(
            &mut buf,
            &BorrowedFrame::Array(&set),
            true,
        )
        .unwrap();
        assert_eq!(&buf[..n], SET_NX_PX_WIRE);
        let release = [
            BorrowedFrame::BulkString(b"EVALSHA"),
            BorrowedFrame::BulkString(RELEASE.sha1.as_bytes()),
            BorrowedFrame::Integer(1),
            BorrowedFrame::BulkString(KEY),
            BorrowedFrame::BulkString(TOKEN),
        ];
        let n = redis_protocol::resp2::encode::encode_borrowed(
            &mut buf,
            &BorrowedFrame::Array(&release),
            true,
        )
        .unwrap();
        assert_eq!(&buf[..n], EVALSHA_RELEASE_WIRE);
    }

    #[test]
    fn all_parsers_accept_every_reply_whole() {
        for (name, input) in REPLIES {
            let Ok(Status::Complete((reply, used))) = parse_reply(input) else {
                panic!("{name}: ours did not parse");
            };
            assert_eq!(used, input.len(), "{name}");
            if let Reply::Aggregate(a) = reply {
                assert_eq!(a.iter().count(), 3, "{name}");
            }
            let (_, used) = redis_protocol::resp2::decode::decode_range(input)
                .unwrap()
                .unwrap();
            assert_eq!(used, input.len(), "{name}");
            let (_, used) = redis_protocol::resp2::decode::decode(input)
                .unwrap()
                .unwrap();
            assert_eq!(used, input.len(), "{name}");
            redis::parse_redis_value(input).unwrap();
            let mut parser = redis::Parser::new();
            for _ in 0..3 {
                parser.parse_value(input).unwrap();
            }
        }
    }
}
