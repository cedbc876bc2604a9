//! TLS against plain TCP, side by side in one run on the same servers:
//! five `redis-server` processes on 127.0.0.1, each listening on a plain
//! port and a TLS port (certificates made at start-up with the test
//! harness's `TestPki`, ECDSA P-256). Two blocking `redlock-std` clients,
//! one `redis://` and one `rediss://`, take turns: the measured cycles are
//! split into rounds, and within a round each client runs its share, so
//! that a slow moment of the shared machine hits both alike.
//!
//! Per client: acquire and release latency (p50, p99), the process's CPU
//! time per 1000 lock + unlock cycles (`getrusage`, every thread; the
//! servers are other processes), and heap allocations per cycle (a
//! counting global allocator, every thread).
//!
//! Run with `cargo bench -p redlock-benches --bench tls`. The result is a
//! markdown table on stdout; progress goes to stderr.
//! `CLIENT_BENCH_CYCLES` sets the measured cycles per client (default
//! 20,000).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

// Shared with the client bench, which also uses its per-thread counts.
#[allow(dead_code)]
#[path = "client/cost.rs"]
mod cost;

use core::time::Duration;
use std::time::Instant;

use redlock_std::Client;
use redlock_tests::RedisServer;
use redlock_tests::alloc_count::{self, Counting};
use redlock_tests::tls::{ServerCert, TestPki};

use crate::cost::Cost;

const SERVERS: usize = 5;
const TTL: Duration = Duration::from_secs(10);
const WARMUP: usize = 2_000;
const ROUNDS: usize = 8;

#[global_allocator]
static GLOBAL: Counting = Counting;

/// One client's measurements.
#[derive(Default)]
struct Row {
    acquire: Vec<Duration>,
    release: Vec<Duration>,
    cost: Cost,
    allocs: u64,
    cycles: u64,
}

impl Row {
    /// `n` lock + unlock cycles on `client`, measured.
    fn run(&mut self, client: &Client, key: &str, n: usize) {
        let before = Cost::now();
        let allocs = alloc_count::count();
        alloc_count::start();
        for _ in 0..n {
            let t0 = Instant::now();
            let lock = client.lock(key, TTL).expect("lock");
            let t1 = Instant::now();
            client.unlock(&lock).expect("unlock");
            let t2 = Instant::now();
            self.acquire.push(t1 - t0);
            self.release.push(t2 - t1);
        }
        alloc_count::stop();
        self.allocs += (alloc_count::count() - allocs) as u64;
        self.cost = self.cost.plus(Cost::now().since(before));
        self.cycles += n as u64;
    }
}

fn percentile(samples: &mut [Duration], p: f64) -> f64 {
    samples.sort_unstable();
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[i].as_secs_f64() * 1e6
}

fn main() {
    let cycles: usize = std::env::var("CLIENT_BENCH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let pki = TestPki::new().expect("certificates");
    let files = pki.server(ServerCert::Good);
    let (cert, key, ca) = (
        files.cert.to_string_lossy().into_owned(),
        files.key.to_string_lossy().into_owned(),
        pki.ca().to_string_lossy().into_owned(),
    );
    eprintln!("starting {SERVERS} redis-server processes (plain and TLS ports)");
    let mut servers = Vec::new();
    let mut tls_ports = Vec::new();
    for _ in 0..SERVERS {
        // A free port may be taken before the server binds it: try again.
        let started = (0..5).find_map(|_| {
            let port = redlock_tests::free_port().ok()?.to_string();
            let server = RedisServer::start_with(&[
                "--tls-port",
                &port,
                "--tls-cert-file",
                &cert,
                "--tls-key-file",
                &key,
                "--tls-ca-cert-file",
                &ca,
                "--tls-auth-clients",
                "no",
            ])
            .ok()?;
            Some((server, port))
        });
        let (server, port) = started.expect("redis-server with a TLS port");
        servers.push(server);
        tls_ports.push(port);
    }
    let plain_urls: Vec<String> = servers
        .iter()
        .map(|s| format!("redis://127.0.0.1:{}", s.port()))
        .collect();
    let tls_urls: Vec<String> = tls_ports
        .iter()
        .map(|p| format!("rediss://127.0.0.1:{p}"))
        .collect();
    let plain = Client::builder()
        .servers(&plain_urls)
        .build()
        .expect("plain client");
    let tls = Client::builder()
        .servers(&tls_urls)
        .tls_ca_file(pki.ca())
        .build()
        .expect("TLS client");
    let clients = [("plain TCP", &plain), ("TLS (rustls, ring)", &tls)];
    let mut rows: Vec<Row> = clients.iter().map(|_| Row::default()).collect();

    eprintln!("warming up ({WARMUP} cycles each)");
    for (_, client) in clients {
        let mut scratch = Row::default();
        scratch.run(client, "bench:tls:warmup", WARMUP);
    }
    let per_round = cycles.div_ceil(ROUNDS);
    for round in 0..ROUNDS {
        eprintln!("round {}/{ROUNDS}", round + 1);
        for k in 0..clients.len() {
            // Alternating first place between rounds.
            let k = (k + round) % clients.len();
            let (_, client) = clients[k];
            rows[k].run(client, "bench:tls", per_round);
        }
    }

    println!(
        "| client | acquire p50 µs | acquire p99 µs | release p50 µs | release p99 µs | CPU s / 1000 cycles | context switches / cycle | allocations / cycle |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut medians = Vec::new();
    for ((name, _), row) in clients.iter().zip(rows.iter_mut()) {
        let (a50, a99) = (
            percentile(&mut row.acquire, 0.5),
            percentile(&mut row.acquire, 0.99),
        );
        let (r50, r99) = (
            percentile(&mut row.release, 0.5),
            percentile(&mut row.release, 0.99),
        );
        let cpu = row.cost.cpu_per_1000(row.cycles);
        let allocs = row.allocs as f64 / row.cycles.max(1) as f64;
        let switches = row.cost.switches_per(row.cycles);
        println!(
            "| {name} | {a50:.0} | {a99:.0} | {r50:.0} | {r99:.0} | {cpu:.3} | {switches:.2} | {allocs:.1} |"
        );
        medians.push((a50, r50, cpu));
    }
    if let [(pa, pr, pc), (ta, tr, tc)] = medians[..] {
        println!();
        println!(
            "TLS / plain: acquire p50 {:.2}x, release p50 {:.2}x, CPU per cycle {:.2}x",
            ta / pa,
            tr / pr,
            tc / pc
        );
    }
    drop(servers);
}
