//! What the async API's cancellation and guard tests share: servers behind
//! fault proxies, looking at keys directly, bounded waits.

#![allow(dead_code, unused_imports)] // each test file uses a part of it
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

extern crate alloc;

pub(crate) use alloc::sync::Arc;
pub(crate) use core::future::Future;
pub(crate) use core::panic::AssertUnwindSafe;
pub(crate) use core::pin::Pin;
pub(crate) use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
pub(crate) use core::task::{Context, Poll};
pub(crate) use core::time::Duration;
pub(crate) use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
pub(crate) use std::time::Instant;

pub(crate) use futures::FutureExt;
pub(crate) use redlock_std::{
    AsyncAutoLock, AsyncClient, AsyncLockGuard, Client, Error, Lock, Lost,
};
pub(crate) use redlock_tests::proxy::{Fault, FaultProxy};
pub(crate) use redlock_tests::{RedisServer, Value};

/// The tests that count the process's threads or run on a short ttl run
/// alone; the others share.
pub(crate) static PROCESS: RwLock<()> = RwLock::new(());

pub(crate) fn shared() -> RwLockReadGuard<'static, ()> {
    PROCESS
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) fn exclusive() -> RwLockWriteGuard<'static, ()> {
    PROCESS
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The ttl of what the tests drop: far beyond every bounded wait, so that a
/// key that disappears was released, not expired.
pub(crate) const LONG_TTL: Duration = Duration::from_secs(60);

/// How long a background release may take to show on every server (many
/// request timeouts, and the proxies' delays).
pub(crate) const RELEASE_BOUND: Duration = Duration::from_secs(8);

/// A request timeout that a loaded machine never runs into.
pub(crate) const SLACK_TIMEOUT: Duration = Duration::from_millis(250);

/// The request timeout with a ttl of 500 ms (a tenth of it).
pub(crate) const SHORT_TTL_TIMEOUT: Duration = Duration::from_millis(50);

/// The client's request timeout in the cancellation tests.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_millis(100);

/// Real servers, the first `proxied` of them behind fault proxies.
pub(crate) struct Cluster {
    pub(crate) servers: Vec<RedisServer>,
    pub(crate) proxies: Vec<FaultProxy>,
}

impl Cluster {
    pub(crate) fn start(n: usize, proxied: usize) -> Cluster {
        let servers: Vec<RedisServer> = (0..n).map(|_| RedisServer::start().unwrap()).collect();
        let proxies = servers[..proxied]
            .iter()
            .map(|s| FaultProxy::start(s.addr()).unwrap())
            .collect();
        Cluster { servers, proxies }
    }

    /// The addresses a client under test uses (through the proxies).
    pub(crate) fn urls(&self) -> Vec<String> {
        self.servers
            .iter()
            .enumerate()
            .map(|(i, s)| match self.proxies.get(i) {
                Some(p) => p.addr().to_string(),
                None => s.addr().to_string(),
            })
            .collect()
    }

    /// The servers' own addresses (for a contender that is not slowed).
    pub(crate) fn direct_urls(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.addr().to_string()).collect()
    }

    pub(crate) fn set_faults(&self, fault: Fault) {
        for p in &self.proxies {
            p.set(fault);
        }
    }

    /// What each server holds under `key`.
    pub(crate) fn values(&self, key: &str) -> Vec<Value> {
        values(&self.servers, key)
    }
}

pub(crate) fn values(servers: &[RedisServer], key: &str) -> Vec<Value> {
    servers
        .iter()
        .map(|s| {
            s.conn()
                .unwrap()
                .request(&[b"GET", key.as_bytes()])
                .unwrap()
        })
        .collect()
}

/// How many servers hold `token` under `key`.
pub(crate) fn holding(servers: &[RedisServer], key: &str, token: &str) -> usize {
    values(servers, key)
        .iter()
        .filter(|v| **v == Value::Bulk(token.as_bytes().to_vec()))
        .count()
}

/// Opens the client's connections (their handshakes done), so that a
/// request is written at once, not held behind a handshake.
pub(crate) fn warm_up(c: &AsyncClient) {
    futures::executor::block_on(async {
        let lock = c.lock("warm-up", LONG_TTL).await.unwrap();
        c.unlock(&lock).await.unwrap();
    });
}

/// How many servers hold `key` (whoever holds it).
pub(crate) fn held_on(servers: &[RedisServer], key: &str) -> usize {
    values(servers, key)
        .iter()
        .filter(|v| matches!(v, Value::Bulk(_)))
        .count()
}

/// Polls `done` every 10 ms until it holds or `bound` passes; whether it held.
pub(crate) fn eventually(bound: Duration, mut done: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + bound;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits (bounded) until no server holds `key`; what they hold if some still do.
pub(crate) fn wait_gone(servers: &[RedisServer], key: &str) -> Result<(), Vec<Value>> {
    if eventually(RELEASE_BOUND, || {
        values(servers, key).iter().all(|v| *v == Value::Nil)
    }) {
        Ok(())
    } else {
        Err(values(servers, key))
    }
}

pub(crate) fn delete_everywhere(servers: &[RedisServer], key: &str) {
    for s in servers {
        s.conn()
            .unwrap()
            .request(&[b"DEL", key.as_bytes()])
            .unwrap();
    }
}

pub(crate) fn client(urls: &[String], fencing: bool) -> AsyncClient {
    Client::builder()
        .servers(urls)
        .request_timeout(REQUEST_TIMEOUT)
        .retry(3, Duration::from_millis(100))
        .fencing(fencing)
        .build_async()
        .unwrap()
}

/// The drift allowance of the default config for `ttl` (`ttl/100 + 2 ms`),
/// plus 1 ms for the core clock's whole microseconds.
pub(crate) fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(3)
}
