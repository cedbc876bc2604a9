//! Scripted tests of release (R3, A7): the token-checking script on every
//! server, idempotent, delivered when it can be.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::*;
use redlock_core::handshake::Step;
use redlock_core::redlock_resp::ErrorKind;
use redlock_core::{
    ArgumentError, Config, Lock, Operation, Release, ServerId, ServerOutcome, Servers, SetupError,
};

#[test]
fn a_release_whose_connection_broke_is_sent_once_more() {
    let mut d = acquire(&no_retry(), 3, 10_000, ms(0));
    d.sent(ms(0));
    d.reply(ms(1), 0, b"+OK\r\n").unwrap();
    d.reply(ms(1), 1, b"$-1\r\n").unwrap();
    d.reply(ms(1), 2, b"$-1\r\n").unwrap();
    assert!(d.outcome().unwrap().is_err());
    assert_eq!(d.sent(ms(1)).len(), 3);
    // Server 0 (which has our key) loses its connection before answering
    // the release: it is sent again, once.
    d.op.handle_connection_error(ms(2), ServerId(0));
    assert!(!d.op.is_finished());
    let again = d.sent(ms(2));
    assert_eq!(again.len(), 1);
    assert!(again[0].server == 0 && again[0].script() == "release" && again[0].release);
    d.op.handle_connection_error(ms(3), ServerId(0));
    assert!(d.sent(ms(3)).is_empty(), "only once");
    assert!(d.op.is_finished());

    // A7 the same: an unlock whose connection broke asks again.
    let lock = Lock::from_token(*d.op.token(), dur(10_000), ms(0));
    let servers = Servers::new(3).unwrap();
    let mut d = Drive::new(Release::for_lock(&no_retry(), &servers, b"res", &lock));
    assert_eq!(d.sent(ms(0)).len(), 3);
    d.op.handle_connection_error(ms(1), ServerId(1));
    assert_eq!(d.sent(ms(1)).len(), 1);
    for s in 0..3 {
        d.reply(ms(2), s, b":1\r\n").unwrap();
    }
    assert_eq!(d.outcome().unwrap().deleted(), 3);
}

#[test]
fn release_is_idempotent_and_waits_for_every_server_or_its_timeout() {
    let servers = Servers::new(3).unwrap();
    let mut d = release(&servers, 20);
    assert_eq!(d.sent(ms(0)).len(), 3);
    d.reply(ms(1), 0, b":0\r\n").unwrap();
    d.reply(ms(1), 1, b":0\r\n").unwrap();
    assert!(d.outcome().is_none());
    d.op.handle_timeout(ms(20));
    let released = d.outcome().unwrap();
    assert_eq!(released.deleted(), 0);
    // Two of three had no key of ours: the key is gone on a majority.
    assert_eq!(released.confirmed(), 2);
    assert!(!released.complete());
    assert_eq!(
        released.report.outcomes(),
        &[
            ServerOutcome::NotHeld,
            ServerOutcome::NotHeld,
            ServerOutcome::TimedOut
        ]
    );
    assert!(d.op.is_finished());
}

#[test]
fn release_takes_any_token_up_to_64_bytes() {
    let servers = Servers::new(1).unwrap();
    let long = [b'x'; 64];
    let mut d = Drive::new(Release::new(&Config::DEFAULT, &servers, b"r", &long, dur(20)).unwrap());
    assert_eq!(d.sent(ms(0))[0].args[4], long);
    assert_eq!(
        Release::new(&Config::DEFAULT, &servers, b"r", &[b'x'; 65], dur(20),).err(),
        Some(ArgumentError::Token)
    );
    let (lock, servers) = held_lock(2, 1_000);
    let mut d = Drive::new(Release::for_lock(&Config::DEFAULT, &servers, b"res", &lock));
    let sent = d.sent(ms(1));
    assert!(
        sent.iter()
            .all(|s| s.script() == "release" && s.args[4] == lock.token().as_bytes())
    );
    assert_eq!(d.op.poll_timeout(), Some(ms(11)));
}

#[test]
fn releases_are_marked_for_delivery_and_nothing_else_is() {
    let mut d = acquire(&no_retry(), 3, 10_000, ms(0));
    let sets = d.sent(ms(0));
    assert!(sets.iter().all(|s| !s.release));
    for s in 0..2 {
        d.reply(ms(1), s, b"$-1\r\n").unwrap();
    }
    let releases = d.sent(ms(1));
    assert_eq!(releases.len(), 3);
    assert!(
        releases
            .iter()
            .all(|s| s.script() == "release" && s.release)
    );
    let lock = Lock::from_token(*d.op.token(), dur(10_000), ms(0));
    let servers = Servers::new(3).unwrap();
    let mut d = Drive::new(Release::for_lock(&no_retry(), &servers, b"res", &lock));
    assert!(d.sent(ms(2)).iter().all(|s| s.release));
}

#[test]
fn a_release_does_not_wait_for_a_server_its_handshake_refused() {
    let servers = Servers::new(3).unwrap();
    let mut d = release(&servers, 20);
    assert_eq!(d.sent(ms(0)).len(), 3);
    let why = SetupError::Refused {
        step: Step::Auth,
        kind: ErrorKind::NoPerm,
    };
    d.op.handle_setup_error(ms(1), ServerId(1), why);
    d.reply(ms(2), 0, b":1\r\n").unwrap();
    assert!(d.outcome().is_none());
    assert!(!d.op.is_finished(), "server 2 has not answered");
    d.reply(ms(2), 2, b":0\r\n").unwrap();
    assert!(d.op.is_finished(), "no timeout to wait for");
    let released = d.outcome().unwrap();
    assert_eq!(
        released.report.outcomes(),
        &[
            ServerOutcome::Ok,
            ServerOutcome::Setup(why),
            ServerOutcome::NotHeld
        ]
    );
    assert_eq!((released.deleted(), released.confirmed()), (1, 2));
}
