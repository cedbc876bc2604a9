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

    /// An async client with `config` over links and buffers of its own
    /// (kept for the process), and the half of its links for a connector.
    fn bare(
        config: redlock_embedded::Config,
    ) -> (
        redlock_tests::embedded_async::AsyncEmbedded<3>,
        redlock_embedded::ConnectorLinks<'static, redlock_tests::embedded_async::TokioStream, 3>,
    ) {
        let links: &'static mut redlock_embedded::Links<_, 3> =
            Box::leak(Box::new(redlock_embedded::Links::new()));
        let (client_links, connector_links) = links.split();
        let c = redlock_embedded::AsyncClient::new(
            client_links,
            redlock_tests::embedded::StdClock,
            redlock_tests::embedded_async::TokioDelay,
            redlock_tests::embedded::OsRng,
            config,
            [Credentials::NONE; 3],
            Box::leak(Box::default()),
        )
        .unwrap();
        (c, connector_links)
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
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
        let (rt, local, waiter) = waiter.parts();
        let (got, ticks_while_waiting) = local.block_on(rt, async {
            let ticker = async {
                while !done.get() {
                    ticks.set(ticks.get() + 1);
                    tokio::time::sleep(StdDuration::from_millis(1)).await;
                }
            };
            let call = async {
                let now = waiter.now();
                let got = waiter
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
        assert_ne!(held.token(), lock.token());
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
        for polls in 0..12 {
            let resource = format!("dropped-{polls}");
            {
                let (rt, local, inner) = c.parts();
                let _guard = rt.enter();
                let mut fut = pin!(inner.lock(resource.as_bytes(), Duration::from_millis(300)));
                let mut cx = Context::from_waker(Waker::noop());
                for _ in 0..polls {
                    if let Poll::Ready(r) = fut.as_mut().poll(&mut cx) {
                        let _ = r;
                        break;
                    }
                    // The connector runs meanwhile.
                    local.block_on(rt, tokio::time::sleep(StdDuration::from_micros(200)));
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

    /// Tokio streams; the connects to `slow` are refused while `refuse`
    /// is set, and otherwise take `delay` (a far server's round trip, or
    /// a SYN that had to be sent again).
    struct SlowStack {
        slow: core::net::SocketAddr,
        refuse: core::sync::atomic::AtomicBool,
        delay: StdDuration,
        connects: core::sync::atomic::AtomicUsize,
    }

    impl embedded_nal_async::TcpConnect for SlowStack {
        type Error = std::io::Error;
        type Connection<'a> = redlock_tests::embedded_async::TokioStream;

        async fn connect<'a>(
            &'a self,
            remote: core::net::SocketAddr,
        ) -> Result<Self::Connection<'a>, std::io::Error> {
            use core::sync::atomic::Ordering;
            if remote == self.slow {
                self.connects.fetch_add(1, Ordering::Relaxed);
                if self.refuse.load(Ordering::Relaxed) {
                    return Err(std::io::ErrorKind::ConnectionRefused.into());
                }
                tokio::time::sleep(self.delay).await;
            }
            let stream = tokio::net::TcpStream::connect(remote).await?;
            stream.set_nodelay(true)?;
            Ok(embedded_io_adapters::tokio_1::FromTokio::new(stream))
        }
    }

    /// From review 25: a server whose connect failed once, then takes
    /// 50 ms to connect (well within the connect timeout), comes back
    /// while the calls are shorter than 50 ms: the connector goes on
    /// between calls, as a blocking stack's connect does. (With the connects
    /// inside the calls, each call dropped the connect and the next started
    /// it again: the server never came back.)
    #[test]
    fn a_reconnect_slower_than_a_call_lands_between_calls() {
        use core::sync::atomic::Ordering;
        use redlock_embedded::{Config, Connector};

        let servers = start(3);
        let addrs: [core::net::SocketAddr; 3] = core::array::from_fn(|i| servers[i].addr());
        let stack: &'static SlowStack = Box::leak(Box::new(SlowStack {
            slow: addrs[2],
            refuse: true.into(),
            delay: StdDuration::from_millis(50),
            connects: 0.into(),
        }));
        let mut config = Config::DEFAULT;
        config.request_timeout = Some(Duration::from_millis(100));
        let (mut c, connector_links) = bare(config);
        let rt = runtime();
        let local = tokio::task::LocalSet::new();
        let mut connector = Connector::new(stack, addrs, connector_links);
        local.spawn_local(async move { connector.run().await });
        let within = |fut| {
            local
                .block_on(&rt, async {
                    tokio::time::timeout(StdDuration::from_secs(5), fut).await
                })
                .expect("a call ran past its limit")
        };
        assert_eq!(within(c.connect()), 2, "server 2 refused its first connect");
        // The server is back, 50 ms away.
        stack.refuse.store(false, Ordering::Relaxed);
        // A lock held and kept: extended every 20 ms.
        let mut lock = local
            .block_on(&rt, c.lock(b"review-reconnect", Duration::from_secs(10)))
            .unwrap();
        let start = std::time::Instant::now();
        let mut calls = 0;
        let mut back = false;
        while start.elapsed() < StdDuration::from_secs(4) {
            local
                .block_on(&rt, c.extend(&mut lock, Duration::from_secs(10)))
                .unwrap();
            calls += 1;
            // The application does something else for 20 ms.
            local.block_on(&rt, async {
                tokio::time::sleep(StdDuration::from_millis(20)).await
            });
            if local.block_on(&rt, c.connect()) == 3 {
                back = true;
                break;
            }
        }
        let _ = local.block_on(&rt, c.unlock(&lock));
        assert!(
            back,
            "server 2 never came back in {calls} calls over 4 s; {} connects started to it",
            stack.connects.load(Ordering::Relaxed)
        );
        assert!(
            stack.connects.load(Ordering::Relaxed) <= 3,
            "{} connects to server 2: it should have taken one after the refusal",
            stack.connects.load(Ordering::Relaxed)
        );
    }

    /// From review 25: a `lock_until` that waits ~600 ms on a held
    /// resource, with the farthest deadline there is, is polled as its
    /// timer and sockets say, not in a loop.
    #[test]
    fn a_waiting_lock_until_is_not_polled_in_a_loop() {
        use redlock_embedded::Instant;

        struct Counted<'c, F> {
            fut: core::pin::Pin<&'c mut F>,
            polls: &'c Cell<u64>,
        }
        impl<F: Future> Future for Counted<'_, F> {
            type Output = F::Output;
            fn poll(mut self: core::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
                self.polls.set(self.polls.get() + 1);
                self.fut.as_mut().poll(cx)
            }
        }

        let servers = start(3);
        let mut holder = client(&servers);
        let _held = holder.lock(b"probe", Duration::from_millis(600)).unwrap();
        let mut waiter = client(&servers);
        assert_eq!(waiter.connect(), 3);
        let polls = Cell::new(0u64);
        let (rt, local, inner) = waiter.parts();
        let got = local.block_on(rt, async {
            let fut = pin!(inner.lock_until(
                b"probe",
                Duration::from_secs(5),
                Instant::from_micros(u64::MAX),
            ));
            tokio::time::timeout(StdDuration::from_secs(5), Counted { fut, polls: &polls })
                .await
                .map(|r| r.map(|l| *l))
        });
        assert!(got.unwrap().is_ok());
        assert!(polls.get() < 1_000, "{} polls", polls.get());
    }

    /// `AsyncClient::new` refuses what `Client::new` refuses: buffers too
    /// small for a handshake command, and no servers.
    #[test]
    fn the_async_client_refuses_bad_arguments() {
        use redlock_embedded::{AsyncClient, Buffers, Config, Links};
        use redlock_tests::embedded::{OsRng, StdClock};
        use redlock_tests::embedded_async::{TokioDelay, TokioStream};

        let links: &'static mut Links<TokioStream, 1> = Box::leak(Box::new(Links::new()));
        let built = AsyncClient::new(
            links.split().0,
            StdClock,
            TokioDelay,
            OsRng,
            Config::DEFAULT,
            [Credentials::NONE],
            Box::leak(Box::new(Buffers::<1, 1024, 64>::new())),
        );
        assert!(
            matches!(built, Err(Error::BufferTooSmall { .. })),
            "{built:?}"
        );
        let none: &'static mut Links<TokioStream, 0> = Box::leak(Box::new(Links::new()));
        let built = AsyncClient::new(
            none.split().0,
            StdClock,
            TokioDelay,
            OsRng,
            Config::DEFAULT,
            [],
            Box::leak(Box::new(Buffers::<0>::new())),
        );
        assert!(matches!(built, Err(Error::ServerCount(0))), "{built:?}");
    }

    /// From review 25b: a connector whose run was dropped during connects
    /// (its task aborted, a `select` around it ended) takes them up again
    /// when it runs again, rather than leaving them until the connect
    /// timeout.
    #[test]
    fn a_connector_run_again_takes_up_the_connects_the_last_run_dropped() {
        use redlock_embedded::{Config, Connector, Options};

        let servers = start(3);
        let addrs: [core::net::SocketAddr; 3] = core::array::from_fn(|i| servers[i].addr());
        // Every connect takes 200 ms.
        let stack: &'static SlowStack = Box::leak(Box::new(SlowStack {
            slow: addrs[0],
            refuse: false.into(),
            delay: StdDuration::from_millis(200),
            connects: 0.into(),
        }));
        let (mut c, connector_links) = bare(Config::DEFAULT);
        c.set_options(Options {
            connect_timeout: Duration::from_secs(2),
            ..Options::DEFAULT
        });
        let rt = runtime();
        let mut connector = Connector::new(stack, addrs, connector_links);
        // The connector and a connect call, both dropped after 50 ms: the
        // connect to server 0 is under way.
        let early = rt.block_on(async {
            tokio::time::timeout(StdDuration::from_millis(50), async {
                tokio::select! {
                    never = connector.run() => match never {},
                    ready = c.connect() => ready,
                }
            })
            .await
        });
        assert!(early.is_err(), "server 0's connect takes 200 ms");
        // The connector runs again.
        let started = std::time::Instant::now();
        let ready = rt.block_on(async {
            tokio::time::timeout(StdDuration::from_secs(10), async {
                tokio::select! {
                    never = connector.run() => match never {},
                    ready = c.connect() => ready,
                }
            })
            .await
            .expect("a connect call ran past its limit")
        });
        assert_eq!(ready, 3, "after {:?}", started.elapsed());
        assert!(
            started.elapsed() < StdDuration::from_secs(1),
            "the connects took {:?}: the dropped one was left to its timeout",
            started.elapsed()
        );
    }

    /// From review 25b: a client whose connector never runs fails within
    /// about one connect timeout, every server unavailable (the docs say
    /// the connector must run).
    #[test]
    fn a_client_without_its_connector_fails_in_a_connect_timeout() {
        use redlock_embedded::{Config, Options};

        let (mut c, _) = bare(Config::DEFAULT);
        c.set_options(Options {
            connect_timeout: Duration::from_millis(300),
            ..Options::DEFAULT
        });
        let rt = runtime();
        let started = std::time::Instant::now();
        let got = rt.block_on(async {
            tokio::time::timeout(
                StdDuration::from_secs(10),
                c.try_lock(b"no-connector", Duration::from_secs(5)),
            )
            .await
            .expect("a call without a connector ran past its limit")
        });
        assert!(
            matches!(got, Err(Error::Unavailable(_))),
            "no server was ever connected: {got:?}"
        );
        assert!(started.elapsed() < StdDuration::from_secs(2));
    }
}
