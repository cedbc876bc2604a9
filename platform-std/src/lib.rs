#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod asynchronous;
mod call;
mod error;
mod inspect;
#[cfg(feature = "tls")]
mod tls;
mod transport;
pub mod url;
mod watchdog;

use alloc::sync::Arc;
use core::fmt;
use core::time::Duration;
use std::time::Instant as StdInstant;

use redlock_core::redlock_resp::Limits;
use redlock_core::{Acquire, Extend, FenceRepair, Inspect, Release, Servers};
pub use redlock_core::{
    Commands, FailureKind, FenceRepaired, Released, Report, ServerId, ServerOutcome, SetupError,
};
use redlock_core::{Config, Drift, Retry};

use crate::asynchronous::Driver;
pub use crate::asynchronous::{AsyncAutoLock, AsyncClient, AsyncLockGuard, WhenLost};
use crate::call::Call;
pub use crate::error::{Error, Outcomes, describe};
pub use crate::inspect::{Holding, Inspection};
#[cfg(not(feature = "tls"))]
use crate::transport::TlsTarget;
use crate::transport::{ConnConfig, Transport};
pub use crate::url::{Secret, ServerUrl, UrlError};
pub use crate::watchdog::{AutoLock, LockGuard, Lost, OnLost};

/// The guard of a lock whose holder panicked: the client's shared state is
/// kept consistent by each critical section (operations run under
/// `catch_unwind`), so it is used as it is.
pub(crate) fn relock<T>(r: Result<T, std::sync::PoisonError<T>>) -> T {
    r.unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The OS random number generator, for tokens. A failure is an error.
/// The last failure is kept, so that the error reports the OS's own.
#[derive(Default)]
struct OsRng {
    failed: Option<getrandom::Error>,
}

#[derive(Debug)]
struct RngError(std::io::Error);

impl fmt::Display for RngError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl core::error::Error for RngError {}

impl rand_core::TryRng for OsRng {
    type Error = RngError;
    fn try_next_u32(&mut self) -> Result<u32, RngError> {
        let mut b = [0u8; 4];
        self.try_fill_bytes(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }
    fn try_next_u64(&mut self) -> Result<u64, RngError> {
        let mut b = [0u8; 8];
        self.try_fill_bytes(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), RngError> {
        getrandom::fill(dst).map_err(|e| {
            self.failed = Some(e);
            RngError(std::io::Error::other(e.to_string()))
        })
    }
}

impl rand_core::TryCryptoRng for OsRng {}

/// A resource name, inline up to 128 bytes (no allocation per lock), on the
/// heap beyond.
#[derive(Clone, PartialEq, Eq)]
enum Resource {
    Inline {
        len: u8,
        bytes: [u8; INLINE_RESOURCE],
    },
    Heap(Box<[u8]>),
}

const INLINE_RESOURCE: usize = 128;

impl Resource {
    fn new(name: &[u8]) -> Resource {
        match u8::try_from(name.len()) {
            Ok(len) if name.len() <= INLINE_RESOURCE => {
                let mut bytes = [0u8; INLINE_RESOURCE];
                bytes[..name.len()].copy_from_slice(name);
                Resource::Inline { len, bytes }
            }
            _ => Resource::Heap(name.into()),
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match self {
            Resource::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Resource::Heap(b) => b,
        }
    }
}

impl AsRef<[u8]> for Resource {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl fmt::Debug for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

/// A lock held on a majority of the servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lock {
    resource: Resource,
    inner: redlock_core::Lock,
    /// When the transport's clock read its origin, to turn core instants into std ones.
    epoch: StdInstant,
}

impl Lock {
    /// The locked resource (the key on every server).
    pub fn resource(&self) -> &[u8] {
        self.resource.as_bytes()
    }

    /// The token the servers hold (40 lowercase hex characters).
    pub fn token(&self) -> &str {
        self.inner.token().as_str()
    }

    /// The validity left now, on the monotonic clock (zero once expired).
    pub fn remaining(&self) -> Duration {
        self.valid_until()
            .saturating_duration_since(StdInstant::now())
    }

    /// The instant after which the lock must be considered lost.
    pub fn valid_until(&self) -> StdInstant {
        self.std_instant(self.inner.valid_until())
    }

    /// The client's core clock now.
    pub(crate) fn core_now(&self) -> redlock_core::Instant {
        let since = StdInstant::now().saturating_duration_since(self.epoch);
        redlock_core::Instant::from_micros(
            transport::CLOCK_ORIGIN_MICROS.saturating_add(since.as_micros() as u64),
        )
    }

    /// The std instant of a core instant on the client's clock.
    pub(crate) fn std_instant(&self, t: redlock_core::Instant) -> StdInstant {
        let since_epoch = t.as_micros().saturating_sub(transport::CLOCK_ORIGIN_MICROS);
        self.epoch + Duration::from_micros(since_epoch)
    }

    /// The F1 fencing token, when the client was built with fencing.
    pub fn fence(&self) -> Option<u64> {
        self.inner.fence()
    }

    /// What each server answered in the round that gave the current validity.
    pub fn report(&self) -> &Report {
        self.inner.report()
    }

    /// How many times the lock was extended.
    pub fn extensions(&self) -> u32 {
        self.inner.extensions()
    }
}

/// Builds a [`Client`].
///
/// Its `Debug` shows the servers with their passwords hidden.
#[derive(Clone)]
pub struct Builder {
    servers: Vec<String>,
    config: Config,
    ttl: Duration,
    connect_timeout: Duration,
    limits: Limits,
    on_runtime: bool,
    #[cfg(feature = "tls")]
    tls: tls::TlsOptions,
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The raw strings may hold passwords: shown parsed (hidden), or not
        // at all when they do not parse.
        let servers: Vec<String> = self
            .servers
            .iter()
            .map(|s| match s.parse::<ServerUrl>() {
                Ok(url) => url.to_string(),
                Err(_) => "(not a valid address)".into(),
            })
            .collect();
        let mut d = f.debug_struct("Builder");
        d.field("servers", &servers)
            .field("config", &self.config)
            .field("ttl", &self.ttl)
            .field("connect_timeout", &self.connect_timeout)
            .field("limits", &self.limits);
        // File paths and a name only: nothing secret.
        #[cfg(feature = "tls")]
        d.field("tls", &self.tls);
        d.finish()
    }
}

impl Builder {
    /// Adds servers, as `redis://[[user]:password@]host[:port][/db]`,
    /// `rediss://...` (TLS, with the `tls` feature) or `host:port`.
    pub fn servers<I: IntoIterator<Item = S>, S: AsRef<str>>(mut self, urls: I) -> Self {
        self.servers
            .extend(urls.into_iter().map(|s| s.as_ref().to_string()));
        self
    }

    /// The ttl of [`Client::lock`] (default 10 s).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Retries after a failed attempt (default 3, with 0-200 ms of jitter).
    pub fn retry(mut self, retries: u32, jitter: Duration) -> Self {
        self.config.retry = Retry {
            retries,
            jitter: core_duration(jitter),
        };
        self
    }

    /// How long each server may take to answer one request (default: 1% of
    /// the ttl, clamped to 5-500 ms: enough for servers a WAN round trip
    /// away with a ttl of tens of seconds).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.config.request_timeout = Some(core_duration(timeout));
        self
    }

    /// The clock-drift allowance: `ttl * num / den + constant` (default `ttl/100 + 2 ms`).
    pub fn drift(mut self, num: u32, den: u32, constant: Duration) -> Self {
        self.config.drift = Drift {
            ratio_num: num,
            ratio_den: den,
            constant: core_duration(constant),
        };
        self
    }

    /// How many times a lock may be extended (default: no limit).
    pub fn max_extensions(mut self, max: u32) -> Self {
        self.config.max_extensions = Some(max);
        self
    }

    /// Acquire with F1 fencing tokens.
    pub fn fencing(mut self, on: bool) -> Self {
        self.config.fencing = on;
        self
    }

    /// Refuse votes from servers that restarted less than `max_ttl` ago (the
    /// delayed-restart rule, enforced by the client). Give the largest ttl
    /// any client uses on these servers.
    ///
    /// The restart time comes from `INFO server` (`uptime_in_seconds`), so
    /// the guard needs the ACL permission `+info`. Fail closed: a server
    /// whose restart time cannot be known (INFO denied, or without an
    /// uptime) is not used, and its vote does not count.
    pub fn restart_guard(mut self, max_ttl: Option<Duration>) -> Self {
        self.config.restart_guard = max_ttl.map(core_duration);
        self
    }

    /// Which commands release, extend, fenced acquisitions and inspect send
    /// ([`Commands`]): by default ([`Commands::Auto`]) the native commands
    /// where a server's handshake reports them (Valkey 9.0 or later: no
    /// Lua, no `@scripting` permission), else the scripts.
    /// [`Commands::Native`] refuses a server without them (its report says
    /// so), and never sends a script; [`Commands::Scripts`] sends scripts
    /// everywhere.
    pub fn commands(mut self, commands: Commands) -> Self {
        self.config.commands = commands;
        self
    }

    /// How long a connect may take (default 1 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Limits on what servers may send (default: [`Limits::DEFAULT`]).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Whether async calls drive the connections on their runtime's own
    /// reactor (default `true`; it needs the `tokio` or `async-io`
    /// feature, and does nothing without them). `false`: the client's
    /// driver thread does it for every task, as without those features
    /// (each call then crosses threads twice; see [`asynchronous`]).
    pub fn drive_on_runtime(mut self, on: bool) -> Self {
        self.on_runtime = on;
        self
    }

    /// Checks the settings and makes the client. Connections open lazily.
    ///
    /// # Errors
    /// [`Error::TlsSettings`] when a `rediss://` server's TLS settings are not
    /// usable (a certificate or key file that cannot be read or parsed, a
    /// key that does not match its certificate, a server name that is
    /// not one); [`Error::Url`] for an address that does not parse,
    /// [`Error::ServerCount`] for a server count outside 1..=9; [`Error::DuplicateServer`] when two
    /// entries are the same server (the same address and port, whatever the
    /// database or credentials; names are resolved here).
    pub fn build(self) -> Result<Client, Error> {
        let urls = self
            .servers
            .iter()
            .map(|s| s.parse::<ServerUrl>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(Error::Url)?;
        let servers = Servers::new(urls.len()).map_err(|e| Error::ServerCount(e.0))?;
        let conn = ConnConfig {
            connect_timeout: self.connect_timeout,
            backoff_min: Duration::from_millis(10),
            backoff_max: Duration::from_secs(2),
            limits: self.limits,
            info_required: self.config.restart_guard.is_some(),
            commands: self.config.commands,
            delivery_grace: Duration::from_micros(
                self.config
                    .request_timeout_for(core_duration(self.ttl))
                    .as_micros(),
            ),
        };
        let servers_tls = self.tls_targets(&urls)?;
        let transport =
            Transport::with_tls(&servers_tls, conn).map_err(|e| Error::Io(Arc::new(e)))?;
        if let Some((first, second)) = transport.same_server() {
            return Err(Error::DuplicateServer {
                first: urls[first].address(),
                second: urls[second].address(),
            });
        }
        let shared = Arc::new(Shared {
            transport,
            servers,
            config: self.config,
            ttl: self.ttl,
            driver: Driver::default(),
            on_runtime: self.on_runtime && asynchronous::ON_RUNTIME,
        });
        Ok(Client {
            _life: Arc::new(Life(shared.clone())),
            shared,
        })
    }

    /// Each server with its TLS target (none without the `tls` feature,
    /// where `rediss://` does not parse).
    #[cfg(not(feature = "tls"))]
    fn tls_targets(
        &self,
        urls: &[ServerUrl],
    ) -> Result<Vec<(ServerUrl, Option<TlsTarget>)>, Error> {
        Ok(urls.iter().map(|u| (u.clone(), None)).collect())
    }

    /// Checks the settings and makes the client's async face (see
    /// [`AsyncClient`]), starting its driver thread.
    ///
    /// # Errors
    /// As [`build`](Builder::build), and [`Error::Io`] when the driver
    /// thread cannot be started.
    pub fn build_async(self) -> Result<AsyncClient, Error> {
        self.build()?.to_async()
    }
}

/// How many attempts an acquisition makes.
#[derive(Debug, Clone, Copy)]
enum Attempts {
    /// As configured (`Builder::retry`).
    Configured,
    /// One attempt, no retries.
    Once,
    /// Retries until the deadline.
    Until(StdInstant),
}

fn core_duration(d: Duration) -> redlock_core::Duration {
    redlock_core::Duration::from_micros(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// A Redlock client over N independent Redis masters.
///
/// `Send + Sync` and cheap to clone (clones share the connections): use it
/// from many threads. Requests of all threads to one server are pipelined
/// over that server's single connection; one thread at a time waits on the
/// sockets and drives every thread's operation, and each caller is woken
/// when its call is finished.
///
/// ```no_run
/// use std::time::Duration;
/// let client = redlock_std::Client::builder()
///     .servers(["127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"])
///     .build()?;
/// let lock = client.lock(b"orders", Duration::from_secs(10))?;
/// // ... work, finishing before lock.remaining() runs out ...
/// client.unlock(&lock)?;
/// # Ok::<(), redlock_std::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Client {
    shared: Arc<Shared>,
    _life: Arc<Life>,
}

#[derive(Debug)]
struct Shared {
    transport: Transport<Call>,
    /// The server count; incarnations are filled in per acquisition.
    servers: Servers,
    config: Config,
    ttl: Duration,
    /// The driver thread of the async API (see `asynchronous`).
    driver: Driver,
    /// Async calls lead the transport on their runtime's reactor.
    on_runtime: bool,
}

impl Shared {
    /// The core operation that extends `lock`, its clock read now.
    fn extend_op(&self, lock: &Lock, ttl: Duration) -> Result<Extend<Resource>, Error> {
        Extend::new(
            &self.config,
            &self.transport.servers(self.servers),
            lock.resource.clone(),
            &lock.inner,
            core_duration(ttl),
            self.transport.now(),
        )
        .map_err(Error::Argument)
    }
}

/// Held by every [`Client`] handle (the async ones and the guards
/// included): when the last one goes, the driver thread may end.
#[derive(Debug)]
struct Life(Arc<Shared>);

impl Drop for Life {
    fn drop(&mut self) {
        self.0.shut_down_driver();
    }
}

impl Client {
    /// A builder with the defaults.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_std::Client;
    ///
    /// let client = Client::builder()
    ///     .servers(["127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"])
    /// #   .servers(Vec::<String>::new());
    /// # let _servers = redlock_tests::doc::Servers::start(3);
    /// # let client = Client::builder()
    /// #   .servers(_servers.urls())
    ///     .ttl(Duration::from_secs(30))
    ///     .fencing(true)
    ///     .build()?;
    /// let lock = client.lock("orders", client.ttl())?;
    /// assert_eq!(lock.fence(), Some(1));
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    pub fn builder() -> Builder {
        Builder {
            servers: Vec::new(),
            config: Config::DEFAULT,
            ttl: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(1),
            limits: Limits::DEFAULT,
            on_runtime: true,
            #[cfg(feature = "tls")]
            tls: tls::TlsOptions::default(),
        }
    }

    /// The default ttl.
    ///
    /// ```
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// let lock = client.lock("orders", client.ttl())?;
    /// assert!(lock.remaining() <= client.ttl());
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    pub fn ttl(&self) -> Duration {
        self.shared.ttl
    }

    /// Acquires `resource` for `ttl`, retrying as configured.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// let lock = client.lock("orders", Duration::from_secs(10))?;
    /// // ... work, finishing before lock.remaining() runs out ...
    /// client.unlock(&lock)?;
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    pub fn lock(&self, resource: impl AsRef<[u8]>, ttl: Duration) -> Result<Lock, Error> {
        let (config, deadline) = self.attempts(Attempts::Configured);
        self.acquire(resource.as_ref(), ttl, config, deadline)
    }

    /// One attempt, no retries.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_std::Error;
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// let held = client.try_lock("orders", Duration::from_secs(10))?;
    /// match client.try_lock("orders", Duration::from_secs(10)) {
    ///     Err(Error::Conflict(_)) => println!("busy, try later"),
    ///     other => panic!("{other:?}"),
    /// }
    /// client.unlock(&held)?;
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    pub fn try_lock(&self, resource: impl AsRef<[u8]>, ttl: Duration) -> Result<Lock, Error> {
        let (config, deadline) = self.attempts(Attempts::Once);
        self.acquire(resource.as_ref(), ttl, config, deadline)
    }

    /// Retries with jitter until `deadline` (no retry starts after it).
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// let deadline = Instant::now() + Duration::from_secs(5);
    /// let lock = client.lock_until("nightly-report", Duration::from_secs(60), deadline)?;
    /// client.unlock(&lock)?;
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    pub fn lock_until(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
        deadline: StdInstant,
    ) -> Result<Lock, Error> {
        let (config, deadline) = self.attempts(Attempts::Until(deadline));
        self.acquire(resource.as_ref(), ttl, config, deadline)
    }

    fn acquire(
        &self,
        resource: &[u8],
        ttl: Duration,
        config: Config,
        deadline: Option<StdInstant>,
    ) -> Result<Lock, Error> {
        // Name lookups first: they must not eat into the validity (A1).
        self.shared.transport.resolve_wanted_names();
        let op = self.acquire_op(resource, ttl, config, deadline)?;
        self.acquired(resource, self.shared.transport.run(op))
    }

    /// The config of an acquisition with `attempts`, and its deadline.
    fn attempts(&self, attempts: Attempts) -> (Config, Option<StdInstant>) {
        let config = self.shared.config;
        match attempts {
            Attempts::Configured => (config, None),
            Attempts::Once => (
                Config {
                    retry: Retry::NONE,
                    ..config
                },
                None,
            ),
            Attempts::Until(deadline) => (
                Config {
                    retry: Retry {
                        retries: u32::MAX,
                        ..config.retry
                    },
                    ..config
                },
                Some(deadline),
            ),
        }
    }

    /// The core operation of an acquisition, its clock read now.
    fn acquire_op(
        &self,
        resource: &[u8],
        ttl: Duration,
        config: Config,
        deadline: Option<StdInstant>,
    ) -> Result<Acquire<Resource>, Error> {
        let transport = &self.shared.transport;
        let servers = transport.servers(self.shared.servers);
        let now = transport.now();
        let deadline = deadline.map(|d| {
            let from_now = d.saturating_duration_since(StdInstant::now());
            now.saturating_add(core_duration(from_now))
        });
        let mut rng = OsRng::default();
        Acquire::new(
            &config,
            &servers,
            Resource::new(resource),
            core_duration(ttl),
            deadline,
            &mut rng,
            now,
        )
        .map_err(|e| match (e, rng.failed) {
            (redlock_core::ArgumentError::Rng, Some(os)) => {
                // The OS's own error where it has a code.
                let os = match os.raw_os_error() {
                    Some(code) => std::io::Error::from_raw_os_error(code),
                    None => std::io::Error::other(os.to_string()),
                };
                Error::Rng(Arc::new(os))
            }
            (redlock_core::ArgumentError::Rng, None) => {
                Error::Rng(Arc::new(std::io::Error::other("no entropy for a token")))
            }
            (e, _) => Error::Argument(e),
        })
    }

    /// An acquisition's outcome as the API gives it.
    fn acquired(
        &self,
        resource: &[u8],
        outcome: Result<redlock_core::Lock, redlock_core::AcquireError>,
    ) -> Result<Lock, Error> {
        match outcome {
            Ok(lock) => Ok(Lock {
                resource: Resource::new(resource),
                inner: lock,
                epoch: self.shared.transport.epoch(),
            }),
            Err(e) => Err(Error::from_failure(e.kind, self.outcomes(e.report))),
        }
    }

    /// `report` (of a lock, a release, a repair) with each server's
    /// address, and the words of the servers that refused their handshake:
    /// what an error carries, for an operation that succeeded. Its
    /// `Display` is `host:port: outcome, ...`.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// let lock = client.lock("orders", Duration::from_secs(10))?;
    /// let said = client.outcomes(*lock.report()).to_string();
    /// assert!(said.contains(": ok"), "{said}");
    /// # client.unlock(&lock)?;
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    pub fn outcomes(&self, report: Report) -> Outcomes {
        let transport = &self.shared.transport;
        let notes = report
            .iter()
            .map(|(server, outcome)| {
                let address = transport
                    .url(server.index())
                    .map_or_else(|| format!("server {}", server.0), |u| u.address());
                (address, transport.note(server.index(), outcome))
            })
            .collect();
        Outcomes { report, notes }
    }

    /// Releases `lock` on every server (A7; idempotent: an expired lock is
    /// fine).
    ///
    /// # Errors
    /// [`Error::Unavailable`] when fewer than a majority of the servers
    /// answered: the key may then stay on the others until its ttl runs out,
    /// and nobody else can take the lock before. The report tells which.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// let lock = client.lock("orders", Duration::from_secs(10))?;
    /// let released = client.unlock(&lock)?;
    /// assert_eq!(released.deleted(), 3);
    /// // Releasing again is harmless: nothing of ours is left.
    /// assert_eq!(client.unlock(&lock)?.deleted(), 0);
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    pub fn unlock(&self, lock: &Lock) -> Result<Released, Error> {
        self.confirmed(self.shared.transport.run(self.release_op(lock)))
    }

    /// The core operation that releases `lock`.
    fn release_op(&self, lock: &Lock) -> Release<Resource> {
        Release::for_lock(
            &self.shared.config,
            &self.shared.transport.servers(self.shared.servers),
            lock.resource.clone(),
            &lock.inner,
        )
    }

    /// Releases `resource` held with `token` (a lock taken by another
    /// process). Errors as [`unlock`](Client::unlock).
    ///
    /// ```
    /// use std::time::Duration;
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// // A token printed by another process (`redlock acquire`, say).
    /// let token = client.lock("deploy", Duration::from_secs(60))?.token().to_string();
    /// let released = client.unlock_token("deploy", &token)?;
    /// assert_eq!(released.deleted(), 3);
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    pub fn unlock_token(
        &self,
        resource: impl AsRef<[u8]>,
        token: impl AsRef<[u8]>,
    ) -> Result<Released, Error> {
        let op = self.release_token_op(resource.as_ref(), token.as_ref())?;
        self.confirmed(self.shared.transport.run(op))
    }

    /// The core operation that releases `resource` held with `token`.
    fn release_token_op(&self, resource: &[u8], token: &[u8]) -> Result<Release<Resource>, Error> {
        Release::new(
            &self.shared.config,
            &self.shared.transport.servers(self.shared.servers),
            Resource::new(resource),
            token,
            self.default_request_timeout(),
        )
        .map_err(Error::Argument)
    }

    /// The request timeout of operations that have no ttl of their own.
    fn default_request_timeout(&self) -> redlock_core::Duration {
        self.shared
            .config
            .request_timeout_for(core_duration(self.shared.ttl))
    }

    /// A release counts once a majority confirmed it (the core says).
    fn confirmed(&self, released: Released) -> Result<Released, Error> {
        if released.is_confirmed() {
            Ok(released)
        } else {
            Err(Error::Unavailable(self.outcomes(released.report)))
        }
    }

    /// Extends `lock` to a fresh `ttl`. On failure the lock keeps its old validity.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// let mut lock = client.lock("orders", Duration::from_secs(10))?;
    /// client.extend(&mut lock, Duration::from_secs(30))?;
    /// assert!(lock.remaining() > Duration::from_secs(10));
    /// assert_eq!(lock.extensions(), 1);
    /// client.unlock(&lock)?;
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    pub fn extend(&self, lock: &mut Lock, ttl: Duration) -> Result<(), Error> {
        self.shared.transport.resolve_wanted_names();
        let op = self.extend_op(lock, ttl)?;
        self.extended(lock, self.shared.transport.run(op))
    }

    fn extend_op(&self, lock: &Lock, ttl: Duration) -> Result<Extend<Resource>, Error> {
        self.shared.extend_op(lock, ttl)
    }

    /// An extension's outcome: `lock` takes the new validity.
    fn extended(
        &self,
        lock: &mut Lock,
        outcome: Result<redlock_core::Lock, redlock_core::ExtendError>,
    ) -> Result<(), Error> {
        match outcome {
            Ok(extended) => {
                lock.inner = extended;
                Ok(())
            }
            Err(e) => Err(Error::from_failure(e.kind, self.outcomes(e.report))),
        }
    }

    /// F1 repair, for an operator: raises `resource`'s fence counter to at
    /// least `at_least` on every server, never lowering it. Use it after
    /// [`Error::FenceLost`] (servers restarted without persistence and lost
    /// their counters), with `at_least` the highest fence the protected
    /// resource has accepted: every fence handed out afterwards is larger.
    /// Safe to run again; a floor too low is safe but the resource will
    /// refuse tokens until the counter passes what it has seen.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when fewer than a majority confirmed.
    ///
    /// ```
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// // After servers lost the counter, the resource says it accepted fence 41.
    /// let repaired = client.fence_repair("db-migrate", 41)?;
    /// assert!(repaired.counter >= 41);
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    pub fn fence_repair(
        &self,
        resource: impl AsRef<[u8]>,
        at_least: u64,
    ) -> Result<FenceRepaired, Error> {
        let op = self.fence_repair_op(resource.as_ref(), at_least);
        self.fence_repaired(self.shared.transport.run(op))
    }

    fn fence_repair_op(&self, resource: &[u8], at_least: u64) -> FenceRepair<Resource> {
        FenceRepair::new(
            &self.shared.config,
            &self.shared.transport.servers(self.shared.servers),
            Resource::new(resource),
            at_least,
            self.default_request_timeout(),
        )
    }

    fn fence_repaired(
        &self,
        outcome: Result<FenceRepaired, redlock_core::FenceRepairError>,
    ) -> Result<FenceRepaired, Error> {
        outcome.map_err(|e| Error::Unavailable(self.outcomes(e.report)))
    }

    /// Per server: who holds `resource`, and for how long.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// let lock = client.lock("orders", Duration::from_secs(10))?;
    /// let inspection = client.inspect("orders")?;
    /// assert_eq!(inspection.majority_holder(), Some(lock.token().as_bytes()));
    /// for holding in inspection.entries() {
    ///     println!("{:?} for {:?}", holding.holder_str(), holding.ttl());
    /// }
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    pub fn inspect(&self, resource: impl AsRef<[u8]>) -> Result<Inspection, Error> {
        let op = self.inspect_op(resource.as_ref());
        let transport = &self.shared.transport;
        let inspection = transport.run(op);
        Ok(Inspection::from_core(&inspection, |i, o| {
            transport.note(i, o)
        }))
    }

    fn inspect_op(&self, resource: &[u8]) -> Inspect<Resource> {
        Inspect::new(
            &self.shared.transport.servers(self.shared.servers),
            Resource::new(resource),
            self.default_request_timeout(),
        )
    }

    /// The per-request timeout for operations with `ttl`.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// // 1% of the ttl, from 5 ms to 500 ms, unless set with the builder.
    /// assert_eq!(client.request_timeout(Duration::from_secs(30)), Duration::from_millis(300));
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    pub fn request_timeout(&self, ttl: Duration) -> Duration {
        Duration::from_micros(
            self.shared
                .config
                .request_timeout_for(core_duration(ttl))
                .as_micros(),
        )
    }

    /// The servers, as given (passwords hidden when displayed).
    ///
    /// ```
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// for url in client.server_urls() {
    ///     println!("{url}"); // passwords show as ***
    /// }
    /// assert_eq!(client.server_urls().len(), 3);
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    pub fn server_urls(&self) -> Vec<ServerUrl> {
        let transport = &self.shared.transport;
        (0..transport.len())
            .filter_map(|i| transport.url(i))
            .collect()
    }
}
