//! Guards, `with_lock` and the driver's watchdog of the async API
//! (`AsyncClient`), against real servers: a dropped `AsyncLockGuard` or
//! `AsyncAutoLock` is released in the background without blocking the
//! dropping thread; `with_lock` releases on every exit path and tells its
//! body of a loss before the validity ends (also when a majority of servers
//! dies); watched locks are kept alive by the driver thread, with no thread
//! per lock; a release (`unlock`, `AsyncLockGuard::release`,
//! `AsyncAutoLock::release`) dropped while it waits for a free slot still
//! releases. Cancellation of lock futures: `async_cancel.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test driver

mod async_common;

use async_common::*;

/// What a test drops: a guard or a watched lock.
enum Releasable {
    Guard(Box<AsyncLockGuard>),
    Auto(AsyncAutoLock),
}

/// Drops what `take` acquires while the proxies hold every request (so its
/// release cannot complete until the test lets them pass, and the request
/// timeout is a minute): the drop must return all the same, and the key
/// then disappear from every server.
fn dropping_releases_in_the_background(
    take: impl FnOnce(&AsyncClient) -> Result<Releasable, Error>,
) {
    let _serial = shared();
    let cluster = Cluster::start(3, 3);
    let c = Client::builder()
        .servers(cluster.urls())
        .request_timeout(Duration::from_secs(60))
        .build_async()
        .unwrap();
    warm_up(&c);
    let held = take(&c).unwrap();
    let token = match &held {
        Releasable::Guard(g) => g.token().to_string(),
        Releasable::Auto(a) => a.lock().token().to_string(),
    };
    // Acquired on a majority; the third SET lands a moment later.
    assert!(eventually(RELEASE_BOUND, || holding(
        &cluster.servers,
        "res",
        &token
    ) == 3));
    cluster.set_faults(Fault::Hold);
    // Dropped inside a current-thread runtime, while a counter task runs.
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let dropper = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async move {
            let count = Arc::new(AtomicUsize::new(0));
            let stop = Arc::new(AtomicBool::new(false));
            let counter = {
                let (count, stop) = (count.clone(), stop.clone());
                tokio::spawn(async move {
                    while !stop.load(Ordering::SeqCst) {
                        count.fetch_add(1, Ordering::SeqCst);
                        tokio::task::yield_now().await;
                    }
                })
            };
            tokio::task::yield_now().await;
            drop(held);
            // The runtime's only thread goes on: the counter advances.
            let seen = count.load(Ordering::SeqCst);
            while count.load(Ordering::SeqCst) < seen + 100 {
                tokio::task::yield_now().await;
            }
            stop.store(true, Ordering::SeqCst);
            counter.await.unwrap();
            done_tx.send(()).unwrap();
        });
    });
    // Its release cannot have completed: the proxies hold it. A drop that
    // waited for it would not return before the test lets it through.
    done_rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the drop returned while its release could not complete");
    dropper.join().unwrap();
    assert_eq!(
        holding(&cluster.servers, "res", &token),
        3,
        "the release went through the held proxies?"
    );
    // The driver wrote the release: the proxies hold it.
    assert!(
        eventually(RELEASE_BOUND, || cluster
            .proxies
            .iter()
            .all(|p| p.held_upstream() > 0)),
        "the release was not sent"
    );
    cluster.set_faults(Fault::Pass);
    if let Err(left) = wait_gone(&cluster.servers, "res") {
        panic!("not released in the background: {left:?}");
    }
}

#[test]
fn dropping_an_async_lock_guard_releases_in_the_background_without_blocking() {
    dropping_releases_in_the_background(|c| {
        futures::executor::block_on(c.lock_guard("res", LONG_TTL))
            .map(|g| Releasable::Guard(Box::new(g)))
    });
}

#[test]
fn dropping_an_async_auto_lock_releases_in_the_background_without_blocking() {
    dropping_releases_in_the_background(|c| {
        futures::executor::block_on(c.lock_auto_extend("res", LONG_TTL)).map(Releasable::Auto)
    });
}

/// Three servers, a client with `request_timeout`, and a runtime.
fn with_lock_cluster(request_timeout: Duration) -> (Cluster, AsyncClient, tokio::runtime::Runtime) {
    let cluster = Cluster::start(3, 0);
    let c = Client::builder()
        .servers(cluster.urls())
        .request_timeout(request_timeout)
        .build_async()
        .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        // IO for the client's `tokio` feature (its connections on tokio's
        // reactor), time for the test's own timers.
        .enable_all()
        .build()
        .unwrap();
    (cluster, c, rt)
}

#[test]
fn with_lock_returns_the_body_output_and_releases() {
    let _serial = shared();
    let (cluster, c, rt) = with_lock_cluster(SLACK_TIMEOUT);
    let servers = &cluster.servers;
    let out = rt
        .block_on(c.with_lock("res", LONG_TTL, |lost| async move {
            drop(lost);
            // Held by a majority while the body runs.
            (held_on(servers, "res"), 42)
        }))
        .unwrap();
    assert!(out.0 >= 2, "held on {} servers", out.0);
    assert_eq!(out.1, 42);
    // The release is awaited before with_lock returns.
    assert_eq!(cluster.values("res"), vec![Value::Nil; 3]);
}

#[test]
fn with_lock_releases_when_the_body_returns_an_error() {
    let _serial = shared();
    let (cluster, c, rt) = with_lock_cluster(SLACK_TIMEOUT);
    let out: Result<u32, &str> = rt
        .block_on(c.with_lock("res", LONG_TTL, |_lost| async { Err("the work failed") }))
        .unwrap();
    assert_eq!(out, Err("the work failed"));
    assert_eq!(cluster.values("res"), vec![Value::Nil; 3]);
}

#[test]
fn with_lock_releases_in_the_background_when_the_body_panics() {
    let _serial = shared();
    let (cluster, c, rt) = with_lock_cluster(SLACK_TIMEOUT);
    let servers = &cluster.servers;
    let held = AtomicUsize::new(0);
    let caught = rt.block_on(
        AssertUnwindSafe(c.with_lock("res", LONG_TTL, |_lost| async {
            held.store(held_on(servers, "res"), Ordering::SeqCst);
            if servers.len() == 3 {
                panic!("the body panics");
            }
        }))
        .catch_unwind(),
    );
    let payload = caught.expect_err("the panic goes through with_lock");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"the body panics"));
    assert!(held.load(Ordering::SeqCst) >= 2, "held while the body ran");
    if let Err(left) = wait_gone(servers, "res") {
        panic!("not released after the panic: {left:?}");
    }
}

#[test]
fn with_lock_dropped_mid_body_releases_in_the_background() {
    let _serial = shared();
    let (cluster, c, rt) = with_lock_cluster(SLACK_TIMEOUT);
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    rt.block_on(async {
        let mut fut = Box::pin(c.with_lock("res", LONG_TTL, |_lost| async move {
            started_tx.send(()).unwrap();
            futures::future::pending::<()>().await;
        }));
        tokio::select! {
            out = &mut fut => panic!("the body never ends: {out:?}"),
            started = started_rx => started.unwrap(),
        }
        assert!(held_on(&cluster.servers, "res") >= 2);
        drop(fut);
    });
    if let Err(left) = wait_gone(&cluster.servers, "res") {
        panic!("not released after the drop: {left:?}");
    }
}

#[test]
fn with_lock_tells_its_body_of_a_loss_before_the_validity_ends() {
    let _serial = shared();
    let (cluster, c, rt) = with_lock_cluster(SLACK_TIMEOUT);
    let servers = &cluster.servers;
    let ttl = Duration::from_secs(2);
    // The lock's validity ends no sooner than this (its attempt starts
    // later, and extensions only push it further).
    let before = Instant::now();
    let valid_at_least_until = before + ttl - drift(ttl);
    let (why, fired_at) = rt
        .block_on(c.with_lock("res", ttl, |lost| async move {
            // Deleted behind its back.
            delete_everywhere(servers, "res");
            let why = tokio::time::timeout(Duration::from_secs(10), lost)
                .await
                .expect("the loss is told to the body");
            (why, Instant::now())
        }))
        .unwrap();
    assert_eq!(why, Lost::NotHeld);
    assert!(
        fired_at < valid_at_least_until,
        "told {:?} after the validity ended",
        fired_at - valid_at_least_until
    );
    assert_eq!(cluster.values("res"), vec![Value::Nil; 3]);
}

#[test]
fn when_lost_fires_with_not_held_before_the_validity_ends() {
    let _serial = shared();
    let (cluster, c, rt) = with_lock_cluster(SLACK_TIMEOUT);
    let ttl = Duration::from_millis(1500);
    rt.block_on(async {
        let auto = c.lock_auto_extend("res", ttl).await.unwrap();
        let valid_until = auto.lock().valid_until();
        delete_everywhere(&cluster.servers, "res");
        let why = tokio::time::timeout(Duration::from_secs(10), auto.when_lost())
            .await
            .expect("the loss is reported");
        let fired_at = Instant::now();
        assert_eq!(why, Lost::NotHeld);
        assert!(auto.is_lost());
        assert_eq!(auto.lost(), Some(Lost::NotHeld));
        assert!(
            fired_at < valid_until,
            "reported {:?} after the validity ended",
            fired_at - valid_until
        );
        // A when_lost made after the loss is ready at once.
        assert_eq!(auto.when_lost().now_or_never(), Some(Lost::NotHeld));
    });
}

#[test]
fn when_lost_fires_with_unavailable_before_the_validity_ends_when_a_majority_dies() {
    let _serial = shared();
    // Extensions retried every 50 ms for the last third of a 3 s validity.
    let (mut cluster, c, rt) = with_lock_cluster(SHORT_TTL_TIMEOUT);
    let ttl = Duration::from_secs(3);
    let auto = rt.block_on(c.lock_auto_extend("res", ttl)).unwrap();
    let lost = auto.when_lost();
    cluster.servers[0].kill().unwrap();
    cluster.servers[1].kill().unwrap();
    let (why, fired_at) = rt.block_on(async {
        let why = tokio::time::timeout(Duration::from_secs(10), lost).await;
        (why, Instant::now())
    });
    let why = why.unwrap_or_else(|_| {
        panic!(
            "no loss reported 10 s after a majority died (is_lost: {}; the validity \
             ended {:?} ago)",
            auto.is_lost(),
            fired_at.saturating_duration_since(auto.lock().valid_until())
        )
    });
    assert_eq!(why, Lost::Unavailable);
    // The validity as last extended (no extension can succeed any more).
    let valid_until = auto.lock().valid_until();
    assert!(
        fired_at < valid_until,
        "reported {:?} after the validity ended",
        fired_at - valid_until
    );
    assert!(auto.is_lost());
}

#[test]
fn an_async_auto_lock_is_held_for_several_ttls() {
    // Alone: a 500 ms ttl leaves about one request timeout (50 ms) for
    // each extension, which the other tests' load must not eat.
    let _alone = exclusive();
    let (cluster, c, rt) = with_lock_cluster(SHORT_TTL_TIMEOUT);
    let ttl = Duration::from_millis(500);
    let auto = rt.block_on(c.lock_auto_extend("res", ttl)).unwrap();
    let token = auto.lock().token().to_string();
    std::thread::sleep(ttl * 3 + ttl / 2);
    let now = Instant::now();
    let lock = auto.lock();
    let on = holding(&cluster.servers, "res", &token);
    let context = format!(
        "lost: {:?}, {} extensions, valid for {:?} more, held on {on} servers: {:?}",
        auto.lost(),
        lock.extensions(),
        lock.valid_until().checked_duration_since(now),
        cluster.values("res")
    );
    assert!(!auto.is_lost(), "{context}");
    assert!(on >= 2, "{context}");
    assert!(lock.extensions() > 0, "{context}");
    assert!(matches!(
        rt.block_on(c.try_lock("res", ttl)),
        Err(Error::Conflict(_))
    ));
    let released = rt.block_on(auto.release()).unwrap();
    assert_eq!(released.deleted(), 3);
    assert_eq!(cluster.values("res"), vec![Value::Nil; 3]);
}

/// The process's thread count (`/proc/self/status`).
fn threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("a Threads: line")
}

#[test]
fn fifty_auto_extended_locks_cost_no_thread_each() {
    // Alone: no other test starts threads meanwhile.
    let _alone = exclusive();
    let cluster = Cluster::start(3, 0);
    let c = Client::builder()
        .servers(cluster.urls())
        .request_timeout(SHORT_TTL_TIMEOUT)
        .build_async()
        .unwrap();
    // Room for several extension attempts (50 ms each) before a loss, for
    // 51 locks extended in the same batches on a loaded machine.
    let ttl = Duration::from_millis(1500);
    // The driver runs and the connections are open.
    let first = futures::executor::block_on(c.lock_auto_extend("warm", ttl)).unwrap();
    let before = threads();
    let autos: Vec<AsyncAutoLock> = futures::executor::block_on(futures::future::join_all(
        (0..50).map(|i| c.lock_auto_extend(format!("many-{i}"), ttl)),
    ))
    .into_iter()
    .collect::<Result<_, _>>()
    .unwrap();
    std::thread::sleep(ttl * 2);
    let after = threads();
    assert!(
        after < before + 10,
        "{before} threads before 50 watched locks, {after} with them"
    );
    for (i, auto) in autos.iter().enumerate() {
        assert!(!auto.is_lost(), "many-{i}: {:?}", auto.lost());
        assert!(auto.lock().extensions() > 0, "many-{i}: not extended");
        let token = auto.lock().token().to_string();
        assert!(
            holding(&cluster.servers, &format!("many-{i}"), &token) >= 2,
            "many-{i}"
        );
    }
    futures::executor::block_on(async {
        // (Whatever a loaded machine makes of them: the keys expire.)
        for auto in autos {
            drop(auto.release().await);
        }
        drop(first.release().await);
    });
}

/// The release a test starts and drops while every slot of the transport
/// is taken.
#[derive(Debug, Clone, Copy)]
enum Release {
    Unlock,
    Guard,
    Auto,
}

#[test]
fn a_release_dropped_while_waiting_for_a_free_slot_still_releases() {
    let _serial = shared();
    let cluster = Cluster::start(3, 3);
    // Requests held by the proxies stay in flight (no timeout meanwhile).
    let c = Client::builder()
        .servers(cluster.urls())
        .request_timeout(Duration::from_secs(60))
        .build_async()
        .unwrap();
    warm_up(&c);
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let mut left = Vec::new();
    // 63: the release gets the last slot and is dropped mid-flight (the
    // control); 64: it waits for a slot when dropped.
    for (fillers, kind) in [63, 64]
        .into_iter()
        .flat_map(|n| [Release::Unlock, Release::Guard, Release::Auto].map(|k| (n, k)))
    {
        let res = format!("queued-{fillers}-{kind:?}");
        cluster.set_faults(Fault::Pass);
        let (lock, guard, auto) = futures::executor::block_on(async {
            match kind {
                Release::Unlock => (Some(c.lock(&res, LONG_TTL).await.unwrap()), None, None),
                Release::Guard => (
                    None,
                    Some(c.lock_guard(&res, LONG_TTL).await.unwrap()),
                    None,
                ),
                Release::Auto => (
                    None,
                    None,
                    Some(c.lock_auto_extend(&res, LONG_TTL).await.unwrap()),
                ),
            }
        });
        assert!(eventually(RELEASE_BOUND, || cluster
            .values(&res)
            .iter()
            .all(|v| *v != Value::Nil)));
        // Slots (64 in all, those kept for releases included) taken by
        // releases whose answers the proxies hold.
        cluster.set_faults(Fault::Hold);
        let mut waiting: Vec<Pin<Box<dyn Future<Output = ()> + Send + '_>>> = (0..fillers)
            .map(|i| -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
                let c = &c;
                Box::pin(async move { drop(c.unlock_token(format!("filler-{i}"), "nobody").await) })
            })
            .collect();
        for f in &mut waiting {
            assert!(f.as_mut().poll(&mut cx).is_pending());
        }
        // The release waits for a slot; its caller goes away meanwhile.
        let mut release: Pin<Box<dyn Future<Output = ()> + Send + '_>> = match kind {
            Release::Unlock => {
                let lock = lock.clone().unwrap();
                let c = &c;
                Box::pin(async move { drop(c.unlock(&lock).await) })
            }
            Release::Guard => {
                let guard = guard.unwrap();
                Box::pin(async move { drop(guard.release().await) })
            }
            Release::Auto => {
                let auto = auto.unwrap();
                Box::pin(async move { drop(auto.release().await) })
            }
        };
        assert!(release.as_mut().poll(&mut cx).is_pending());
        drop(release);
        // The other releases run on in the background; the proxies let
        // everything through.
        drop(waiting);
        cluster.set_faults(Fault::Pass);
        if let Err(held) = wait_gone(&cluster.servers, &res) {
            let on = held.iter().filter(|v| **v != Value::Nil).count();
            left.push(format!(
                "{kind:?} with {fillers} slots taken: held on {on} servers"
            ));
        }
        if let Some(lock) = lock {
            // The caller still has it: released for the next round.
            drop(futures::executor::block_on(c.unlock(&lock)));
        }
        delete_everywhere(&cluster.servers, &res);
    }
    assert!(
        left.is_empty(),
        "releases dropped before they ran (the keys stay until their ttl): {left:?}"
    );
}
