//! TLS (`rediss://`) against real TLS-only `redis-server` processes, with
//! certificates made at test time ([`TestPki`]): the operations over TLS,
//! mixed with plain servers, mutual TLS, each certificate failure and what
//! the report says of it, stalled, slow and reset links, and the builder's
//! checks of its certificate and key files.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test driver

extern crate alloc;

use alloc::sync::Arc;
use core::net::SocketAddr;
use core::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use core::time::Duration;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

use redlock_std::{Builder, Client, Error, Outcomes, ServerId, ServerOutcome};
use redlock_tests::RedisServer;
use redlock_tests::fake::{self, Fake};
use redlock_tests::proxy::{Fault, FaultProxy};
use redlock_tests::tls::{ServerCert, TestPki, TlsOptions, WRONG_NAME};

const TTL: Duration = Duration::from_secs(30);

/// Servers that require a client certificate signed by the PKI's CA
/// (`--tls-auth-clients yes`).
const CHECK_CLIENTS: TlsOptions = TlsOptions {
    cert: ServerCert::Good,
    auth_clients: true,
};

/// What every TLS failure's refusal starts with.
const TLS_FAILED: &str = "TLS failed: ";

/// What the report says of a TLS handshake that got no answer within the
/// connect timeout (a connection error, not a refusal).
const NO_ANSWER: &str = "no answer to the TLS handshake within the connect timeout";

fn pki() -> TestPki {
    TestPki::new().expect("the test PKI is made")
}

fn tls_servers(pki: &TestPki, n: usize, options: TlsOptions) -> Vec<RedisServer> {
    (0..n)
        .map(|_| RedisServer::start_tls(pki, options).expect("a TLS redis-server starts"))
        .collect()
}

/// `rediss://127.0.0.1:port` (the certificate's IP address).
fn rediss(s: &RedisServer) -> String {
    format!("rediss://{}", s.addr())
}

fn rediss_all(s: &[RedisServer]) -> Vec<String> {
    s.iter().map(rediss).collect()
}

/// A client over `urls` that trusts the PKI's CA, makes one attempt per
/// call, and gives each request room on a loaded machine.
fn trusting(pki: &TestPki, urls: &[String]) -> Builder {
    Client::builder()
        .servers(urls)
        .tls_ca_file(pki.ca())
        .retry(0, Duration::ZERO)
        .request_timeout(Duration::from_secs(1))
}

fn unavailable(e: &Error) -> &Outcomes {
    match e {
        Error::Unavailable(o) => o,
        other => panic!("expected Unavailable, got {other}"),
    }
}

/// Asserts that `err` is [`Error::Unavailable`], that no server voted for
/// us, and that at least `at_least` servers were refused for a TLS failure
/// whose words contain `why` (a call decides once a majority failed: the
/// others may not have been waited for).
fn assert_tls_refused(err: &Error, at_least: usize, why: &str) {
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

/// Lock, inspect, extend, unlock with `client` on its `n` servers,
/// checking what the servers hold at each step: with the client's own
/// connections (which see its requests in order: all `n` hold the key), and
/// with `witness`, a second client over the same servers (a majority does,
/// and it cannot take the lock).
fn lock_extend_inspect_unlock(client: &Client, witness: &Client, n: usize) {
    let majority = n / 2 + 1;
    let holders = |inspection: &redlock_std::Inspection, token: &str| {
        inspection
            .entries()
            .iter()
            .filter(|h| h.outcome == ServerOutcome::Ok && h.holder_str() == Some(token))
            .count()
    };

    let mut lock = client.lock(b"tls-res", TTL).expect("lock over TLS");
    assert!(lock.report().count(ServerOutcome::Ok) >= majority);
    assert!(lock.remaining() > Duration::ZERO);
    let own = client.inspect(b"tls-res").expect("inspect over TLS");
    assert_eq!(own.entries().len(), n);
    assert_eq!(holders(&own, lock.token()), n, "{own:?}");
    for h in own.entries() {
        let ttl = h.ttl().expect("the key expires");
        assert!(ttl > Duration::ZERO && ttl <= TTL, "{h:?}");
    }
    let seen = witness.inspect(b"tls-res").expect("inspect over TLS");
    assert_eq!(seen.majority_holder(), Some(lock.token().as_bytes()));
    assert!(holders(&seen, lock.token()) >= majority, "{seen:?}");

    // Another client cannot take it.
    let err = witness.lock(b"tls-res", TTL).unwrap_err();
    assert!(matches!(err, Error::Conflict(_)), "{err}");

    let longer = Duration::from_secs(120);
    client.extend(&mut lock, longer).expect("extend over TLS");
    assert_eq!(lock.extensions(), 1);
    assert!(lock.remaining() > TTL);
    let own = client.inspect(b"tls-res").expect("inspect over TLS");
    let extended = own
        .entries()
        .iter()
        .filter(|h| h.holder_str() == Some(lock.token()) && h.ttl().is_some_and(|t| t > TTL))
        .count();
    assert_eq!(extended, n, "{own:?}");

    let released = client.unlock(&lock).expect("unlock over TLS");
    assert_eq!(released.deleted(), n);
    let own = client.inspect(b"tls-res").expect("inspect over TLS");
    assert!(own.entries().iter().all(|h| h.holder.is_none()), "{own:?}");
    // Free again for anyone.
    let other = witness.lock(b"tls-res", TTL).expect("the released lock");
    witness.unlock(&other).expect("unlock over TLS");
}

/// Fenced locks over TLS: the fence grows from one lock to the next.
fn fenced_locks(pki: &TestPki, urls: &[String]) {
    let fenced = trusting(pki, urls).fencing(true).build().unwrap();
    let first = fenced
        .lock(b"tls-fenced", TTL)
        .expect("fenced lock over TLS");
    let one = first.fence().expect("a fence");
    fenced.unlock(&first).unwrap();
    let second = fenced
        .lock(b"tls-fenced", TTL)
        .expect("fenced lock over TLS");
    let two = second.fence().expect("a fence");
    assert!(two > one, "fences {one} then {two}");
    let seen = fenced.inspect(b"tls-fenced").unwrap();
    assert_eq!(seen.majority_holder(), Some(second.token().as_bytes()));
    fenced.unlock(&second).unwrap();
}

#[test]
fn lock_extend_inspect_unlock_and_fence_over_tls_on_three_servers() {
    let pki = pki();
    let s = tls_servers(&pki, 3, TlsOptions::default());
    let urls = rediss_all(&s);
    let client = trusting(&pki, &urls).build().unwrap();
    let witness = trusting(&pki, &urls).build().unwrap();
    lock_extend_inspect_unlock(&client, &witness, 3);
    fenced_locks(&pki, &urls);
}

#[test]
fn lock_extend_inspect_unlock_and_fence_over_tls_on_five_servers_by_name() {
    let pki = pki();
    let s = tls_servers(&pki, 5, TlsOptions::default());
    // By host name: the certificate's DNS name is checked, not its IP.
    let urls: Vec<String> = s
        .iter()
        .map(|s| format!("rediss://localhost:{}", s.port()))
        .collect();
    let client = trusting(&pki, &urls).build().unwrap();
    let witness = trusting(&pki, &urls).build().unwrap();
    lock_extend_inspect_unlock(&client, &witness, 5);
    fenced_locks(&pki, &urls);
}

#[test]
fn one_client_mixes_plain_and_tls_servers() {
    let pki = pki();
    let tls = tls_servers(&pki, 3, TlsOptions::default());
    let plain: Vec<RedisServer> = (0..2).map(|_| RedisServer::start().unwrap()).collect();
    let mut urls = rediss_all(&tls);
    urls.extend(plain.iter().map(|s| format!("redis://{}", s.addr())));
    let client = trusting(&pki, &urls).build().unwrap();
    let witness = trusting(&pki, &urls).build().unwrap();
    lock_extend_inspect_unlock(&client, &witness, 5);
    // The plain servers really hold the keys (read in plain text).
    let lock = client.lock(b"mixed", TTL).unwrap();
    let _ = client.inspect(b"mixed").unwrap(); // after every SET
    for s in &plain {
        assert_eq!(
            s.conn().unwrap().request(&[b"GET", b"mixed"]).unwrap(),
            redlock_tests::Value::Bulk(lock.token().as_bytes().to_vec())
        );
    }
    client.unlock(&lock).unwrap();
}

#[test]
fn a_tls_port_addressed_as_plain_and_a_plain_port_addressed_as_tls_are_not_used() {
    let pki = pki();
    let tls = tls_servers(&pki, 4, TlsOptions::default());
    let plain = RedisServer::start().unwrap();
    // A TLS-only server addressed as redis://: it gets RESP where it
    // expects a ClientHello, and closes.
    let plain_to_tls = format!("redis://{}", tls[3].addr());
    // A plain server addressed as rediss://: it gets a ClientHello, reads
    // it as the start of an inline command and waits for its end (redis
    // looks for the newline with strchr, which stops at the hello's first
    // zero byte), so it never answers: the handshake times out.
    let tls_to_plain = format!("rediss://{}", plain.addr());
    // Room for the good servers' handshakes on a loaded machine.
    let connect_timeout = Duration::from_secs(2);

    // Three good servers of five: the majority still locks.
    let mut urls = rediss_all(&tls[..3]);
    urls.extend([plain_to_tls.clone(), tls_to_plain.clone()]);
    let client = trusting(&pki, &urls)
        .connect_timeout(connect_timeout)
        .build()
        .unwrap();
    let lock = client
        .lock(b"res", TTL)
        .expect("a majority of good servers");
    assert!(lock.report().count(ServerOutcome::Ok) >= 3);
    for bad in [3, 4] {
        assert_ne!(lock.report().get(ServerId(bad)), Some(ServerOutcome::Ok));
    }
    let seen = client.inspect(b"res").unwrap();
    assert_eq!(seen.majority_holder(), Some(lock.token().as_bytes()));
    for bad in [3, 4] {
        assert_ne!(seen.entries()[bad].outcome, ServerOutcome::Ok, "{seen:?}");
        assert_eq!(seen.entries()[bad].holder, None, "{seen:?}");
    }
    client.unlock(&lock).unwrap();
    // Nothing reached the plain server as a command.
    assert_eq!(
        plain.conn().unwrap().request(&[b"DBSIZE"]).unwrap(),
        redlock_tests::Value::Integer(0)
    );

    // Two bad of three: the call fails, and the report names both. (The
    // request timeout is longer than the connect timeout: the silent
    // server is given up by the latter.)
    let urls = vec![rediss(&tls[0]), plain_to_tls, tls_to_plain];
    let err = trusting(&pki, &urls)
        .connect_timeout(connect_timeout)
        .request_timeout(LONG_REQUEST_TIMEOUT)
        .build()
        .unwrap()
        .lock(b"res", TTL)
        .unwrap_err();
    let o = unavailable(&err);
    // The TLS port spoken to in plain text fails as a connection does (it
    // closes, or answers with bytes that are no RESP).
    assert!(
        matches!(
            o.get(ServerId(1)),
            Some(ServerOutcome::ConnectionError | ServerOutcome::UnexpectedReply)
        ),
        "{err}"
    );
    assert!(
        !o.refusal(ServerId(1))
            .is_some_and(|t| t.contains(NO_ANSWER)),
        "{err}"
    );
    // The silent plain server is given up by the connect timeout: a
    // connection error (it is tried again later), and the report says why.
    assert_eq!(
        o.get(ServerId(2)),
        Some(ServerOutcome::ConnectionError),
        "{err}"
    );
    let why = o
        .refusal(ServerId(2))
        .unwrap_or_else(|| panic!("no note for {}: {err}", plain.addr()));
    assert!(why.contains(NO_ANSWER), "{err}");
    let shown = err.to_string();
    assert!(
        shown.contains(&format!("{}: connection failed: {NO_ANSWER}", plain.addr())),
        "{shown}"
    );
    assert!(shown.contains(&plain.addr().to_string()), "{shown}");
    assert!(shown.contains(&tls[3].addr().to_string()), "{shown}");
}

/// Answers whatever it reads with a RESP error, as a plain Redis does to a
/// line it cannot run.
fn resp_error(c: &mut TcpStream, _: &[u8], _: &AtomicBool) {
    let _ = c.write_all(b"-ERR unknown command\r\n");
}

#[test]
fn a_peer_that_answers_the_hello_in_resp_or_http_is_not_a_tls_server() {
    let pki = pki();
    let good = RedisServer::start_tls(&pki, TlsOptions::default()).unwrap();
    let resp = Fake::start(resp_error);
    let http = Fake::start(fake::garbage);
    let urls = vec![
        format!("rediss://{}", resp.addr),
        format!("rediss://{}", http.addr),
        rediss(&good),
    ];
    let err = trusting(&pki, &urls)
        .build()
        .unwrap()
        .lock(b"res", TTL)
        .unwrap_err();
    let o = unavailable(&err);
    for (server, addr) in [(0, &resp.addr), (1, &http.addr)] {
        let why = o.refusal(ServerId(server)).unwrap_or_else(|| {
            panic!("no refusal for {addr}: {err}");
        });
        assert!(why.starts_with(TLS_FAILED), "{err}");
        assert!(why.contains("not a TLS server"), "{err}");
    }
    assert!(err.to_string().contains("not a TLS server"), "{err}");
}

#[test]
fn mutual_tls_works_with_the_client_certificate() {
    let pki = pki();
    let s = tls_servers(&pki, 3, CHECK_CLIENTS);
    let urls = rediss_all(&s);
    let client = pki.client();
    let with_cert = |urls: &[String]| {
        trusting(&pki, urls)
            .tls_client_cert(&client.cert, &client.key)
            .build()
            .unwrap()
    };
    lock_extend_inspect_unlock(&with_cert(&urls), &with_cert(&urls), 3);
}

#[test]
fn mutual_tls_refuses_a_client_without_a_certificate() {
    let pki = pki();
    let s = tls_servers(&pki, 3, CHECK_CLIENTS);
    let err = trusting(&pki, &rediss_all(&s))
        .build()
        .unwrap()
        .lock(b"res", TTL)
        .unwrap_err();
    assert_tls_refused(&err, 2, "client certificate");
}

#[test]
fn mutual_tls_refuses_a_client_certificate_of_another_ca() {
    let pki = pki();
    let s = tls_servers(&pki, 3, CHECK_CLIENTS);
    let foreign = pki.other_ca_client();
    let err = trusting(&pki, &rediss_all(&s))
        .tls_client_cert(&foreign.cert, &foreign.key)
        .build()
        .unwrap()
        .lock(b"res", TTL)
        .unwrap_err();
    assert_tls_refused(&err, 2, "client certificate");
}

#[test]
fn a_server_certificate_from_an_untrusted_ca_is_refused() {
    let pki = pki();
    let good = tls_servers(&pki, 3, TlsOptions::default());
    // Trusting only the other CA.
    let err = trusting(&pki, &rediss_all(&good))
        .tls_ca_file(pki.other_ca())
        .build()
        .unwrap()
        .lock(b"res", TTL)
        .unwrap_err();
    assert_tls_refused(&err, 2, "unknown CA");
    // Mozilla's roots (the default) do not know the test CA either.
    let err = Client::builder()
        .servers(rediss_all(&good))
        .retry(0, Duration::ZERO)
        .build()
        .unwrap()
        .lock(b"res", TTL)
        .unwrap_err();
    assert_tls_refused(&err, 2, "unknown CA");
    // Servers whose certificates the other CA signed.
    let other = tls_servers(
        &pki,
        3,
        TlsOptions {
            cert: ServerCert::OtherCa,
            ..TlsOptions::default()
        },
    );
    let err = trusting(&pki, &rediss_all(&other))
        .build()
        .unwrap()
        .lock(b"res", TTL)
        .unwrap_err();
    assert_tls_refused(&err, 2, "unknown CA");
}

#[test]
fn a_certificate_for_another_name_is_refused_unless_that_name_is_asked_for() {
    let pki = pki();
    let wrong = tls_servers(
        &pki,
        3,
        TlsOptions {
            cert: ServerCert::WrongName,
            ..TlsOptions::default()
        },
    );
    // By IP address, and by host name.
    let err = trusting(&pki, &rediss_all(&wrong))
        .build()
        .unwrap()
        .lock(b"res", TTL)
        .unwrap_err();
    assert_tls_refused(&err, 2, "not valid for the name");
    let by_name: Vec<String> = wrong
        .iter()
        .map(|s| format!("rediss://localhost:{}", s.port()))
        .collect();
    let err = trusting(&pki, &by_name)
        .build()
        .unwrap()
        .lock(b"res", TTL)
        .unwrap_err();
    assert_tls_refused(&err, 2, "not valid for the name");
    // Asking for the certificate's name instead of the URLs' hosts.
    let named = trusting(&pki, &rediss_all(&wrong))
        .tls_server_name(WRONG_NAME)
        .build()
        .unwrap();
    let lock = named.lock(b"res", TTL).expect("the name asked for");
    named.unlock(&lock).unwrap();

    // And the other way round: good certificates, another name asked for.
    let good = tls_servers(&pki, 3, TlsOptions::default());
    let err = trusting(&pki, &rediss_all(&good))
        .tls_server_name(WRONG_NAME)
        .build()
        .unwrap()
        .lock(b"res", TTL)
        .unwrap_err();
    assert_tls_refused(&err, 2, "not valid for the name");
}

#[test]
fn an_expired_certificate_is_refused() {
    let pki = pki();
    let s = tls_servers(
        &pki,
        3,
        TlsOptions {
            cert: ServerCert::Expired,
            ..TlsOptions::default()
        },
    );
    let err = trusting(&pki, &rediss_all(&s))
        .build()
        .unwrap()
        .lock(b"res", TTL)
        .unwrap_err();
    assert_tls_refused(&err, 2, "expired");
}

/// Servers that speak TLS 1.2 only.
const TLS_1_2: [&str; 2] = ["--tls-protocols", "TLSv1.2"];

fn tls_1_2_servers(pki: &TestPki, options: TlsOptions) -> Vec<RedisServer> {
    (0..3)
        .map(|_| RedisServer::start_tls_with(pki, options, &TLS_1_2).unwrap())
        .collect()
}

#[test]
fn tls_1_2_servers_work() {
    let pki = pki();
    let no_client_check = tls_1_2_servers(&pki, TlsOptions::default());
    let urls = rediss_all(&no_client_check);
    let client = trusting(&pki, &urls).build().unwrap();
    let witness = trusting(&pki, &urls).build().unwrap();
    lock_extend_inspect_unlock(&client, &witness, 3);
    // And with mutual TLS.
    let mutual = tls_1_2_servers(&pki, CHECK_CLIENTS);
    let urls = rediss_all(&mutual);
    let mine = pki.client();
    let with_cert = || {
        trusting(&pki, &urls)
            .tls_client_cert(&mine.cert, &mine.key)
            .build()
            .unwrap()
    };
    lock_extend_inspect_unlock(&with_cert(), &with_cert(), 3);
}

#[test]
fn tls_1_2_servers_refuse_a_client_without_a_certificate() {
    let pki = pki();
    let s = tls_1_2_servers(&pki, CHECK_CLIENTS);
    // TLS 1.2 refuses during the handshake (TLS 1.3 after the client
    // finished it), with a handshake_failure alert (1.2 has no
    // certificate_required): the report should still say why.
    let err = trusting(&pki, &rediss_all(&s))
        .build()
        .unwrap()
        .lock(b"res", TTL)
        .unwrap_err();
    assert_tls_refused(&err, 2, "client certificate");
}

#[test]
fn tls_1_2_servers_refuse_a_client_certificate_of_another_ca() {
    let pki = pki();
    let s = tls_1_2_servers(&pki, CHECK_CLIENTS);
    let foreign = pki.other_ca_client();
    let err = trusting(&pki, &rediss_all(&s))
        .tls_client_cert(&foreign.cert, &foreign.key)
        .build()
        .unwrap()
        .lock(b"res", TTL)
        .unwrap_err();
    assert_tls_refused(&err, 2, "client certificate");
}

#[test]
fn a_server_alert_is_reported() {
    let pki = pki();
    // TLS 1.2 with only a cipher the client does not offer (and that an
    // ECDSA certificate cannot serve): the server ends the handshake with
    // an alert.
    let no_common_cipher = [
        "--tls-protocols",
        "TLSv1.2",
        "--tls-ciphers",
        "DHE-RSA-AES256-SHA256",
    ];
    let s: Vec<RedisServer> = (0..3)
        .map(|_| {
            RedisServer::start_tls_with(&pki, TlsOptions::default(), &no_common_cipher).unwrap()
        })
        .collect();
    let err = trusting(&pki, &rediss_all(&s))
        .build()
        .unwrap()
        .lock(b"res", TTL)
        .unwrap_err();
    assert_tls_refused(&err, 2, "alert");
    assert!(!err.to_string().contains("client certificate"), "{err}");
}

/// A relay to `upstream` that forwards all the client sends but only the
/// first `budget` bytes the server sends on each connection, then nothing
/// (the connection stays open): a server that stops mid-handshake, after
/// part of its first flight.
struct StallingRelay {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    /// Server bytes forwarded so far, all connections together.
    forwarded: Arc<AtomicUsize>,
}

impl StallingRelay {
    fn start(upstream: SocketAddr, budget: usize) -> StallingRelay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let forwarded = Arc::new(AtomicUsize::new(0));
        let (stop2, forwarded2) = (stop.clone(), forwarded.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if stop2.load(Ordering::Relaxed) {
                    break;
                }
                let (Ok(mut client), Ok(mut server)) = (client, TcpStream::connect(upstream))
                else {
                    continue;
                };
                let (mut to_server, mut from_server) =
                    (server.try_clone().unwrap(), client.try_clone().unwrap());
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut client, &mut to_server);
                    let _ = to_server.shutdown(std::net::Shutdown::Both);
                });
                let forwarded = forwarded2.clone();
                std::thread::spawn(move || {
                    let mut left = budget;
                    let mut buf = [0u8; 4096];
                    // Forward up to the budget, then read and drop the rest
                    // until either side closes.
                    while let Ok(n @ 1..) = server.read(&mut buf) {
                        let pass = n.min(left);
                        if pass > 0 && from_server.write_all(&buf[..pass]).is_err() {
                            break;
                        }
                        left -= pass;
                        forwarded.fetch_add(pass, Ordering::Relaxed);
                    }
                    let _ = from_server.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        StallingRelay {
            addr,
            stop,
            forwarded,
        }
    }
}

impl Drop for StallingRelay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop so that it sees the stop.
        let _ = TcpStream::connect(self.addr);
    }
}

/// The connect timeout of the stall tests, and how long past it a call may
/// end on a loaded machine. The request timeout is far longer, so a call
/// that ends within this bound gave the handshakes up by the connect
/// timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(300);
const SLACK: Duration = Duration::from_secs(3);
const LONG_REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// A lock on `urls` (the first two stalled) fails within the bound, and the
/// stalled servers did not vote.
fn lock_fails_by_the_connect_timeout(pki: &TestPki, urls: &[String]) -> Client {
    let client = trusting(pki, urls)
        .connect_timeout(CONNECT_TIMEOUT)
        .request_timeout(LONG_REQUEST_TIMEOUT)
        .build()
        .unwrap();
    let start = Instant::now();
    let err = client.lock(b"res", TTL).unwrap_err();
    let elapsed = start.elapsed();
    let o = unavailable(&err);
    // A connection error (a stalled server is tried again), and the report
    // says why. (The third server's handshake began last: it cannot time
    // out before the stalled ones, and the call waits for both.)
    for stalled in [0, 1] {
        assert_eq!(
            o.get(ServerId(stalled)),
            Some(ServerOutcome::ConnectionError),
            "{err}"
        );
        let why = o
            .refusal(ServerId(stalled))
            .unwrap_or_else(|| panic!("no note for server {stalled}: {err}"));
        assert!(why.contains(NO_ANSWER), "{err}");
    }
    assert!(
        err.to_string()
            .contains("connection failed: no answer to the TLS handshake"),
        "{err}"
    );
    // It waited for the handshakes (no instant failure), and gave them up
    // long before the request timeout.
    assert!(
        elapsed >= CONNECT_TIMEOUT / 2 && elapsed < CONNECT_TIMEOUT + SLACK,
        "the lock took {elapsed:?} with a {CONNECT_TIMEOUT:?} connect timeout: {err}"
    );
    client
}

#[test]
fn a_server_stalled_before_its_handshake_answer_is_given_up_by_the_connect_timeout() {
    let pki = pki();
    let s = tls_servers(&pki, 3, TlsOptions::default());
    let proxies: Vec<FaultProxy> = s[..2]
        .iter()
        .map(|s| FaultProxy::start(s.addr()).unwrap())
        .collect();
    for p in &proxies {
        p.set(Fault::Hold);
    }
    let mut urls: Vec<String> = proxies
        .iter()
        .map(|p| format!("rediss://{}", p.addr()))
        .collect();
    urls.push(rediss(&s[2]));
    let client = lock_fails_by_the_connect_timeout(&pki, &urls);
    assert!(proxies.iter().all(|p| p.accepted() >= 1));

    // Once the link flows again, the same client reconnects and locks.
    for p in &proxies {
        p.set(Fault::Pass);
    }
    let lock = lock_eventually(&client);
    client.unlock(&lock).unwrap();
}

#[test]
fn a_server_stalled_mid_handshake_is_given_up_by_the_connect_timeout() {
    let pki = pki();
    let s = tls_servers(&pki, 3, TlsOptions::default());
    // The server's first flight (ServerHello, certificate, ...) is longer
    // than this: the client gets part of it, then nothing.
    let budget = 200;
    let relays: Vec<StallingRelay> = s[..2]
        .iter()
        .map(|s| StallingRelay::start(s.addr(), budget))
        .collect();
    let mut urls: Vec<String> = relays
        .iter()
        .map(|r| format!("rediss://{}", r.addr))
        .collect();
    urls.push(rediss(&s[2]));
    let _client = lock_fails_by_the_connect_timeout(&pki, &urls);
    // The servers did answer, and the client got part of each answer.
    assert!(
        relays
            .iter()
            .all(|r| r.forwarded.load(Ordering::Relaxed) >= budget)
    );
}

/// Locks `resource`, retrying while a reconnect may still be in its backoff
/// (up to 10 s).
fn lock_eventually(client: &Client) -> redlock_std::Lock {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match client.lock(b"res", TTL) {
            Ok(lock) => return lock,
            Err(e) if Instant::now() < deadline => {
                assert!(matches!(e, Error::Unavailable(_)), "{e}");
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("still failing after 10 s: {e}"),
        }
    }
}

#[test]
fn a_byte_at_a_time_link_still_completes_the_handshake() {
    let pki = pki();
    let s = tls_servers(&pki, 3, TlsOptions::default());
    let proxies: Vec<FaultProxy> = s
        .iter()
        .map(|s| FaultProxy::start(s.addr()).unwrap())
        .collect();
    // Every TLS record arrives in one-byte pieces, in both directions: a
    // handshake of a few kilobytes takes a second or so.
    for p in &proxies {
        p.set(Fault::Drip(Duration::from_micros(100)));
    }
    let urls: Vec<String> = proxies
        .iter()
        .map(|p| format!("rediss://{}", p.addr()))
        .collect();
    let timeout = Duration::from_secs(10);
    let client = trusting(&pki, &urls)
        .connect_timeout(timeout)
        .request_timeout(timeout)
        .build()
        .unwrap();
    let start = Instant::now();
    let lock = client
        .lock(b"res", Duration::from_secs(60))
        .expect("a slow link is still a link");
    let seen = client.inspect(b"res").unwrap();
    assert_eq!(seen.majority_holder(), Some(lock.token().as_bytes()));
    client.unlock(&lock).unwrap();
    // Within the timeouts (connect, then the lock's, inspect's and
    // unlock's requests), and more.
    assert!(start.elapsed() < 4 * timeout, "{:?}", start.elapsed());
    assert!(proxies.iter().all(|p| p.accepted() >= 1));
}

#[test]
fn after_a_reset_the_client_reconnects_over_tls() {
    let pki = pki();
    let s = tls_servers(&pki, 3, TlsOptions::default());
    let proxies: Vec<FaultProxy> = s
        .iter()
        .map(|s| FaultProxy::start(s.addr()).unwrap())
        .collect();
    let urls: Vec<String> = proxies
        .iter()
        .map(|p| format!("rediss://{}", p.addr()))
        .collect();
    let client = trusting(&pki, &urls).build().unwrap();
    let lock = client.lock(b"res", TTL).unwrap();
    client.unlock(&lock).unwrap();
    let accepted: Vec<usize> = proxies.iter().map(FaultProxy::accepted).collect();

    // Every connection is cut, and new ones too.
    for p in &proxies {
        p.set(Fault::Reset);
    }
    let err = client.lock(b"res", TTL).unwrap_err();
    let o = unavailable(&err);
    assert_eq!(o.count(ServerOutcome::Ok), 0, "{err}");

    for p in &proxies {
        p.set(Fault::Pass);
    }
    let lock = lock_eventually(&client);
    let seen = client.inspect(b"res").unwrap();
    assert_eq!(seen.majority_holder(), Some(lock.token().as_bytes()));
    client.unlock(&lock).unwrap();
    // Over new connections (new TLS sessions).
    for (p, before) in proxies.iter().zip(accepted) {
        assert!(p.accepted() > before);
    }
}

#[test]
fn tls_servers_that_restart_are_used_again() {
    let pki = pki();
    let mut s = tls_servers(&pki, 3, TlsOptions::default());
    let client = trusting(&pki, &rediss_all(&s)).build().unwrap();
    let lock = client.lock(b"res", TTL).unwrap();
    client.unlock(&lock).unwrap();
    for server in &mut s[..2] {
        server.kill().unwrap();
    }
    let err = client.lock(b"res", TTL).unwrap_err();
    assert!(matches!(err, Error::Unavailable(_)), "{err}");
    for server in &mut s[..2] {
        server.restart().expect("a TLS server restarts on its port");
        assert!(server.is_tls());
    }
    let lock = lock_eventually(&client);
    assert_eq!(client.unlock(&lock).unwrap().deleted(), 3);
}

/// A TLS application-data record (type 23, version 3.3, 32 bytes) whose
/// body is no ciphertext of the session: its authentication fails, so the
/// client's TLS layer fails after its handshake passed. (Fixed bytes: a
/// forged record passes AEAD authentication with a chance of 2^-128.)
const CORRUPT_RECORD: [u8; 37] = {
    let mut record = [0x5a; 37];
    record[0] = 0x17;
    record[1] = 0x03;
    record[2] = 0x03;
    record[3] = 0x00;
    record[4] = 0x20;
    record
};

/// What a [`CorruptingRelay`] does to the next bytes, once.
const PASS: u8 = 0;
/// Drops the next bytes the client sends (a request: the server never
/// gets it) and sends the client [`CORRUPT_RECORD`] instead of an answer.
const SWALLOW_REQUEST: u8 = 1;
/// Forwards the client's bytes, but sends the client [`CORRUPT_RECORD`]
/// instead of the next bytes the server sends (the request ran, its answer
/// is lost).
const CORRUPT_REPLY: u8 = 2;

/// A relay to `upstream` that passes everything both ways until armed;
/// then, once, it answers the client with [`CORRUPT_RECORD`] (see
/// [`SWALLOW_REQUEST`] and [`CORRUPT_REPLY`]) and forwards nothing more on
/// that connection (the client closes it). New connections pass again.
struct CorruptingRelay {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    armed: Arc<AtomicU8>,
    /// Corrupt records sent so far.
    fired: Arc<AtomicUsize>,
    /// Connections accepted so far.
    accepted: Arc<AtomicUsize>,
}

impl CorruptingRelay {
    fn start(upstream: SocketAddr) -> CorruptingRelay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let relay = CorruptingRelay {
            addr,
            stop: Arc::new(AtomicBool::new(false)),
            armed: Arc::new(AtomicU8::new(PASS)),
            fired: Arc::new(AtomicUsize::new(0)),
            accepted: Arc::new(AtomicUsize::new(0)),
        };
        let (stop, armed, fired, accepted) = (
            relay.stop.clone(),
            relay.armed.clone(),
            relay.fired.clone(),
            relay.accepted.clone(),
        );
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let (Ok(client), Ok(server)) = (client, TcpStream::connect(upstream)) else {
                    continue;
                };
                accepted.fetch_add(1, Ordering::Relaxed);
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                // Set once this connection's corrupt record went out: from
                // then on nothing is forwarded either way.
                let cut = Arc::new(AtomicBool::new(false));
                for (from, to, mode) in [
                    (client.try_clone(), server.try_clone(), SWALLOW_REQUEST),
                    (server.try_clone(), client.try_clone(), CORRUPT_REPLY),
                ] {
                    let (Ok(from), Ok(to), Ok(to_client)) = (from, to, client.try_clone()) else {
                        continue;
                    };
                    let (cut, armed, fired) = (cut.clone(), armed.clone(), fired.clone());
                    std::thread::spawn(move || {
                        relay_one_way(from, to, to_client, mode, &cut, &armed, &fired);
                    });
                }
            }
        });
        relay
    }

    /// The next bytes of `mode`'s direction are replaced (once).
    fn arm(&self, mode: u8) {
        self.armed.store(mode, Ordering::Relaxed);
    }

    fn fired(&self) -> usize {
        self.fired.load(Ordering::Relaxed)
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::Relaxed)
    }
}

/// Copies `from` to `to` until either side closes; when the relay is armed
/// with `mode` (this direction's), sends [`CORRUPT_RECORD`] to the client
/// instead of the bytes read, and cuts the connection.
fn relay_one_way(
    mut from: TcpStream,
    mut to: TcpStream,
    mut to_client: TcpStream,
    mode: u8,
    cut: &AtomicBool,
    armed: &AtomicU8,
    fired: &AtomicUsize,
) {
    let mut buf = [0u8; 16 * 1024];
    while let Ok(n @ 1..) = from.read(&mut buf) {
        if cut.load(Ordering::Relaxed) {
            continue;
        }
        if armed
            .compare_exchange(mode, PASS, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            cut.store(true, Ordering::Relaxed);
            fired.fetch_add(1, Ordering::Relaxed);
            let _ = to_client.write_all(&CORRUPT_RECORD);
            continue;
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
    let _ = from.shutdown(std::net::Shutdown::Both);
}

impl Drop for CorruptingRelay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop so that it sees the stop.
        let _ = TcpStream::connect(self.addr);
    }
}

/// Locks `res` with `client` and checks with its own connections (which
/// see its requests in order) that every server holds the key: the
/// connections are idle after it.
fn lock_on_all(client: &Client, n: usize) -> redlock_std::Lock {
    let lock = client.lock(b"res", TTL).expect("lock over TLS");
    let own = client.inspect(b"res").unwrap();
    let holding = own
        .entries()
        .iter()
        .filter(|h| h.outcome == ServerOutcome::Ok && h.holder_str() == Some(lock.token()))
        .count();
    assert_eq!(holding, n, "{own:?}");
    lock
}

/// Asserts that no server holds `res`, as `witness` (a client with its own
/// connections) sees it.
fn assert_released_everywhere(witness: &Client, n: usize) {
    let seen = witness.inspect(b"res").unwrap();
    assert_eq!(seen.entries().len(), n);
    for h in seen.entries() {
        assert_eq!(h.outcome, ServerOutcome::Ok, "{seen:?}");
        assert_eq!(h.holder, None, "{seen:?}");
    }
}

#[test]
fn a_tls_error_after_the_handshake_is_a_connection_error_and_a_release_is_sent_again() {
    let pki = pki();
    let s = tls_servers(&pki, 3, TlsOptions::default());
    let relays: Vec<CorruptingRelay> = s[..2]
        .iter()
        .map(|s| CorruptingRelay::start(s.addr()))
        .collect();
    let mut urls: Vec<String> = relays
        .iter()
        .map(|r| format!("rediss://{}", r.addr))
        .collect();
    urls.push(rediss(&s[2]));
    let client = trusting(&pki, &urls).build().unwrap();
    // Straight to the servers.
    let witness = trusting(&pki, &rediss_all(&s)).build().unwrap();
    let relay = &relays[0];

    // The release never reaches server 0: its connection breaks with a
    // TLS error instead. It is sent again on a new connection (TLS again)
    // and deletes the key there too, before unlock returns; a server
    // refused for it would keep the key for its whole ttl.
    let lock = lock_on_all(&client, 3);
    assert_eq!(relay.accepted(), 1);
    relay.arm(SWALLOW_REQUEST);
    let released = client.unlock(&lock).expect("a majority confirms");
    assert_eq!(relay.fired(), 1, "the release was swallowed");
    assert_eq!(
        released.report.get(ServerId(0)),
        Some(ServerOutcome::Ok),
        "the release was sent again on a new connection: {:?}",
        released.report
    );
    assert_eq!(released.deleted(), 3, "{:?}", released.report);
    assert_eq!(relay.accepted(), 2, "one new connection");
    assert_released_everywhere(&witness, 3);

    // The release ran, its answer is lost to a TLS error: sent again, it
    // finds nothing of ours (not a refusal either).
    let lock = lock_on_all(&client, 3);
    relay.arm(CORRUPT_REPLY);
    let released = client.unlock(&lock).expect("a majority confirms");
    assert_eq!(relay.fired(), 2, "the answer was corrupted");
    assert_eq!(
        released.report.get(ServerId(0)),
        Some(ServerOutcome::NotHeld),
        "{:?}",
        released.report
    );
    assert!(released.complete(), "{:?}", released.report);
    assert_eq!(relay.accepted(), 3, "one new connection");
    assert_released_everywhere(&witness, 3);

    // A call that fails on such errors says what broke each connection,
    // and the servers are not refused: the next release reaches them.
    let mut lock = lock_on_all(&client, 3);
    for r in &relays {
        r.arm(CORRUPT_REPLY);
    }
    let err = client
        .extend(&mut lock, Duration::from_secs(120))
        .unwrap_err();
    let o = err.outcomes().unwrap_or_else(|| panic!("no report: {err}"));
    for server in [0, 1] {
        assert_eq!(
            o.get(ServerId(server)),
            Some(ServerOutcome::ConnectionError),
            "{err}"
        );
        let note = o
            .refusal(ServerId(server))
            .unwrap_or_else(|| panic!("no note for server {server}: {err}"));
        assert!(note.starts_with(TLS_FAILED), "{err}");
    }
    assert!(
        err.to_string()
            .contains(&format!("connection failed: {TLS_FAILED}")),
        "{err}"
    );
    assert_eq!(relays[1].fired(), 1);
    assert_eq!(client.unlock(&lock).unwrap().deleted(), 3);
    assert_released_everywhere(&witness, 3);
}

#[test]
fn a_closed_port_is_a_connection_error_without_a_tls_note() {
    let pki = pki();
    let good = RedisServer::start_tls(&pki, TlsOptions::default()).unwrap();
    // Nothing listens there: the TCP connect fails, no handshake begins.
    let closed = [
        format!("rediss://127.0.0.1:{}", redlock_tests::free_port().unwrap()),
        format!("redis://127.0.0.1:{}", redlock_tests::free_port().unwrap()),
    ];
    let mut urls = closed.to_vec();
    urls.push(rediss(&good));
    let err = trusting(&pki, &urls)
        .build()
        .unwrap()
        .lock(b"res", TTL)
        .unwrap_err();
    let o = unavailable(&err);
    for server in [0, 1] {
        assert_eq!(
            o.get(ServerId(server)),
            Some(ServerOutcome::ConnectionError),
            "{err}"
        );
        assert_eq!(o.refusal(ServerId(server)), None, "{err}");
        assert_eq!(o.describe(ServerId(server)), "connection failed", "{err}");
    }
    let shown = err.to_string();
    assert!(!shown.contains(NO_ANSWER), "{shown}");
    assert!(!shown.contains(TLS_FAILED), "{shown}");
}

// The builder reads the files once, and says which one is wrong.

/// The text of a [`Error::TlsSettings`] from building a TLS client with `builder`.
fn tls_error(builder: Builder) -> String {
    match builder.servers(["rediss://127.0.0.1:6379"]).build() {
        Err(Error::TlsSettings(text)) => text,
        Err(other) => panic!("expected Error::TlsSettings, got {other}"),
        Ok(_) => panic!("expected Error::TlsSettings, the client was built"),
    }
}

/// Asserts that nothing of the key file at `key` shows in `text`: neither
/// its PEM lines nor its content whole.
fn assert_no_key_material(text: &str, key: &std::path::Path) {
    let pem = std::fs::read_to_string(key).unwrap();
    for line in pem
        .lines()
        .filter(|l| !l.starts_with("-----") && l.len() > 8)
    {
        assert!(!text.contains(line), "key material in {text:?}");
    }
    assert!(!text.contains(pem.trim()), "key material in {text:?}");
}

#[test]
fn the_builder_refuses_unusable_ca_files_and_names_them() {
    let pki = pki();
    let dir = pki.dir();

    let missing = dir.join("missing-ca.pem");
    let text = tls_error(Client::builder().tls_ca_file(&missing));
    assert!(text.contains(&missing.display().to_string()), "{text}");

    let garbage = dir.join("garbage.pem");
    std::fs::write(&garbage, "this is not a certificate\n").unwrap();
    let text = tls_error(Client::builder().tls_ca_file(&garbage));
    assert!(text.contains(&garbage.display().to_string()), "{text}");

    let broken = dir.join("broken.pem");
    std::fs::write(
        &broken,
        "-----BEGIN CERTIFICATE-----\n!!!! not base64 !!!!\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let text = tls_error(Client::builder().tls_ca_file(&broken));
    assert!(text.contains(&broken.display().to_string()), "{text}");

    // A key given where the CA certificate goes: named, never printed.
    let key = pki.server(ServerCert::Good).key;
    let text = tls_error(Client::builder().tls_ca_file(&key));
    assert!(text.contains(&key.display().to_string()), "{text}");
    assert_no_key_material(&text, &key);

    // The error's sentence says it too.
    let err = Client::builder()
        .servers(["rediss://127.0.0.1:6379"])
        .tls_ca_file(&missing)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("missing-ca.pem"), "{err}");
}

#[test]
fn the_builder_refuses_unusable_client_keys_without_printing_them() {
    let pki = pki();
    let dir = pki.dir();
    let client = pki.client();
    let with = |cert: &std::path::Path, key: &std::path::Path| {
        Client::builder()
            .tls_ca_file(pki.ca())
            .tls_client_cert(cert, key)
    };

    // A key that belongs to another certificate.
    let other_key = pki.server(ServerCert::Good).key;
    let text = tls_error(with(&client.cert, &other_key));
    assert!(
        text.contains(&client.cert.display().to_string())
            || text.contains(&other_key.display().to_string()),
        "{text}"
    );
    assert_no_key_material(&text, &other_key);
    assert_no_key_material(&text, &client.key);

    // A missing key, and a missing certificate.
    let missing = dir.join("missing.key");
    let text = tls_error(with(&client.cert, &missing));
    assert!(text.contains(&missing.display().to_string()), "{text}");
    let missing_cert = dir.join("missing-client.pem");
    let text = tls_error(with(&missing_cert, &client.key));
    assert!(text.contains(&missing_cert.display().to_string()), "{text}");
    assert_no_key_material(&text, &client.key);

    // Key files whose content is not a key: their content never shows.
    let secret = "TOP-SECRET-KEY-MATERIAL-0123456789";
    let raw = dir.join("raw.key");
    std::fs::write(&raw, format!("{secret}\n")).unwrap();
    let text = tls_error(with(&client.cert, &raw));
    assert!(text.contains(&raw.display().to_string()), "{text}");
    assert!(!text.contains(secret), "{text}");
    let bogus = dir.join("bogus.key");
    // Valid base64 of the secret, in a PEM private key block.
    let encoded = "VE9QLVNFQ1JFVC1LRVktTUFURVJJQUwtMDEyMzQ1Njc4OQ==";
    std::fs::write(
        &bogus,
        format!("-----BEGIN PRIVATE KEY-----\n{encoded}\n-----END PRIVATE KEY-----\n"),
    )
    .unwrap();
    let err = with(&client.cert, &bogus)
        .servers(["rediss://127.0.0.1:6379"])
        .build()
        .unwrap_err();
    assert!(matches!(err, Error::TlsSettings(_)), "{err}");
    let shown = format!("{err} {err:?}");
    assert!(
        !shown.contains(secret) && !shown.contains(encoded),
        "{shown}"
    );
}

#[test]
fn the_builder_refuses_a_server_name_that_is_not_one() {
    let pki = pki();
    let text = tls_error(
        Client::builder()
            .tls_ca_file(pki.ca())
            .tls_server_name("not a host name"),
    );
    assert!(text.contains("not a host name"), "{text}");
}

#[test]
fn tls_options_with_plain_servers_only_are_unused() {
    let pki = pki();
    let s: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
    let urls: Vec<String> = s.iter().map(|s| format!("redis://{}", s.addr())).collect();
    let client = pki.client();
    let c = trusting(&pki, &urls)
        .tls_client_cert(&client.cert, &client.key)
        .tls_server_name(WRONG_NAME)
        .build()
        .expect("TLS options do not hinder plain servers");
    let lock = c.lock(b"res", TTL).unwrap();
    let _ = c.inspect(b"res").unwrap(); // after every SET
    for server in &s {
        assert_eq!(
            server.conn().unwrap().request(&[b"GET", b"res"]).unwrap(),
            redlock_tests::Value::Bulk(lock.token().as_bytes().to_vec())
        );
    }
    assert_eq!(c.unlock(&lock).unwrap().deleted(), 3);
}
