//! TLS (`rediss://`) links that fail, against real TLS-only `redis-server`
//! processes: handshakes stalled before and mid-flight (given up by the
//! connect timeout, and the report says so), a link that drips a byte at a
//! time, resets and restarts (the client reconnects over TLS), a TLS error
//! after the handshake (a connection error: a release is sent again), and a
//! closed port (a connection error with no TLS note). The operations over
//! TLS, mutual TLS, certificate failures and the builder: `tls.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test driver

mod tls_common;

use tls_common::*;

/// What the relays below share: a listener on a free loopback port whose
/// thread connects each client it accepts to `upstream` and hands both
/// connections to `relay`; it stops accepting when this is dropped.
struct RelayListener {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl RelayListener {
    fn start(
        upstream: SocketAddr,
        mut relay: impl FnMut(TcpStream, TcpStream) + Send + 'static,
    ) -> RelayListener {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if stop2.load(Ordering::Relaxed) {
                    break;
                }
                let (Ok(client), Ok(server)) = (client, TcpStream::connect(upstream)) else {
                    continue;
                };
                relay(client, server);
            }
        });
        RelayListener { addr, stop }
    }
}

impl Drop for RelayListener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop so that it sees the stop.
        let _ = TcpStream::connect(self.addr);
    }
}

/// A relay to `upstream` that forwards all the client sends but only the
/// first `budget` bytes the server sends on each connection, then nothing
/// (the connection stays open): a server that stops mid-handshake, after
/// part of its first flight.
struct StallingRelay {
    listener: RelayListener,
    /// Server bytes forwarded so far, all connections together.
    forwarded: Arc<AtomicUsize>,
}

impl StallingRelay {
    fn start(upstream: SocketAddr, budget: usize) -> StallingRelay {
        let forwarded = Arc::new(AtomicUsize::new(0));
        let forwarded2 = forwarded.clone();
        let listener = RelayListener::start(upstream, move |mut client, mut server| {
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
        });
        StallingRelay {
            listener,
            forwarded,
        }
    }
}

/// The connect timeout of the stall tests, and how long past it a call may
/// end on a loaded machine. The request timeout is far longer, so a call
/// that ends within this bound gave the handshakes up by the connect
/// timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(300);
const SLACK: Duration = Duration::from_secs(3);

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
    assert_connection_errors_noted(&err, o, &[0, 1], |why| {
        assert!(why.contains(NO_ANSWER), "{err}");
    });
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
    let proxies = proxies_to(&s[..2]);
    for p in &proxies {
        p.set(Fault::Hold);
    }
    let mut urls = rediss_to(proxies.iter().map(FaultProxy::addr));
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
    let mut urls = rediss_to(relays.iter().map(|r| r.listener.addr));
    urls.push(rediss(&s[2]));
    let _client = lock_fails_by_the_connect_timeout(&pki, &urls);
    // The servers did answer, and the client got part of each answer.
    assert!(
        relays
            .iter()
            .all(|r| r.forwarded.load(Ordering::Relaxed) >= budget)
    );
}

/// A [`FaultProxy`] in front of each of `servers`, passing everything.
fn proxies_to(servers: &[RedisServer]) -> Vec<FaultProxy> {
    servers
        .iter()
        .map(|s| FaultProxy::start(s.addr()).unwrap())
        .collect()
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
    let proxies = proxies_to(&s);
    // Every TLS record arrives in one-byte pieces, in both directions: a
    // handshake of a few kilobytes takes a second or so.
    for p in &proxies {
        p.set(Fault::Drip(Duration::from_micros(100)));
    }
    let urls = rediss_to(proxies.iter().map(FaultProxy::addr));
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
    let proxies = proxies_to(&s);
    let urls = rediss_to(proxies.iter().map(FaultProxy::addr));
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
    listener: RelayListener,
    armed: Arc<AtomicU8>,
    /// Corrupt records sent so far.
    fired: Arc<AtomicUsize>,
    /// Connections accepted so far.
    accepted: Arc<AtomicUsize>,
}

impl CorruptingRelay {
    fn start(upstream: SocketAddr) -> CorruptingRelay {
        let armed = Arc::new(AtomicU8::new(PASS));
        let fired = Arc::new(AtomicUsize::new(0));
        let accepted = Arc::new(AtomicUsize::new(0));
        let (armed2, fired2, accepted2) = (armed.clone(), fired.clone(), accepted.clone());
        let listener = RelayListener::start(upstream, move |client, server| {
            accepted2.fetch_add(1, Ordering::Relaxed);
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
                let (cut, armed, fired) = (cut.clone(), armed2.clone(), fired2.clone());
                std::thread::spawn(move || {
                    relay_one_way(from, to, to_client, mode, &cut, &armed, &fired);
                });
            }
        });
        CorruptingRelay {
            listener,
            armed,
            fired,
            accepted,
        }
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
    let mut urls = rediss_to(relays.iter().map(|r| r.listener.addr));
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
    assert_connection_errors_noted(&err, o, &[0, 1], |note| {
        assert!(note.starts_with(TLS_FAILED), "{err}");
    });
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
    let err = lock_error(trusting(&pki, &urls));
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
