//! What the client logs (through the `log` facade) never contains a password.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test driver

use core::time::Duration;
use std::sync::Mutex;

use redlock_std::Client;
use redlock_tests::{RedisServer, free_port};

struct Capture(Mutex<Vec<String>>);

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, record: &log::Record<'_>) {
        self.0
            .lock()
            .unwrap()
            .push(format!("{} {}", record.level(), record.args()));
    }
    fn flush(&self) {}
}

static CAPTURE: Capture = Capture(Mutex::new(Vec::new()));

#[test]
fn logs_never_show_passwords() {
    log::set_logger(&CAPTURE).unwrap();
    log::set_max_level(log::LevelFilter::Trace);
    let server = RedisServer::start_with(&["--requirepass", "right"]).unwrap();
    let dead = free_port().unwrap();
    let urls = [
        format!("redis://user:hunter2@{}", server.addr()),
        format!("redis://:hunter2@127.0.0.1:{dead}"),
        format!("redis://:hunter2@{}", server.addr()),
    ];
    let c = Client::builder()
        .servers(&urls)
        .retry(0, Duration::ZERO)
        .build()
        .unwrap();
    let err = c.lock(b"res", Duration::from_secs(1)).unwrap_err();
    let logs = CAPTURE.0.lock().unwrap().join("\n");
    assert!(!logs.is_empty(), "nothing was logged");
    assert!(logs.contains("127.0.0.1"), "{logs}");
    assert!(!logs.contains("hunter2"), "{logs}");
    assert!(!format!("{err} {err:?} {c:?} {:?}", c.server_urls()).contains("hunter2"));
}
