//! The native fence repair and a native-only build's fallback (found by a review: each failed before its fix).

#![cfg(all(feature = "native", feature = "fencing"))]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use redlock_core::{Dialect, FenceRepair, Operation, ServerId, ServerOutcome};

/// Three native servers; 1 and 2 answer the `GET` at once (below the
/// floor), server 0 never answers. The two healthy servers are a majority:
/// the repair should top them up and succeed. Instead the parked servers
/// are timed out with server 0 (same deadline): no top-up, and the repair
/// fails.
#[test]
fn a_server_that_times_out_takes_the_parked_servers_with_it() {
    let servers = native_servers(3);
    let mut d = Drive::new(FenceRepair::new(
        &no_retry(),
        &servers,
        b"res",
        100,
        dur(50),
    ));
    let sent = d.sent(ms(0));
    assert_eq!(sent.len(), 3);
    assert_eq!(sent[1].args, vec![b"GET".to_vec(), b"res:fence".to_vec()]);
    d.reply(ms(1), 1, b"$2\r\n40\r\n").unwrap();
    d.reply(ms(1), 2, b"$-1\r\n").unwrap();
    assert!(d.sent(ms(1)).is_empty(), "server 0 still awaited");
    // Server 0's deadline: the platform calls handle_timeout.
    let at = d.op.poll_timeout().unwrap();
    assert_eq!(at, ms(50));
    d.op.handle_timeout(at);
    let top_ups = d.sent(at);
    assert_eq!(
        top_ups.len(),
        2,
        "servers 1 and 2 answered the GET and should be topped up: {:?}",
        d.op.poll_outcome()
    );
}

/// The same with a slow (not dead) script server: the parked native servers
/// time out at their GET's deadline although they answered.
#[test]
fn parked_servers_time_out_while_a_server_is_slow() {
    let mut servers = native_servers(3);
    servers.set_dialect(ServerId(0), Dialect::Scripts);
    let mut d = Drive::new(FenceRepair::new(
        &no_retry(),
        &servers,
        b"res",
        100,
        dur(50),
    ));
    d.sent(ms(0));
    d.reply(ms(1), 1, b"$2\r\n40\r\n").unwrap();
    d.reply(ms(1), 2, b"$2\r\n40\r\n").unwrap();
    // Server 0 answers at its deadline (the platform handles the timeout
    // first, as a loop that checks timers before reading would).
    d.op.handle_timeout(ms(50));
    d.reply(ms(50), 0, b":100\r\n").ok();
    let top_ups = d.sent(ms(50));
    assert_eq!(top_ups.len(), 2, "{:?}", d.op.poll_outcome());
}

/// Sanity: all answer in time; the top-up goes to the two below the floor,
/// and the counter is the max.
#[test]
fn top_up_only_below_the_floor_and_counter_is_the_max() {
    let servers = native_servers(3);
    let mut d = Drive::new(FenceRepair::new(
        &no_retry(),
        &servers,
        b"res",
        100,
        dur(50),
    ));
    d.sent(ms(0));
    d.reply(ms(1), 0, b"$3\r\n250\r\n").unwrap();
    d.reply(ms(1), 1, b"$2\r\n40\r\n").unwrap();
    assert!(d.sent(ms(1)).is_empty());
    d.reply(ms(1), 2, b"$-1\r\n").unwrap();
    let top = d.sent(ms(2));
    assert_eq!(top.len(), 2);
    assert_eq!(
        top[0].args,
        vec![b"INCRBY".to_vec(), b"res:fence".to_vec(), b"60".to_vec()]
    );
    assert_eq!(
        top[1].args,
        vec![b"INCRBY".to_vec(), b"res:fence".to_vec(), b"100".to_vec()]
    );
    assert!(d.outcome().is_none());
    d.reply(ms(3), 1, b":100\r\n").unwrap();
    d.reply(ms(3), 2, b":100\r\n").unwrap();
    let ok = d.outcome().unwrap().unwrap();
    assert_eq!(ok.counter, 250);
    assert!(ok.complete());
    assert!(d.op.is_finished());
}

/// A parked server whose connection drops before the top-up.
#[test]
fn a_parked_server_whose_connection_drops() {
    let servers = native_servers(3);
    let mut d = Drive::new(FenceRepair::new(
        &no_retry(),
        &servers,
        b"res",
        100,
        dur(50),
    ));
    d.sent(ms(0));
    d.reply(ms(1), 1, b"$2\r\n40\r\n").unwrap();
    d.op.handle_connection_error(ms(2), ServerId(1));
    d.reply(ms(3), 0, b"$2\r\n40\r\n").unwrap();
    d.reply(ms(3), 2, b"$2\r\n40\r\n").unwrap();
    let top = d.sent(ms(3));
    assert_eq!(top.len(), 2);
    d.reply(ms(4), 0, b":100\r\n").unwrap();
    d.reply(ms(4), 2, b":100\r\n").unwrap();
    let ok = d.outcome().unwrap().unwrap();
    assert_eq!(
        ok.report.get(ServerId(1)),
        Some(ServerOutcome::ConnectionError)
    );
}

/// A build without the scripts: a server marked `NativeOrScripts` (the
/// public `Servers::set_dialect` accepts it) whose `DELIFEQ` is answered
/// with a plain `ERR` is "sent the script": with no script built in, the
/// generic encoder writes `SET res 1 res tok`.
#[test]
#[cfg(not(feature = "scripts"))]
fn native_only_build_falls_back_to_a_script_it_does_not_have() {
    let mut servers = redlock_core::Servers::new(1).unwrap();
    servers.set_dialect(ServerId(0), Dialect::NativeOrScripts);
    let mut d = release(&servers, 50);
    let first = d.sent(ms(0));
    assert_eq!(first[0].name(), b"DELIFEQ");
    d.reply(ms(1), 0, b"-ERR unknown command 'DELIFEQ'\r\n")
        .unwrap();
    let again = d.sent(ms(1));
    let names: Vec<String> = again
        .iter()
        .map(|s| {
            s.args
                .iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    assert!(again.is_empty(), "a native-only build sent {names:?}");
}
