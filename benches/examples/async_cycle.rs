//! The async API on a tokio runtime, driving its connections on the
//! runtime's reactor (`reactor`) or from the client's driver thread
//! (`thread`): lock + unlock cycles against five real `redis-server`s it
//! starts, in `TASKS` tasks on distinct resources. Prints cycles/s, the
//! acquire p50 (µs), and client CPU and context switches per 1000 cycles.
//!
//! `cargo run --release -p redlock-benches --example async_cycle -- MODE TASKS SECS [current|multi]`
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    unsafe_code
)]

extern crate alloc;

use alloc::sync::Arc;
use core::sync::atomic::{AtomicBool, Ordering};
use core::time::Duration;
use std::time::Instant;

use redlock_std::Client;
use redlock_tests::RedisServer;

/// User + system CPU time and context switches (voluntary + not) of this
/// process.
fn usage() -> (Duration, i64) {
    let mut ru = core::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `ru` is a writable, aligned `rusage`; RUSAGE_SELF is valid.
    let r = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
    assert_eq!(r, 0);
    // SAFETY: getrusage succeeded and filled it (plain integers).
    let ru = unsafe { ru.assume_init() };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    (
        tv(ru.ru_utime) + tv(ru.ru_stime),
        ru.ru_nvcsw + ru.ru_nivcsw,
    )
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "reactor".into());
    let tasks: usize = args.next().map_or(16, |n| n.parse().unwrap());
    let secs: u64 = args.next().map_or(5, |n| n.parse().unwrap());
    let flavor = args.next().unwrap_or_else(|| "current".into());
    let servers: Vec<RedisServer> = (0..5).map(|_| RedisServer::start().unwrap()).collect();
    let urls: Vec<String> = servers.iter().map(|s| s.addr().to_string()).collect();
    let rt = if flavor == "multi" {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    };
    let client = Client::builder()
        .servers(&urls)
        .drive_on_runtime(mode == "reactor")
        .build_async()
        .unwrap();
    let ttl = Duration::from_secs(10);
    let stop = Arc::new(AtomicBool::new(false));
    let (cycles, p50, cpu, csw, elapsed) = rt.block_on(async {
        for _ in 0..500 {
            let lock = client.lock("warm", ttl).await.unwrap();
            client.unlock(&lock).await.unwrap();
        }
        let (cpu0, csw0) = usage();
        let t0 = Instant::now();
        let mut handles = Vec::new();
        for t in 0..tasks {
            let client = client.clone();
            let stop = stop.clone();
            handles.push(tokio::spawn(async move {
                let key = format!("cycle-{t}");
                let mut acquire = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    let lock = client.lock(&key, ttl).await.unwrap();
                    acquire.push(t.elapsed());
                    client.unlock(&lock).await.unwrap();
                }
                acquire
            }));
        }
        tokio::time::sleep(Duration::from_secs(secs)).await;
        stop.store(true, Ordering::Relaxed);
        let mut all = Vec::new();
        for h in handles {
            all.extend(h.await.unwrap());
        }
        let elapsed = t0.elapsed();
        let (cpu1, csw1) = usage();
        all.sort();
        let p50 = all[all.len() / 2].as_secs_f64() * 1e6;
        (all.len(), p50, cpu1 - cpu0, csw1 - csw0, elapsed)
    });
    let per_k = |x: f64| x / cycles as f64 * 1000.0;
    println!(
        "{mode} {flavor} tasks={tasks}: {:.0} cycles/s, acquire p50 {p50:.1} us, cpu {:.1} ms/1000, csw {:.0}/1000",
        cycles as f64 / elapsed.as_secs_f64(),
        per_k(cpu.as_secs_f64() * 1e3),
        per_k(csw as f64),
    );
}
