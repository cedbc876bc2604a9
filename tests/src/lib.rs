//! Test harness for the redlock workspace.
//!
//! [`RedisServer`] starts a real `redis-server` process on a free loopback
//! port in its own temporary directory, waits until it answers, and stops it
//! by pid when dropped (also when the test panics); [`tls`] has TLS-only
//! ones and the certificates they use. [`Conn`] is a small blocking client
//! built on `redlock-resp`, for tests that need to talk to a (plain) server
//! directly.

extern crate alloc;

use core::net::{Ipv4Addr, SocketAddr};
use core::sync::atomic::{AtomicUsize, Ordering};
use core::time::Duration;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use redlock_resp::{Arg, Reply, Status};

pub mod alloc_count;
pub mod embedded;
pub mod embedded_async;
pub mod fake;
pub mod proxy;
pub mod qemu;
pub mod sim;
pub mod tls;
pub mod torture;

/// How long a server may take to start answering.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a test binary that starts servers may run before the harness
/// stops it (`REDLOCK_TEST_LIMIT_SECS` overrides): a hung test then fails
/// loudly in minutes, with its servers killed, instead of holding CI until
/// its own time limit.
const TEST_BINARY_LIMIT: Duration = Duration::from_secs(600);

/// Pids of the servers this process started and has not stopped yet.
static LIVE_SERVERS: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

fn live_servers() -> std::sync::MutexGuard<'static, Vec<u32>> {
    LIVE_SERVERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Starts, once per process, the thread that ends a hung test binary.
fn arm_time_limit() {
    static ARMED: std::sync::Once = std::sync::Once::new();
    ARMED.call_once(|| {
        let limit = std::env::var("REDLOCK_TEST_LIMIT_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .map_or(TEST_BINARY_LIMIT, Duration::from_secs);
        let spawned = std::thread::Builder::new()
            .name("test-time-limit".into())
            .spawn(move || {
                std::thread::sleep(limit);
                eprintln!(
                    "redlock-tests: this test binary ran past its {} s limit (a hung test?): \
                     killing its servers and exiting",
                    limit.as_secs()
                );
                for pid in live_servers().iter() {
                    let _ = Command::new("kill")
                        .arg("-KILL")
                        .arg(pid.to_string())
                        .status();
                }
                std::process::exit(101);
            });
        if let Err(e) = spawned {
            eprintln!("redlock-tests: no time limit for this binary: {e}");
        }
    });
}

/// A `redis-server` child process on 127.0.0.1, stopped when dropped.
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    port: u16,
    dir: PathBuf,
    extra: Vec<String>,
    /// TLS only (see [`tls`]): `port` is the TLS port, the plain one is off.
    tls: bool,
}

impl RedisServer {
    /// Starts a server without persistence (`--save '' --appendonly no`).
    pub fn start() -> io::Result<RedisServer> {
        RedisServer::start_with(&[])
    }

    /// Starts a server without persistence, with extra command-line
    /// arguments (`["--requirepass", "secret"]`).
    pub fn start_with(extra: &[&str]) -> io::Result<RedisServer> {
        RedisServer::start_mode(extra, false)
    }

    /// Starts a plain or (with `tls`, its TLS arguments in `extra`) a
    /// TLS-only server.
    fn start_mode(extra: &[&str], tls: bool) -> io::Result<RedisServer> {
        let mut last_err = None;
        // A free port may be taken between the probe and the server's bind:
        // try a few ports.
        for _ in 0..5 {
            let port = free_port()?;
            match RedisServer::spawn(port, extra, tls) {
                Ok(server) => return Ok(server),
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or_else(|| io::Error::other("redis-server did not start")))
    }

    fn spawn(port: u16, extra: &[&str], tls: bool) -> io::Result<RedisServer> {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "redlock-test-{}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed),
            port
        ));
        std::fs::create_dir_all(&dir)?;
        arm_time_limit();
        let child = RedisServer::command(port, &dir, extra, tls)?;
        let extra = extra.iter().map(|s| s.to_string()).collect();
        let mut server = RedisServer {
            child,
            port,
            dir,
            extra,
            tls,
        };
        server.wait_ready()?;
        Ok(server)
    }

    fn command(port: u16, dir: &std::path::Path, extra: &[&str], tls: bool) -> io::Result<Child> {
        let port = port.to_string();
        let ports: &[&str] = if tls {
            &["--port", "0", "--tls-port", &port]
        } else {
            &["--port", &port]
        };
        let child = Command::new("redis-server")
            .args(ports)
            .args(["--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(dir)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot run redis-server (is it installed?): {e}"),
                )
            })?;
        live_servers().push(child.id());
        Ok(child)
    }

    fn forget_pid(&self) {
        let pid = self.child.id();
        live_servers().retain(|&p| p != pid);
    }

    /// Kills the server with SIGKILL (no shutdown save) and waits for it.
    pub fn kill(&mut self) -> io::Result<()> {
        self.child.kill()?;
        self.child.wait()?;
        self.forget_pid();
        Ok(())
    }

    /// Starts it again on the same port, in the same folder, with the same
    /// arguments (so it reloads its append-only file if persistence is on).
    pub fn restart(&mut self) -> io::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            // The port may linger briefly after the kill.
            let extra: Vec<&str> = self.extra.iter().map(String::as_str).collect();
            self.child = RedisServer::command(self.port, &self.dir, &extra, self.tls)?;
            match self.wait_ready() {
                Ok(()) => return Ok(()),
                Err(e) if Instant::now() > deadline => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// Sends a signal (`"STOP"`, `"CONT"`, ...) with `kill(1)`.
    pub fn signal(&self, name: &str) -> io::Result<()> {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()?;
        if status.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!("kill -{name} failed")))
        }
    }

    fn wait_ready(&mut self) -> io::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Err(io::Error::other(format!("redis-server exited: {status}")));
            }
            if self.tls {
                // A TLS port cannot be asked in plain text: up once it
                // accepts (it listens after loading its certificates).
                if TcpStream::connect_timeout(&self.addr(), Duration::from_secs(2)).is_ok() {
                    return Ok(());
                }
            } else if let Ok(mut conn) = Conn::connect(self.addr()) {
                // Any reply (PONG, or NOAUTH when a password is set) means
                // it is up, except LOADING: it is still reading its
                // append-only file.
                match conn.request(&[b"PING"]) {
                    Ok(Value::Error(e)) if e.starts_with(b"LOADING") => {}
                    // (NOAUTH: it cannot be asked who it is.)
                    Ok(Value::Error(_)) => return Ok(()),
                    Ok(_) => {
                        // Two servers started at once may have been given
                        // the same free port: the one that answers must be
                        // ours (the other exits, or is waited for by its
                        // own starter, which then tries another port).
                        let ours = format!("process_id:{}\r\n", self.child.id());
                        return match conn.request(&[b"INFO", b"server"]) {
                            Ok(Value::Bulk(text))
                                if !text.windows(ours.len()).any(|w| w == ours.as_bytes()) =>
                            {
                                Err(io::Error::new(
                                    io::ErrorKind::AddrInUse,
                                    "another redis-server answers on this port",
                                ))
                            }
                            _ => Ok(()),
                        };
                    }
                    Err(_) => {}
                }
            }
            if Instant::now() > deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "redis-server did not answer",
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The loopback address it listens on (its TLS port's, for a TLS-only
    /// server).
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// Its port (the TLS port, for a TLS-only server).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether it is TLS-only ([`RedisServer::start_tls`]).
    pub fn is_tls(&self) -> bool {
        self.tls
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A new connection to it; an error for a TLS-only server, which
    /// [`Conn`] cannot talk to.
    pub fn conn(&self) -> io::Result<Conn> {
        if self.tls {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a TLS-only server: Conn speaks plain RESP",
            ));
        }
        Conn::connect(self.addr())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.forget_pid();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

/// An owned copy of a reply, for assertions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// `+...`
    Simple(Vec<u8>),
    /// `-...` / `!...`
    Error(Vec<u8>),
    /// `:...`
    Integer(i64),
    /// `$...`
    Bulk(Vec<u8>),
    /// Null of any kind.
    Nil,
    /// Any aggregate, flattened to its elements (a map alternates key, value).
    Aggregate(redlock_resp::AggregateKind, Vec<Value>),
    /// `#t` / `#f`
    Boolean(bool),
    /// `,...` as text
    Double(Vec<u8>),
    /// `(...` as text
    BigNumber(Vec<u8>),
    /// `=...`: the text without its format
    Verbatim(Vec<u8>),
}

impl From<Reply<'_>> for Value {
    fn from(r: Reply<'_>) -> Value {
        match r {
            Reply::Simple(b) => Value::Simple(b.to_vec()),
            Reply::Error(e) => Value::Error(e.message().to_vec()),
            Reply::Integer(i) => Value::Integer(i),
            Reply::Bulk(b) => Value::Bulk(b.to_vec()),
            Reply::Nil => Value::Nil,
            Reply::Aggregate(a) => Value::Aggregate(a.kind(), a.iter().map(Value::from).collect()),
            Reply::Boolean(b) => Value::Boolean(b),
            Reply::Double(d) => Value::Double(d.to_vec()),
            Reply::BigNumber(n) => Value::BigNumber(n.to_vec()),
            Reply::Verbatim { text, .. } => Value::Verbatim(text.to_vec()),
        }
    }
}

/// A blocking test connection: encodes with `redlock-resp`, reads until one
/// whole reply parses, and keeps the raw bytes of the last reply.
#[derive(Debug)]
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    last_raw: Vec<u8>,
}

impl Conn {
    /// Connects with a 5 s read timeout.
    pub fn connect(addr: SocketAddr) -> io::Result<Conn> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            buf: Vec::new(),
            last_raw: Vec::new(),
        })
    }

    /// Sends a command given as byte arguments and reads its reply.
    pub fn request(&mut self, args: &[&[u8]]) -> io::Result<Value> {
        let args: Vec<Arg<'_>> = args.iter().map(|a| Arg::Bytes(a)).collect();
        self.request_args(&args)
    }

    /// Sends a command given as [`Arg`]s and reads its reply.
    pub fn request_args(&mut self, args: &[Arg<'_>]) -> io::Result<Value> {
        let mut out = vec![0u8; 64];
        let n = match redlock_resp::command_args(&mut out, args) {
            Ok(n) => n,
            Err(redlock_resp::EncodeError::BufferTooSmall { needed }) => {
                out.resize(needed, 0);
                redlock_resp::command_args(&mut out, args).map_err(io::Error::other)?
            }
            Err(e) => return Err(io::Error::other(e)),
        };
        self.send_raw(&out[..n])?;
        self.read_reply()
    }

    /// Writes raw bytes.
    pub fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Reads until one reply parses; returns it owned.
    pub fn read_reply(&mut self) -> io::Result<Value> {
        loop {
            match redlock_resp::parse_reply(&self.buf) {
                Ok(Status::Complete((reply, used))) => {
                    let value = Value::from(reply);
                    self.last_raw = self.buf.drain(..used).collect();
                    return Ok(value);
                }
                Ok(Status::Incomplete) => {}
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
            }
            let mut chunk = [0u8; 4096];
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// The exact bytes of the last reply read.
    pub fn last_raw(&self) -> &[u8] {
        &self.last_raw
    }
}

/// What a good server answers to one command (encoded, as a client sent
/// it), for fake servers that must pass the client's handshake: the digest
/// of the script to `SCRIPT LOAD`, a server section with an uptime of a day
/// and a `run_id` unique to this fake (`fake_id`) to `INFO`, and `+OK` to
/// anything else.
pub fn fake_answer(command: &[u8], fake_id: u16) -> Vec<u8> {
    let has = |word: &[u8]| command.windows(word.len()).any(|w| w == word);
    if has(b"SCRIPT") {
        let sha = redlock_resp::script::ALL
            .iter()
            .find(|s| has(s.source.as_bytes()))
            .map_or("0000000000000000000000000000000000000000", |s| s.sha1);
        format!("${}\r\n{sha}\r\n", sha.len()).into_bytes()
    } else if has(b"INFO") {
        let body = format!("# Server\r\nrun_id:fake{fake_id:036}\r\nuptime_in_seconds:86400\r\n");
        format!("${}\r\n{body}\r\n", body.len()).into_bytes()
    } else {
        b"+OK\r\n".to_vec()
    }
}

/// Real servers for the documentation examples of `redlock-std`, which run
/// as doc tests against them.
pub mod doc {
    use super::RedisServer;

    /// Servers kept running while this lives.
    #[derive(Debug)]
    pub struct Servers(Vec<RedisServer>);

    impl Servers {
        /// Starts `n` servers (panics if one does not start: an example's
        /// setup fails loudly).
        #[allow(clippy::expect_used)]
        pub fn start(n: usize) -> Servers {
            Servers(
                (0..n)
                    .map(|_| RedisServer::start().expect("redis-server starts"))
                    .collect(),
            )
        }

        /// Their addresses, `127.0.0.1:port`.
        pub fn urls(&self) -> Vec<String> {
            self.0.iter().map(|s| s.addr().to_string()).collect()
        }
    }

    /// Three servers and a client over them with the default settings.
    #[allow(clippy::expect_used)]
    pub fn client() -> (redlock_std::Client, Servers) {
        let servers = Servers::start(3);
        let client = redlock_std::Client::builder()
            .servers(servers.urls())
            .build()
            .expect("a client");
        (client, servers)
    }
}
