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
        self.0.lock().unwrap().push(format!(
            "{} {} {}",
            record.level(),
            record.target(),
            record.args()
        ));
    }
    fn flush(&self) {}
}

static CAPTURE: Capture = Capture(Mutex::new(Vec::new()));

/// Installs the capturing logger once for the whole test binary.
fn capture() -> &'static Capture {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        log::set_logger(&CAPTURE).unwrap();
        log::set_max_level(log::LevelFilter::Trace);
    });
    &CAPTURE
}

fn logged() -> String {
    capture().0.lock().unwrap().join("\n")
}

/// A password with every character that URLs and shells treat specially,
/// and a byte that is not UTF-8 (`%FF` in the URL).
const PASSWORD_IN_URL: &str = "hunter2@:/%25%FF";

#[test]
fn logs_and_errors_never_show_passwords() {
    capture();
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
    let logs = logged();
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

/// The decisions a user wants to see with `-v` have a record each: a retry
/// with its wait, a server given up on, a NOSCRIPT fallback.
#[test]
fn decisions_are_logged() {
    capture();
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
    let urls: Vec<String> = servers.iter().map(|s| s.addr().to_string()).collect();
    let c = Client::builder()
        .servers(&urls)
        .retry(1, Duration::from_millis(10))
        .request_timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    // A retry: the resource is held by someone else.
    for s in &servers {
        s.conn()
            .unwrap()
            .request(&[b"SET", b"held", b"theirs", b"PX", b"30000"])
            .unwrap();
    }
    assert!(c.lock(b"held", Duration::from_secs(5)).is_err());
    assert!(logged().contains("retry in"), "{}", logged());
    // A NOSCRIPT fallback: the scripts were flushed.
    let lock = c.lock(b"res", Duration::from_secs(5)).unwrap();
    for s in &servers {
        s.conn().unwrap().request(&[b"SCRIPT", b"FLUSH"]).unwrap();
    }
    c.unlock(&lock).unwrap();
    assert!(logged().contains("NOSCRIPT fallback"), "{}", logged());
    // A server given up on: it is stopped while a release waits for it.
    let lock = c.lock(b"res2", Duration::from_secs(5)).unwrap();
    servers[0].signal("STOP").unwrap();
    let _ = c.unlock(&lock);
    servers[0].signal("CONT").unwrap();
    assert!(logged().contains("giving up on server 0"), "{}", logged());
    // The core's records have the target `redlock`, and a retry is news
    // (shown with -v, at level info).
    assert!(
        logged()
            .lines()
            .any(|l| l.starts_with("INFO redlock ") && l.contains("retry in")),
        "{}",
        logged()
    );
}
