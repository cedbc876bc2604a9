//! Helpers: the built command, servers, scratch folders, waiting, signals,
//! and a guard that kills what a test started if it fails.

pub(crate) use core::time::Duration;
pub(crate) use std::path::{Path, PathBuf};
pub(crate) use std::process::{Child, Command, Output, Stdio};
pub(crate) use std::time::Instant;

pub(crate) use redlock_tests::{RedisServer, Value, free_port};

/// The built binary.
pub(crate) fn redlock() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_redlock"));
    c.env_remove("REDLOCK_SERVERS").env_remove("RUST_LOG");
    c
}

pub(crate) fn servers(n: usize) -> (Vec<RedisServer>, String) {
    let servers: Vec<RedisServer> = (0..n).map(|_| RedisServer::start().unwrap()).collect();
    let list = servers
        .iter()
        .map(|s| s.addr().to_string())
        .collect::<Vec<_>>()
        .join(",");
    (servers, list)
}

pub(crate) fn get(s: &RedisServer, key: &str) -> Value {
    s.conn()
        .unwrap()
        .request(&[b"GET", key.as_bytes()])
        .unwrap()
}

/// Asserts that `json` (what `inspect --json` prints) names `token` as the
/// majority's holder.
pub(crate) fn assert_majority_holder(json: &str, token: &str) {
    assert!(
        json.contains(&format!("\"majority_holder\": \"{token}\"")),
        "{json}"
    );
}

/// Sends signal `name` (`"INT"`) to `target` (a pid, or `-PGID` for a
/// group) with kill(1), and checks that it was delivered.
pub(crate) fn send_signal(name: &str, target: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), "--", target])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{name} {target}");
}

/// A fresh scratch directory for one test.
pub(crate) fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("redlock-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub(crate) fn wait_for_file(path: &Path) {
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
pub(crate) fn finish(mut child: Child) -> Output {
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
pub(crate) fn start(cmd: &mut Command) -> Child {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

pub(crate) fn run(cmd: &mut Command) -> Output {
    finish(start(cmd))
}

pub(crate) fn code(out: &Output) -> i32 {
    out.status.code().expect("exited by a signal")
}

pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub(crate) fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A shell command that writes its token to `dir/started`, waits for
/// `dir/go`, then exits with `status`.
pub(crate) fn hold_until_go(dir: &Path, status: i32) -> Vec<String> {
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
pub(crate) fn until_term(dir: &Path, marker: &str, status: i32) -> String {
    format!(
        "trap 'touch {d}/{marker}; exit {status}' TERM; touch {d}/started; \
         while true; do sleep 0.05; done",
        d = dir.display()
    )
}

/// True while process `pid` runs (a zombie does not count).
pub(crate) fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// The live processes (zombies do not count) of process group `pgid`.
pub(crate) fn group_members(pgid: u32) -> Vec<u32> {
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
pub(crate) struct Running {
    pub(crate) child: Option<Child>,
    pub(crate) groups: Vec<u32>,
}

impl Running {
    pub(crate) fn new(child: Child) -> Running {
        Running {
            child: Some(child),
            groups: Vec::new(),
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Waits for redlock, as [`finish`] does.
    pub(crate) fn finish(mut self) -> Output {
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
pub(crate) fn read_pid(path: &Path) -> u32 {
    wait_for_file(path);
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Calls of `command` on `server` since its statistics were reset.
pub(crate) fn calls(server: &RedisServer, command: &str) -> u64 {
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

pub(crate) fn reset_stats(servers: &[RedisServer]) {
    for s in servers {
        s.conn()
            .unwrap()
            .request(&[b"CONFIG", b"RESETSTAT"])
            .unwrap();
    }
}

pub(crate) fn pttl(s: &RedisServer, key: &str) -> i64 {
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

/// The `--options` named in `text`.
pub(crate) fn long_options(text: &str) -> Vec<String> {
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

/// Issue 10, item 6: what every demo prints for someone new to Redlock:
/// what a lock and a fencing token are, timed lines in the order of their
/// times, and what the attempts count.
pub(crate) fn demo_explains_itself(text: &str) {
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
