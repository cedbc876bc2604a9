//! End-to-end tests of the `redlock` command against real `redis-server`
//! processes: run under a lock, contention, every exit status of its own,
//! fencing tokens, signal forwarding, a lost lock, and the demo.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)] // test driver

use core::time::Duration;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Instant;

use redlock_tests::{RedisServer, Value, free_port};

/// The built binary.
fn redlock() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_redlock"));
    c.env_remove("REDLOCK_SERVERS").env_remove("RUST_LOG");
    c
}

fn servers(n: usize) -> (Vec<RedisServer>, String) {
    let servers: Vec<RedisServer> = (0..n).map(|_| RedisServer::start().unwrap()).collect();
    let list = servers
        .iter()
        .map(|s| s.addr().to_string())
        .collect::<Vec<_>>()
        .join(",");
    (servers, list)
}

fn get(s: &RedisServer, key: &str) -> Value {
    s.conn()
        .unwrap()
        .request(&[b"GET", key.as_bytes()])
        .unwrap()
}

/// Sends signal `name` (`"INT"`) to `target` (a pid, or `-PGID` for a
/// group) with kill(1), and checks that it was delivered.
fn send_signal(name: &str, target: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), "--", target])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{name} {target}");
}

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("redlock-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn wait_for_file(path: &Path) {
    let give_up = Instant::now() + Duration::from_secs(30);
    while !path.exists() {
        assert!(
            Instant::now() < give_up,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits for `child` (at most 60 s, then kills it and fails).
fn finish(mut child: Child) -> Output {
    let give_up = Instant::now() + Duration::from_secs(60);
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if Instant::now() >= give_up {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "redlock did not exit; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Starts `cmd` with its output captured.
fn start(cmd: &mut Command) -> Child {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn run(cmd: &mut Command) -> Output {
    finish(start(cmd))
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("exited by a signal")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A shell command that writes its token to `dir/started`, waits for
/// `dir/go`, then exits with `status`.
fn hold_until_go(dir: &Path, status: i32) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        format!(
            "echo \"$REDLOCK_RESOURCE $REDLOCK_TOKEN\" > {d}/started.tmp && mv {d}/started.tmp {d}/started; \
             while [ ! -e {d}/go ]; do sleep 0.02; done; exit {status}",
            d = dir.display()
        ),
    ]
}

/// A shell command that touches `dir/started`, then loops until SIGTERM,
/// on which it touches `dir/marker` and exits with `status`.
fn until_term(dir: &Path, marker: &str, status: i32) -> String {
    format!(
        "trap 'touch {d}/{marker}; exit {status}' TERM; touch {d}/started; \
         while true; do sleep 0.05; done",
        d = dir.display()
    )
}

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
fn a_lost_lock_terminates_the_command_and_exits_70() {
    let (servers, list) = servers(3);
    let dir = scratch("lost");
    let script = until_term(&dir, "terminated", 143);
    let child = start(
        redlock()
            .args(["lock", "--servers", &list, "--ttl", "3s", "doomed"])
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
    assert!(
        dir.join("terminated").exists(),
        "the command got no SIGTERM"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// True while process `pid` runs (a zombie does not count).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
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
    assert!(
        json.contains(&format!("\"majority_holder\": \"{token}\"")),
        "{json}"
    );
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

#[test]
fn bench_prints_one_json_object() {
    let (_servers, list) = servers(3);
    let out = run(redlock().args([
        "bench",
        "--servers",
        &list,
        "--clients",
        "2",
        "--duration",
        "300ms",
        "--json",
    ]));
    assert_eq!(code(&out), 0, "stderr: {}", stderr(&out));
    let json = stdout(&out);
    assert_eq!(json.trim().lines().count(), 1, "{json}");
    for key in [
        "\"servers\": 3",
        "\"clients\": 2",
        "\"resources\": \"distinct\"",
        "\"cycles\": ",
        "\"cycles_per_sec\": ",
        "\"acquire_us\": {\"p50\": ",
        "\"p999\": ",
        "\"release_us\": {",
        "\"conflicts\": 0",
        "\"errors\": 0",
    ] {
        assert!(json.contains(key), "{key} missing in {json}");
    }
    assert!(!json.contains("\"cycles\": 0,"), "{json}");
}

#[test]
fn the_demo_runs_to_completion_and_leaves_no_server_behind() {
    let out = run(redlock().args(["demo", "--duration", "2s"]));
    let text = stdout(&out);
    assert_eq!(code(&out), 0, "stdout: {text}\nstderr: {}", stderr(&out));
    assert!(text.contains("no two overlapped: yes"), "{text}");
    assert!(text.contains("killed the redis-servers"), "{text}");
    demo_explains_itself(&text);
    assert!(text.contains("every server stopped"), "{text}");
    let ports: Vec<u16> = text
        .lines()
        .find_map(|l| l.strip_prefix("servers: "))
        .unwrap()
        .split(", ")
        .map(|a| a.rsplit(':').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(ports.len(), 5);
    for port in ports {
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
            "a redis-server still listens on {port}"
        );
    }
}

#[test]
fn ctrl_c_stops_the_demo_and_a_waiting_lock_cleanly() {
    // The demo: interrupted half-way, it still stops every server.
    let mut child = start(redlock().args(["demo", "--duration", "60s"]));
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut ports = Vec::new();
    let mut line = String::new();
    while ports.is_empty() {
        line.clear();
        assert!(
            std::io::BufRead::read_line(&mut stdout, &mut line).unwrap() > 0,
            "no servers line"
        );
        if let Some(list) = line.trim().strip_prefix("servers: ") {
            ports = list
                .split(", ")
                .map(|a| a.rsplit(':').next().unwrap().parse::<u16>().unwrap())
                .collect();
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    send_signal("INT", &child.id().to_string());
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    let out = finish(child);
    assert_eq!(code(&out), 130, "stderr: {}", stderr(&out));
    for port in ports {
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
            "a redis-server still listens on {port}"
        );
    }

    // A lock waiting for a held resource: interrupted, it gives up at once.
    let (_servers, list) = servers(3);
    let out = run(redlock().args(["acquire", "--servers", &list, "busy"]));
    assert_eq!(code(&out), 0);
    let waiter = start(redlock().args([
        "lock",
        "--servers",
        &list,
        "--wait",
        "60s",
        "busy",
        "--",
        "true",
    ]));
    std::thread::sleep(Duration::from_millis(500));
    let sent = Instant::now();
    send_signal("INT", &waiter.id().to_string());
    let out = finish(waiter);
    assert_eq!(code(&out), 130, "stderr: {}", stderr(&out));
    assert!(stderr(&out).contains("interrupted"), "{}", stderr(&out));
    assert!(
        sent.elapsed() < Duration::from_secs(30),
        "did not stop waiting"
    );
}

/// The live processes (zombies do not count) of process group `pgid`.
fn group_members(pgid: u32) -> Vec<u32> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...; comm may hold spaces and ')'.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map_or("", |(_, rest)| rest)
            .split_whitespace()
            .collect();
        if fields.first() != Some(&"Z") && fields.get(2) == Some(&pgid.to_string().as_str()) {
            members.push(pid);
        }
    }
    members
}

/// A redlock process and the process groups of its command: if the test
/// fails, they are killed with SIGKILL when this is dropped, so that
/// nothing it started keeps running.
struct Running {
    child: Option<Child>,
    groups: Vec<u32>,
}

impl Running {
    fn new(child: Child) -> Running {
        Running {
            child: Some(child),
            groups: Vec::new(),
        }
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Waits for redlock, as [`finish`] does.
    fn finish(mut self) -> Output {
        finish(self.child.take().unwrap())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            for g in &self.groups {
                let _ = Command::new("kill")
                    .args(["-KILL", "--", &format!("-{g}")])
                    .stderr(Stdio::null())
                    .status();
            }
        }
    }
}

/// The number in `path` (a pid written by a test command).
fn read_pid(path: &Path) -> u32 {
    wait_for_file(path);
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
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

/// Calls of `command` on `server` since its statistics were reset.
fn calls(server: &RedisServer, command: &str) -> u64 {
    let Value::Bulk(info) = server
        .conn()
        .unwrap()
        .request(&[b"INFO", b"commandstats"])
        .unwrap()
    else {
        panic!("INFO commandstats");
    };
    let info = String::from_utf8(info).unwrap();
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
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

    // Misplaced, or in a bad URL: 64.
    let bad_port = format!("redis://:{escaped}@127.0.0.1:99999");
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
    // A lower floor leaves every counter where it is.
    let out = run(redlock().args([
        "fence-repair",
        "--servers",
        &list,
        "--at-least",
        "1",
        "fenced",
    ]));
    assert_eq!(code(&out), 0, "stderr: {}", stderr(&out));
    for s in &servers {
        assert_eq!(
            get(s, "fenced:fence"),
            Value::Bulk(next.to_string().into_bytes())
        );
    }
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

fn reset_stats(servers: &[RedisServer]) {
    for s in servers {
        s.conn()
            .unwrap()
            .request(&[b"CONFIG", b"RESETSTAT"])
            .unwrap();
    }
}

fn pttl(s: &RedisServer, key: &str) -> i64 {
    match s
        .conn()
        .unwrap()
        .request(&[b"PTTL", key.as_bytes()])
        .unwrap()
    {
        Value::Integer(ms) => ms,
        other => panic!("PTTL: {other:?}"),
    }
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

/// The `--options` named in `text`.
fn long_options(text: &str) -> Vec<String> {
    let mut options: Vec<String> = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter_map(|w| w.strip_prefix("--"))
        .filter(|name| name.len() > 1 && !name.starts_with('-'))
        .map(|name| format!("--{}", name.trim_end_matches('-')))
        .collect();
    options.sort();
    options.dedup();
    options
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

/// Issue 10, item 6: what every demo prints for someone new to Redlock:
/// what a lock and a fencing token are, timed lines in the order of their
/// times, and what the attempts count.
fn demo_explains_itself(text: &str) {
    let mut lines = text.lines();
    let first = lines.next().unwrap();
    let second = lines.next().unwrap();
    assert!(first.starts_with("A lock "), "{text}");
    assert!(second.starts_with("A fencing token "), "{text}");
    let times: Vec<f64> = text
        .lines()
        .filter_map(|l| l.trim_start().split_once("s  "))
        .filter_map(|(t, _)| t.parse().ok())
        .collect();
    assert!(times.len() > 3, "{text}");
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "lines out of time order: {text}"
    );
    let attempts = text
        .lines()
        .find(|l| l.starts_with("acquire attempts: "))
        .unwrap();
    assert!(
        attempts.contains("got the lock") && attempts.contains("found it held"),
        "{attempts}"
    );
}

/// Issue 10, item 6: `demo --servers` stops no server and claims to stop
/// none; it deletes the keys it made there (its fence counter too, which
/// never expires on its own), also when interrupted; its help says why
/// fence counters never expire.
#[test]
fn the_demo_on_given_servers_leaves_them_running_and_clean() {
    let (servers, list) = servers(3);
    let keys = |s: &RedisServer| match s
        .conn()
        .unwrap()
        .request(&[b"KEYS", b"redlock-demo*"])
        .unwrap()
    {
        Value::Aggregate(_, keys) => keys,
        other => panic!("KEYS: {other:?}"),
    };
    let out = run(redlock().args(["demo", "--servers", &list, "--duration", "1"]));
    let text = stdout(&out);
    assert_eq!(code(&out), 0, "{text}{}", stderr(&out));
    demo_explains_itself(&text);
    assert!(
        !text.contains("stopped") && !text.contains("killed"),
        "{text}"
    );
    assert!(text.contains("from 3 of 3 servers, left running"), "{text}");
    assert!(text.contains(":fence"), "{text}");
    for s in &servers {
        assert_eq!(
            s.conn().unwrap().request(&[b"PING"]).unwrap(),
            Value::Simple(b"PONG".to_vec())
        );
        assert_eq!(keys(s), Vec::<Value>::new(), "keys left behind");
    }

    // Interrupted half-way: the keys go all the same.
    let mut child = Running::new(start(redlock().args([
        "demo",
        "--servers",
        &list,
        "--duration",
        "60",
    ])));
    let give_up = Instant::now() + Duration::from_secs(20);
    while servers.iter().all(|s| keys(s).is_empty()) {
        assert!(Instant::now() < give_up, "the demo never took its lock");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    send_signal("INT", &child.pid().to_string());
    let stdout_pipe = child.child.as_mut().unwrap().stdout.take().unwrap();
    std::thread::spawn(move || std::io::copy(&mut { stdout_pipe }, &mut std::io::sink()));
    let out = child.finish();
    assert_eq!(code(&out), 130, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("removed the demo's keys"),
        "{}",
        stderr(&out)
    );
    for s in &servers {
        assert_eq!(keys(s), Vec::<Value>::new(), "keys left behind");
    }

    let help = stdout(&run(redlock().args(["demo", "--help"])));
    assert!(help.contains("never expires"), "{help}");
    assert!(help.contains("backwards"), "{help}");
}
