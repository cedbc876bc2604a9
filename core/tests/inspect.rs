//! Scripted tests of inspection (F3): the holder and PTTL on every server.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::*;
use redlock_core::redlock_resp::ErrorKind;
use redlock_core::{Inspect, Operation, ServerOutcome, Servers};

#[test]
fn inspect_reads_holder_and_pttl_per_server() {
    let servers = Servers::new(4).unwrap();
    let mut d = Drive::new(Inspect::new(&servers, b"res", dur(20)));
    let sent = d.sent(ms(0));
    assert!(
        sent.iter()
            .all(|s| s.script() == "inspect" && s.args[3] == b"res")
    );
    d.reply(ms(1), 0, b"*2\r\n$3\r\nabc\r\n:1500\r\n").unwrap();
    d.reply(ms(1), 1, b"*2\r\n$-1\r\n:-2\r\n").unwrap();
    d.reply(ms(1), 2, b"-WRONGTYPE x\r\n").unwrap();
    d.op.handle_timeout(ms(20));
    let inspection = d.outcome().unwrap();
    let e = inspection.entries();
    assert_eq!(e.len(), 4);
    assert_eq!(
        (
            e[0].outcome,
            e[0].holder.as_deref(),
            e[0].pttl_ms,
            e[0].ttl()
        ),
        (ServerOutcome::Ok, Some(&b"abc"[..]), 1500, Some(dur(1500)))
    );
    assert_eq!(
        (e[1].outcome, e[1].holder.as_deref(), e[1].ttl()),
        (ServerOutcome::Ok, None, None)
    );
    assert_eq!(
        e[2].outcome,
        ServerOutcome::ServerError(ErrorKind::WrongType)
    );
    assert_eq!(e[3].outcome, ServerOutcome::TimedOut);
    assert_eq!(inspection.majority_holder(), None);
    // A long foreign value is cut, with its full length kept.
    let mut d = Drive::new(Inspect::new(&Servers::new(1).unwrap(), b"res", dur(20)));
    d.sent(ms(0));
    let mut reply = b"*2\r\n$100\r\n".to_vec();
    reply.extend_from_slice(&[b'x'; 100]);
    reply.extend_from_slice(b"\r\n:-1\r\n");
    d.reply(ms(1), 0, &reply).unwrap();
    let i = d.outcome().unwrap();
    assert_eq!(
        (
            i.entries()[0].holder.as_ref().unwrap().len(),
            i.entries()[0].holder_len
        ),
        (64, 100)
    );
    assert_eq!(i.majority_holder(), Some(&[b'x'; 64][..]));
}
