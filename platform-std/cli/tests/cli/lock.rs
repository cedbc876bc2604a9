//! `redlock lock`: a command run under a lock, signals, a lost lock, and the
//! command's process group dying with redlock.

use crate::common::*;

#[test]
fn runs_the_command_with_the_lock_held_and_exits_with_its_status() {
    let (servers, list) = servers(3);
    let dir = scratch("run");
    let child = start(
        redlock()
            .args(["lock", "--servers", &list, "job", "--"])
            .args(hold_until_go(&dir, 3)),
    );
    wait_for_file(&dir.join("started"));
    let seen = std::fs::read_to_string(dir.join("started")).unwrap();
    let (resource, token) = seen.trim().split_once(' ').unwrap();
    assert_eq!(resource, "job");
    assert_eq!(token.len(), 40);
    // While the command runs, every server holds the key with its token.
    for s in &servers {
        assert_eq!(get(s, "job"), Value::Bulk(token.as_bytes().to_vec()));
    }
    std::fs::write(dir.join("go"), "").unwrap();
    let out = finish(child);
    assert_eq!(code(&out), 3, "stderr: {}", stderr(&out));
    // Released when the command exited.
    for s in &servers {
        assert_eq!(get(s, "job"), Value::Nil);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_second_lock_on_a_held_resource_exits_75_or_waits_its_turn() {
    let (_servers, list) = servers(3);
    let dir = scratch("contend");
    let first = start(
        redlock()
            .args(["lock", "--servers", &list, "shared", "--"])
            .args(hold_until_go(&dir, 0)),
    );
    wait_for_file(&dir.join("started"));
    // Without --wait: the normal retries, then 75 with a reason.
    let out = run(redlock().args(["lock", "--servers", &list, "shared", "--", "true"]));
    assert_eq!(code(&out), 75, "stderr: {}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(err.contains("held by another"), "{err}");
    // With --wait: waits until the first one is done, then runs.
    let marker = dir.join("second-ran");
    let second = start(
        redlock()
            .args(["lock", "--servers", &list, "--wait", "20s", "shared", "--"])
            .args(["sh", "-c", &format!("touch {}", marker.display())]),
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !marker.exists(),
        "the second ran while the first held the lock"
    );
    std::fs::write(dir.join("go"), "").unwrap();
    assert_eq!(code(&finish(first)), 0);
    let out = finish(second);
    assert_eq!(code(&out), 0, "stderr: {}", stderr(&out));
    assert!(marker.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_lost_lock_terminates_the_command_and_exits_70() {
    let (servers, list) = servers(3);
    let dir = scratch("lost");
    let script = until_term(&dir, "terminated", 143);
    let child = start(
        redlock()
            .args(["lock", "-v", "--servers", &list, "--ttl", "3s", "doomed"])
            // Extensions get more than the 30 ms a 3 s ttl gives: a loaded
            // machine must not lose the lock before the test deletes it.
            .args(["--request-timeout", "100ms", "--"])
            .args(["sh", "-c", &script]),
    );
    wait_for_file(&dir.join("started"));
    // The watchdog keeps it past its ttl.
    std::thread::sleep(Duration::from_millis(3500));
    for s in &servers {
        assert_ne!(get(s, "doomed"), Value::Nil, "not kept alive");
    }
    // Deleted behind its back: the next extension fails.
    for s in &servers {
        s.conn().unwrap().request(&[b"DEL", b"doomed"]).unwrap();
    }
    let out = finish(child);
    assert_eq!(code(&out), 70, "stderr: {}", stderr(&out));
    assert!(stderr(&out).contains("lost the lock"), "{}", stderr(&out));
    // -v: the loss is among the lock's events, after the extensions.
    let err = stderr(&out);
    let kinds: Vec<&str> = err
        .lines()
        .filter_map(|l| l.split_once("lock event: "))
        .filter_map(|(_, e)| e.split_whitespace().next())
        .collect();
    assert_eq!(kinds.first(), Some(&"acquired"), "{err}");
    assert!(kinds.contains(&"extended"), "{err}");
    assert_eq!(kinds.last(), Some(&"lost"), "{err}");
    assert!(
        dir.join("terminated").exists(),
        "the command got no SIGTERM"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_lost_lock_stops_every_process_of_the_command() {
    let (servers, list) = servers(3);
    let dir = scratch("lost-tree");
    // The command starts a background process that ignores SIGTERM: only
    // the SIGKILL after the grace period, sent to the whole process group,
    // stops it.
    let script = format!(
        "sh -c 'trap \"\" TERM; while true; do sleep 0.05; done' & echo $! > {d}/bg.tmp; \
         mv {d}/bg.tmp {d}/bg; wait",
        d = dir.display()
    );
    let child = start(
        redlock()
            .args([
                "lock",
                "--servers",
                &list,
                "--ttl",
                "1s",
                "--grace",
                "300ms",
            ])
            .args(["tree", "--", "sh", "-c", &script]),
    );
    wait_for_file(&dir.join("bg"));
    let bg: u32 = std::fs::read_to_string(dir.join("bg"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(bg));
    for s in &servers {
        s.conn().unwrap().request(&[b"DEL", b"tree"]).unwrap();
    }
    let out = finish(child);
    assert_eq!(code(&out), 70, "stderr: {}", stderr(&out));
    let give_up = Instant::now() + Duration::from_secs(10);
    while alive(bg) {
        assert!(
            Instant::now() < give_up,
            "a process of the command outlived the lock"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_ctrl_c_to_redlock_and_its_group_reaches_the_command_once() {
    use std::os::unix::process::CommandExt;
    let (_servers, list) = servers(3);
    let dir = scratch("once");
    let script = format!(
        "trap 'echo int >> {d}/ints' INT; touch {d}/started; \
         i=0; while [ $i -lt 40 ]; do sleep 0.05; i=$((i+1)); done",
        d = dir.display()
    );
    // redlock leads its own group here, like a job in a shell: a Ctrl-C at
    // a terminal goes to the whole group.
    let child = start(
        redlock()
            .args([
                "lock",
                "--servers",
                &list,
                "once",
                "--",
                "sh",
                "-c",
                &script,
            ])
            .process_group(0),
    );
    wait_for_file(&dir.join("started"));
    let group = format!("-{}", child.id());
    send_signal("INT", &group);
    let out = finish(child);
    assert_eq!(code(&out), 0, "stderr: {}", stderr(&out));
    let ints = std::fs::read_to_string(dir.join("ints")).unwrap();
    assert_eq!(
        ints.lines().count(),
        1,
        "SIGINT reached the command more than once"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fencing_tokens_grow_across_runs() {
    let (_servers, list) = servers(3);
    let mut last = 0u64;
    for run_no in 0..3 {
        // Options may also follow the resource, before `--`.
        let args: &[&str] = if run_no == 1 {
            &["lock", "--servers", &list, "fenced", "--fence", "--"]
        } else {
            &["lock", "--servers", &list, "--fence", "fenced", "--"]
        };
        let out = run(redlock()
            .args(args)
            .args(["sh", "-c", "echo $REDLOCK_FENCE"]));
        assert_eq!(code(&out), 0, "stderr: {}", stderr(&out));
        let fence: u64 = stdout(&out).trim().parse().unwrap();
        assert!(fence > last, "{fence} after {last}");
        last = fence;
    }
    // Without --fence there is none.
    let out = run(redlock()
        .args(["lock", "--servers", &list, "fenced", "--"])
        .args(["sh", "-c", "echo \"[${REDLOCK_FENCE-unset}]\""]));
    assert_eq!(stdout(&out).trim(), "[unset]");
}

#[test]
fn signals_are_forwarded_and_the_lock_released() {
    let (servers, list) = servers(3);
    let dir = scratch("signal");
    let script = until_term(&dir, "got", 42);
    let child = start(
        redlock()
            .args(["lock", "--servers", &list, "sig", "--"])
            .args(["sh", "-c", &script]),
    );
    wait_for_file(&dir.join("started"));
    send_signal("TERM", &child.id().to_string());
    let out = finish(child);
    assert_eq!(code(&out), 42, "stderr: {}", stderr(&out));
    assert!(dir.join("got").exists());
    for s in &servers {
        assert_eq!(get(s, "sig"), Value::Nil, "not released");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 9, item 5: PR_SET_PDEATHSIG alone kills the command's leader only;
/// a process it started in its group (a grandchild of redlock) must die too.
#[test]
fn a_killed_redlock_takes_every_process_of_its_command_with_it() {
    let (_servers, list) = servers(3);
    let dir = scratch("kill9");
    let script = format!(
        "echo $$ > {d}/job.tmp; mv {d}/job.tmp {d}/job; \
         sleep 30 & echo $! > {d}/grandchild.tmp; mv {d}/grandchild.tmp {d}/grandchild; wait",
        d = dir.display()
    );
    // No pipes: the test must not wait for output that the command's
    // surviving processes would hold open.
    let log = std::fs::File::create(dir.join("stderr")).unwrap();
    let child = redlock()
        .args(["lock", "--servers", &list, "--ttl", "2s", "kill9", "--"])
        .args(["sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut running = Running::new(child);
    let pgid = read_pid(&dir.join("job"));
    running.groups.push(pgid);
    let grandchild = read_pid(&dir.join("grandchild"));
    let members = group_members(pgid);
    assert!(
        members.contains(&pgid) && members.contains(&grandchild),
        "the command's group {pgid}: {members:?}"
    );

    let redlock_pid = running.pid();
    send_signal("KILL", &redlock_pid.to_string());
    let _ = running.child.as_mut().unwrap().wait();
    let give_up = Instant::now() + Duration::from_secs(10);
    loop {
        let left = group_members(pgid);
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < give_up,
            "processes of the command outlived redlock (group {pgid}): {left:?}; redlock's stderr: {}",
            std::fs::read_to_string(dir.join("stderr")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 9, item 6: a lost lock's command gets SIGKILL before the validity
/// the client computed ends, whatever --grace says, also when a majority
/// said the key is gone.
#[test]
fn a_lost_lock_kills_a_command_that_ignores_sigterm_before_its_validity_ends() {
    let (servers, list) = servers(3);
    let dir = scratch("grace");
    let ttl = Duration::from_secs(3);
    // Ignores SIGTERM; left alone, it would finish after 40 s.
    let script = format!(
        "trap '' TERM; echo $$ > {d}/job.tmp; mv {d}/job.tmp {d}/job; \
         i=0; while [ $i -lt 40 ]; do sleep 1; i=$((i+1)); done; touch {d}/finished",
        d = dir.display()
    );
    let mut running = Running::new(start(
        redlock()
            .args(["lock", "--servers", &list, "--ttl", "3s", "--grace", "120s"])
            .args(["graceless", "--", "sh", "-c", &script]),
    ));
    let pgid = read_pid(&dir.join("job"));
    running.groups.push(pgid);
    // Deleted behind its back: the next extension finds it not held. The
    // last extension that succeeded was sent before the delete, so the
    // validity the client computed ends before `deleted + ttl`.
    for s in &servers {
        s.conn().unwrap().request(&[b"DEL", b"graceless"]).unwrap();
    }
    let deleted = Instant::now();
    let out = running.finish();
    let took = deleted.elapsed();
    assert_eq!(code(&out), 70, "stderr: {}", stderr(&out));
    assert!(stderr(&out).contains("lost the lock"), "{}", stderr(&out));
    assert!(!dir.join("finished").exists(), "the command ran to its end");
    // redlock reaps the command after the SIGKILL: nothing of it is left.
    assert_eq!(group_members(pgid), Vec::<u32>::new());
    // Generous: the validity ended by `ttl` after the delete; the grace
    // (120 s) and the command (40 s) are far longer.
    assert!(
        took < ttl + Duration::from_secs(10),
        "the command was stopped {took:?} after the delete"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Microseconds since the Unix epoch, now.
fn unix_micros_now() -> u64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    u64::try_from(d.as_micros()).unwrap()
}

/// The number after `key=` in an event line.
fn event_value(line: &str, key: &str) -> u64 {
    let word = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key} in {line:?}"));
    word.parse()
        .unwrap_or_else(|e| panic!("{key} in {line:?}: {e}"))
}

#[test]
fn the_command_learns_its_validity_and_v_logs_the_lock_events() {
    let (_servers, list) = servers(3);
    let before = unix_micros_now();
    let out = run(redlock()
        .args(["lock", "-v", "--servers", &list, "--ttl", "1s", "--fence"])
        .args(["valid", "--", "sh", "-c"])
        .arg("echo \"$REDLOCK_VALID_UNTIL $REDLOCK_FENCE\"; sleep 1.5"));
    let after = unix_micros_now();
    assert_eq!(code(&out), 0, "stderr: {}", stderr(&out));
    let printed = stdout(&out);
    let mut words = printed.split_whitespace();
    let valid_ms: u64 = words.next().unwrap().parse().unwrap();
    let fence: u64 = words.next().unwrap().parse().unwrap();
    // The validity ends after the start and at most a ttl after it.
    assert!(
        valid_ms * 1000 > before,
        "{valid_ms} ms, began at {before} µs"
    );
    assert!(
        valid_ms <= before / 1000 + 1000,
        "{valid_ms} ms, began at {before} µs"
    );

    let err = stderr(&out);
    let events: Vec<&str> = err
        .lines()
        .filter_map(|l| l.split_once("lock event: ").map(|(_, e)| e))
        .collect();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(kinds.first(), Some(&"acquired"), "{err}");
    assert_eq!(kinds.last(), Some(&"released"), "{err}");
    // The command ran 1.5 s on a 1 s ttl: the watchdog extended.
    assert!(kinds.contains(&"extended"), "{err}");
    let acquired = events[0];
    let at = event_value(acquired, "at_unix_us");
    assert!(before <= at && at <= after, "{acquired}");
    assert_eq!(
        event_value(acquired, "valid_until_unix_us") / 1000,
        valid_ms
    );
    assert_eq!(event_value(acquired, "fence"), fence);
    // Each extension moves the validity on.
    let mut last = event_value(acquired, "valid_until_unix_us");
    for e in events.iter().filter(|e| e.starts_with("extended")) {
        let v = event_value(e, "valid_until_unix_us");
        assert!(v > last, "{e} after {last}");
        last = v;
    }
    let released = event_value(events[events.len() - 1], "at_unix_us");
    assert!(at + 1_500_000 <= released && released <= after, "{err}");

    // Without -v, nothing is logged.
    let quiet = run(redlock().args(["lock", "--servers", &list, "valid", "--", "true"]));
    assert_eq!(code(&quiet), 0);
    assert!(!stderr(&quiet).contains("lock event"), "{}", stderr(&quiet));
}
