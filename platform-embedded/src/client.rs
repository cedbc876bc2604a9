//! The blocking client: the shared engine over a [`Network`] whose
//! [`wait`](Network::wait) is where the loop sleeps.

use rand_core::TryCryptoRng;
use redlock_core::{
    Config, Duration, FenceRepaired, Inspection, Instant, Operation, Released, Retry,
};

use crate::conn::Buffers;
use crate::engine::{Driven, Engine, Flow, Lock, Options, confirmed};
use crate::error::Error;
use crate::net::{Clock, Network};
use redlock_core::session::Credentials;

/// A Redlock client over `SERVERS` servers, for a microcontroller: no heap,
/// every buffer fixed by const generics, one operation at a time. Its
/// per-server buffers and connection state are a [`Buffers`] that the
/// caller keeps (in a static, say), so the client itself stays small.
///
/// - `N`: the [`Network`] (one socket per server), `C`: the [`Clock`],
///   `G`: a cryptographically secure RNG for tokens (there is no default).
/// - `IN`: bytes buffered per server for replies; the largest is the
///   handshake's `INFO server` (about 600 bytes on Redis 7). A reply that
///   does not fit fails that server's connection.
/// - `OUT`: bytes buffered per server for requests; it must hold the
///   largest handshake command (a `SCRIPT LOAD`, checked by
///   [`Client::new`]) and the largest request (an `EVAL` with a script's
///   source, after `NOSCRIPT`). Resource names can be up to
///   [`max_resource_len`](Client::max_resource_len) bytes: 154 with the
///   default 640.
///
/// Each operation first (re)connects the servers that are down and whose
/// backoff has passed, waits until each is through its handshake (judged
/// fail-closed by the core: until then nothing else is sent on it) or has
/// failed, then sends every request before reading any reply, and reads
/// replies as sockets become ready. A server that fails during an
/// operation is reconnected in the background (after its backoff) and is
/// used again by the operation's later requests, such as the next attempt
/// of a lock; a release for a server whose connection broke waits behind
/// the new connection's handshake.
pub struct Client<'a, N, C, G, const SERVERS: usize, const IN: usize = 1024, const OUT: usize = 640>
{
    engine: Engine<'a, C, G, SERVERS, IN, OUT>,
    net: N,
}

impl<N, C, G, const SERVERS: usize, const IN: usize, const OUT: usize> core::fmt::Debug
    for Client<'_, N, C, G, SERVERS, IN, OUT>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Client")
            .field("engine", &self.engine)
            .finish_non_exhaustive()
    }
}

impl<'a, N, C, G, const SERVERS: usize, const IN: usize, const OUT: usize>
    Client<'a, N, C, G, SERVERS, IN, OUT>
where
    N: Network,
    C: Clock,
    G: TryCryptoRng,
{
    /// A client over the `SERVERS` servers of `net`, logging in to each with
    /// its `creds`, keeping its per-server state in `buffers` (which it
    /// clears). Nothing is connected until the first operation (or
    /// [`connect`](Client::connect)).
    ///
    /// `Err(BufferTooSmall)` when `OUT` cannot hold a handshake command (a
    /// `SCRIPT LOAD`, or `AUTH` with these credentials) or the largest
    /// request.
    pub fn new(
        net: N,
        clock: C,
        rng: G,
        config: Config,
        creds: [Credentials<'a>; SERVERS],
        buffers: &'a mut Buffers<SERVERS, IN, OUT>,
    ) -> Result<Self, Error> {
        Ok(Client {
            engine: Engine::new(clock, rng, config, creds, buffers)?,
            net,
        })
    }

    /// Changes the connection settings.
    pub fn set_options(&mut self, options: Options) {
        self.engine.options = options;
    }

    /// The algorithm's settings.
    pub fn config(&self) -> &Config {
        &self.engine.config
    }

    /// The clock's time.
    pub fn now(&self) -> Instant {
        self.engine.clock.now()
    }

    /// The network, to poll it between operations.
    pub fn net_mut(&mut self) -> &mut N {
        &mut self.net
    }

    /// The longest resource name this client can send.
    pub fn max_resource_len(&self) -> usize {
        self.engine.max_resource_len()
    }

    /// Connects every server that is down (and past its backoff) and runs
    /// its handshake; returns how many servers are ready. Operations do
    /// this themselves; calling it first (at boot) keeps connection time
    /// out of the first operation.
    pub fn connect(&mut self) -> usize {
        self.prepare();
        self.engine.ready()
    }

    /// Acquires `resource` for `ttl`, retrying as [`Config::retry`] says.
    pub fn lock<'r>(&mut self, resource: &'r [u8], ttl: Duration) -> Result<Lock<'r>, Error> {
        self.acquire(resource, ttl, None, self.engine.config)
    }

    /// Acquires `resource` for `ttl`, retrying until the retries run out or
    /// no retry could start before `deadline` (client clock).
    pub fn lock_until<'r>(
        &mut self,
        resource: &'r [u8],
        ttl: Duration,
        deadline: Instant,
    ) -> Result<Lock<'r>, Error> {
        let mut config = self.engine.config;
        config.retry.retries = u32::MAX;
        self.acquire(resource, ttl, Some(deadline), config)
    }

    /// One attempt at `resource`, no retries.
    pub fn try_lock<'r>(&mut self, resource: &'r [u8], ttl: Duration) -> Result<Lock<'r>, Error> {
        let mut config = self.engine.config;
        config.retry = Retry::NONE;
        self.acquire(resource, ttl, None, config)
    }

    fn acquire<'r>(
        &mut self,
        resource: &'r [u8],
        ttl: Duration,
        deadline: Option<Instant>,
        config: Config,
    ) -> Result<Lock<'r>, Error> {
        self.engine.check_resource(resource)?;
        self.prepare();
        let mut op = self.engine.acquire(resource, ttl, deadline, config)?;
        let lock = self.run(&mut op)?;
        lock.map(|lock| Lock { resource, lock })
            .map_err(|e| Error::from_failure(e.kind, e.report))
    }

    /// Extends `lock` to a fresh `ttl` (counted from now), if a majority
    /// still holds it within its validity. On success `lock` has the new
    /// validity; on failure it is left as it was.
    pub fn extend(&mut self, lock: &mut Lock<'_>, ttl: Duration) -> Result<(), Error> {
        self.prepare();
        let mut op = self.engine.extend(lock, ttl)?;
        lock.lock = self
            .run(&mut op)?
            .map_err(|e| Error::from_failure(e.kind, e.report))?;
        Ok(())
    }

    /// Releases `lock` on every server. `Err(NotReleased)` when fewer than a
    /// majority confirmed (the key may stay until its ttl ends).
    pub fn unlock(&mut self, lock: &Lock<'_>) -> Result<Released, Error> {
        self.prepare();
        let mut op = self.engine.release(lock);
        confirmed(self.run(&mut op)?)
    }

    /// Releases `resource` if it holds `token` (a lock taken by another
    /// process, or before a reboot, whose token was kept).
    pub fn unlock_token(&mut self, resource: &[u8], token: &[u8]) -> Result<Released, Error> {
        self.engine.check_resource(resource)?;
        self.prepare();
        let mut op = self.engine.release_token(resource, token)?;
        confirmed(self.run(&mut op)?)
    }

    /// Who holds `resource` on each server, and for how long (F3).
    pub fn inspect(&mut self, resource: &[u8]) -> Result<Inspection, Error> {
        self.engine.check_resource(resource)?;
        self.prepare();
        let mut op = self.engine.inspect(resource);
        self.run(&mut op)
    }

    /// F1, an operator's repair: raises `resource`'s fence counter to at
    /// least `floor` on every server (never lowers it).
    pub fn fence_repair(&mut self, resource: &[u8], floor: u64) -> Result<FenceRepaired, Error> {
        self.engine.check_resource(resource)?;
        self.prepare();
        let mut op = self.engine.fence_repair(resource, floor);
        self.run(&mut op)?
            .map_err(|e| Error::from_failure(e.kind, e.report))
    }

    /// Before an operation: (re)connects the servers that are down and past
    /// their backoff, and waits until each is through its handshake or has
    /// failed (the connect timeout bounds it). A server whose last attempt
    /// failed is not waited for: it keeps connecting in the background, so
    /// that a server that never answers costs one connect timeout, not one
    /// per operation.
    #[inline(never)]
    fn prepare(&mut self) {
        let end = self.engine.prepare_end();
        // Never `Err`: only an operation's requests fail the loop.
        let _ = self.settle(None, end);
    }

    /// Drives `op` to its end: sends everything it has, then reads replies
    /// as they come and times out what is late.
    fn run<O: Operation>(&mut self, op: &mut O) -> Result<O::Output, Error> {
        self.drive(op)?;
        // Taken only now, once: the outcome is not copied around the loop.
        op.poll_outcome().ok_or(Error::NoOutcome)
    }

    /// The loop of [`run`](Client::run), not generic, so that its code
    /// exists once.
    fn drive(&mut self, op: &mut dyn Driven) -> Result<(), Error> {
        self.engine.begin();
        self.settle(Some(op), Instant::ZERO)
    }

    /// Pumps the engine, waiting on the network as it says, until it is
    /// done: the one loop of [`drive`](Client::drive) and
    /// [`prepare`](Client::prepare).
    fn settle(
        &mut self,
        mut op: Option<&mut (dyn Driven + '_)>,
        end: Instant,
    ) -> Result<(), Error> {
        while let Flow::Wait(until) = self.engine.pump(&mut self.net, op.as_deref_mut(), end)? {
            self.net.wait(until);
        }
        Ok(())
    }
}
