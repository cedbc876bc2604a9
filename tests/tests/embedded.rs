//! `redlock-embedded` against real `redis-server` processes, over
//! non-blocking std sockets wrapped with `embedded-io-adapters`: the same
//! client that runs on a microcontroller, with the host's sockets, clock and
//! RNG. Lock, extend, unlock, inspect and fenced locks; contention with the
//! std client; servers down, silent, hostile, or refusing the handshake.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

use core::net::SocketAddr;

use redlock_embedded::{Client, Config, Credentials, Duration, Options};
use redlock_tests::embedded::{OsRng, StdClock, StdNet};

#[path = "embedded_common/mod.rs"]
mod common;

use common::buffers;

type Embedded<const N: usize> = Client<'static, StdNet, StdClock, OsRng, N>;

fn with_creds<const N: usize>(
    addrs: [SocketAddr; N],
    config: Config,
    creds: [Credentials<'static>; N],
) -> Embedded<N> {
    let mut c = Client::new(
        StdNet::new(&addrs),
        StdClock,
        OsRng,
        config,
        creds,
        buffers(),
    )
    .unwrap();
    c.set_options(Options {
        connect_timeout: Duration::from_millis(300),
        ..Options::DEFAULT
    });
    c
}
