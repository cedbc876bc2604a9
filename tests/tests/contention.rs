//! Contention on one resource, with a protected register that is updated
//! non-atomically (read, sleep, write): a lost update would show that two
//! holders overlapped.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test driver

use core::time::Duration;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use redlock_std::Client;
use redlock_tests::RedisServer;

const CYCLES: usize = 8;

fn client(urls: &[String]) -> Client {
    Client::builder()
        .servers(urls)
        .retry(1_000, Duration::from_millis(20))
        .build()
        .unwrap()
}

/// Increments the number in `register` under the lock, `CYCLES` times.
fn work(urls: &[String], register: &Path) {
    work_with(&client(urls), register);
}

fn work_with(c: &Client, register: &Path) {
    for _ in 0..CYCLES {
        let deadline = Instant::now() + Duration::from_secs(30);
        let lock = c
            .lock_until(b"register", Duration::from_secs(5), deadline)
            .unwrap();
        let n: u64 = std::fs::read_to_string(register)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        std::thread::sleep(Duration::from_millis(2));
        assert!(
            lock.remaining() > Duration::ZERO,
            "worked past the validity"
        );
        std::fs::write(register, (n + 1).to_string()).unwrap();
        c.unlock(&lock).unwrap();
    }
}

fn register_file(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("redlock-register-{}-{name}", std::process::id()));
    std::fs::write(&path, "0").unwrap();
    path
}

/// 16 threads each run `work` against 3 fresh servers; no update is lost.
fn sixteen_threads(name: &str, work: impl Fn(&[String], &Path) + Sync) {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
    let urls: Vec<String> = servers.iter().map(|s| s.addr().to_string()).collect();
    let register = register_file(name);
    std::thread::scope(|scope| {
        for _ in 0..16 {
            scope.spawn(|| work(&urls, &register));
        }
    });
    let n: usize = std::fs::read_to_string(&register).unwrap().parse().unwrap();
    let _ = std::fs::remove_file(&register);
    assert_eq!(n, 16 * CYCLES);
}

#[test]
fn sixteen_threads_lose_no_update() {
    sixteen_threads("threads", work);
}

#[test]
fn sixteen_threads_sharing_one_client_lose_no_update() {
    let shared = std::sync::OnceLock::new();
    sixteen_threads("shared", |urls, register| {
        work_with(shared.get_or_init(|| client(urls)), register);
    });
}

#[test]
fn four_processes_lose_no_update() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
    let urls: Vec<String> = servers.iter().map(|s| s.addr().to_string()).collect();
    let register = register_file("processes");
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..4)
        .map(|_| {
            Command::new(&exe)
                .args(["--exact", "contention_worker", "--ignored", "--quiet"])
                .env("CONTENTION_SERVERS", urls.join(","))
                .env("CONTENTION_REGISTER", &register)
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let n: usize = std::fs::read_to_string(&register).unwrap().parse().unwrap();
    let _ = std::fs::remove_file(&register);
    assert_eq!(n, 4 * CYCLES);
}

/// The body of each process of `four_processes_lose_no_update`.
#[test]
#[ignore = "run by four_processes_lose_no_update as a child process"]
fn contention_worker() {
    let (Ok(servers), Ok(register)) = (
        std::env::var("CONTENTION_SERVERS"),
        std::env::var("CONTENTION_REGISTER"),
    ) else {
        return;
    };
    let urls: Vec<String> = servers.split(',').map(str::to_string).collect();
    work(&urls, Path::new(&register));
}
