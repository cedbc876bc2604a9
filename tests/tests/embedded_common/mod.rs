//! The embedded client's tests, run on the blocking client (`embedded.rs`)
//! and on the async one (`embedded_async.rs`): each gives `Embedded<N>`
//! and `with_creds`.

use core::net::SocketAddr;
use core::sync::atomic::AtomicBool;
use core::time::Duration as StdDuration;
use std::io::Write;
use std::net::TcpStream;
use std::thread;

use redlock_core::handshake::{SetupError, Step};
use redlock_core::redlock_resp::{ErrorKind, Status, parse_reply};
use redlock_embedded::{
    Buffers, Client, Config, Credentials, Duration, Error, Lock, ServerId, ServerOutcome,
};
use redlock_tests::embedded::{OsRng, StdClock, StdNet};
use redlock_tests::fake::{CASES, Fake, unsolicited};
use redlock_tests::proxy::{Fault, FaultProxy};
use redlock_tests::{RedisServer, Value, fake_answer};

use super::{Embedded, with_creds};

/// A client's buffers, for the rest of the test process.
pub(crate) fn buffers<const N: usize>() -> &'static mut Buffers<N> {
    Box::leak(Box::default())
}

fn config() -> Config {
    let mut config = Config::DEFAULT;
    config.request_timeout = Some(Duration::from_millis(100));
    config
}

fn client<const N: usize>(addrs: [SocketAddr; N], config: Config) -> Embedded<N> {
    with_creds(addrs, config, [Credentials::NONE; N])
}
fn addrs<const N: usize>(servers: &[RedisServer]) -> [SocketAddr; N] {
    core::array::from_fn(|i| servers[i].addr())
}

fn start(n: usize) -> Vec<RedisServer> {
    (0..n).map(|_| RedisServer::start().unwrap()).collect()
}

fn get(server: &RedisServer, key: &[u8]) -> Value {
    server.conn().unwrap().request(&[b"GET", key]).unwrap()
}

fn holders(servers: &[RedisServer], key: &[u8], token: &[u8]) -> usize {
    servers
        .iter()
        .filter(|s| get(s, key) == Value::Bulk(token.to_vec()))
        .count()
}

const TTL: Duration = Duration::from_secs(10);

#[test]
fn lock_inspect_extend_and_unlock() {
    let servers = start(3);
    let mut c = client::<3>(addrs(&servers), config());
    assert_eq!(c.connect(), 3);
    let mut lock = c.lock(b"emb-basic", TTL).unwrap();
    let token = lock.token().as_bytes().to_vec();
    // It decides at a majority; the third vote may still be on its way.
    assert!(holders(&servers, b"emb-basic", &token) >= 2);
    assert!(lock.validity() <= TTL && lock.validity() > Duration::from_secs(9));
    assert!(lock.report().count(ServerOutcome::Ok) >= 2);

    let seen = c.inspect(b"emb-basic").unwrap();
    assert_eq!(seen.majority_holder(), Some(&token[..]));

    c.extend(&mut lock, Duration::from_secs(60)).unwrap();
    assert_eq!(lock.extensions(), 1);
    assert!(lock.validity() > Duration::from_secs(59));
    for s in &servers {
        let pttl = s.conn().unwrap().request(&[b"PTTL", b"emb-basic"]).unwrap();
        let Value::Integer(ms) = pttl else {
            panic!("{pttl:?}")
        };
        assert!(ms > 10_000, "extended on every server: {ms}");
    }

    let released = c.unlock(&lock).unwrap();
    assert_eq!(released.deleted(), 3);
    assert_eq!(holders(&servers, b"emb-basic", &token), 0);
    // Extending a released lock: lost, and nothing is re-created.
    let err = c.extend(&mut lock, TTL).unwrap_err();
    assert!(matches!(err, Error::Lost(_)), "{err}");
    assert!(servers.iter().all(|s| get(s, b"emb-basic") == Value::Nil));
}

#[test]
fn fenced_locks_get_increasing_fences() {
    let servers = start(3);
    let mut config = config();
    config.fencing = true;
    let mut c = client::<3>(addrs(&servers), config);
    let first = c.lock(b"emb-fence", TTL).unwrap();
    let f1 = first.fence().expect("a fenced lock has a fence");
    c.unlock(&first).unwrap();
    let second = c.lock(b"emb-fence", TTL).unwrap();
    let f2 = second.fence().unwrap();
    assert!(f2 > f1, "{f2} > {f1}");
    let mut counter = b"emb-fence".to_vec();
    counter.extend_from_slice(redlock_core::FENCE_SUFFIX);
    let at_f2 = servers
        .iter()
        .filter(|s| get(s, &counter) == Value::Bulk(f2.to_string().into_bytes()))
        .count();
    assert!(at_f2 >= 2, "the fence is on a majority: {at_f2}");
    c.unlock(&second).unwrap();
}

#[test]
fn the_std_client_and_the_embedded_client_exclude_each_other() {
    let servers = start(3);
    let urls: Vec<String> = servers.iter().map(|s| s.addr().to_string()).collect();
    let std_client = redlock_std::Client::builder()
        .servers(&urls)
        .request_timeout(StdDuration::from_millis(100))
        .build()
        .unwrap();
    let mut c = client::<3>(addrs(&servers), config());

    let mine = c.lock(b"emb-shared", TTL).unwrap();
    let err = std_client
        .try_lock(b"emb-shared", StdDuration::from_secs(10))
        .unwrap_err();
    assert!(matches!(err, redlock_std::Error::Conflict(_)), "{err}");
    c.unlock(&mine).unwrap();

    let theirs = std_client
        .try_lock(b"emb-shared", StdDuration::from_secs(10))
        .unwrap();
    let err = c.try_lock(b"emb-shared", TTL).unwrap_err();
    let Error::Conflict(report) = err else {
        panic!("{err}")
    };
    assert!(report.count(ServerOutcome::Held) >= 2, "{report:?}");
    std_client.unlock(&theirs).unwrap();

    // Both at once on a non-atomic register: no update is lost.
    const ROUNDS: usize = 25;
    let counter = servers[0].addr();
    let bump = move || {
        let mut conn = redlock_tests::Conn::connect(counter).unwrap();
        let n = match conn.request(&[b"GET", b"emb-counter"]).unwrap() {
            Value::Bulk(b) => String::from_utf8(b).unwrap().parse::<u64>().unwrap(),
            _ => 0,
        };
        thread::sleep(StdDuration::from_millis(1));
        let next = (n + 1).to_string();
        conn.request(&[b"SET", b"emb-counter", next.as_bytes()])
            .unwrap();
    };
    let other = thread::spawn(move || {
        for _ in 0..ROUNDS {
            let deadline = std::time::Instant::now() + StdDuration::from_secs(20);
            let lock = std_client
                .lock_until(b"emb-mutex", StdDuration::from_secs(5), deadline)
                .unwrap();
            bump();
            std_client.unlock(&lock).unwrap();
        }
    });
    for _ in 0..ROUNDS {
        let deadline = c.now().saturating_add(Duration::from_secs(20));
        let lock = c
            .lock_until(b"emb-mutex", Duration::from_secs(5), deadline)
            .unwrap();
        bump();
        c.unlock(&lock).unwrap();
    }
    other.join().unwrap();
    assert_eq!(
        get(&servers[0], b"emb-counter"),
        Value::Bulk((2 * ROUNDS).to_string().into_bytes())
    );
}

#[test]
fn a_minority_down_still_locks_and_a_majority_down_does_not() {
    let mut servers = start(5);
    let mut c = client::<5>(addrs(&servers), config());
    assert_eq!(c.connect(), 5);
    servers[1].kill().unwrap();
    servers[3].kill().unwrap();
    let lock = c.lock(b"emb-minority", TTL).unwrap();
    for down in [1, 3] {
        let outcome = lock.report().get(ServerId(down)).unwrap();
        assert!(
            matches!(
                outcome,
                ServerOutcome::ConnectionError | ServerOutcome::Pending
            ),
            "server {down}: {outcome:?}"
        );
    }
    c.unlock(&lock).unwrap();

    servers[4].kill().unwrap();
    let err = c.try_lock(b"emb-minority", TTL).unwrap_err();
    assert!(matches!(err, Error::Unavailable(_)), "{err}");
    // The failed attempt released what it took (A5).
    for s in [0, 2] {
        assert_eq!(get(&servers[s], b"emb-minority"), Value::Nil);
    }

    // Back up: the client reconnects at a later operation.
    for s in [1, 3, 4] {
        servers[s].restart().unwrap();
    }
    let deadline = std::time::Instant::now() + StdDuration::from_secs(10);
    let lock = loop {
        match c.try_lock(b"emb-minority", TTL) {
            Ok(lock) if lock.report().count(ServerOutcome::Ok) >= 3 => break lock,
            Ok(lock) => {
                c.unlock(&lock).unwrap();
            }
            Err(e) => assert!(std::time::Instant::now() < deadline, "{e}"),
        }
        thread::sleep(StdDuration::from_millis(50));
    };
    c.unlock(&lock).unwrap();
}

/// Answers the handshake like a good server, then nothing: its lock
/// requests time out.
fn handshake_then_silent(c: &mut TcpStream, data: &[u8], _: &AtomicBool) {
    let mut rest = data;
    while let Ok(Status::Complete((_, used))) = parse_reply(rest) {
        let command = &rest[..used];
        let has = |w: &[u8]| command.windows(w.len()).any(|x| x == w);
        if has(b"SCRIPT") || has(b"INFO") {
            let _ = c.write_all(&fake_answer(command, 7));
        }
        rest = &rest[used..];
    }
}

#[test]
fn a_server_that_never_answers_costs_a_timeout_not_the_lock() {
    let servers = start(2);
    // Silent from the first byte: its handshake never ends.
    let silent = Fake::start(redlock_tests::fake::silent);
    let silent_addr: SocketAddr = silent.addr.parse().unwrap();
    let mut c = client::<3>(
        [servers[0].addr(), silent_addr, servers[1].addr()],
        config(),
    );
    assert_eq!(c.connect(), 2);
    for _ in 0..3 {
        let lock = c.lock(b"emb-silent", TTL).unwrap();
        let outcome = lock.report().get(ServerId(1)).unwrap();
        assert!(
            matches!(
                outcome,
                ServerOutcome::ConnectionError | ServerOutcome::Pending
            ),
            "{outcome:?}"
        );
        c.unlock(&lock).unwrap();
    }

    // Through the handshake, then silent: each request times out.
    let mute = Fake::start(handshake_then_silent);
    let mute_addr: SocketAddr = mute.addr.parse().unwrap();
    let mut c = client::<3>([servers[0].addr(), mute_addr, servers[1].addr()], config());
    assert_eq!(c.connect(), 3);
    let released = {
        let lock = c.lock(b"emb-mute", TTL).unwrap();
        c.unlock(&lock).unwrap()
    };
    assert_eq!(
        released.report.get(ServerId(1)),
        Some(ServerOutcome::TimedOut),
        "{released:?}"
    );
    // With the silent one needed for a majority, the lock fails.
    servers[0]
        .conn()
        .unwrap()
        .request(&[b"SET", b"emb-mute2", b"x"])
        .unwrap();
    let err = c.try_lock(b"emb-mute2", TTL).unwrap_err();
    assert!(
        matches!(err, Error::Unavailable(_) | Error::Conflict(_)),
        "{err}"
    );
}

#[test]
fn hostile_servers_fail_alone() {
    let real = start(4);
    for (name, behave) in CASES {
        let fake = Fake::start(behave);
        let fake_addr: SocketAddr = fake.addr.parse().unwrap();
        let addrs = [
            real[0].addr(),
            real[1].addr(),
            fake_addr,
            real[2].addr(),
            real[3].addr(),
        ];
        let mut c = client::<5>(addrs, config());
        for round in 0..3 {
            let lock = c
                .lock(b"emb-hostile", TTL)
                .unwrap_or_else(|e| panic!("{name} round {round}: {e}"));
            let outcome = lock.report().get(ServerId(2)).unwrap();
            assert!(
                matches!(
                    outcome,
                    ServerOutcome::ConnectionError
                        | ServerOutcome::TimedOut
                        | ServerOutcome::Pending
                        | ServerOutcome::Setup(_)
                ),
                "{name}: {outcome:?}"
            );
            assert!(lock.report().count(ServerOutcome::Ok) >= 3, "{name}");
            c.unlock(&lock).unwrap();
        }
        // With bad servers in the majority's way the lock fails, typed.
        let twin = Fake::start(behave);
        let addrs = [fake_addr, real[0].addr(), twin.addr.parse().unwrap()];
        let mut c = client::<3>(addrs, config());
        let err = c.try_lock(b"emb-hostile2", TTL).unwrap_err();
        assert!(matches!(err, Error::Unavailable(_)), "{name}: {err}");
    }

    // A reply more than was asked: the connection is dropped, and the
    // server is used again after a reconnect.
    let fake = Fake::start(unsolicited);
    let addrs = [real[0].addr(), fake.addr.parse().unwrap(), real[1].addr()];
    let mut c = client::<3>(addrs, config());
    for _ in 0..3 {
        let lock = c.lock(b"emb-unsolicited", TTL).unwrap();
        c.unlock(&lock).unwrap();
        thread::sleep(StdDuration::from_millis(30));
    }
    assert!(
        fake.accepted.load(core::sync::atomic::Ordering::Relaxed) >= 2,
        "reconnected after the unsolicited reply"
    );
}

fn setup_error(lock_or_err: &Result<Lock<'_>, Error>, server: u8) -> Option<SetupError> {
    let report = match lock_or_err {
        Ok(lock) => *lock.report(),
        Err(e) => *e.report().unwrap(),
    };
    match report.get(ServerId(server)) {
        Some(ServerOutcome::Setup(e)) => Some(e),
        _ => None,
    }
}

#[test]
fn the_handshake_fails_closed() {
    let servers = start(2);
    let guarded = RedisServer::start_with(&["--requirepass", "right"]).unwrap();
    let addrs = [servers[0].addr(), guarded.addr(), servers[1].addr()];
    let wrong = Credentials {
        password: Some(b"wrong"),
        ..Credentials::NONE
    };
    let mut c = with_creds(
        addrs,
        config(),
        [Credentials::NONE, wrong, Credentials::NONE],
    );
    let got = c.lock(b"emb-auth", TTL);
    assert!(
        matches!(
            setup_error(&got, 1),
            Some(SetupError::Refused {
                step: Step::Auth,
                ..
            })
        ),
        "{got:?}"
    );
    if let Ok(lock) = got {
        c.unlock(&lock).unwrap();
    }
    // Nothing was written to the refusing server under the wrong login.
    let right = Credentials {
        password: Some(b"right"),
        ..Credentials::NONE
    };
    let mut c = with_creds(
        addrs,
        config(),
        [Credentials::NONE, right, Credentials::NONE],
    );
    let lock = c.lock(b"emb-auth", TTL).unwrap();
    let outcome = lock.report().get(ServerId(1)).unwrap();
    assert!(
        matches!(outcome, ServerOutcome::Ok | ServerOutcome::Pending),
        "{outcome:?}"
    );
    c.unlock(&lock).unwrap();

    // A database out of range is a refusal, never database 0. The other
    // two hold the key already: a lock through db 0 would not count anyway,
    // so the vote of server 1 must be a setup error.
    let db99 = Credentials {
        db: 99,
        ..Credentials::NONE
    };
    let mut c = with_creds(
        [servers[0].addr(), servers[1].addr(), guarded.addr()],
        config(),
        [
            Credentials::NONE,
            Credentials::NONE,
            Credentials {
                password: Some(b"right"),
                ..db99
            },
        ],
    );
    let got = c.lock(b"emb-db", TTL);
    assert!(
        matches!(
            setup_error(&got, 2),
            Some(SetupError::Refused {
                step: Step::Select,
                kind: ErrorKind::Err
            })
        ),
        "{got:?}"
    );
    let guarded_conn = || {
        let mut conn = guarded.conn().unwrap();
        conn.request(&[b"AUTH", b"right"]).unwrap();
        conn
    };
    assert_eq!(
        guarded_conn().request(&[b"GET", b"emb-db"]).unwrap(),
        Value::Nil
    );
    if let Ok(lock) = got {
        c.unlock(&lock).unwrap();
    }

    // One server behind two entries votes once: the entry whose handshake
    // passes second is refused (the later one, unless the async client's
    // connector got its connection up first: a race of the two connects;
    // either way one of them, never both, votes).
    let twice = [servers[0].addr(), servers[1].addr(), servers[0].addr()];
    let mut c = client::<3>(twice, config());
    let got = c.lock(b"emb-twice", TTL);
    let refused = [
        setup_error(&got, 2) == Some(SetupError::SameServer(ServerId(0))),
        setup_error(&got, 0) == Some(SetupError::SameServer(ServerId(2))),
    ];
    assert!(refused[0] != refused[1], "exactly one refused: {got:?}");
    if let Ok(lock) = got {
        c.unlock(&lock).unwrap();
    }
}

#[test]
fn the_restart_guard_does_not_count_fresh_servers() {
    let servers = start(3);
    let mut config = config();
    config.restart_guard = Some(Duration::from_secs(3600));
    let mut c = client::<3>(addrs(&servers), config);
    let err = c.try_lock(b"emb-guard", TTL).unwrap_err();
    let Error::Unavailable(report) = err else {
        panic!("{err}")
    };
    assert!(report.count(ServerOutcome::Restarted) >= 2, "{report:?}");
    assert!(servers.iter().all(|s| get(s, b"emb-guard") == Value::Nil));
}

#[test]
fn bad_arguments_are_errors() {
    let servers = start(1);
    let mut c = client::<1>(addrs(&servers), config());
    let long = vec![b'r'; c.max_resource_len() + 1];
    assert!(matches!(
        c.lock(&long, TTL),
        Err(Error::ResourceTooLong { .. })
    ));
    assert!(matches!(
        c.lock(b"emb-args", Duration::ZERO),
        Err(Error::Argument(_))
    ));
    let max = vec![b'r'; c.max_resource_len()];
    let mut config = config();
    config.fencing = true;
    let mut fenced = client::<1>(addrs(&servers), config);
    let lock = fenced.lock(&max, TTL).unwrap();
    fenced.unlock(&lock).unwrap();
    assert!(matches!(
        c.unlock_token(b"emb-args", &[b't'; 65]),
        Err(Error::Argument(_))
    ));
    let built = Client::new(
        StdNet::new(&addrs::<1>(&servers)),
        StdClock,
        OsRng,
        Config::DEFAULT,
        [Credentials::NONE],
        Box::leak(Box::new(Buffers::<1, 1024, 64>::new())),
    );
    assert!(matches!(built, Err(Error::BufferTooSmall { .. })));
    let long = Credentials {
        password: Some(&[b'p'; 700]),
        ..Credentials::NONE
    };
    let built = Client::new(
        StdNet::new(&addrs::<1>(&servers)),
        StdClock,
        OsRng,
        Config::DEFAULT,
        [long],
        buffers::<1>(),
    );
    assert!(
        matches!(built, Err(Error::BufferTooSmall { needed: 722 })),
        "{built:?}"
    );
    let none = Client::new(
        StdNet::new(&[]),
        StdClock,
        OsRng,
        Config::DEFAULT,
        [],
        buffers::<0>(),
    );
    assert!(matches!(none, Err(Error::ServerCount(0))));
}

/// Closes every client connection of `server` (as an idle timeout would).
fn kill_clients(server: &RedisServer) {
    server
        .conn()
        .unwrap()
        .request(&[b"CLIENT", b"KILL", b"TYPE", b"normal", b"SKIPME", b"yes"])
        .unwrap();
}

#[test]
fn a_long_resource_survives_a_script_flush() {
    // After NOSCRIPT the core sends the script's source with EVAL: the
    // longest resource name allowed must still fit.
    let servers = start(3);
    let mut config = config();
    config.fencing = true;
    let mut c = client::<3>(addrs(&servers), config);
    assert_eq!(c.connect(), 3);
    let resource = vec![b'r'; c.max_resource_len()];
    for s in &servers {
        s.conn().unwrap().request(&[b"SCRIPT", b"FLUSH"]).unwrap();
    }
    let mut lock = c.lock(&resource, TTL).unwrap();
    assert!(lock.fence().is_some());
    c.extend(&mut lock, TTL).unwrap();
    assert_eq!(
        c.inspect(&resource).unwrap().majority_holder(),
        Some(lock.token().as_bytes())
    );
    for s in &servers {
        s.conn().unwrap().request(&[b"SCRIPT", b"FLUSH"]).unwrap();
    }
    let released = c.unlock(&lock).unwrap();
    assert!(released.deleted() >= 2, "{released:?}");
    assert!(servers.iter().all(|s| get(s, &resource) == Value::Nil));
    // The fence repair's script is always sent with EVAL.
    let floor = lock.fence().unwrap() + 10;
    let repaired = c.fence_repair(&resource, floor).unwrap();
    assert!(repaired.counter >= floor, "{repaired:?}");
    // One byte more is refused before anything is sent.
    let longer = vec![b'r'; c.max_resource_len() + 1];
    assert!(matches!(
        c.lock(&longer, TTL),
        Err(Error::ResourceTooLong { .. })
    ));
}

#[test]
fn a_release_is_delivered_after_its_connection_broke() {
    // The stack does not tell that the server closed the connection: the
    // release goes out, fails, and is sent again behind a new handshake.
    let servers = start(3);
    let mut c = client::<3>(addrs(&servers), config());
    c.net_mut().notice_close = false;
    assert_eq!(c.connect(), 3);
    let lock = c.lock(b"emb-idle", TTL).unwrap();
    // Until every vote landed.
    let deadline = std::time::Instant::now() + StdDuration::from_secs(5);
    while holders(&servers, b"emb-idle", lock.token().as_bytes()) < 3 {
        assert!(std::time::Instant::now() < deadline);
        thread::sleep(StdDuration::from_millis(5));
    }
    kill_clients(&servers[0]);
    thread::sleep(StdDuration::from_millis(50));
    let released = c.unlock(&lock).unwrap();
    assert_eq!(get(&servers[0], b"emb-idle"), Value::Nil, "{released:?}");
    assert_eq!(released.deleted(), 3, "{released:?}");
    assert_eq!(c.net_mut().connects[0], 2, "one reconnect");
}

#[test]
fn retries_use_servers_that_came_back() {
    // Connections lost before the call: the attempts after the first use
    // the servers again once they reconnected.
    let servers = start(3);
    let mut c = client::<3>(addrs(&servers), config());
    c.net_mut().notice_close = false;
    assert_eq!(c.connect(), 3);
    kill_clients(&servers[0]);
    kill_clients(&servers[1]);
    thread::sleep(StdDuration::from_millis(50));
    let deadline = c.now().saturating_add(Duration::from_secs(5));
    let lock = c.lock_until(b"emb-retry", TTL, deadline).unwrap();
    assert!(lock.report().count(ServerOutcome::Ok) >= 2);
    c.unlock(&lock).unwrap();
}

#[test]
fn a_server_restarted_during_an_acquisition_is_judged_by_its_new_process() {
    // C2 with a reconnect in the middle of an acquisition: the restarted
    // server's votes must be judged by its new start time, not the old one
    // the acquisition began with (it lost the other client's key).
    let mut servers = start(3);
    // The test clock counts from its first use: make the servers older
    // than the guard by that clock.
    let _ = redlock_embedded::Clock::now(&StdClock);
    thread::sleep(StdDuration::from_millis(3_600));
    // Another client holds the lock on servers 1 and 2: a majority.
    for s in &servers[1..] {
        s.conn()
            .unwrap()
            .request(&[b"SET", b"emb-rg", b"other", b"PX", b"60000"])
            .unwrap();
    }
    let mut config = config();
    config.restart_guard = Some(Duration::from_secs(3));
    let mut c = client::<3>(addrs(&servers), config);
    assert_eq!(c.connect(), 3);
    let mut restarted = servers.pop().unwrap();
    let restarter = thread::spawn(move || {
        thread::sleep(StdDuration::from_millis(30));
        restarted.kill().unwrap();
        restarted.restart().unwrap();
        restarted
    });
    let deadline = c.now().saturating_add(Duration::from_millis(2_000));
    let got = c.lock_until(b"emb-rg", TTL, deadline);
    servers.push(restarter.join().unwrap());
    // Server 0 is the only other vote: without server 2's, no majority.
    let err = got.expect_err("a restarted server's vote must not count");
    let report = err.report().unwrap();
    assert_ne!(report.get(ServerId(2)), Some(ServerOutcome::Ok), "{err}");
}

/// `n` servers, each behind a fault proxy: the servers, the proxies, and
/// the proxies' addresses.
fn proxied<const N: usize>() -> (Vec<RedisServer>, Vec<FaultProxy>, [SocketAddr; N]) {
    let servers = start(N);
    let proxies: Vec<FaultProxy> = servers
        .iter()
        .map(|s| FaultProxy::start(s.addr()).unwrap())
        .collect();
    let addrs = core::array::from_fn(|i| proxies[i].addr());
    (servers, proxies, addrs)
}

#[test]
fn a_request_lost_on_a_live_connection_costs_one_timeout_and_a_reconnect() {
    // The session probes a connection whose request is unanswered for half
    // its time, and gives it up when the probe shows it out of step (later
    // replies would be taken for older requests).
    let (servers, proxies, addrs) = proxied::<3>();
    let mut c = client::<3>(addrs, config());
    assert_eq!(c.connect(), 3);
    let warm = c.lock(b"emb-warm", TTL).unwrap();
    c.unlock(&warm).unwrap();
    for p in &proxies {
        p.set(Fault::Swallow(b"SET"));
    }
    let err = c.try_lock(b"emb-lost", TTL).unwrap_err();
    assert!(matches!(err, Error::Unavailable(_)), "{err}");
    for cycle in 0..20 {
        let lock = c
            .try_lock(b"emb-lost", TTL)
            .unwrap_or_else(|e| panic!("cycle {cycle}: {e}"));
        // (A lock is decided at its quorum; the third SET lands all the same.)
        assert!(
            lock.report().count(ServerOutcome::Ok) >= 2,
            "cycle {cycle}: {lock:?}"
        );
        assert_eq!(c.unlock(&lock).unwrap().deleted(), 3, "cycle {cycle}");
    }
    assert_eq!(c.net_mut().connects, [2, 2, 2], "one reconnect each");
    for s in &servers {
        assert_eq!(get(s, b"emb-lost"), Value::Nil);
    }
}

#[test]
fn a_release_lost_on_a_live_connection_is_sent_again() {
    let (servers, proxies, addrs) = proxied::<3>();
    let mut c = client::<3>(addrs, config());
    assert_eq!(c.connect(), 3);
    let lock = c.lock(b"emb-lost-release", TTL).unwrap();
    // Until every vote landed.
    let deadline = std::time::Instant::now() + StdDuration::from_secs(5);
    while holders(&servers, b"emb-lost-release", lock.token().as_bytes()) < 3 {
        assert!(std::time::Instant::now() < deadline);
        thread::sleep(StdDuration::from_millis(5));
    }
    proxies[0].set(Fault::Swallow(b"EVALSHA"));
    let released = c.unlock(&lock).unwrap();
    assert_eq!(released.deleted(), 3, "{released:?}");
    for s in &servers {
        assert_eq!(get(s, b"emb-lost-release"), Value::Nil);
    }
    assert_eq!(c.net_mut().connects, [2, 1, 1], "one reconnect");
}

/// Every operation, fenced and not, on Valkey 9 (native commands, no
/// script loaded or sent), on a mix with Valkey 8 and Redis 7 (scripts
/// there), and with native only (refused by the older kinds).
#[test]
fn native_commands_where_the_server_has_them() {
    use redlock_tests::ServerKind::{Redis, Valkey8, Valkey9};
    for kinds in [[Valkey9; 3], [Valkey9, Valkey8, Redis]] {
        let servers: Vec<RedisServer> = kinds
            .iter()
            .map(|&k| RedisServer::start_kind(k, &[]).unwrap())
            .collect();
        let mut fenced = config();
        fenced.fencing = true;
        for config in [config(), fenced] {
            let mut c = client::<3>(addrs(&servers), config);
            let mut last = 0;
            for _ in 0..3 {
                let mut lock = c.lock(b"emb-native", TTL).unwrap();
                if config.fencing {
                    let fence = lock.fence().unwrap();
                    assert!(fence > last, "{kinds:?}: {fence} > {last}");
                    last = fence;
                }
                c.extend(&mut lock, Duration::from_secs(20)).unwrap();
                let token = lock.token().as_bytes().to_vec();
                let seen = c.inspect(b"emb-native").unwrap();
                assert_eq!(seen.majority_holder(), Some(&token[..]), "{kinds:?}");
                let released = c.unlock(&lock).unwrap();
                assert!(released.report.count(ServerOutcome::Ok) >= 2);
                assert_eq!(holders(&servers, b"emb-native", &token), 0, "{kinds:?}");
            }
        }
        for (s, kind) in servers.iter().zip(kinds) {
            let scripts = s.calls("evalsha") + s.calls("eval");
            if kind == Valkey9 {
                assert_eq!(scripts + s.calls("script|load"), 0, "{kind:?}");
                assert!(s.calls("delifeq") > 0 && s.calls("multi") > 0);
            } else {
                assert!(scripts > 0, "{kind:?}");
                assert_eq!(s.calls("delifeq"), 0, "{kind:?}");
            }
        }
    }
    // Native only: the older kinds are refused at the handshake, and say so.
    let servers: Vec<RedisServer> = [Valkey9, Valkey8, Redis]
        .iter()
        .map(|&k| RedisServer::start_kind(k, &[]).unwrap())
        .collect();
    let mut native = config();
    native.commands = redlock_core::Commands::Native;
    let mut c = client::<3>(addrs(&servers), native);
    let err = c.lock(b"emb-native-only", TTL).unwrap_err();
    let report = err.report().unwrap();
    assert!(
        report.count(ServerOutcome::Setup(SetupError::NoNative)) >= 1,
        "{report:?}"
    );
    assert_eq!(
        servers[1].calls("script|load") + servers[2].calls("script|load"),
        0
    );
}

/// Bad servers that claim the native commands, beside four real Valkey 9:
/// each fails alone, and every operation still works.
#[test]
fn hostile_native_servers_fail_alone() {
    let real: Vec<RedisServer> = (0..4)
        .map(|_| RedisServer::start_kind(redlock_tests::ServerKind::Valkey9, &[]).unwrap())
        .collect();
    for (name, behave) in redlock_tests::fake::NATIVE_CASES {
        let fake = Fake::start(behave);
        let addrs = [
            real[0].addr(),
            real[1].addr(),
            fake.addr.parse().unwrap(),
            real[2].addr(),
            real[3].addr(),
        ];
        let mut c = client::<5>(addrs, config());
        for round in 0..3 {
            let mut lock = c
                .lock(b"emb-hostile-native", TTL)
                .unwrap_or_else(|e| panic!("{name} round {round}: {e}"));
            c.extend(&mut lock, TTL)
                .unwrap_or_else(|e| panic!("{name} round {round}: extend: {e}"));
            let token = lock.token().as_bytes().to_vec();
            let seen = c.inspect(b"emb-hostile-native").unwrap();
            assert_eq!(seen.majority_holder(), Some(&token[..]), "{name}");
            let released = c.unlock(&lock).unwrap();
            assert!(released.report.count(ServerOutcome::Ok) >= 4, "{name}");
        }
    }
}
