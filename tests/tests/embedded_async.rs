//! `redlock-embedded`'s async client (`AsyncClient`, feature `async`)
//! against real `redis-server` processes, over tokio streams through
//! `embedded-io-adapters` and an `embedded-nal-async` connector: the
//! blocking client's tests (`embedded_common`), each call run to its end on
//! a current-thread runtime; and what only an async client can show, that
//! other tasks run while a call waits.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

use core::net::SocketAddr;

use redlock_embedded::{Config, Credentials, Duration, Options};
use redlock_tests::embedded_async::BlockOn;

#[path = "embedded_common/mod.rs"]
mod common;

type Embedded<const N: usize> = BlockOn<N>;

fn with_creds<const N: usize>(
    addrs: [SocketAddr; N],
    config: Config,
    creds: [Credentials<'static>; N],
) -> Embedded<N> {
    let mut c = BlockOn::new(addrs, config, creds).unwrap();
    c.set_options(Options {
        connect_timeout: Duration::from_millis(300),
        ..Options::DEFAULT
    });
    c
}
