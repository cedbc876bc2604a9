//! The embassy firmware (`platform-embedded/firmware`, binary `embassy`,
//! feature `embassy`) under QEMU `mps2-an386`, against three real
//! `redis-server` processes on the host: on embassy's executor, its time
//! driver on the board clock and embassy-net over the firmware's LAN9118
//! driver, `redlock-embedded`'s `AsyncClient` takes a lock, proves it,
//! holds it (while the host checks that nobody else can take it), extends
//! and releases it; then a lock call waits on a held resource while a
//! second task counts milliseconds.
//!
//! QEMU is required: without `qemu-system-arm` this test fails.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

use core::time::Duration;
use std::io::Read;

use redlock_tests::qemu::{Qemu, build_firmware, require_qemu};
use redlock_tests::{RedisServer, Value};

/// QEMU is killed after this long (a run takes well under a second).
const LIMIT: Duration = Duration::from_secs(60);

/// 64 hex digits from the OS: a fresh seed for every run.
fn fresh_seed() -> String {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .expect("/dev/urandom");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The fields of the line that starts with `word `.
fn fields<'l>(lines: &'l [String], word: &str) -> Vec<&'l str> {
    lines
        .iter()
        .find(|l| l.split(' ').next() == Some(word))
        .unwrap_or_else(|| panic!("no `{word}` line in {lines:#?}"))
        .split(' ')
        .collect()
}

fn number(s: &str) -> u64 {
    s.parse()
        .unwrap_or_else(|_| panic!("`{s}` is not a number"))
}

#[test]
fn embassy_firmware_locks_holds_extends_releases_and_its_ticker_runs_while_a_lock_call_waits() {
    require_qemu();
    let elf = build_firmware("embassy", &["embassy"]);
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
    let ports: Vec<String> = servers.iter().map(|s| s.port().to_string()).collect();
    let resource = "firmware-embassy";
    let args = format!("{} {resource} 2000 10000 {}", ports.join(" "), fresh_seed());

    let mut qemu = Qemu::boot(&elf, &args, LIMIT).expect("QEMU starts");
    let mut lines = Vec::new();
    let mut checked = false;
    while let Some(line) = qemu.next_line() {
        eprintln!("firmware: {line}");
        let holding = line.starts_with("holding ");
        lines.push(line);
        if holding {
            // While the firmware holds the lock: the std client cannot
            // take it, and a majority holds the firmware's token.
            let token = fields(&lines, "acquired")[2].to_string();
            let c = redlock_std::Client::builder()
                .servers(servers.iter().map(|s| s.addr().to_string()))
                .build()
                .unwrap();
            let other = c.try_lock(resource, Duration::from_secs(5));
            assert!(
                matches!(other, Err(redlock_std::Error::Conflict(_))),
                "the std client took the firmware's lock: {other:?}"
            );
            let holding = servers
                .iter()
                .filter(|s| holder(s, resource) == Value::Bulk(token.clone().into_bytes()))
                .count();
            assert!(holding >= 2, "only {holding}/3 servers hold {token}");
            checked = true;
        }
    }
    let (status, stderr) = qemu.wait();
    assert!(
        status.success(),
        "the embassy firmware failed ({status}): {lines:#?}\nQEMU stderr: {stderr}"
    );
    assert!(checked, "the firmware never said `holding`: {lines:#?}");
    assert!(!lines.iter().any(|l| l.starts_with("error")), "{lines:#?}");
    assert_eq!(fields(&lines, "args"), ["args", resource, "2000", "10000"]);
    assert_eq!(fields(&lines, "nic")[1], "0x01180001", "{lines:#?}");
    let words: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.split(' ').next())
        .filter(|w| {
            [
                "connected",
                "acquired",
                "proved",
                "holding",
                "extended",
                "released",
                "waited",
                "stack",
            ]
            .contains(w)
        })
        .collect();
    assert_eq!(
        words,
        [
            "connected",
            "acquired",
            "proved",
            "holding",
            "extended",
            "released",
            "waited",
            "stack"
        ],
        "{lines:#?}"
    );
    assert_eq!(fields(&lines, "connected"), ["connected", "3/3"]);
    let acquired = fields(&lines, "acquired");
    assert_eq!(acquired.len(), 4, "{acquired:?}");
    assert_eq!(acquired[1], resource);
    let token = acquired[2];
    assert_eq!(token.len(), 40, "{token}");
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{token}");
    let validity = number(acquired[3]);
    assert!((9_000..=10_000).contains(&validity), "validity {validity}");
    assert_eq!(fields(&lines, "proved"), ["proved", "3/3"]);
    let extended = number(fields(&lines, "extended")[1]);
    assert!((9_000..=10_000).contains(&extended), "extended {extended}");
    // Released everywhere, the waiting step's lock too.
    for server in &servers {
        assert_eq!(holder(server, resource), Value::Nil);
        assert_eq!(holder(server, "embassy-wait"), Value::Nil);
    }
    // The lock call waited for the first holder's 800 ms ttl, and the
    // ticker ran meanwhile: a 1 ms ticker counts about one per millisecond
    // (at least half are asked for, to allow for a busy host).
    let waited = fields(&lines, "waited");
    assert_eq!(waited.len(), 4, "{waited:?}");
    assert_eq!(waited[2], "ticks");
    let (ms, ticks) = (number(waited[1]), number(waited[3]));
    assert!(ms >= 500, "the lock call waited only {ms} ms: {lines:#?}");
    assert!(
        ticks * 2 >= ms,
        "{ticks} ticks in the {ms} ms the lock call waited: {lines:#?}"
    );
    let stack = number(fields(&lines, "stack")[1]);
    assert!(stack > 0 && stack < 64 * 1024, "stack {stack}");
}

fn holder(server: &RedisServer, key: &str) -> Value {
    server
        .conn()
        .unwrap()
        .request(&[b"GET", key.as_bytes()])
        .unwrap()
}
