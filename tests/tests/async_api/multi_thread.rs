//! A crowd on a multi-thread runtime: the 1,000-task crowd's checks, with
//! the registers shared by two workers.

use super::*;

/// A register shared by tasks on several workers: read, then written after
/// `.await`s, so that two holders at once (now in parallel, on two threads)
/// would lose an update.
#[derive(Debug, Default)]
struct SharedRegister {
    value: AtomicU64,
    writes: AtomicU64,
    inside: core::sync::atomic::AtomicU32,
    overlaps: core::sync::atomic::AtomicU32,
    too_late: core::sync::atomic::AtomicU32,
}

/// One task of the multi-thread crowd: as [`increment`], on a
/// [`SharedRegister`].
async fn increment_shared(
    c: AsyncClient,
    resource: &'static str,
    r: Arc<SharedRegister>,
    deadline: Instant,
) -> Result<Released, Error> {
    let lock = c.lock_until(resource, CROWD_TTL, deadline).await?;
    if r.inside.fetch_add(1, Ordering::SeqCst) > 0 {
        r.overlaps.fetch_add(1, Ordering::SeqCst);
    }
    let read = r.value.load(Ordering::SeqCst);
    for _ in 0..3 {
        tokio::task::yield_now().await;
    }
    if lock.remaining() > Duration::ZERO {
        r.value.store(read + 1, Ordering::SeqCst);
        r.writes.fetch_add(1, Ordering::SeqCst);
    } else {
        r.too_late.fetch_add(1, Ordering::SeqCst);
    }
    r.inside.fetch_sub(1, Ordering::SeqCst);
    c.unlock(&lock).await
}

/// 400 tasks on a 2-worker multi-thread runtime (they lead on its reactor
/// with the `reactor` feature, the driver thread serves them without),
/// contending for 4 resources, plus 16 tasks locking and unlocking
/// resources of their own all along, so that the leader role and the
/// finished operations' owners are spread over both workers: no update
/// lost, no two holders at once, every task served before its deadline
/// and released before its ttl, and every own-resource cycle succeeds.
#[test]
fn a_crowd_on_a_multi_thread_runtime_loses_no_update() {
    let s = servers(3);
    let c = crowd_client(&s);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let registers: Vec<Arc<SharedRegister>> = (0..RESOURCES).map(|_| Arc::default()).collect();
    let deadline = Instant::now() + CROWD_PATIENCE;
    let crowd: Vec<_> = (0..400)
        .map(|i| {
            let r = i % RESOURCES;
            rt.spawn(increment_shared(
                c.clone(),
                NAMES[r],
                registers[r].clone(),
                deadline,
            ))
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let own: Vec<_> = (0..16)
        .map(|i| {
            let (c, stop) = (c.clone(), stop.clone());
            rt.spawn(async move {
                let key = format!("mt-own:{i}");
                let mut cycles = 0u64;
                while !stop.load(Ordering::Relaxed) || cycles == 0 {
                    let lock = c.try_lock(&key, CROWD_TTL).await?;
                    c.unlock(&lock).await?;
                    cycles += 1;
                }
                Ok::<u64, Error>(cycles)
            })
        })
        .collect();
    let results: Vec<Result<Released, Error>> = rt.block_on(bounded("the crowd", async {
        let mut out = Vec::new();
        for t in crowd {
            out.push(t.await.unwrap());
        }
        out
    }));
    stop.store(true, Ordering::Relaxed);
    let cycles: Vec<Result<u64, Error>> = rt.block_on(bounded("the own cycles", async {
        let mut out = Vec::new();
        for t in own {
            out.push(t.await.unwrap());
        }
        out
    }));
    for (i, r) in registers.iter().enumerate() {
        assert_eq!(
            r.overlaps.load(Ordering::SeqCst),
            0,
            "register {i}: two holders at once"
        );
        assert_eq!(
            r.value.load(Ordering::SeqCst),
            r.writes.load(Ordering::SeqCst),
            "register {i}: increments lost"
        );
        assert_eq!(
            r.too_late.load(Ordering::SeqCst),
            0,
            "register {i}: too late"
        );
    }
    let written: u64 = registers
        .iter()
        .map(|r| r.writes.load(Ordering::SeqCst))
        .sum();
    let failed: Vec<&Error> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(
        failed.is_empty() && written == 400,
        "of 400 tasks, {} got no lock before their deadline (the first: {}); {written} wrote",
        failed.len(),
        failed.first().map_or(String::new(), ToString::to_string),
    );
    let expired_first = released_after_expiry(&results);
    assert_eq!(expired_first, 0, "releases found their key gone");
    for (i, c) in cycles.iter().enumerate() {
        assert!(
            c.as_ref().is_ok_and(|&n| n > 0),
            "own-resource task {i}: {c:?}"
        );
    }
}
