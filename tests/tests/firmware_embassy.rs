//! The embassy skeleton firmware (`platform-embedded/firmware`, binary
//! `embassy`, feature `embassy`) under QEMU `mps2-an386`, against three real
//! `redis-server` processes on the host: embassy's executor, its time driver
//! on the board clock and embassy-net over the firmware's LAN9118 driver
//! PING each server over its own `TcpSocket`, while a second task counts
//! milliseconds.
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

/// How many `PING`s `server` has run (`INFO commandstats`).
fn pings(server: &RedisServer) -> u64 {
    let info = server
        .conn()
        .unwrap()
        .request(&[b"INFO", b"commandstats"])
        .unwrap();
    let Value::Bulk(text) = info else {
        panic!("INFO commandstats: {info:?}");
    };
    String::from_utf8_lossy(&text)
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_ping:calls="))
        .map(|rest| rest.split(',').next().unwrap().parse().unwrap())
        .unwrap_or(0)
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
fn embassy_firmware_pings_three_servers_while_its_ticker_runs() {
    require_qemu();
    let elf = build_firmware("embassy", &["embassy"]);
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
    let before: Vec<u64> = servers.iter().map(pings).collect();
    let ports: Vec<String> = servers.iter().map(|s| s.port().to_string()).collect();
    let args = format!(
        "{} firmware-embassy 0 10000 {}",
        ports.join(" "),
        fresh_seed()
    );

    let mut qemu = Qemu::boot(&elf, &args, LIMIT).expect("QEMU starts");
    let mut lines = Vec::new();
    while let Some(line) = qemu.next_line() {
        eprintln!("firmware: {line}");
        lines.push(line);
    }
    let (status, stderr) = qemu.wait();
    assert!(
        status.success(),
        "the embassy firmware failed ({status}): {lines:#?}\nQEMU stderr: {stderr}"
    );
    assert!(!lines.iter().any(|l| l.starts_with("error")), "{lines:#?}");
    assert_eq!(
        fields(&lines, "args"),
        ["args", "firmware-embassy", "0", "10000"]
    );
    assert_eq!(fields(&lines, "nic")[1], "0x01180001", "{lines:#?}");

    // Every step, in order, for each server.
    let steps: Vec<&str> = lines
        .iter()
        .map(String::as_str)
        .filter(|l| {
            let word = l.split(' ').next();
            matches!(word, Some("connected" | "sent" | "pong" | "closed"))
        })
        .collect();
    let expected: Vec<String> = ports
        .iter()
        .enumerate()
        .flat_map(|(i, port)| {
            [
                format!("connected {i} {port}"),
                format!("sent {i} PING"),
                format!("pong {i}"),
                format!("closed {i}"),
            ]
        })
        .collect();
    assert_eq!(steps, expected, "{lines:#?}");

    // Each server saw exactly the firmware's PING.
    for (i, server) in servers.iter().enumerate() {
        assert_eq!(pings(server), before[i] + 1, "server {i}");
    }

    // The ticker ran while the main task waited on the network: a 1 ms
    // ticker counts about one per millisecond (at least half of them are
    // asked for, to allow for a busy host).
    let ticks = fields(&lines, "ticks");
    assert_eq!(ticks.len(), 4, "{ticks:?}");
    assert_eq!(ticks[2], "network_ms");
    let (count, network_ms) = (number(ticks[1]), number(ticks[3]));
    assert!(count > 0, "the ticker never ran: {lines:#?}");
    assert!(
        count * 2 >= network_ms,
        "{count} ticks in {network_ms} ms of network: {lines:#?}"
    );
    let stack = number(fields(&lines, "stack")[1]);
    assert!(stack > 0 && stack < 64 * 1024, "stack {stack}");
}
