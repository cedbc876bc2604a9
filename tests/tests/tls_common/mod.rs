//! What the TLS tests (`tls.rs`, `tls_faults.rs`) share: the test PKI,
//! TLS (and plain) `redis-server` processes and their addresses, a client
//! that trusts the PKI's CA and the error of its lock, and what a TLS
//! failure's report says.

#![allow(dead_code, unused_imports)] // each test file uses a part of it
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

extern crate alloc;

pub(crate) use alloc::sync::Arc;
pub(crate) use core::net::SocketAddr;
pub(crate) use core::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
pub(crate) use core::time::Duration;
pub(crate) use std::io::{Read, Write};
pub(crate) use std::net::{TcpListener, TcpStream};
pub(crate) use std::time::Instant;

pub(crate) use redlock_std::{Builder, Client, Error, Outcomes, ServerId, ServerOutcome};
pub(crate) use redlock_tests::RedisServer;
pub(crate) use redlock_tests::fake::{self, Fake};
pub(crate) use redlock_tests::proxy::{Fault, FaultProxy};
pub(crate) use redlock_tests::tls::{ServerCert, TestPki, TlsOptions, WRONG_NAME};

pub(crate) const TTL: Duration = Duration::from_secs(30);

/// What every TLS failure's refusal starts with.
pub(crate) const TLS_FAILED: &str = "TLS failed: ";

/// What the report says of a TLS handshake that got no answer within the
/// connect timeout (a connection error, not a refusal).
pub(crate) const NO_ANSWER: &str = "no answer to the TLS handshake within the connect timeout";

/// A request timeout far beyond the connect timeouts of the tests that use
/// it: a handshake given up within their bounds was given up by the connect
/// timeout, not by the request timeout.
pub(crate) const LONG_REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

pub(crate) fn pki() -> TestPki {
    TestPki::new().expect("the test PKI is made")
}

pub(crate) fn tls_servers(pki: &TestPki, n: usize, options: TlsOptions) -> Vec<RedisServer> {
    (0..n)
        .map(|_| RedisServer::start_tls(pki, options).expect("a TLS redis-server starts"))
        .collect()
}

/// `n` TLS servers that present `cert` and do not check clients.
pub(crate) fn servers_presenting(pki: &TestPki, n: usize, cert: ServerCert) -> Vec<RedisServer> {
    tls_servers(
        pki,
        n,
        TlsOptions {
            cert,
            ..TlsOptions::default()
        },
    )
}

/// `n` plain (not TLS) servers.
pub(crate) fn plain_servers(n: usize) -> Vec<RedisServer> {
    (0..n).map(|_| RedisServer::start().unwrap()).collect()
}

/// `rediss://127.0.0.1:port` (the certificate's IP address).
pub(crate) fn rediss(s: &RedisServer) -> String {
    format!("rediss://{}", s.addr())
}

pub(crate) fn rediss_all(s: &[RedisServer]) -> Vec<String> {
    s.iter().map(rediss).collect()
}

/// `rediss://localhost:port` of each server: by host name, so that the
/// certificate's DNS name is checked, not its IP address.
pub(crate) fn rediss_by_name(s: &[RedisServer]) -> Vec<String> {
    s.iter()
        .map(|s| format!("rediss://localhost:{}", s.port()))
        .collect()
}

/// `rediss://addr` for each of `addrs` (relays and proxies in front of TLS
/// servers).
pub(crate) fn rediss_to(addrs: impl IntoIterator<Item = SocketAddr>) -> Vec<String> {
    addrs
        .into_iter()
        .map(|addr| format!("rediss://{addr}"))
        .collect()
}

/// `redis://addr` for each (plain) server.
pub(crate) fn redis_all(s: &[RedisServer]) -> Vec<String> {
    s.iter().map(|s| format!("redis://{}", s.addr())).collect()
}

/// A client over `urls` that trusts the PKI's CA, makes one attempt per
/// call, and gives each request room on a loaded machine.
pub(crate) fn trusting(pki: &TestPki, urls: &[String]) -> Builder {
    Client::builder()
        .servers(urls)
        .tls_ca_file(pki.ca())
        .retry(0, Duration::ZERO)
        .request_timeout(Duration::from_secs(1))
}

/// The error of a lock on `res` with the client `builder` builds (the
/// build must pass).
pub(crate) fn lock_error(builder: Builder) -> Error {
    builder.build().unwrap().lock(b"res", TTL).unwrap_err()
}

pub(crate) fn unavailable(e: &Error) -> &Outcomes {
    match e {
        Error::Unavailable(o) => o,
        other => panic!("expected Unavailable, got {other}"),
    }
}

/// Asserts that `err` is [`Error::Unavailable`], that no server voted for
/// us, and that at least `at_least` servers were refused for a TLS failure
/// whose words contain `why` (a call decides once a majority failed: the
/// others may not have been waited for).
pub(crate) fn assert_tls_refused(err: &Error, at_least: usize, why: &str) {
    let o = unavailable(err);
    assert_eq!(o.count(ServerOutcome::Ok), 0, "{err}");
    let refused = o
        .iter()
        .filter(|(server, _)| {
            o.refusal(*server)
                .is_some_and(|text| text.starts_with(TLS_FAILED) && text.contains(why))
        })
        .count();
    assert!(
        refused >= at_least,
        "{refused} servers refused with {why:?}, expected {at_least}: {err}"
    );
    assert!(err.to_string().contains(why), "{err}");
}

/// Asserts that each of `servers` failed with a connection error in `o`
/// (the outcomes of `err`), and calls `check` with the note the report
/// gives for it.
pub(crate) fn assert_connection_errors_noted(
    err: &Error,
    o: &Outcomes,
    servers: &[u8],
    check: impl Fn(&str),
) {
    for &server in servers {
        assert_eq!(
            o.get(ServerId(server)),
            Some(ServerOutcome::ConnectionError),
            "{err}"
        );
        let note = o
            .refusal(ServerId(server))
            .unwrap_or_else(|| panic!("no note for server {server}: {err}"));
        check(note);
    }
}
