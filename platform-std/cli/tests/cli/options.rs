//! Usage, flags, durations, flock(1) habits, secrets and logging.

use crate::common::*;

#[test]
fn bad_usage_exits_64_with_one_line() {
    let (_servers, list) = servers(1);
    for args in [
        vec!["lock", "--servers", &list, "res"],
        vec![
            "lock",
            "--servers",
            &list,
            "--ttl",
            "soon",
            "res",
            "--",
            "true",
        ],
        vec!["lock", "--bogus", "res", "--", "true"],
        vec!["lock", "res", "--", "true"],
        vec!["unlock", "--servers", &list, "res"],
        vec!["bench", "--servers", &list, "--resources", "some"],
        vec!["frobnicate"],
        vec!["lock", "--servers", "redis://:pw@[::1", "res", "--", "true"],
    ] {
        let out = run(redlock().args(&args));
        assert_eq!(code(&out), 64, "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(!err.contains("pw"), "a password leaked: {err}");
    }
    // --help and --version succeed.
    for args in [
        vec!["--help"],
        vec!["--version"],
        vec!["lock", "--help"],
        vec!["acquire", "--help"],
        vec!["unlock", "--help"],
        vec!["inspect", "--help"],
        vec!["bench", "--help"],
        vec!["demo", "--help"],
    ] {
        let out = run(redlock().args(&args));
        assert_eq!(code(&out), 0, "{args:?}");
        assert!(!stdout(&out).is_empty());
    }
}

/// Issue 9, item 9: the client's timeouts, retries and restart guard from
/// the command line.
#[test]
fn client_flags_are_checked_and_take_effect() {
    let (servers, list) = servers(3);
    // Bad values: 64, one line, naming the option.
    for (args, option) in [
        (
            vec!["acquire", "--request-timeout", "soon", "r"],
            "--request-timeout",
        ),
        (
            vec!["acquire", "--request-timeout", "0", "r"],
            "--request-timeout",
        ),
        (
            vec!["acquire", "--ttl", "1s", "--request-timeout", "1s", "r"],
            "--request-timeout",
        ),
        (
            vec!["inspect", "--connect-timeout", "0", "r"],
            "--connect-timeout",
        ),
        (vec!["acquire", "--retries", "-1", "r"], "--retries"),
        (
            vec!["lock", "--retries", "x", "r", "--", "true"],
            "--retries",
        ),
        (
            vec!["acquire", "--retry-delay", "1,5s", "r"],
            "--retry-delay",
        ),
        (
            vec!["acquire", "--restart-guard", "0", "r"],
            "--restart-guard",
        ),
        (vec!["acquire", "--commands", "lua", "r"], "--commands"),
        // Options a subcommand has no use for are unknown to it.
        (vec!["unlock", "--retries", "1", "r", "t"], "--retries"),
        (vec!["bench", "--retry-delay", "1s"], "--retry-delay"),
    ] {
        let out = run(redlock()
            .arg(args[0])
            .args(["--servers", &list])
            .args(&args[1..]));
        assert_eq!(code(&out), 64, "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(option), "{args:?}: {err}");
    }
    // Every subcommand that talks to servers documents its options.
    for (sub, options) in [
        (
            "lock",
            &[
                "--request-timeout",
                "--connect-timeout",
                "--retries",
                "--retry-delay",
                "--restart-guard",
            ][..],
        ),
        (
            "acquire",
            &[
                "--request-timeout",
                "--connect-timeout",
                "--retries",
                "--retry-delay",
                "--restart-guard",
            ],
        ),
        ("unlock", &["--request-timeout", "--connect-timeout"]),
        ("inspect", &["--request-timeout", "--connect-timeout"]),
        (
            "bench",
            &["--request-timeout", "--connect-timeout", "--restart-guard"],
        ),
        (
            "demo",
            &["--request-timeout", "--connect-timeout", "--restart-guard"],
        ),
    ] {
        let help = stdout(&run(redlock().args([sub, "--help"])));
        for o in options {
            assert!(help.contains(o), "{sub} --help lacks {o}: {help}");
        }
    }
    let top = stdout(&run(redlock().arg("--help")));
    for o in [
        "--request-timeout",
        "--connect-timeout",
        "--retries",
        "--retry-delay",
        "--restart-guard",
    ] {
        assert!(top.contains(o), "--help lacks {o}");
    }

    // --retries: with the lock held elsewhere, N retries are N + 1
    // attempts, each a SET on a majority at least.
    let out = run(redlock().args(["acquire", "--servers", &list, "held"]));
    assert_eq!(code(&out), 0, "stderr: {}", stderr(&out));
    for (retries, attempts) in [("0", 1), ("2", 3)] {
        for s in &servers {
            s.conn()
                .unwrap()
                .request(&[b"CONFIG", b"RESETSTAT"])
                .unwrap();
        }
        let out = run(redlock().args([
            "acquire",
            "--servers",
            &list,
            "--retries",
            retries,
            "--retry-delay",
            "1ms",
            "held",
        ]));
        assert_eq!(code(&out), 75, "stderr: {}", stderr(&out));
        let sets: u64 = servers.iter().map(|s| calls(s, "set")).sum();
        assert!(
            (2 * attempts..=3 * attempts).contains(&sets),
            "--retries {retries}: {sets} SETs on 3 servers"
        );
    }

    // --restart-guard: every server just started, so no vote counts.
    let out = run(redlock().args([
        "acquire",
        "--servers",
        &list,
        "--restart-guard",
        "1h",
        "guarded",
    ]));
    assert_eq!(code(&out), 69, "stderr: {}", stderr(&out));
    assert!(stderr(&out).contains("restarted"), "{}", stderr(&out));

    // --request-timeout: servers that never answer (listeners that never
    // accept; the kernel completes the connects) are waited for that long.
    let silent: Vec<std::net::TcpListener> = (0..3)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let silent_list = silent
        .iter()
        .map(|l| l.local_addr().unwrap().to_string())
        .collect::<Vec<_>>()
        .join(",");
    let started = Instant::now();
    let out = run(redlock().args([
        "acquire",
        "--servers",
        &silent_list,
        "--retries",
        "0",
        "--request-timeout",
        "1500ms",
        "--connect-timeout",
        "2s",
        "res",
    ]));
    let took = started.elapsed();
    assert_eq!(code(&out), 69, "stderr: {}", stderr(&out));
    assert!(
        stderr(&out).contains("no answer within the request timeout"),
        "{}",
        stderr(&out)
    );
    assert!(took >= Duration::from_millis(1400), "waited only {took:?}");
}

/// Issue 9, item 4: no output of the command shows a password, whether the
/// URL is right, wrong, misplaced or not even UTF-8.
#[test]
fn no_output_shows_a_password() {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;

    const SECRET: &str = "Sekr1t";
    let password = format!("{SECRET}@:/%");
    let servers: Vec<RedisServer> = (0..3)
        .map(|_| RedisServer::start_with(&["--requirepass", &password]).unwrap())
        .collect();
    // The password %-escaped: Sekr1t%40%3A%2F%25.
    let escaped = format!("{SECRET}%40%3A%2F%25");
    let url = |s: &RedisServer, pw: &str| format!("redis://:{pw}@{}", s.addr());
    let list = servers
        .iter()
        .map(|s| url(s, &escaped))
        .collect::<Vec<_>>()
        .join(",");
    let wrong = servers
        .iter()
        .map(|s| url(s, &format!("{escaped}wrong")))
        .collect::<Vec<_>>()
        .join(",");
    let raw_byte = |prefix: &str| {
        let mut bytes = format!("redis://:{SECRET}@:/%").into_bytes();
        bytes.push(0xff);
        bytes.extend_from_slice(format!("@{}", servers[0].addr()).as_bytes());
        let mut arg = prefix.as_bytes().to_vec();
        arg.extend(bytes);
        OsString::from_vec(arg)
    };
    let check = |what: &str, out: &Output, expect: i32| {
        let all = format!("{}{}", stdout(out), stderr(out));
        assert_eq!(code(out), expect, "{what}: {all}");
        assert!(!all.contains(SECRET), "{what} showed the password: {all}");
        all
    };

    // Right: every subcommand works and shows the servers without it.
    let out = run(redlock().args(["acquire", "--servers", &list, "--ttl", "20s", "res"]));
    let token = check("acquire", &out, 0)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let all = check(
        "inspect",
        &run(redlock().args(["inspect", "--servers", &list, "res"])),
        0,
    );
    // Servers by address: no password, not even masked.
    assert!(all.contains(&servers[0].addr().to_string()), "{all}");
    assert!(!all.contains("***"), "{all}");
    check(
        "inspect --json",
        &run(redlock().args(["inspect", "--servers", &list, "--json", "res"])),
        0,
    );
    check(
        "unlock",
        &run(redlock().args(["unlock", "--servers", &list, "res", &token])),
        0,
    );
    check(
        "lock",
        &run(redlock().args(["lock", "--servers", &list, "res", "--", "true"])),
        0,
    );
    check(
        "bench",
        &run(redlock().args(["bench", "--servers", &list, "--duration", "200ms"])),
        0,
    );
    let all = check(
        "demo",
        &run(redlock().args(["demo", "--servers", &list, "--duration", "1s"])),
        0,
    );
    assert!(all.contains("servers: redis://:***@"), "{all}");

    // Wrong: 69, naming each server without it.
    let all = check(
        "wrong password",
        &run(redlock().args(["acquire", "--servers", &wrong, "res"])),
        69,
    );
    assert!(all.contains("127.0.0.1:"), "{all}");
    assert!(all.contains("WRONGPASS"), "{all}");

    // Misplaced, or in a bad URL: 64. A server URL given as the lock's
    // name (servers from the environment) is refused, unseen, by every
    // subcommand that takes one.
    let bad_port = format!("redis://:{escaped}@127.0.0.1:99999");
    let one = url(&servers[0], &escaped);
    for args in [
        vec!["acquire", &one],
        vec!["unlock", &one, &token],
        vec!["inspect", &one],
        vec!["fence-repair", "--at-least", "1", &one],
        vec!["lock", &one, "true"],
    ] {
        let out = run(redlock().args(&args).env("REDLOCK_SERVERS", &list));
        let all = check(&format!("{args:?}"), &out, 64);
        assert!(all.contains("RESOURCE"), "{all}");
    }
    // The same given as a token, a TLS file or name: refused, unseen.
    for args in [
        vec!["unlock", "res", &one],
        vec!["acquire", "--tls-ca", &one, "res"],
        vec!["acquire", "--tls-cert", &one, "--tls-key", "k", "res"],
        vec!["acquire", "--tls-server-name", &one, "res"],
    ] {
        let out = run(redlock().args(&args).env("REDLOCK_SERVERS", &list));
        check(&format!("{args:?}"), &out, 64);
    }
    // As the command of `lock` (RESOURCE SERVERS CMD by mistake): it
    // cannot run (127), and is not shown.
    check(
        "lock RESOURCE URL",
        &run(redlock()
            .args(["lock", "res-cmd", &one])
            .env("REDLOCK_SERVERS", &list)),
        127,
    );
    for args in [
        vec!["inspect", "--servers", &list, "res", &list],
        vec![list.as_str(), "res"],
        vec!["acquire", "--servers", &bad_port, "res"],
        vec!["acquire", "--servers", &list, "--ttl", &list, "res"],
        vec!["acquire", "--servers", &list, &format!("-{list}"), "res"],
        vec![
            "lock",
            "--servers",
            &list,
            &format!("--{list}"),
            "res",
            "--",
            "true",
        ],
    ] {
        check(&format!("{args:?}"), &run(redlock().args(&args)), 64);
    }

    // Not UTF-8 (a raw byte 0xff), as an argument or in the environment:
    // 64, saying which argument, and how to write such a password.
    for (args, position) in [
        (
            vec![
                OsString::from("acquire"),
                OsString::from("--servers"),
                raw_byte(""),
                OsString::from("res"),
            ],
            "argument 3",
        ),
        (
            vec![
                OsString::from("acquire"),
                raw_byte("--servers="),
                OsString::from("res"),
            ],
            "argument 2",
        ),
        (
            vec![
                OsString::from("inspect"),
                OsString::from("res"),
                raw_byte(""),
            ],
            "argument 3",
        ),
        // Before the subcommand, even `lock` (whose command may hold any
        // bytes).
        (
            vec![
                raw_byte(""),
                OsString::from("lock"),
                OsString::from("res"),
                OsString::from("true"),
            ],
            "argument 1",
        ),
    ] {
        let all = check("a raw byte", &run(redlock().args(&args)), 64);
        assert!(all.contains(position) && all.contains("%FF"), "{all}");
    }
    let mut env = raw_byte("");
    env.push(",127.0.0.1:1");
    let all = check(
        "REDLOCK_SERVERS with a raw byte",
        &run(redlock()
            .env("REDLOCK_SERVERS", &env)
            .args(["acquire", "res"])),
        64,
    );
    assert!(
        all.contains("REDLOCK_SERVERS") && all.contains("%FF"),
        "{all}"
    );
    // The command of `lock` gets its arguments as given, bytes that are
    // not UTF-8 included (a file name, say), as flock(1) passes them.
    let out = run(redlock().args([
        OsString::from("lock"),
        OsString::from("--servers"),
        OsString::from(&list),
        OsString::from("res"),
        OsString::from("printf"),
        OsString::from("%s"),
        OsString::from_vec(vec![b'a', 0xff, b'b']),
    ]));
    check("lock with a raw byte for the command", &out, 0);
    assert_eq!(out.stdout, [b'a', 0xff, b'b']);
}

/// Issue 10, item 1: a bare number is seconds (`--ttl 10` is ten seconds),
/// as for sleep(1), timeout(1) and flock -w; units and fractions work.
#[test]
fn bare_numbers_in_durations_are_seconds() {
    let (servers, list) = servers(3);
    for (ttl, key, lo, hi) in [
        ("10", "bare", 9_000, 10_000),
        ("0.5", "fraction", 300, 500),
        ("1.5s", "fraction-unit", 1_300, 1_500),
        ("250ms", "unit", 150, 250),
    ] {
        let out = run(redlock().args(["acquire", "--servers", &list, "--ttl", ttl, key]));
        assert_eq!(code(&out), 0, "--ttl {ttl}: {}", stderr(&out));
        let validity: i64 = stdout(&out)
            .split_whitespace()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            (lo..=hi).contains(&validity),
            "--ttl {ttl}: validity {validity} ms"
        );
        if ttl == "10" {
            let left = pttl(&servers[0], key);
            assert!(left > 8_000, "--ttl 10 set a PTTL of {left} ms");
        }
    }
    // --wait 1 is one second of waiting for a held lock.
    let started = Instant::now();
    let out = run(redlock().args(["acquire", "--servers", &list, "--wait", "1", "bare"]));
    let took = started.elapsed();
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(10),
        "--wait 1 waited {took:?}"
    );
    // The help says so, everywhere durations are read.
    let top = stdout(&run(redlock().arg("--help")));
    assert!(top.contains("a bare number is seconds"), "{top}");
    assert!(!top.contains("milliseconds"), "{top}");
    for sub in ["lock", "acquire"] {
        let help = stdout(&run(redlock().args([sub, "--help"])));
        assert!(help.contains("a bare number is seconds"), "{sub}: {help}");
    }
    // A bad duration says what a good one looks like.
    let out = run(redlock().args(["acquire", "--servers", &list, "--ttl", "1,5", "x"]));
    assert_eq!(code(&out), 64);
    assert!(stderr(&out).contains("seconds"), "{}", stderr(&out));
}

/// Issue 10, item 2: flock(1)'s -w, -n and -E, and a wait without bound.
#[test]
fn flock_habits_wait_nonblock_and_conflict_exit_code() {
    let (servers, list) = servers(3);
    let dir = scratch("flock");
    let out = run(redlock().args(["acquire", "--servers", &list, "--ttl", "60", "busy"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let token = stdout(&out).split_whitespace().next().unwrap().to_string();

    // -n: one attempt (one SET per server at most), then 75 at once.
    reset_stats(&servers);
    let started = Instant::now();
    let out = run(redlock().args(["lock", "--servers", &list, "-n", "busy", "--", "true"]));
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(2));
    let sets: u64 = servers.iter().map(|s| calls(s, "set")).sum();
    assert!((2..=3).contains(&sets), "-n made {sets} SETs on 3 servers");
    // -E: the status for "held by someone else", with -n, -w, and long.
    for (args, status) in [
        (vec!["lock", "-n", "-E", "1", "busy", "--", "true"], 1),
        (vec!["lock", "-nE", "9", "busy", "--", "true"], 9),
        (vec!["acquire", "-w", "0.3", "-E", "3", "busy"], 3),
        (
            vec!["acquire", "--nonblock", "--conflict-exit-code=0", "busy"],
            0,
        ),
        (vec!["acquire", "-n", "busy"], 75),
    ] {
        let out = run(redlock()
            .arg(args[0])
            .args(["--servers", &list])
            .args(&args[1..]));
        assert_eq!(code(&out), status, "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("held by another"),
            "{args:?}: {}",
            stderr(&out)
        );
        assert!(stdout(&out).is_empty(), "{args:?}");
    }
    // -n with -w (or --retries) is a usage error, as are bad values.
    for args in [
        vec!["lock", "-n", "-w", "5", "busy", "--", "true"],
        vec!["acquire", "--nonblock", "--wait", "5", "busy"],
        vec!["acquire", "-n", "--retries", "2", "busy"],
        vec!["acquire", "-E", "256", "busy"],
        vec!["acquire", "-w", "later", "busy"],
        vec!["acquire", "-x", "busy"],
    ] {
        let out = run(redlock()
            .arg(args[0])
            .args(["--servers", &list])
            .args(&args[1..]));
        assert_eq!(code(&out), 64, "{args:?}: {}", stderr(&out));
        assert_eq!(stderr(&out).trim().lines().count(), 1, "{args:?}");
    }

    // --wait forever: waits past any deadline until the holder lets go.
    let marker = dir.join("ran");
    let waiter = Running::new(start(
        redlock()
            .args([
                "lock",
                "--servers",
                &list,
                "--wait",
                "forever",
                "busy",
                "--",
            ])
            .args(["sh", "-c", &format!("touch {}", marker.display())]),
    ));
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!marker.exists(), "ran while the lock was held elsewhere");
    let out = run(redlock().args(["unlock", "--servers", &list, "busy", &token]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = waiter.finish();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(marker.exists());

    // -w inf stays interruptible: SIGTERM ends the wait at once.
    let out = run(redlock().args(["acquire", "--servers", &list, "busy"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let waiter = Running::new(start(redlock().args([
        "lock",
        "--servers",
        &list,
        "-w",
        "inf",
        "busy",
        "--",
        "true",
    ])));
    std::thread::sleep(Duration::from_millis(500));
    let sent = Instant::now();
    send_signal("TERM", &waiter.pid().to_string());
    let out = waiter.finish();
    assert_eq!(code(&out), 143, "{}", stderr(&out));
    assert!(stderr(&out).contains("interrupted"), "{}", stderr(&out));
    assert!(sent.elapsed() < Duration::from_secs(5));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 10, item 2: the top-level usage names every option of every
/// subcommand (bench --ttl and demo --workers were missing), and the
/// short options of flock(1).
#[test]
fn the_top_level_usage_names_every_option() {
    let top = stdout(&run(redlock().arg("--help")));
    for sub in [
        "lock",
        "acquire",
        "unlock",
        "inspect",
        "fence-repair",
        "bench",
        "demo",
    ] {
        let help = stdout(&run(redlock().args([sub, "--help"])));
        let options = long_options(&help);
        assert!(!options.is_empty(), "{sub}: {help}");
        for option in options {
            assert!(top.contains(&option), "--help lacks {sub}'s {option}");
        }
    }
    for short in ["-w", "-n", "-E", "-v", "-h"] {
        assert!(top.contains(short), "--help lacks {short}");
    }
    let usage = top
        .lines()
        .find(|l| l.trim_start().starts_with("redlock bench"))
        .unwrap();
    assert!(usage.contains("--ttl"), "{usage}");
    let usage = top
        .lines()
        .find(|l| l.trim_start().starts_with("redlock demo"))
        .unwrap();
    assert!(usage.contains("--workers"), "{usage}");
}

/// Issue 10, item 5: -v, -vv (before or after the subcommand) and RUST_LOG
/// show the library's log records on stderr, never a password; without
/// them, nothing is logged.
#[test]
fn verbose_shows_the_library_log_without_passwords() {
    const SECRET: &str = "Sekr1tLog";
    let servers: Vec<RedisServer> = (0..3)
        .map(|_| RedisServer::start_with(&["--requirepass", SECRET]).unwrap())
        .collect();
    let list = servers
        .iter()
        .map(|s| format!("redis://:{SECRET}@{}", s.addr()))
        .collect::<Vec<_>>()
        .join(",");
    let no_secret = |what: &str, out: &Output| {
        let all = format!("{}{}", stdout(out), stderr(out));
        assert!(!all.contains(SECRET), "{what} showed the password: {all}");
    };

    // Quiet by default.
    let out = run(redlock().args(["acquire", "--servers", &list, "quiet"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));

    // -vv: the debug records, connections included, by address.
    for args in [
        vec!["acquire", "-vv", "--servers", &list, "loud"],
        vec!["-vv", "inspect", "--servers", &list, "loud"],
        vec!["-v", "unlock", "--verbose", "--servers", &list, "loud", "x"],
    ] {
        let out = run(redlock().args(&args));
        let err = stderr(&out);
        assert!(err.contains("DEBUG"), "{args:?}: {err}");
        assert!(err.contains("connected to"), "{args:?}: {err}");
        assert!(err.contains(&servers[0].addr().to_string()), "{err}");
        no_secret(&format!("{args:?}"), &out);
    }
    // RUST_LOG works alone.
    let out = run(redlock().env("RUST_LOG", "redlock=debug").args([
        "inspect",
        "--servers",
        &list,
        "loud",
    ]));
    assert!(stderr(&out).contains("connected to"), "{}", stderr(&out));
    no_secret("RUST_LOG", &out);

    // -v: warnings and decisions, not the debug records. A wrong
    // password: each refusal is logged, without the password.
    let wrong = list.replace(SECRET, "Wr0ng");
    let out = run(redlock().args(["acquire", "-v", "--servers", &wrong, "x"]));
    assert_eq!(code(&out), 69, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("WARN") && err.contains("WRONGPASS"), "{err}");
    assert!(err.contains(&servers[1].addr().to_string()), "{err}");
    assert!(!err.contains("DEBUG"), "{err}");
    no_secret("-v with a wrong password", &out);
    let out = run(redlock().args(["acquire", "-vv", "--servers", &wrong, "x"]));
    assert_eq!(code(&out), 69, "{}", stderr(&out));
    no_secret("wrong password", &out);
}

/// `bench --async`: N tasks on one thread (the async API) instead of N
/// threads, with the same JSON fields, and cycles that succeed.
#[test]
fn bench_async_runs_tasks_with_the_same_json() {
    let (_servers, list) = servers(3);
    let bench = |extra: &[&str], duration: &str| {
        let mut args = vec![
            "bench",
            "--servers",
            &list,
            "--clients",
            "4",
            "--duration",
            duration,
            "--json",
        ];
        args.extend_from_slice(extra);
        let out = run(redlock().args(&args));
        assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
        let json = stdout(&out);
        assert_eq!(json.trim().lines().count(), 1, "{json}");
        json
    };
    // `"name": ` in order, nested ones included.
    let keys = |json: &str| -> Vec<String> {
        json.split('"')
            .collect::<Vec<_>>()
            .windows(3)
            .filter(|w| w[2].starts_with(": "))
            .map(|w| w[1].to_string())
            .collect()
    };
    let tasks = bench(&["--async"], "1s");
    let threads = bench(&[], "300ms");
    assert_eq!(keys(&tasks), keys(&threads), "{tasks}\n{threads}");
    assert!(keys(&tasks).contains(&"p999".to_string()), "{tasks}");
    // Not `"errors": 0`: a loaded machine may time out a request.
    for key in [
        "\"servers\": 3",
        "\"clients\": 4",
        "\"resources\": \"distinct\"",
        "\"conflicts\": 0",
    ] {
        assert!(tasks.contains(key), "{key} missing in {tasks}");
    }
    let cycles: u64 = tasks
        .split("\"cycles\": ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no cycles in {tasks}"));
    assert!(cycles > 0, "{tasks}");
}

/// `--commands native` refuses servers without native commands (Redis 7
/// here) and says why; `--commands scripts` and the default work there.
#[test]
fn commands_native_refuses_a_server_without_them() {
    let (_servers, list) = servers(3);
    let out = run(redlock().args([
        "acquire",
        "--servers",
        &list,
        "--commands",
        "native",
        "--retries",
        "0",
        "cmd-native",
    ]));
    assert_ne!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).is_empty());
    assert!(
        stderr(&out).contains("no native commands"),
        "{}",
        stderr(&out)
    );
    for mode in ["scripts", "auto"] {
        let out = run(redlock().args([
            "acquire",
            "--servers",
            &list,
            "--commands",
            mode,
            "cmd-native",
        ]));
        assert_eq!(code(&out), 0, "{mode}: {}", stderr(&out));
        let token = stdout(&out);
        let token = token.split_whitespace().next().unwrap().to_string();
        let out = run(redlock().args([
            "unlock",
            "--servers",
            &list,
            "--commands",
            mode,
            "cmd-native",
            &token,
        ]));
        assert_eq!(code(&out), 0, "{mode}: {}", stderr(&out));
    }
}

/// `-v` says what happened: each operation's outcome, every server by
/// address (a server that is down included), and the time it took, at
/// info level, also when the operation succeeded.
#[test]
fn verbose_says_what_happened_to_each_server() {
    let (_servers, list) = servers(2);
    let down = format!("127.0.0.1:{}", redlock_tests::free_port().unwrap());
    let list = format!("{list},{down}");
    for verbose in [["-v", "acquire"], ["acquire", "-v"]] {
        let out = run(redlock().args(verbose).args([
            "--servers",
            &list,
            "--retries",
            "0",
            "verbose-res",
        ]));
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let err = stderr(&out);
        let line = err
            .lines()
            .find(|l| l.contains("acquire \"verbose-res\": held"))
            .unwrap_or_else(|| panic!("no outcome line: {err}"));
        for address in list.split(',') {
            assert!(line.contains(address), "{address} missing: {line}");
        }
        assert!(line.contains(" ms"), "{line}");
        let token = stdout(&out).split_whitespace().next().unwrap().to_string();
        let out = run(redlock().args(["-v", "unlock", "--servers", &list, "verbose-res", &token]));
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let err = stderr(&out);
        let line = err
            .lines()
            .find(|l| l.contains("release \"verbose-res\": deleted on 2"))
            .unwrap_or_else(|| panic!("no outcome line: {err}"));
        assert!(line.contains(&down), "{line}");
    }
    // Without -v: nothing on stderr.
    let out = run(redlock().args(["acquire", "--servers", &list, "--retries", "0", "quiet-res"]));
    assert_eq!(code(&out), 0);
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
}

/// Issue 27: a mistyped option or subcommand is a usage error (64) in one
/// line that names what was probably meant.
#[test]
fn a_mistyped_option_or_subcommand_says_what_was_meant() {
    for (args, meant) in [
        (&["acquire", "--wiat", "1", "r"][..], "--wait"),
        (
            &["lock", "--servers", "h:1", "--fense", "r", "--", "true"],
            "--fence",
        ),
        (&["ackquire", "r"], "acquire"),
        (&["acquire", "--commands", "nativ", "r"], "native"),
    ] {
        let out = run(redlock().args(args));
        assert_eq!(code(&out), 64, "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.contains("did you mean") && err.contains(meant),
            "{args:?}: {err}"
        );
        assert!(stdout(&out).is_empty(), "{args:?}");
    }
}

/// Issue 27: help and the version go to stdout (0); without a subcommand,
/// the help goes to stderr (64); `-h` is `--help`, and `help SUBCOMMAND` is
/// `SUBCOMMAND --help`.
#[test]
fn help_version_and_no_subcommand() {
    let help = run(redlock().arg("--help"));
    assert_eq!(code(&help), 0);
    assert!(stderr(&help).is_empty(), "{}", stderr(&help));
    assert!(stdout(&help).contains("Usage:"), "{}", stdout(&help));
    for args in [&["-h"][..], &["help"]] {
        let out = run(redlock().args(args));
        assert_eq!(code(&out), 0, "{args:?}");
        assert_eq!(stdout(&out), stdout(&help), "{args:?}");
    }
    let lock = stdout(&run(redlock().args(["lock", "--help"])));
    assert!(
        lock.contains("RESOURCE") && lock.contains("--grace"),
        "{lock}"
    );
    for args in [
        &["lock", "-h"][..],
        &["help", "lock"],
        &["-v", "lock", "--help"],
    ] {
        let out = run(redlock().args(args));
        assert_eq!(code(&out), 0, "{args:?}");
        assert_eq!(stdout(&out), lock, "{args:?}");
    }
    for args in [&["--version"][..], &["-V"], &["version"]] {
        let out = run(redlock().args(args));
        assert_eq!(code(&out), 0, "{args:?}");
        assert_eq!(
            stdout(&out).trim(),
            format!("redlock {}", env!("CARGO_PKG_VERSION")),
            "{args:?}"
        );
    }
    for args in [&[][..], &["-v"], &["-vv"], &["--verbose"]] {
        let out = run(redlock().args(args));
        assert_eq!(code(&out), 64, "{args:?}");
        assert!(stdout(&out).is_empty(), "{args:?}");
        assert!(
            stderr(&out).contains("Usage:"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    // Anything else without a subcommand is a usage error of one line.
    for args in [&["--"][..], &["-v", "--"]] {
        let out = run(redlock().args(args));
        assert_eq!(code(&out), 64, "{args:?}");
        assert_eq!(
            stderr(&out).trim().lines().count(),
            1,
            "{args:?}: {}",
            stderr(&out)
        );
        assert!(stderr(&out).contains("subcommand"), "{}", stderr(&out));
    }
}

/// `acquire` whose token cannot be printed (stdout closed) gives the lock
/// back and says so (74): nobody could have released it.
#[test]
fn acquire_gives_the_lock_back_when_it_cannot_print_the_token() {
    let (servers, list) = servers(3);
    let (reader, out) = std::io::pipe().unwrap();
    drop(reader);
    let got = finish(
        redlock()
            .args(["acquire", "--servers", &list, "untold"])
            .stdout(out)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    assert_eq!(code(&got), 74, "{}", stderr(&got));
    assert!(stderr(&got).contains("released"), "{}", stderr(&got));
    for s in &servers {
        assert_eq!(get(s, "untold"), Value::Nil, "{}", s.addr());
    }
}

/// No panic (status 101) when stdout or stderr is a pipe nobody reads:
/// help, usage errors and failures keep their exit statuses.
#[test]
fn a_closed_stdout_or_stderr_changes_no_exit_status() {
    for (args, status) in [
        (&["--help"][..], 0),
        (&[][..], 64),
        (&["--bogus"], 64),
        (&["completions", "bash"], 0),
        (&["man"], 0),
        (
            &["acquire", "--servers", "127.0.0.1:1", "--retries", "0", "r"],
            69,
        ),
    ] {
        let (reader, out) = std::io::pipe().unwrap();
        let err = out.try_clone().unwrap();
        drop(reader);
        // Not `run`: it would capture both.
        let got = finish(
            redlock()
                .args(args)
                .stdout(out)
                .stderr(err)
                .spawn()
                .unwrap(),
        );
        assert_eq!(code(&got), status, "{args:?}");
    }
}

/// Issue 27: `redlock completions bash|zsh|fish` prints a completion script
/// naming the subcommands and their options (bash's parses, and completes);
/// another shell is a usage error.
#[test]
fn completions_for_bash_zsh_and_fish() {
    for shell in ["bash", "zsh", "fish"] {
        let out = run(redlock().args(["completions", shell]));
        assert_eq!(code(&out), 0, "{shell}: {}", stderr(&out));
        let script = stdout(&out);
        assert!(script.len() > 1000, "{shell}: {script}");
        for word in ["redlock", "acquire", "fence-repair", "wait", "servers"] {
            assert!(script.contains(word), "{shell}: {word} missing");
        }
        assert!(stderr(&out).is_empty(), "{shell}: {}", stderr(&out));
    }
    // A duration completes to nothing (not to file names); a file does.
    let fish = stdout(&run(redlock().args(["completions", "fish"])));
    let line = |long: &str| {
        fish.lines()
            .find(|l| l.contains(&format!("-l {long} ")))
            .unwrap_or_else(|| panic!("no --{long} in {fish}"))
            .to_string()
    };
    assert!(line("ttl").ends_with("-r -f"), "{}", line("ttl"));
    assert!(line("wait").ends_with("-r -f"), "{}", line("wait"));
    assert!(line("tls-ca").ends_with("-r -F"), "{}", line("tls-ca"));
    let dir = scratch("completions");
    let script = dir.join("redlock.bash");
    std::fs::write(&script, run(redlock().args(["completions", "bash"])).stdout).unwrap();
    let check = run(Command::new("bash").arg("-n").arg(&script));
    assert_eq!(code(&check), 0, "bash -n: {}", stderr(&check));
    // What bash offers after `redlock acq` and `redlock acquire --wa`.
    let complete = |words: &str, cword: usize| {
        let out = run(Command::new("bash").arg("-c").arg(format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD={cword}; \
             _redlock redlock \"${{COMP_WORDS[$COMP_CWORD]}}\" \"${{COMP_WORDS[$COMP_CWORD-1]}}\"; \
             echo \"${{COMPREPLY[*]}}\"",
            script.display()
        )));
        assert_eq!(code(&out), 0, "{words}: {}", stderr(&out));
        stdout(&out).trim().to_string()
    };
    assert_eq!(complete("redlock acq", 1), "acquire");
    assert_eq!(complete("redlock acquire --wa", 2), "--wait");
    assert_eq!(complete("redlock unlock --comm", 2), "--commands");
    assert_eq!(
        complete("redlock unlock --commands ''", 3),
        "auto scripts native"
    );
    for args in [&["completions", "tcsh"][..], &["completions"]] {
        let out = run(redlock().args(args));
        assert_eq!(code(&out), 64, "{args:?}");
        assert_eq!(stderr(&out).trim().lines().count(), 1, "{args:?}");
        assert!(stdout(&out).is_empty(), "{args:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 27: `redlock man` prints the man page checked in next to the
/// crate (the unit test `the_checked_in_man_page_is_up_to_date` checks that
/// it is what the definitions make).
#[test]
fn man_prints_the_checked_in_page() {
    let out = run(redlock().arg("man"));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let page = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("redlock.1")).unwrap();
    assert!(out.stdout == page, "redlock man differs from redlock.1");
}

/// Without `--`, the command starts at the first argument after RESOURCE
/// that is not one of redlock's options: its own options are its own.
#[test]
fn the_command_keeps_its_own_options_without_double_dash() {
    let (_servers, list) = servers(3);
    let out = run(redlock().args([
        "lock",
        "--servers",
        &list,
        "own",
        "--ttl",
        "5",
        "sh",
        "-c",
        "printf '%s\\n' \"$*\"",
        "sh",
        "-n",
        "--ttl",
        "-v",
        "--",
    ]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "-n --ttl -v --");
    // -v was the command's, not redlock's: nothing logged.
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
}

/// `--servers` wins over `REDLOCK_SERVERS`, which counts only without it;
/// a `--servers` that names none is an error, not a fall back to it.
#[test]
fn servers_from_the_option_before_the_environment() {
    let (_servers, list) = servers(3);
    let dead: Vec<String> = (0..3)
        .map(|_| format!("127.0.0.1:{}", free_port().unwrap()))
        .collect();
    let dead = dead.join(",");
    // From the environment alone.
    let out = run(redlock()
        .env("REDLOCK_SERVERS", format!(" {list} , "))
        .args(["acquire", "env-only"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // The option over the environment.
    let out = run(redlock().env("REDLOCK_SERVERS", &dead).args([
        "acquire",
        "--servers",
        &list,
        "option-first",
    ]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = run(redlock().env("REDLOCK_SERVERS", &list).args([
        "acquire",
        "--servers",
        &dead,
        "--retries",
        "0",
        "option-first-2",
    ]));
    assert_eq!(code(&out), 69, "{}", stderr(&out));
    // None named: 64, whatever the environment has.
    for (env, option) in [
        (Some(list.as_str()), Some("")),
        (Some(list.as_str()), Some(" , ")),
        (Some(""), None),
        (Some(" ,"), None),
        (None, None),
    ] {
        let mut cmd = redlock();
        cmd.arg("acquire");
        if let Some(env) = env {
            cmd.env("REDLOCK_SERVERS", env);
        }
        if let Some(option) = option {
            cmd.arg(format!("--servers={option}"));
        }
        let out = run(cmd.arg("none"));
        assert_eq!(code(&out), 64, "{env:?} {option:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("no servers"), "{}", stderr(&out));
    }
}
