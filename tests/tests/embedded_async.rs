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

mod only_async {
    use core::cell::Cell;
    use core::future::Future;
    use core::pin::pin;
    use core::task::{Context, Poll, Waker};
    use core::time::Duration as StdDuration;

    use redlock_embedded::{Credentials, Duration, Error};
    use redlock_tests::embedded_async::BlockOn;
    use redlock_tests::{RedisServer, Value};

    use super::{Embedded, with_creds};

    fn start(n: usize) -> Vec<RedisServer> {
        (0..n).map(|_| RedisServer::start().unwrap()).collect()
    }

    fn client(servers: &[RedisServer]) -> Embedded<3> {
        let mut config = redlock_embedded::Config::DEFAULT;
        config.request_timeout = Some(Duration::from_millis(100));
        with_creds(
            core::array::from_fn(|i| servers[i].addr()),
            config,
            [Credentials::NONE; 3],
        )
    }

    /// On one thread, a lock call that waits on a held resource (retrying
    /// with its backoff) lets another task run: the ticker counts its
    /// turns while the call waits, and the call still gets the lock once
    /// the holder lets go.
    #[test]
    fn another_task_runs_while_a_lock_call_waits() {
        let servers = start(3);
        let mut holder = client(&servers);
        let held = holder.lock(b"shared", Duration::from_millis(600)).unwrap();
        let mut waiter = client(&servers);
        let ticks = Cell::new(0u32);
        let done = Cell::new(false);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (got, ticks_while_waiting) = rt.block_on(async {
            let ticker = async {
                while !done.get() {
                    ticks.set(ticks.get() + 1);
                    tokio::time::sleep(StdDuration::from_millis(1)).await;
                }
            };
            let call = async {
                let now = waiter.now();
                let got = waiter
                    .inner()
                    .lock_until(
                        b"shared",
                        Duration::from_secs(5),
                        now.saturating_add(Duration::from_secs(5)),
                    )
                    .await
                    .map(|l| *l);
                let seen = ticks.get();
                done.set(true);
                (got, seen)
            };
            let ((got, seen), ()) = tokio::join!(call, ticker);
            (got, seen)
        });
        // The holder's lock ran out (600 ms): the waiter has it.
        let lock = got.unwrap();
        assert!(!held.token().as_bytes().is_empty());
        assert!(
            ticks_while_waiting >= 50,
            "the ticker ran {ticks_while_waiting} times in the ~600 ms the call waited"
        );
        let token = Value::Bulk(lock.token().as_bytes().to_vec());
        let holding = servers
            .iter()
            .filter(|s| s.conn().unwrap().request(&[b"GET", b"shared"]).unwrap() == token)
            .count();
        assert!(holding >= 2, "a majority holds the waiter's token");
    }

    /// A lock future dropped after any number of polls leaves the client
    /// usable: the next call takes the lock and releases it, and the
    /// replies the dropped call was owed are not taken for the next one's.
    #[test]
    fn lock_futures_dropped_after_any_poll_leave_the_client_usable() {
        let servers = start(3);
        let mut c = client(&servers);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _guard = rt.enter();
        for polls in 0..12 {
            let resource = format!("dropped-{polls}");
            {
                let mut fut = pin!(
                    c.inner()
                        .lock(resource.as_bytes(), Duration::from_millis(300))
                );
                let mut cx = Context::from_waker(Waker::noop());
                for _ in 0..polls {
                    if let Poll::Ready(r) = fut.as_mut().poll(&mut cx) {
                        let _ = r;
                        break;
                    }
                    rt.block_on(tokio::time::sleep(StdDuration::from_micros(200)));
                }
            }
            // A key the dropped call may have set ends with its ttl; the
            // same client then takes the resource and releases it.
            let deadline = c.now().saturating_add(Duration::from_secs(3));
            let lock = c
                .lock_until(resource.as_bytes(), Duration::from_secs(5), deadline)
                .unwrap_or_else(|e: Error| panic!("after {polls} polls: {e}"));
            assert!(
                c.unlock(&lock).unwrap().is_confirmed(),
                "after {polls} polls"
            );
        }
    }

    /// The futures' sizes, which the const generics fix (the buffers are
    /// the caller's `Buffers`, not in the futures): reported, and bounded
    /// so that a change that moves a buffer into a future fails here.
    #[test]
    fn future_sizes_are_reported_and_hold_no_buffer() {
        let servers = start(1);
        let addr = servers[0].addr();
        let mut c5 = BlockOn::<5>::new(
            [addr; 5],
            redlock_embedded::Config::DEFAULT,
            [Credentials::NONE; 5],
        )
        .unwrap();
        let client = core::mem::size_of_val(c5.inner());
        let ttl = Duration::from_secs(1);
        let lock = core::mem::size_of_val(&c5.inner().lock(b"r", ttl));
        let inspect = core::mem::size_of_val(&c5.inner().inspect(b"r"));
        let connect = core::mem::size_of_val(&c5.inner().connect());
        eprintln!(
            "5 servers (x86_64): client {client} B, lock future {lock} B, inspect future {inspect} B, connect future {connect} B"
        );
        // A server's buffers alone are 1024 + 640 B.
        assert!(lock < 5 * 1664, "the lock future holds {lock} B");
        assert!(client < 5 * 1664, "the client holds {client} B");
    }
}
