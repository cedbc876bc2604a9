//! The operator: when a worker reports `FenceLost` (C6: servers restarted
//! without persistence lost the fence counter), it repairs the counter as
//! the SPEC tells an operator to, with `Client::fence_repair(resource,
//! at_least)` on the servers themselves (not through the proxies).
//!
//! `at_least` is the largest of: the largest fence the resource has
//! accepted; the largest fence a worker has reported acquiring; and the
//! largest fence counter the servers that answer within
//! [`COUNTER_WAIT`] still hold. A holder may have been granted a fence it
//! has not used yet, and a floor below it could hand the same fence out
//! again (the SPEC allows the lower floor: the resource would still refuse
//! the older holder's tokens, but the lock's own F1 promise would not
//! hold). The counters cover a fence granted but not recorded yet (a CLI
//! worker's command records its fence only once it runs): the majority
//! that granted it raised their counters to it, and only the servers
//! restarted since lost theirs.
//!
//! It learns of `FenceLost` by reading the workers' files as they grow
//! (every 20 ms), and repairs at most every 50 ms.

use core::net::SocketAddr;
use core::sync::atomic::{AtomicBool, Ordering};
use core::time::Duration;
use std::path::PathBuf;
use std::time::Instant;

use redlock_std::Client;
use redlock_tests::Conn;
use redlock_torture::history::{AttemptOutcome, Micros, RunClock};
use redlock_torture::resource::ResourceServer;
use serde::Serialize;

use crate::record::{Record, read_from};
use crate::worker::RESOURCE;

/// How often the operator reads the workers' files.
const POLL: Duration = Duration::from_millis(20);
/// The least time between two repairs.
const REPAIR_EVERY: Duration = Duration::from_millis(50);
/// How long the operator waits for the servers' fence counters (a paused
/// server does not answer: its counter is left out).
const COUNTER_WAIT: Duration = Duration::from_millis(300);

/// One repair.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Repair {
    /// When it began (run clock).
    pub(crate) at: Micros,
    /// When it returned.
    pub(crate) done: Micros,
    /// The `FenceLost` attempt that called for it: its worker and end.
    pub(crate) after_worker: u32,
    pub(crate) after_fence_lost_at: Micros,
    /// The largest fence the resource had accepted.
    pub(crate) resource_max: u64,
    /// The largest fence a worker had reported acquiring.
    pub(crate) workers_max: u64,
    /// The largest fence counter on the servers that answered.
    pub(crate) servers_max: u64,
    /// The floor given (the largest of the three).
    pub(crate) at_least: u64,
    /// The counter after the repair, or why it failed.
    pub(crate) counter: Option<u64>,
    pub(crate) error: Option<String>,
}

/// The largest value of `key` on `servers` (their own addresses, not the
/// proxies'), among those that answer within [`COUNTER_WAIT`].
fn largest_counter(servers: &[SocketAddr], key: &str) -> u64 {
    let (tx, rx) = std::sync::mpsc::channel();
    for &addr in servers {
        let (tx, key) = (tx.clone(), key.to_owned());
        // Not joined: a paused server's reader ends at its read timeout.
        std::thread::spawn(move || {
            let value = Conn::connect(addr).ok().map_or(0, |mut c| {
                crate::cluster::get_number(&mut c, key.as_bytes())
            });
            let _ = tx.send(value);
        });
    }
    drop(tx);
    let deadline = Instant::now() + COUNTER_WAIT;
    let mut largest = 0;
    for _ in servers {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(value) => largest = largest.max(value),
            Err(_) => break,
        }
    }
    largest
}

/// Watches `files` until `stop`, repairing as needed; returns the repairs.
/// `servers` are the servers' own addresses.
pub(crate) fn run(
    servers: &[SocketAddr],
    files: &[PathBuf],
    resource: &ResourceServer,
    client: &Client,
    clock: RunClock,
    stop: &AtomicBool,
) -> Vec<Repair> {
    let mut offsets = vec![0u64; files.len()];
    let mut workers_max = 0u64;
    // The latest FenceLost not yet repaired: (worker, when it ended).
    let mut pending: Option<(u32, Micros)> = None;
    let mut last_repair: Option<Micros> = None;
    let mut last_try: Option<Instant> = None;
    let mut repairs = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(POLL);
        for (path, offset) in files.iter().zip(offsets.iter_mut()) {
            let Ok((records, next, _)) = read_from(path, *offset) else {
                continue;
            };
            *offset = next;
            for record in records {
                let Record::Attempt(a) = record else { continue };
                match a.outcome {
                    AttemptOutcome::Acquired { fence } => workers_max = workers_max.max(fence),
                    AttemptOutcome::FenceLost
                        if last_repair.is_none_or(|r| a.end > r)
                            && pending.is_none_or(|(_, at)| a.end > at) =>
                    {
                        pending = Some((a.worker, a.end));
                    }
                    _ => {}
                }
            }
        }
        let Some((worker, lost_at)) = pending else {
            continue;
        };
        if last_try.is_some_and(|t| t.elapsed() < REPAIR_EVERY) {
            continue;
        }
        last_try = Some(Instant::now());
        let resource_max = resource
            .accesses()
            .iter()
            .filter(|a| a.accepted)
            .map(|a| a.fence)
            .max()
            .unwrap_or(0);
        let servers_max = largest_counter(servers, &format!("{RESOURCE}:fence"));
        let at_least = resource_max.max(workers_max).max(servers_max);
        let at = clock.now();
        let result = client.fence_repair(RESOURCE, at_least);
        let mut repair = Repair {
            at,
            done: clock.now(),
            after_worker: worker,
            after_fence_lost_at: lost_at,
            resource_max,
            workers_max,
            servers_max,
            at_least,
            counter: None,
            error: None,
        };
        match result {
            Ok(done) => {
                repair.counter = Some(done.counter);
                last_repair = Some(at);
                pending = None;
            }
            Err(e) => repair.error = Some(e.to_string()),
        }
        repairs.push(repair);
    }
    repairs
}

#[cfg(test)]
mod tests {
    use super::*;
    use redlock_tests::RedisServer;

    #[test]
    fn the_largest_counter_is_read_from_the_servers_that_answer() {
        let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
        for (s, v) in servers.iter().zip([b"7".as_slice(), b"12", b"3"]) {
            s.conn().unwrap().request(&[b"SET", b"r:fence", v]).unwrap();
        }
        let addrs: Vec<SocketAddr> = servers.iter().map(RedisServer::addr).collect();
        assert_eq!(largest_counter(&addrs, "r:fence"), 12);
        // The largest one paused: left out, within the wait.
        servers[1].signal("STOP").unwrap();
        let began = Instant::now();
        let largest = largest_counter(&addrs, "r:fence");
        let waited = began.elapsed();
        servers[1].signal("CONT").unwrap();
        assert_eq!(largest, 7);
        assert!(waited < Duration::from_secs(3), "{waited:?}");
        // None: 0.
        assert_eq!(largest_counter(&addrs, "other:fence"), 0);
    }
}
