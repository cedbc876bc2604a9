//! The subcommands for shell scripts: `acquire`, `inspect`, `unlock`,
//! `fence-repair`, and what their messages say.

use crate::common::*;

#[test]
fn too_few_servers_exits_69_naming_each_server() {
    let (_servers, list) = servers(1);
    // One live server and two ports where nothing listens.
    let dead: Vec<String> = (0..2)
        .map(|_| format!("127.0.0.1:{}", free_port().unwrap()))
        .collect();
    let all = format!("{list},{},{}", dead[0], dead[1]);
    let out = run(redlock().args(["lock", "--servers", &all, "res", "--", "true"]));
    assert_eq!(code(&out), 69, "stderr: {}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(&dead[0]) && err.contains("connection failed"),
        "{err}"
    );
    // Servers from the environment work the same way.
    let out = run(redlock()
        .env("REDLOCK_SERVERS", &all)
        .args(["acquire", "res"]));
    assert_eq!(code(&out), 69, "stderr: {}", stderr(&out));
}

#[test]
fn acquire_inspect_unlock_for_shell_scripts() {
    let (servers, list) = servers(3);
    let out = run(redlock().args(["acquire", "--servers", &list, "--ttl", "20s", "script-lock"]));
    assert_eq!(code(&out), 0, "stderr: {}", stderr(&out));
    let line = stdout(&out);
    let mut fields = line.split_whitespace();
    let token = fields.next().unwrap().to_string();
    let validity: u64 = fields.next().unwrap().parse().unwrap();
    assert_eq!(token.len(), 40);
    assert!(validity > 15_000 && validity <= 20_000, "{validity}");
    // A second acquire conflicts.
    let out = run(redlock().args(["acquire", "--servers", &list, "script-lock"]));
    assert_eq!(code(&out), 75, "stderr: {}", stderr(&out));

    let out = run(redlock().args(["inspect", "--servers", &list, "--json", "script-lock"]));
    assert_eq!(code(&out), 0, "stderr: {}", stderr(&out));
    let json = stdout(&out);
    assert_majority_holder(&json, &token);
    assert_eq!(json.matches("\"held\": true").count(), 3, "{json}");
    let out = run(redlock().args(["inspect", "--servers", &list, "script-lock"]));
    assert!(stdout(&out).contains(&format!("held by a majority: {token}")));

    // A wrong token releases nothing (and says the lock is held by
    // another); the right one releases everywhere.
    let out = run(redlock().args(["unlock", "--servers", &list, "script-lock", &"0".repeat(40)]));
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert_eq!(
        get(&servers[0], "script-lock"),
        Value::Bulk(token.clone().into_bytes())
    );
    let out = run(redlock().args(["unlock", "--servers", &list, "script-lock", &token]));
    assert_eq!(code(&out), 0, "stderr: {}", stderr(&out));
    assert!(
        stdout(&out).contains("deleted on 3 of 3"),
        "{}",
        stdout(&out)
    );
    for s in &servers {
        assert_eq!(get(s, "script-lock"), Value::Nil);
    }
    let out = run(redlock().args(["inspect", "--servers", &list, "--json", "script-lock"]));
    assert!(stdout(&out).contains("\"majority_holder\": null"));
}

/// Item 8 of issue 9, end to end: after a majority of servers lost the fence
/// counter, `lock --fence` exits 65 with what to do; `fence-repair` with the
/// highest fence the resource accepted makes the next token larger, and never
/// lowers a counter.
#[test]
fn lost_fence_counters_exit_65_and_fence_repair_mends_them() {
    let (mut servers, list) = servers(3);
    let fence_of = |out: &Output| -> u64 {
        assert_eq!(code(out), 0, "stderr: {}", stderr(out));
        stdout(out).trim().parse().unwrap()
    };
    let fenced = || {
        run(redlock()
            .args(["lock", "--servers", &list, "--fence", "fenced", "--"])
            .args(["sh", "-c", "echo $REDLOCK_FENCE"]))
    };
    let mut highest = 0;
    for _ in 0..3 {
        highest = fence_of(&fenced());
    }
    assert_eq!(highest, 3);
    for s in &mut servers[..2] {
        s.kill().unwrap();
        s.restart().unwrap();
    }
    let out = fenced();
    assert_eq!(code(&out), 65, "stderr: {}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("fence-repair"), "{err}");
    assert!(!err.contains("too few servers answered"), "{err}");
    // Usage errors first: the floor is required and must be a number.
    for bad in [
        vec!["fence-repair", "--servers", &list, "fenced"],
        vec![
            "fence-repair",
            "--servers",
            &list,
            "--at-least",
            "-1",
            "fenced",
        ],
        vec!["fence-repair", "--servers", &list, "--at-least", "3"],
    ] {
        assert_eq!(code(&run(redlock().args(&bad))), 64, "{bad:?}");
    }
    let out = run(redlock().args([
        "fence-repair",
        "--servers",
        &list,
        "--at-least",
        "3",
        "fenced",
    ]));
    assert_eq!(code(&out), 0, "stderr: {}", stderr(&out));
    assert!(
        stdout(&out).contains("on 3 of 3 servers"),
        "{}",
        stdout(&out)
    );
    let next = fence_of(&fenced());
    assert!(next > highest, "{next} after {highest}");
    // A lower floor leaves every counter where it is. (Not all equal: a
    // native fenced acquisition writes its fence where its vote counted,
    // which may be a majority only.)
    let before: Vec<Value> = servers.iter().map(|s| get(s, "fenced:fence")).collect();
    assert!(
        before
            .iter()
            .filter(|v| **v == Value::Bulk(next.to_string().into_bytes()))
            .count()
            >= 2,
        "{before:?}"
    );
    let out = run(redlock().args([
        "fence-repair",
        "--servers",
        &list,
        "--at-least",
        "1",
        "fenced",
    ]));
    assert_eq!(code(&out), 0, "stderr: {}", stderr(&out));
    let after: Vec<Value> = servers.iter().map(|s| get(s, "fenced:fence")).collect();
    assert_eq!(after, before);
}

/// Two entries for one server are a usage error (exit 64), named by address
/// without credentials; a refused handshake names the server's own error.
#[test]
fn duplicate_servers_exit_64_and_refusals_show_the_servers_words() {
    let (servers, _) = servers(2);
    let a = servers[0].addr();
    let b = servers[1].addr();
    let list = format!("redis://:sekrit@{a}/0,redis://{a}/1,{b}");
    let out = run(redlock().args(["acquire", "--servers", &list, "res"]));
    assert_eq!(code(&out), 64, "stderr: {}", stderr(&out));
    assert!(stderr(&out).contains("same server"), "{}", stderr(&out));
    assert!(!stderr(&out).contains("sekrit"), "{}", stderr(&out));
    // A database out of range: 69, in the server's words, nothing in db 0.
    let list = format!("redis://{a}/99,redis://{b}/99");
    let out = run(redlock().args(["acquire", "--servers", &list, "--retries", "0", "res"]));
    assert_eq!(code(&out), 69, "stderr: {}", stderr(&out));
    assert!(
        stderr(&out).contains("DB index is out of range"),
        "{}",
        stderr(&out)
    );
    assert_eq!(get(&servers[0], "res"), Value::Nil);
}

/// Issue 10, item 3: `unlock` says which case it is: released (0), nothing
/// held with that token (0), or held by another token on a majority (75,
/// or -E N).
#[test]
fn unlock_says_which_case_it_is_and_exits_accordingly() {
    let (servers, list) = servers(3);
    let acquire = |resource: &str, ttl: &str| {
        let out = run(redlock().args(["acquire", "--servers", &list, "--ttl", ttl, resource]));
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        stdout(&out).split_whitespace().next().unwrap().to_string()
    };
    let unlock = |resource: &str, token: &str, extra: &[&str]| {
        run(redlock()
            .args(["unlock", "--servers", &list])
            .args(extra)
            .args([resource, token]))
    };
    let token = acquire("held", "20");
    let stranger = "f".repeat(40);

    // Held by another token: 75, naming the holder and its time left.
    let out = unlock("held", &stranger, &[]);
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("held by another token"), "{err}");
    assert!(err.contains(&token) && err.contains("s left"), "{err}");
    assert!(stdout(&out).is_empty());
    let out = unlock("held", &stranger, &["-E", "3"]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let out = unlock("held", &stranger, &["--conflict-exit-code", "0"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    for s in &servers {
        assert_eq!(get(s, "held"), Value::Bulk(token.clone().into_bytes()));
    }

    // Released: 0.
    let out = unlock("held", &token, &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).starts_with("released"), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("deleted on 3 of 3"),
        "{}",
        stdout(&out)
    );

    // Released already, or expired: 0, saying nothing was held.
    let out = unlock("held", &token, &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("nothing was held"),
        "{}",
        stdout(&out)
    );
    let short = acquire("short", "0.2");
    std::thread::sleep(Duration::from_millis(400));
    let out = unlock("short", &short, &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("nothing was held"),
        "{}",
        stdout(&out)
    );

    // Another token on a minority only: not held by anyone, 0.
    servers[0]
        .conn()
        .unwrap()
        .request(&[b"SET", b"minority", stranger.as_bytes(), b"PX", b"20000"])
        .unwrap();
    let out = unlock("minority", &token, &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("nothing was held"),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        get(&servers[0], "minority"),
        Value::Bulk(stranger.into_bytes())
    );
}

/// Issue 10, item 4: messages name servers by address, in words; a second
/// run on a resource still held (by an earlier run, say) is told who holds
/// it and for how long.
#[test]
fn messages_name_servers_by_address_and_the_holder_of_a_held_lock() {
    let (servers, list) = servers(3);
    let out = run(redlock().args(["acquire", "--servers", &list, "--ttl", "30", "job"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let token = stdout(&out).split_whitespace().next().unwrap().to_string();
    for args in [
        vec!["lock", "--servers", &list, "job", "--", "true"],
        vec!["acquire", "--servers", &list, "-n", "job"],
    ] {
        let out = run(redlock().args(&args));
        assert_eq!(code(&out), 75, "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("held by another holder"), "{err}");
        assert!(err.contains("earlier run of redlock"), "{err}");
        assert!(err.contains(&format!("token {token}")), "{err}");
        assert!(err.contains("s left"), "{err}");
        // Each server by address; a majority said "held by another token"
        // (the last may not have been asked: the others had decided).
        for s in &servers {
            assert!(err.contains(&format!("{}: ", s.addr())), "{err}");
        }
        assert!(err.matches(": held by another token").count() >= 2, "{err}");
        assert!(!err.contains("server 0"), "{err}");
    }
    // inspect names each server by address, also one that does not answer,
    // with what happened in words.
    let dead = format!("127.0.0.1:{}", free_port().unwrap());
    let with_dead = format!("{list},{dead}");
    let out = run(redlock().args(["inspect", "--servers", &with_dead, "job"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    for s in &servers {
        assert!(text.contains(&s.addr().to_string()), "{text}");
    }
    let dead_line = text.lines().find(|l| l.starts_with(&dead)).unwrap();
    assert!(dead_line.contains("connection failed"), "{text}");
    assert!(
        !text.contains("server 0") && !text.contains("server 3"),
        "{text}"
    );
    let json = stdout(&run(redlock().args([
        "inspect",
        "--servers",
        &with_dead,
        "--json",
        "job",
    ])));
    assert!(json.contains(&format!("\"server\": \"{dead}\"")), "{json}");
}
