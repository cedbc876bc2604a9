//! The std client against real `redis-server` processes.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

use core::time::Duration;
use std::time::Instant;

use redlock_std::{Client, Error, ServerOutcome};
use redlock_tests::{RedisServer, Value, free_port};

fn servers(n: usize) -> Vec<RedisServer> {
    (0..n).map(|_| RedisServer::start().unwrap()).collect()
}

fn client(servers: &[RedisServer]) -> Client {
    Client::builder()
        .servers(servers.iter().map(|s| s.addr().to_string()))
        .build()
        .unwrap()
}

fn holder(server: &RedisServer, resource: &[u8]) -> Value {
    server.conn().unwrap().request(&[b"GET", resource]).unwrap()
}

#[test]
fn lock_extend_inspect_unlock_on_1_3_and_5_servers() {
    for n in [1, 3, 5] {
        let s = servers(n);
        let c = client(&s);
        let mut lock = c.lock(b"res", Duration::from_secs(10)).unwrap();
        assert_eq!(lock.token().len(), 40);
        assert!(
            lock.remaining() > Duration::from_millis(9_800)
                && lock.remaining() <= Duration::from_secs(10)
        );
        for server in &s {
            assert_eq!(
                holder(server, b"res"),
                Value::Bulk(lock.token().as_bytes().to_vec()),
                "n={n}"
            );
        }
        // A second acquisition conflicts.
        assert!(matches!(
            c.try_lock(b"res", Duration::from_secs(10)),
            Err(Error::Conflict(_))
        ));
        // Extend to 30 s.
        c.extend(&mut lock, Duration::from_secs(30)).unwrap();
        assert!(lock.remaining() > Duration::from_secs(29));
        assert_eq!(lock.extensions(), 1);
        let pttl = s[0].conn().unwrap().request(&[b"PTTL", b"res"]).unwrap();
        assert!(
            matches!(pttl, Value::Integer(ms) if ms > 29_000),
            "{pttl:?}"
        );
        // Inspect.
        let inspection = c.inspect(b"res").unwrap();
        assert_eq!(inspection.entries().len(), n);
        for e in inspection.entries() {
            assert_eq!(e.outcome, ServerOutcome::Ok);
            assert_eq!(e.holder.as_deref(), Some(lock.token().as_bytes()));
            assert!(e.pttl_ms > 29_000);
        }
        assert_eq!(inspection.majority_holder(), Some(lock.token().as_bytes()));
        // Unlock, twice (idempotent).
        assert_eq!(c.unlock(&lock).unwrap().deleted(), n);
        assert_eq!(c.unlock(&lock).unwrap().deleted(), 0);
        for server in &s {
            assert_eq!(holder(server, b"res"), Value::Nil);
        }
        // Extending a released lock reports it lost.
        assert!(matches!(
            c.extend(&mut lock, Duration::from_secs(1)),
            Err(Error::Lost(_))
        ));
    }
}

#[test]
fn every_subset_of_down_servers_for_3_and_5() {
    for n in [3usize, 5] {
        let s = servers(n);
        // Addresses of servers that are down: ports nobody listens on.
        let dead: Vec<String> = (0..n)
            .map(|_| format!("127.0.0.1:{}", free_port().unwrap()))
            .collect();
        for mask in 0u32..(1 << n) {
            let up = mask.count_ones() as usize;
            let urls: Vec<String> = (0..n)
                .map(|i| {
                    if mask & (1 << i) != 0 {
                        s[i].addr().to_string()
                    } else {
                        dead[i].clone()
                    }
                })
                .collect();
            let c = Client::builder()
                .servers(&urls)
                .retry(0, Duration::ZERO)
                .build()
                .unwrap();
            let resource = format!("subset-{n}-{mask}");
            let started = Instant::now();
            let result = c.lock(resource.as_bytes(), Duration::from_secs(30));
            let took = started.elapsed();
            if up > n / 2 {
                let lock = result.unwrap_or_else(|e| panic!("n={n} mask={mask:b}: {e}"));
                let ok = lock.report().count(ServerOutcome::Ok);
                assert!(ok > n / 2 && ok <= up, "n={n} mask={mask:b}: {ok} votes");
                c.unlock(&lock).unwrap();
            } else {
                assert!(
                    matches!(result, Err(Error::Unavailable(_))),
                    "n={n} mask={mask:b}: {result:?}"
                );
                // Fails fast: refused connects, not the 30 s ttl (a bound
                // with room for a loaded machine).
                assert!(
                    took < Duration::from_secs(3),
                    "n={n} mask={mask:b} took {took:?}"
                );
            }
        }
    }
}

#[test]
fn a_foreign_value_on_a_minority_or_a_majority() {
    let s = servers(5);
    let c = client(&s);
    for server in &s[..2] {
        server
            .conn()
            .unwrap()
            .request(&[b"SET", b"minority", b"someone-else", b"PX", b"60000"])
            .unwrap();
    }
    let lock = c.lock(b"minority", Duration::from_secs(5)).unwrap();
    // Decided on the three free servers (the two refusals may come later).
    assert_eq!(lock.report().count(ServerOutcome::Ok), 3);
    assert!(lock.report().count(ServerOutcome::Held) <= 2);
    c.unlock(&lock).unwrap();
    // The foreign values are untouched by our release.
    assert_eq!(
        holder(&s[0], b"minority"),
        Value::Bulk(b"someone-else".to_vec())
    );

    for server in &s[..3] {
        server
            .conn()
            .unwrap()
            .request(&[b"SET", b"majority", b"someone-else", b"PX", b"60000"])
            .unwrap();
    }
    let err = Client::builder()
        .servers(s.iter().map(|x| x.addr().to_string()))
        .retry(1, Duration::from_millis(10))
        .build()
        .unwrap()
        .lock(b"majority", Duration::from_secs(5))
        .unwrap_err();
    assert!(matches!(err, Error::Conflict(_)), "{err}");
    assert!(err.to_string().contains("held by another token"), "{err}");
    // Nothing of ours is left behind (A5).
    for server in &s[3..] {
        assert_eq!(holder(server, b"majority"), Value::Nil);
    }
}

#[test]
fn passwords_acl_users_and_wrong_passwords() {
    let s = RedisServer::start_with(&["--requirepass", "s3cret"]).unwrap();
    let url = format!("redis://:s3cret@{}", s.addr());
    let c = Client::builder().servers([&url]).build().unwrap();
    let lock = c.lock(b"res", Duration::from_secs(5)).unwrap();
    c.unlock(&lock).unwrap();
    // The least-privileged ACL user the scripts need.
    let mut admin = s.conn().unwrap();
    admin.request(&[b"AUTH", b"s3cret"]).unwrap();
    let acl = admin
        .request(&[
            b"ACL",
            b"SETUSER",
            b"locker",
            b"on",
            b">pw",
            b"resetkeys",
            b"~*",
            b"-@all",
            b"+set",
            b"+get",
            b"+pexpire",
            b"+del",
            b"+pttl",
            b"+evalsha",
            b"+eval",
            b"+script|load",
            b"+info",
            b"+select",
            b"+ping",
        ])
        .unwrap();
    assert_eq!(acl, Value::Simple(b"OK".to_vec()));
    let url = format!("redis://locker:pw@{}", s.addr());
    let c = Client::builder()
        .servers([&url])
        .fencing(true)
        .build()
        .unwrap();
    let lock = c.lock(b"acl-res", Duration::from_secs(5)).unwrap();
    assert_eq!(lock.fence(), Some(1));
    c.unlock(&lock).unwrap();
    // A wrong password: a clear error, and the password is not in it.
    let url = format!("redis://locker:hunter2@{}", s.addr());
    let c = Client::builder()
        .servers([&url])
        .retry(0, Duration::ZERO)
        .build()
        .unwrap();
    let err = c.lock(b"res", Duration::from_secs(5)).unwrap_err();
    let shown = format!("{err} {err:?} {c:?}");
    assert!(shown.contains("WRONGPASS"), "{shown}");
    assert!(!shown.contains("NOAUTH"), "{shown}");
    assert!(!shown.contains("hunter2"), "{shown}");
}

#[test]
fn script_flush_between_calls_uses_the_noscript_fallback() {
    let s = servers(3);
    let c = client(&s);
    let lock = c.lock(b"res", Duration::from_secs(5)).unwrap();
    for server in &s {
        server
            .conn()
            .unwrap()
            .request(&[b"SCRIPT", b"FLUSH"])
            .unwrap();
    }
    assert_eq!(c.unlock(&lock).unwrap().deleted(), 3);
}

#[test]
fn hostile_resource_names() {
    let s = servers(3);
    let c = client(&s);
    let long = vec![b'k'; 1024];
    for name in [
        &b"a\r\nb"[..],
        b"nul\0",
        b"\xff\xfe invalid utf-8",
        b"*1\r\n$4\r\nPING\r\n",
        &long,
    ] {
        let lock = c.lock(name, Duration::from_secs(5)).unwrap();
        assert_eq!(
            holder(&s[1], name),
            Value::Bulk(lock.token().as_bytes().to_vec())
        );
        assert_eq!(c.unlock(&lock).unwrap().deleted(), 3);
    }
}

#[test]
fn fencing_tokens_increase_across_acquisitions() {
    let s = servers(3);
    let c = Client::builder()
        .servers(s.iter().map(|x| x.addr().to_string()))
        .fencing(true)
        .build()
        .unwrap();
    let mut last = 0;
    for _ in 0..5 {
        let lock = c.lock(b"fenced", Duration::from_secs(5)).unwrap();
        let f = lock.fence().unwrap();
        assert!(f > last, "{f} after {last}");
        last = f;
        c.unlock(&lock).unwrap();
    }
}

#[test]
fn a_stopped_server_costs_one_request_timeout() {
    let s = servers(3);
    let c = Client::builder()
        .servers(s.iter().map(|x| x.addr().to_string()))
        .request_timeout(Duration::from_millis(50))
        .build()
        .unwrap();
    // Connect first, then stop one server.
    let lock = c.lock(b"warm", Duration::from_secs(5)).unwrap();
    c.unlock(&lock).unwrap();
    let pid = s[2].pid().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-STOP", &pid])
            .status()
            .unwrap()
            .success()
    );
    let started = Instant::now();
    let result = c.lock(b"res", Duration::from_secs(30));
    let took = started.elapsed();
    assert!(
        std::process::Command::new("kill")
            .args(["-CONT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let lock = result.unwrap();
    // Decided on the two live servers' votes, without waiting for the third
    // (a bound far below the 30 s ttl, with room for a loaded machine).
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert_eq!(lock.report().count(ServerOutcome::Ok), 2);
    c.unlock(&lock).unwrap();
}

#[test]
fn an_unlock_that_a_majority_did_not_confirm_is_an_error() {
    let mut s = servers(5);
    let c = client(&s);
    let lock = c.lock(b"unconfirmed", Duration::from_secs(10)).unwrap();
    // A minority gone: the release still counts.
    s[0].kill().unwrap();
    let released = c.unlock(&lock).unwrap();
    assert_eq!(released.deleted(), 4);
    let lock = c.lock(b"unconfirmed", Duration::from_secs(10)).unwrap();
    // A majority gone: the key may stay on them until it expires, and the
    // caller is told, with every server's answer.
    s[1].kill().unwrap();
    s[2].kill().unwrap();
    match c.unlock(&lock) {
        Err(Error::Unavailable(report)) => {
            assert_eq!(report.count(ServerOutcome::Ok), 2, "{report:?}");
            assert_eq!(report.iter().filter(|(_, o)| o.answered()).count(), 2);
        }
        other => panic!("{other:?}"),
    }
    // The two servers that answered did delete the key.
    for server in &s[3..] {
        assert_eq!(holder(server, b"unconfirmed"), Value::Nil);
    }
}

/// Resource names of every usual type; what comes back speaks std types
/// (issue 10, item 8).
#[test]
fn resource_names_of_every_usual_type_and_std_types_back() {
    let s = servers(3);
    let c = client(&s);
    let owned: Vec<u8> = b"bytes-name".into();
    let locks = [
        c.lock("str-name", Duration::from_secs(5)).unwrap(),
        c.lock(String::from("string-name"), Duration::from_secs(5))
            .unwrap(),
        c.lock(owned, Duration::from_secs(5)).unwrap(),
        c.lock(&b"slice-name"[..], Duration::from_secs(5)).unwrap(),
    ];
    let inspection = c.inspect("str-name").unwrap();
    for h in inspection.entries() {
        let ttl: Option<Duration> = h.ttl();
        assert!(ttl.is_some_and(|t| t > Duration::from_secs(3)), "{ttl:?}");
        assert_eq!(h.holder_str(), Some(locks[0].token()));
    }
    assert_eq!(
        inspection.majority_holder(),
        Some(locks[0].token().as_bytes())
    );
    let released = c.unlock_token("string-name", locks[1].token()).unwrap();
    assert_eq!(released.deleted(), 3);
    for lock in &locks {
        c.unlock(lock).unwrap();
    }
}

/// What `main` returning `Result<(), Error>` prints is the error's
/// sentence, naming servers by address, not a dump of internal types
/// (issue 10, item 7).
#[test]
fn an_error_reads_as_a_sentence_in_debug_too() {
    let dead: Vec<String> = (0..3)
        .map(|_| format!("127.0.0.1:{}", redlock_tests::free_port().unwrap()))
        .collect();
    let c = Client::builder()
        .servers(&dead)
        .retry(0, Duration::ZERO)
        .build()
        .unwrap();
    let err = c.lock("orders", Duration::from_secs(10)).unwrap_err();
    let debug = format!("{err:?}");
    assert_eq!(debug, err.to_string());
    assert!(debug.starts_with("too few servers answered ("), "{debug}");
    assert!(debug.contains("connection failed"), "{debug}");
    for address in &dead {
        assert!(debug.contains(&format!("{address}: ")), "{debug}");
    }
    for internal in ["Report", "ServerOutcome", "Outcomes", "Pending", "{"] {
        assert!(!debug.contains(internal), "{internal} in {debug}");
    }
}

/// Errors carry typed causes, with `source()` (issue 11).
#[test]
fn errors_carry_typed_causes() {
    use core::error::Error as _;
    let err = Client::builder()
        .servers(["127.0.0.1:0"])
        .build()
        .unwrap_err();
    assert!(
        matches!(err, Error::Url(redlock_std::UrlError::BadPort)),
        "{err}"
    );
    assert!(err.source().is_some());
    let ten: Vec<String> = (1..=10).map(|p| format!("127.0.0.{p}:6379")).collect();
    let err = Client::builder().servers(&ten).build().unwrap_err();
    assert_eq!(err, Error::ServerCount(10));
    let s = servers(3);
    let c = Client::builder()
        .servers(s.iter().map(|s| s.addr().to_string()))
        .max_extensions(0)
        .build()
        .unwrap();
    let mut lock = c.lock("res", Duration::from_secs(5)).unwrap();
    let err = c.extend(&mut lock, Duration::from_secs(5)).unwrap_err();
    assert_eq!(
        err,
        Error::Argument(redlock_core::ArgumentError::ExtensionLimit)
    );
    assert!(err.source().is_some(), "{err}");
    let err = c.lock("res", Duration::from_micros(10)).unwrap_err();
    assert_eq!(err, Error::Argument(redlock_core::ArgumentError::Ttl));
    c.unlock(&lock).unwrap();
}
