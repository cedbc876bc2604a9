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

/// A password with every character that URLs and shells treat specially,
/// and a byte that is not UTF-8 (`%FF` in the URL).
const PASSWORD_IN_URL: &str = "hunter2@:/%25%FF";

#[test]
fn logs_and_errors_never_show_passwords() {
    log::set_logger(&CAPTURE).unwrap();
    log::set_max_level(log::LevelFilter::Trace);
    let guarded = RedisServer::start_with(&["--requirepass", "right"]).unwrap();
    let other = RedisServer::start_with(&["--requirepass", "right"]).unwrap();
    let dead = free_port().unwrap();
    let urls = [
        format!("redis://user:{PASSWORD_IN_URL}@{}", guarded.addr()),
        format!("redis://:{PASSWORD_IN_URL}@127.0.0.1:{dead}"),
        format!("redis://:{PASSWORD_IN_URL}@{}/3", other.addr()),
    ];
    let builder = Client::builder()
        .servers(&urls)
        .servers([format!("redis://:{PASSWORD_IN_URL}@host:notaport")])
        .retry(0, Duration::ZERO);
    let shown_builder = format!("{builder:?}");
    // The fourth entry does not parse: the error does not repeat it.
    let bad = builder.build().unwrap_err();
    let c = Client::builder()
        .servers(&urls)
        .retry(0, Duration::ZERO)
        .build()
        .unwrap();
    let err = c.lock(b"res", Duration::from_secs(1)).unwrap_err();
    // The wrong password is reported as such, in the server's words.
    assert!(err.to_string().contains("WRONGPASS"), "{err}");
    let logs = CAPTURE.0.lock().unwrap().join("\n");
    assert!(!logs.is_empty(), "nothing was logged");
    assert!(logs.contains("127.0.0.1"), "{logs}");
    let urls_shown: Vec<String> = c
        .server_urls()
        .iter()
        .map(|u| format!("{u} {u:?}"))
        .collect();
    let everything =
        format!("{logs}\n{err} {err:?} {bad} {bad:?} {c:?} {urls_shown:?} {shown_builder}");
    for secret in ["hunter2", "%25%FF", "%FF"] {
        assert!(!everything.contains(secret), "{secret} in {everything}");
    }
}
