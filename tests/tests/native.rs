//! Native commands (issue 26) against real servers: Valkey 9.1 (`SET ...
//! IFEQ`, `DELIFEQ`), Valkey 8.0 and Redis 7 (neither). Every operation on
//! each kind and on a mix, what each server was sent (its own
//! `INFO commandstats`), an ACL user denied `@scripting`, native-only
//! refusals, and a server replaced by an older one mid-run.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test driver

use core::time::Duration;

use redlock_std::{Client, Commands, ServerOutcome, SetupError};
use redlock_tests::{RedisServer, ServerKind, Value};

const TTL: Duration = Duration::from_secs(10);

fn start(kinds: &[ServerKind]) -> Vec<RedisServer> {
    kinds
        .iter()
        .map(|&k| RedisServer::start_kind(k, &[]).unwrap())
        .collect()
}

fn client(servers: &[RedisServer], commands: Commands) -> Client {
    client_as(servers, commands, "")
}

/// A client of `servers`, logged in as `userinfo` (`user:password@`, or
/// empty), with fencing on.
fn client_as(servers: &[RedisServer], commands: Commands, userinfo: &str) -> Client {
    Client::builder()
        .servers(
            servers
                .iter()
                .map(|s| format!("redis://{userinfo}{}", s.addr())),
        )
        .commands(commands)
        .retry(0, Duration::ZERO)
        .build()
        .unwrap()
}

/// Script calls of any kind the server counted.
fn script_calls(server: &RedisServer) -> u64 {
    ["evalsha", "eval", "script|load", "script"]
        .iter()
        .map(|c| server.calls(c))
        .sum()
}

/// Inspects twice: the first (made before any handshake) waits for every
/// server's handshake, so the second and all later operations know each
/// server's dialect. Returns each server's script calls by then.
fn warm(c: &Client, servers: &[RedisServer]) -> Vec<u64> {
    for _ in 0..2 {
        c.inspect("native:warm").unwrap();
    }
    servers.iter().map(script_calls).collect()
}

/// Lock, extend, inspect, unlock; then a fenced lock twice (the fence
/// rises), inspected and unlocked. Panics with the report on a failure.
fn every_operation(c: &Client, fenced: &Client, resource: &str) {
    let mut lock = c.lock(resource, TTL).unwrap();
    c.extend(&mut lock, Duration::from_secs(20)).unwrap();
    let seen = c.inspect(resource).unwrap();
    assert_eq!(seen.majority_holder(), Some(lock.token().as_bytes()));
    for h in seen.entries() {
        let ttl = h.ttl().expect("a holder with a ttl");
        assert!(ttl > TTL, "extended to 20 s, saw {ttl:?}");
    }
    let released = c.unlock(&lock).unwrap();
    assert_eq!(
        released.report.count(ServerOutcome::Ok),
        released.report.len()
    );
    assert_eq!(c.inspect(resource).unwrap().majority_holder(), None);
    // A token that is not ours neither extends nor releases.
    let mut other = fenced.lock(resource, TTL).unwrap();
    let first = other.fence().unwrap();
    let foreign = c.unlock_token(resource, b"not-the-token").unwrap();
    assert_eq!(
        foreign.report.count(ServerOutcome::NotHeld),
        foreign.report.len(),
        "{foreign:?}"
    );
    assert_eq!(
        c.inspect(resource).unwrap().majority_holder(),
        Some(other.token().as_bytes())
    );
    fenced.extend(&mut other, TTL).unwrap();
    fenced.unlock(&other).unwrap();
    let again = fenced.lock(resource, TTL).unwrap();
    assert!(again.fence().unwrap() > first, "fences rise");
    fenced.unlock(&again).unwrap();
}

fn fenced(servers: &[RedisServer], commands: Commands) -> Client {
    Client::builder()
        .servers(servers.iter().map(|s| format!("redis://{}", s.addr())))
        .commands(commands)
        .fencing(true)
        .retry(0, Duration::ZERO)
        .build()
        .unwrap()
}

#[test]
fn valkey_9_gets_native_commands_and_no_script_by_default() {
    let servers = start(&[ServerKind::Valkey9; 3]);
    let (c, f) = (
        client(&servers, Commands::Auto),
        fenced(&servers, Commands::Auto),
    );
    // (A request made before a server's first handshake passed gets the
    // script: its dialect is not known yet.)
    let _ = warm(&c, &servers);
    let before = warm(&f, &servers);
    every_operation(&c, &f, "native:auto");
    for (s, before) in servers.iter().zip(before) {
        assert_eq!(
            script_calls(s),
            before,
            "no script on Valkey 9 in auto mode"
        );
        assert_eq!(s.calls("script|load"), 0, "none loaded");
        assert!(s.calls("delifeq") >= 2, "released with DELIFEQ");
        assert!(s.calls("multi") >= 2, "inspected and fenced in MULTI");
    }
    // Two fenced acquisitions, each written to the majority that voted
    // (at least).
    let incrby: u64 = servers.iter().map(|s| s.calls("incrby")).sum();
    assert!(incrby >= 4, "fences written with INCRBY: {incrby}");
}

#[test]
fn native_only_works_on_valkey_9() {
    let servers = start(&[ServerKind::Valkey9; 3]);
    every_operation(
        &client(&servers, Commands::Native),
        &fenced(&servers, Commands::Native),
        "native:only",
    );
    for s in &servers {
        assert_eq!(script_calls(s), 0);
    }
}

#[test]
fn older_servers_get_the_scripts() {
    for kind in [ServerKind::Valkey8, ServerKind::Redis] {
        let servers = start(&[kind; 3]);
        every_operation(
            &client(&servers, Commands::Auto),
            &fenced(&servers, Commands::Auto),
            "native:older",
        );
        for s in &servers {
            assert!(s.calls("evalsha") > 0, "{kind:?}: scripts");
            assert_eq!(s.calls("delifeq"), 0, "{kind:?}");
        }
    }
}

#[test]
fn scripts_mode_sends_scripts_to_valkey_9() {
    let servers = start(&[ServerKind::Valkey9; 3]);
    every_operation(
        &client(&servers, Commands::Scripts),
        &fenced(&servers, Commands::Scripts),
        "native:scripts",
    );
    for s in &servers {
        assert!(s.calls("evalsha") > 0);
        assert_eq!(s.calls("delifeq") + s.calls("multi"), 0);
    }
}

#[test]
fn a_mix_of_kinds_in_one_client() {
    let servers = start(&[ServerKind::Valkey9, ServerKind::Valkey8, ServerKind::Redis]);
    let (c, f) = (
        client(&servers, Commands::Auto),
        fenced(&servers, Commands::Auto),
    );
    let _ = warm(&c, &servers);
    let before = warm(&f, &servers);
    every_operation(&c, &f, "native:mix");
    assert_eq!(script_calls(&servers[0]), before[0]);
    assert!(servers[0].calls("delifeq") > 0);
    for s in &servers[1..] {
        assert!(s.calls("evalsha") > 0);
    }
    // Fenced acquisitions over the mix, on a fenced client and a plain
    // one taking turns: the fence keeps rising.
    let f = fenced(&servers, Commands::Auto);
    let mut last = 0;
    for _ in 0..5 {
        let lock = f.lock("native:mix:fenced-loop", TTL).unwrap();
        assert!(lock.fence().unwrap() > last);
        last = lock.fence().unwrap();
        let released = f.unlock(&lock).unwrap();
        assert_eq!(released.report.count(ServerOutcome::Ok), 3, "{released:?}");
    }
}

/// `ACL SETUSER locker on >pw ~* +@all -@scripting` on `server`.
fn no_scripting_user(server: &RedisServer) {
    let reply = server
        .conn()
        .unwrap()
        .request(&[
            b"ACL",
            b"SETUSER",
            b"locker",
            b"on",
            b">pw",
            b"~*",
            b"+@all",
            b"-@scripting",
        ])
        .unwrap();
    assert_eq!(reply, Value::Simple(b"OK".to_vec()));
}

#[test]
fn a_user_without_scripting_locks_on_valkey_9_and_is_refused_elsewhere() {
    let servers = start(&[ServerKind::Valkey9; 3]);
    for s in &servers {
        no_scripting_user(s);
    }
    let plain = client_as(&servers, Commands::Auto, "locker:pw@");
    let fenced = Client::builder()
        .servers(
            servers
                .iter()
                .map(|s| format!("redis://locker:pw@{}", s.addr())),
        )
        .fencing(true)
        .retry(0, Duration::ZERO)
        .build()
        .unwrap();
    every_operation(&plain, &fenced, "native:acl");

    // The same user on servers without native commands: refused at the
    // handshake, and the error says why.
    for kind in [ServerKind::Valkey8, ServerKind::Redis] {
        let old = start(&[kind; 3]);
        for s in &old {
            no_scripting_user(s);
        }
        let c = client_as(&old, Commands::Auto, "locker:pw@");
        let err = c.lock("native:acl", TTL).unwrap_err();
        let report = err.report().expect("a report");
        assert!(report.count(ServerOutcome::Pending) <= 1, "{report:?}");
        for (i, outcome) in report.iter().filter(|(_, o)| *o != ServerOutcome::Pending) {
            assert!(
                matches!(
                    outcome,
                    ServerOutcome::Setup(SetupError::ScriptsDenied { .. })
                ),
                "{kind:?} server {}: {outcome:?}",
                i.0
            );
        }
        let refused = report
            .iter()
            .find(|(_, o)| *o != ServerOutcome::Pending)
            .map(|(i, _)| i)
            .unwrap();
        let text = err.outcomes().unwrap().describe(refused);
        assert!(
            text.contains("no native commands") && text.contains("NOPERM"),
            "{text}"
        );
        // Nothing was set: the handshake refused the server before any
        // lock command.
        for s in &old {
            assert_eq!(
                s.conn()
                    .unwrap()
                    .request(&[b"EXISTS", b"native:acl"])
                    .unwrap(),
                Value::Integer(0)
            );
        }
    }
}

#[test]
fn native_only_refuses_older_servers_with_the_reason() {
    for kind in [ServerKind::Valkey8, ServerKind::Redis] {
        let servers = start(&[kind; 3]);
        let c = client(&servers, Commands::Native);
        let err = c.lock("native:refused", TTL).unwrap_err();
        // Refused at the handshake (a server the decision did not wait
        // for is "not asked").
        let report = err.report().unwrap();
        assert!(
            report.count(ServerOutcome::Setup(SetupError::NoNative)) >= 2,
            "{kind:?}: {report:?}"
        );
        assert!(err.to_string().contains("native") || format!("{err:?}").contains("NoNative"));
        for s in &servers {
            assert_eq!(script_calls(s), 0, "{kind:?}: no script, not even loaded");
        }
    }
}

#[test]
fn a_server_replaced_by_an_older_one_gets_scripts_after_it_reconnects() {
    let mut servers = start(&[ServerKind::Valkey9; 3]);
    let c = client(&servers, Commands::Auto);
    let f = fenced(&servers, Commands::Auto);
    every_operation(&c, &f, "native:swap");
    let lock = c.lock("native:swap", TTL).unwrap();
    // Server 0 becomes a Redis 7 on the same port: the lock's key there is
    // gone with the process, the two others hold it.
    servers[0].swap(ServerKind::Redis).unwrap();
    let released = c.unlock(&lock).unwrap();
    assert!(released.report.count(ServerOutcome::Ok) >= 2);
    // From now on, every operation passes on all three, server 0 by the
    // scripts it was given at its new handshake.
    // (Server 0 may still be reconnecting at first.)
    let mut tries = 0;
    loop {
        let lock = c.lock("native:swap", TTL).unwrap();
        let released = c.unlock(&lock).unwrap();
        if released.report.count(ServerOutcome::Ok) == 3 {
            break;
        }
        tries += 1;
        assert!(tries < 50, "server 0 never came back: {released:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    for round in 0..3 {
        // Released and extended on all three: server 0 by the script.
        let mut lock = c.lock("native:swap", TTL).unwrap();
        c.extend(&mut lock, TTL).unwrap();
        let released = c.unlock(&lock).unwrap();
        assert_eq!(released.report.count(ServerOutcome::Ok), 3, "round {round}");
    }
    // (A new fenced client: `f` still has to find its connection to server
    // 0 broken, and a fenced acquisition of a new resource needs every
    // server's word that it has no counter.)
    drop(f);
    let f = fenced(&servers, Commands::Auto);
    let before = warm(&f, &servers);
    every_operation(&c, &f, "native:swap:after");
    assert!(servers[0].calls("evalsha") > 0, "the Redis got scripts");
    assert_eq!(servers[0].calls("delifeq"), 0);
    assert_eq!(script_calls(&servers[1]), before[1], "the Valkeys no more");
}

/// Hostile servers that claim the native commands: each gets a typed
/// outcome for every operation (never a vote, a release or a fence it did
/// not earn), fast, and the real servers keep every operation working.
#[test]
fn hostile_servers_with_native_replies_fail_alone_and_fast() {
    use redlock_tests::fake::{Fake, NATIVE_CASES};
    let real = start(&[ServerKind::Valkey9; 4]);
    // The resource's fence counters exist on the real servers (a fenced
    // acquisition of a new resource needs every server's word).
    let first = fenced(&real, Commands::Auto);
    let lock = first.lock("native:hostile", TTL).unwrap();
    first.unlock(&lock).unwrap();
    for (name, behave) in NATIVE_CASES {
        let fake = Fake::start(behave);
        let mut urls: Vec<String> = real.iter().map(|s| s.addr().to_string()).collect();
        urls.insert(2, fake.addr.clone());
        let build = |fencing: bool| {
            Client::builder()
                .servers(&urls)
                .fencing(fencing)
                .request_timeout(Duration::from_millis(100))
                .retry(0, Duration::ZERO)
                .build()
                .unwrap()
        };
        let (plain, fenced) = (build(false), build(true));
        let not_ok = |what: &str, outcome: Option<ServerOutcome>| {
            assert_ne!(outcome, Some(ServerOutcome::Ok), "{name}: {what}");
        };
        for round in 0..3 {
            let started = std::time::Instant::now();
            let mut lock = fenced
                .lock("native:hostile", TTL)
                .unwrap_or_else(|e| panic!("{name} round {round}: {e}"));
            // (The short block's `EXEC` answer is a valid vote, "set, counter
            // 7", whichever request it is taken for: a lying server votes.
            // That one is there to show the client survives a stream out
            // of step.)
            let lies = name == "native: short MULTI block";
            if !lies {
                not_ok("fenced vote", lock.report().get(redlock_std::ServerId(2)));
            }
            plain
                .extend(&mut lock, TTL)
                .unwrap_or_else(|e| panic!("{name}: extend: {e}"));
            let seen = plain.inspect("native:hostile").unwrap();
            assert_eq!(
                seen.majority_holder(),
                Some(lock.token().as_bytes()),
                "{name}"
            );
            let released = plain.unlock(&lock).unwrap();
            if !lies {
                // (That one answers `:1` to `DELIFEQ` as a real server
                // would: a claimed release, which nothing depends on.)
                not_ok("release", released.report.get(redlock_std::ServerId(2)));
            }
            // The four real servers released.
            assert!(released.report.count(ServerOutcome::Ok) >= 4, "{name}");
            let took = started.elapsed();
            assert!(
                took < Duration::from_secs(3),
                "{name} round {round}: {took:?}"
            );
        }
    }
}

/// The operator's fence repair without Lua: on Valkey 9 a user denied
/// `@scripting` raises the counters (`GET`, then `INCRBY` where below the
/// floor; never lowered), in native-only mode too; the next fence is above
/// the floor.
#[test]
fn fence_repair_without_scripts() {
    let servers = start(&[ServerKind::Valkey9; 3]);
    for s in &servers {
        no_scripting_user(s);
    }
    // One server already above the floor, one below, one without a counter.
    let counter = b"native:repair:fence";
    for commands in [Commands::Auto, Commands::Native] {
        for (s, value) in servers.iter().zip([&b"500"[..], b"7", b""]) {
            let mut conn = s.conn().unwrap();
            conn.request(&[b"DEL", counter]).unwrap();
            if !value.is_empty() {
                conn.request(&[b"SET", counter, value]).unwrap();
            }
        }
        let c = Client::builder()
            .servers(
                servers
                    .iter()
                    .map(|s| format!("redis://locker:pw@{}", s.addr())),
            )
            .commands(commands)
            .fencing(true)
            .build()
            .unwrap();
        let repaired = c.fence_repair("native:repair", 100).unwrap();
        assert_eq!(repaired.counter, 500, "{commands:?}: the highest counter");
        let values: Vec<Value> = servers
            .iter()
            .map(|s| s.conn().unwrap().request(&[b"GET", counter]).unwrap())
            .collect();
        assert_eq!(
            values,
            [
                Value::Bulk(b"500".to_vec()),
                Value::Bulk(b"100".to_vec()),
                Value::Bulk(b"100".to_vec())
            ],
            "{commands:?}"
        );
        let lock = c.lock("native:repair", TTL).unwrap();
        assert!(lock.fence().unwrap() > 100, "{commands:?}");
        c.unlock(&lock).unwrap();
    }
    for s in &servers {
        assert_eq!(script_calls(s), 0);
    }
}
