//! One blocking client, lock + unlock in a loop against five real
//! `redis-server`s it starts: acquire and release p50 (µs) and client CPU
//! per 1000 cycles. Built once per tree and run in turns by `benches/ab.sh`,
//! so that two commits of the library are compared side by side in one run
//! (the same file builds against older trees: it uses only the public API).
//!
//! `cargo run --release -p redlock-benches --example ab_cycle -- LABEL CYCLES`
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    unsafe_code
)]

use core::time::Duration;
use std::time::Instant;

use redlock_std::Client;
use redlock_tests::RedisServer;

/// User + system CPU time of this process.
fn cpu() -> Duration {
    let mut ru = core::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `ru` is a writable, aligned `rusage`; RUSAGE_SELF is valid.
    let r = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
    assert_eq!(r, 0);
    // SAFETY: getrusage succeeded and filled it (plain integers).
    let ru = unsafe { ru.assume_init() };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn p50(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e6
}

fn main() {
    let mut args = std::env::args().skip(1);
    let label = args.next().unwrap_or_else(|| "run".into());
    let cycles: usize = args.next().map_or(20_000, |n| n.parse().unwrap());
    let servers: Vec<RedisServer> = (0..5).map(|_| RedisServer::start().unwrap()).collect();
    let urls: Vec<String> = servers.iter().map(|s| s.addr().to_string()).collect();
    let client = Client::builder().servers(&urls).build().unwrap();
    let ttl = Duration::from_secs(10);
    for _ in 0..2_000 {
        let lock = client.lock("ab", ttl).unwrap();
        client.unlock(&lock).unwrap();
    }
    let (mut acquire, mut release) = (Vec::with_capacity(cycles), Vec::with_capacity(cycles));
    let cpu_before = cpu();
    for _ in 0..cycles {
        let t = Instant::now();
        let lock = client.lock("ab", ttl).unwrap();
        let t2 = Instant::now();
        client.unlock(&lock).unwrap();
        acquire.push(t2 - t);
        release.push(t2.elapsed());
    }
    let spent = cpu() - cpu_before;
    println!(
        "{label} acquire_p50_us {:.1} release_p50_us {:.1} cpu_s_per_1000 {:.4}",
        p50(acquire),
        p50(release),
        spent.as_secs_f64() / cycles as f64 * 1000.0
    );
}
