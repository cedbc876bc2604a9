//! The async client: the same engine as the blocking [`Client`], over
//! [`embedded-io-async`](embedded_io_async) streams that an
//! [`embedded-nal-async`](embedded_nal_async) [`TcpConnect`] opens
//! (embassy-net's `TcpClient` is one), waiting with an
//! [`embedded-hal-async`](embedded_hal_async) [`DelayNs`].
//!
//! # How it drives the streams
//!
//! A call is one future. Each time it is polled it runs the engine's loop
//! once over every stream, polling each `read` and `write` once with the
//! task's context: what is ready moves, what is not registers the task's
//! waker and is dropped. So every request goes out before any reply is
//! read, and replies are taken from all servers as they come, as in the
//! blocking client. Beside it runs one timer, for the earliest deadline.
//!
//! Connections are opened by the [`Connector`], a future of its own that
//! the application runs for as long as the client lives (an embassy task,
//! or joined with the code that makes the calls), as embassy-net's stack
//! runs in its `Runner`. It connects a server whenever that server's
//! session asks, between calls as well as during them, so that a connect
//! slower than a call still lands, as a blocking stack's does. The client
//! and the connector share the [`Links`], which the caller keeps and
//! [`split`](Links::split)s into one half for each: one client and one
//! connector per `Links`, which the borrow checker holds to (two clients
//! on one set of streams would take each other's replies).
//!
//! The streams' `read` and `write` must therefore be **cancel-safe**: a
//! future dropped before it completed must have moved no bytes. Those of
//! embassy-net's `TcpSocket` and of `embedded-io-adapters` (tokio,
//! futures-io) are. `flush` is never called: a `write` must hand the bytes
//! to the stack.
//!
//! The futures are not `Send` (the links are shared through `Cell`s): the
//! client, its calls and the connector run on one executor thread
//! (embassy's, a tokio `LocalSet`, a `futures` local pool).
//!
//! [`Client`]: crate::Client

use core::cell::{Cell, RefCell};
use core::convert::Infallible;
use core::future::{Future, poll_fn};
use core::net::SocketAddr;
use core::pin::pin;
use core::task::{Context, Poll, Waker};

use embassy_futures::join::join_array;
use embassy_futures::select::{Either, select};
use embedded_hal_async::delay::DelayNs;
use embedded_io_async::{Read, Write};
use embedded_nal_async::TcpConnect;
use rand_core::TryCryptoRng;
use redlock_core::session::Credentials;
use redlock_core::{
    Config, Duration, FenceRepaired, Inspection, Instant, Operation, Released, Retry,
};

use crate::conn::Buffers;
use crate::engine::{Driven, Engine, Flow, Lock, Options, confirmed};
use crate::error::Error;
use crate::io::Io;
use crate::net::{Clock, Link};

/// The longest single wait on the timer: a later deadline is waited for
/// in steps (a `DelayNs` takes a `u32` of microseconds).
const LONGEST_WAIT: Duration = Duration::from_secs(1);

/// Where a server's connection is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// None, and none wanted.
    Down,
    /// The session started a connect; the connector has not taken it up.
    Wanted,
    /// The connector is connecting.
    Connecting,
    /// Connected: the stream is in the slot.
    Up,
    /// The connect failed (the session closes the connection).
    Failed,
}

/// One server's stream, shared by the client and the connector.
struct Slot<S> {
    phase: Cell<Phase>,
    stream: RefCell<Option<S>>,
}

impl<S> Slot<S> {
    const fn new() -> Self {
        Slot {
            phase: Cell::new(Phase::Down),
            stream: RefCell::new(None),
        }
    }

    /// Drops the stream (closing it) and any connect under way.
    fn close(&self) {
        if let Ok(mut stream) = self.stream.try_borrow_mut() {
            *stream = None;
        }
        self.phase.set(Phase::Down);
    }
}

/// Keeps `waker` in `cell` (a clone only if it is another task's).
fn register(cell: &Cell<Option<Waker>>, waker: &Waker) {
    let kept = cell.take();
    cell.set(Some(match kept {
        Some(kept) if kept.will_wake(waker) => kept,
        _ => waker.clone(),
    }));
}

/// Wakes the task whose waker `cell` keeps, and keeps it.
fn wake(cell: &Cell<Option<Waker>>) {
    let kept = cell.take();
    if let Some(waker) = &kept {
        waker.wake_by_ref();
    }
    cell.set(kept);
}

/// The connections of an [`AsyncClient`], shared with its [`Connector`]:
/// one stream of type `S` per server, and the two tasks' wakers. The
/// caller keeps it (in a `StaticCell`, say: it is not `Sync`, and
/// [`Links::new`] is `const`) and [`split`](Links::split)s it between the
/// two.
pub struct Links<S, const SERVERS: usize> {
    slots: [Slot<S>; SERVERS],
    /// The task of the running call: woken when a connect lands or fails.
    client: Cell<Option<Waker>>,
    /// The connector's task: woken when a session wants a connection or
    /// gives one up.
    connector: Cell<Option<Waker>>,
}

impl<S, const SERVERS: usize> Links<S, SERVERS> {
    /// No connection.
    pub const fn new() -> Self {
        Links {
            slots: [const { Slot::new() }; SERVERS],
            client: Cell::new(None),
            connector: Cell::new(None),
        }
    }
}

impl<S, const SERVERS: usize> Links<S, SERVERS> {
    /// The client's half and the connector's half. Taking `&mut self`, it
    /// makes one pair at a time: two clients over one set of streams would
    /// take each other's replies.
    pub fn split(&mut self) -> (ClientLinks<'_, S, SERVERS>, ConnectorLinks<'_, S, SERVERS>) {
        let links: &Self = self;
        (ClientLinks(links), ConnectorLinks(links))
    }
}

/// The [`AsyncClient`]'s half of a [`Links`] ([`Links::split`]).
pub struct ClientLinks<'a, S, const SERVERS: usize>(&'a Links<S, SERVERS>);

/// The [`Connector`]'s half of a [`Links`] ([`Links::split`]).
pub struct ConnectorLinks<'a, S, const SERVERS: usize>(&'a Links<S, SERVERS>);

impl<S, const SERVERS: usize> core::fmt::Debug for ClientLinks<'_, S, SERVERS> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.0.fmt(f)
    }
}

impl<S, const SERVERS: usize> core::fmt::Debug for ConnectorLinks<'_, S, SERVERS> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.0.fmt(f)
    }
}

impl<S, const SERVERS: usize> Default for Links<S, SERVERS> {
    fn default() -> Self {
        Links::new()
    }
}

impl<S, const SERVERS: usize> core::fmt::Debug for Links<S, SERVERS> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut list = f.debug_list();
        for slot in &self.slots {
            list.entry(&slot.phase.get());
        }
        list.finish()
    }
}

/// The streams as the engine sees them during one poll of a call.
struct Polled<'p, 'c, S, const SERVERS: usize> {
    cx: &'p mut Context<'c>,
    links: &'p Links<S, SERVERS>,
}

impl<S: Read + Write, const SERVERS: usize> Io for Polled<'_, '_, S, SERVERS> {
    fn connect(&mut self, server: usize) -> Result<(), ()> {
        let slot = self.links.slots.get(server).ok_or(())?;
        slot.close();
        slot.phase.set(Phase::Wanted);
        wake(&self.links.connector);
        Ok(())
    }

    fn link(&mut self, server: usize) -> Link {
        match self.links.slots.get(server).map(|s| s.phase.get()) {
            Some(Phase::Wanted | Phase::Connecting) => Link::Connecting,
            Some(Phase::Up) => Link::Up,
            _ => Link::Down,
        }
    }

    // `read` and `write` are written out, not through a shared helper:
    // with one, the async size probe was 124 B larger.
    fn read(&mut self, server: usize, buf: &mut [u8]) -> Result<Option<usize>, ()> {
        let slot = self.links.slots.get(server).ok_or(())?;
        let mut stream = slot.stream.try_borrow_mut().map_err(|_| ())?;
        let stream = stream.as_mut().ok_or(())?;
        match pin!(stream.read(buf)).poll(self.cx) {
            Poll::Ready(Ok(n)) => Ok(Some(n)),
            Poll::Ready(Err(_)) => Err(()),
            Poll::Pending => Ok(None),
        }
    }

    fn write(&mut self, server: usize, buf: &[u8]) -> Result<Option<usize>, ()> {
        let slot = self.links.slots.get(server).ok_or(())?;
        let mut stream = slot.stream.try_borrow_mut().map_err(|_| ())?;
        let stream = stream.as_mut().ok_or(())?;
        match pin!(stream.write(buf)).poll(self.cx) {
            Poll::Ready(Ok(n)) => Ok(Some(n)),
            Poll::Ready(Err(_)) => Err(()),
            Poll::Pending => Ok(None),
        }
    }

    fn close(&mut self, server: usize) {
        if let Some(slot) = self.links.slots.get(server) {
            let connecting = slot.phase.get() == Phase::Connecting;
            slot.close();
            if connecting {
                // The connector drops the connect.
                wake(&self.links.connector);
            }
        }
    }
}

/// Opens the connections of an [`AsyncClient`]: run
/// [`run`](Connector::run) for as long as the client lives (spawn it as a
/// task, or join it with the code that makes the calls). Without it no
/// server is ever connected: every call would find every server down.
pub struct Connector<'a, T: TcpConnect + 'a, const SERVERS: usize> {
    stack: &'a T,
    addrs: [SocketAddr; SERVERS],
    links: &'a Links<T::Connection<'a>, SERVERS>,
}

impl<'a, T: TcpConnect + 'a, const SERVERS: usize> core::fmt::Debug for Connector<'a, T, SERVERS> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Connector")
            .field("addrs", &self.addrs)
            .field("links", self.links)
            .finish_non_exhaustive()
    }
}

impl<'a, T: TcpConnect + 'a, const SERVERS: usize> Connector<'a, T, SERVERS> {
    /// The connector of the client over the other half of `links`: server
    /// `i` is `addrs[i]`, reached through `stack`.
    pub fn new(
        stack: &'a T,
        addrs: [SocketAddr; SERVERS],
        links: ConnectorLinks<'a, T::Connection<'a>, SERVERS>,
    ) -> Self {
        Connector {
            stack,
            addrs,
            links: links.0,
        }
    }

    /// Connects each server whenever its session asks, until the future is
    /// dropped (it never ends by itself). One connect per server at a time,
    /// all servers at once; a connect the session gave up (its timeout
    /// passed, or the client closed the server) is dropped. A run dropped
    /// during connects (its task aborted, say) may be started again: it
    /// takes them up anew.
    pub async fn run(&mut self) -> Infallible {
        let stack = self.stack;
        let links = self.links;
        let addrs = &self.addrs;
        join_array(core::array::from_fn::<_, SERVERS, _>(|i| async move {
            if let (Some(addr), Some(slot)) = (addrs.get(i), links.slots.get(i)) {
                connects(stack, addr, links, slot).await;
            }
        }))
        .await;
        core::future::pending().await
    }
}

/// Server `slot`'s connects: each time the session wants a connection,
/// connects to `addr` until it is up, fails, or the session gives it up.
async fn connects<'a, T: TcpConnect, const SERVERS: usize>(
    stack: &'a T,
    addr: &SocketAddr,
    links: &Links<T::Connection<'a>, SERVERS>,
    slot: &Slot<T::Connection<'a>>,
) {
    // A connect that a dropped run left: started again.
    if slot.phase.get() == Phase::Connecting {
        slot.phase.set(Phase::Wanted);
    }
    loop {
        poll_fn(|cx| match slot.phase.get() {
            Phase::Wanted => {
                slot.phase.set(Phase::Connecting);
                Poll::Ready(())
            }
            _ => {
                register(&links.connector, cx.waker());
                Poll::Pending
            }
        })
        .await;
        let given_up = poll_fn(|cx| match slot.phase.get() {
            Phase::Connecting => {
                register(&links.connector, cx.waker());
                Poll::Pending
            }
            _ => Poll::Ready(()),
        });
        let connected = match select(stack.connect(*addr), given_up).await {
            Either::First(connected) => connected,
            Either::Second(()) => continue,
        };
        if slot.phase.get() != Phase::Connecting {
            continue;
        }
        match (connected, slot.stream.try_borrow_mut()) {
            (Ok(stream), Ok(mut slot_stream)) => {
                *slot_stream = Some(stream);
                slot.phase.set(Phase::Up);
            }
            _ => slot.phase.set(Phase::Failed),
        }
        // The call waiting for it, if any, sees the news.
        wake(&links.client);
    }
}

/// An operation to build once the connections are prepared, behind a
/// trait object, so that the future that drives calls is not generic.
trait Build<E> {
    /// Builds the operation with the engine (whose servers the handshakes
    /// have told about by now), and lends it to be driven.
    fn build(&mut self, engine: &mut E) -> Result<&mut dyn Driven, Error>;
}

/// A call's operation: how to build it, then the operation itself.
struct Call<O, F> {
    make: Option<F>,
    op: Option<O>,
}

impl<O, F> Call<O, F> {
    fn new(make: F) -> Self {
        Call {
            make: Some(make),
            op: None,
        }
    }
}

impl<O: Operation, F> Call<O, F> {
    /// The operation's outcome, once it was driven to its end.
    fn outcome(&mut self) -> Result<O::Output, Error> {
        self.op
            .as_mut()
            .and_then(Operation::poll_outcome)
            .ok_or(Error::NoOutcome)
    }
}

impl<E, O: Operation, F: FnOnce(&mut E) -> Result<O, Error>> Build<E> for Call<O, F> {
    fn build(&mut self, engine: &mut E) -> Result<&mut dyn Driven, Error> {
        let make = self.make.take().ok_or(Error::NoOutcome)?;
        let op = self.op.insert(make(engine)?);
        Ok(op)
    }
}

/// A Redlock client over `SERVERS` servers for async firmware (embassy) and
/// any executor: the blocking [`Client`](crate::Client)'s operations, its
/// fail-closed handshake and its per-server reports, as futures. No heap,
/// no `unsafe`; its buffers are a [`Buffers`] that the caller keeps, as
/// the blocking client's, and its connections a [`Links`] that it shares
/// with its [`Connector`], which must run beside it.
///
/// - `S`: the streams ([`TcpConnect::Connection`] of the connector's
///   stack; for embassy-net, `TcpConnection`).
/// - `C`: the [`Clock`]; `D`: a [`DelayNs`] to wait for deadlines (for
///   embassy, `embassy_time::Delay`); `G`: a cryptographically secure RNG
///   for tokens.
/// - `IN`, `OUT`: as for the blocking client.
///
/// One call at a time (each takes `&mut self`). A call's future may be
/// dropped at any point, as a blocking call cannot be: the requests it
/// sent are then answered into the void (the next call drops their
/// replies, matched by the core's sessions), and a lock it was acquiring
/// stays until its ttl ends, as with a client that crashed.
pub struct AsyncClient<
    'a,
    S,
    C,
    G,
    D,
    const SERVERS: usize,
    const IN: usize = 1024,
    const OUT: usize = 640,
> {
    engine: Engine<'a, C, G, SERVERS, IN, OUT>,
    delay: D,
    links: &'a Links<S, SERVERS>,
}

impl<S, C, G, D, const SERVERS: usize, const IN: usize, const OUT: usize> core::fmt::Debug
    for AsyncClient<'_, S, C, G, D, SERVERS, IN, OUT>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AsyncClient")
            .field("engine", &self.engine)
            .field("links", self.links)
            .finish_non_exhaustive()
    }
}

impl<'a, S, C, G, D, const SERVERS: usize, const IN: usize, const OUT: usize>
    AsyncClient<'a, S, C, G, D, SERVERS, IN, OUT>
where
    S: Read + Write,
    C: Clock,
    G: TryCryptoRng,
    D: DelayNs,
{
    /// A client whose connections are its half of `links` (opened by a
    /// [`Connector`] over the other half, which must run beside it: without
    /// it every server fails to connect in time), logging in to each server
    /// with its `creds`,
    /// keeping its per-server state in `buffers` (which it clears). Nothing
    /// is connected until the first operation (or
    /// [`connect`](AsyncClient::connect)).
    ///
    /// `Err(BufferTooSmall)` when `OUT` cannot hold a handshake command or
    /// the largest request, as for [`Client::new`](crate::Client::new).
    pub fn new(
        links: ClientLinks<'a, S, SERVERS>,
        clock: C,
        delay: D,
        rng: G,
        config: Config,
        creds: [Credentials<'a>; SERVERS],
        buffers: &'a mut Buffers<SERVERS, IN, OUT>,
    ) -> Result<Self, Error> {
        Ok(AsyncClient {
            engine: Engine::new(clock, rng, config, creds, buffers)?,
            delay,
            links: links.0,
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

    /// The longest resource name this client can send.
    pub fn max_resource_len(&self) -> usize {
        self.engine.max_resource_len()
    }

    /// Connects every server that is down (and past its backoff) and runs
    /// its handshake; returns how many servers are ready.
    pub async fn connect(&mut self) -> usize {
        self.prepare().await;
        self.engine.ready()
    }

    /// Acquires `resource` for `ttl`, retrying as [`Config::retry`] says.
    pub async fn lock<'r>(&mut self, resource: &'r [u8], ttl: Duration) -> Result<Lock<'r>, Error> {
        let config = self.engine.config;
        self.acquire(resource, ttl, None, config).await
    }

    /// Acquires `resource` for `ttl`, retrying until the retries run out or
    /// no retry could start before `deadline` (client clock). Other tasks
    /// run while it waits.
    pub async fn lock_until<'r>(
        &mut self,
        resource: &'r [u8],
        ttl: Duration,
        deadline: Instant,
    ) -> Result<Lock<'r>, Error> {
        let mut config = self.engine.config;
        config.retry.retries = u32::MAX;
        self.acquire(resource, ttl, Some(deadline), config).await
    }

    /// One attempt at `resource`, no retries.
    pub async fn try_lock<'r>(
        &mut self,
        resource: &'r [u8],
        ttl: Duration,
    ) -> Result<Lock<'r>, Error> {
        let mut config = self.engine.config;
        config.retry = Retry::NONE;
        self.acquire(resource, ttl, None, config).await
    }

    async fn acquire<'r>(
        &mut self,
        resource: &'r [u8],
        ttl: Duration,
        deadline: Option<Instant>,
        config: Config,
    ) -> Result<Lock<'r>, Error> {
        self.engine.check_resource(resource)?;
        let mut call = Call::new(|e: &mut Engine<'a, C, G, SERVERS, IN, OUT>| {
            Ok(e.acquire(resource, ttl, deadline, config)?)
        });
        self.call(&mut call).await?;
        call.outcome()?
            .map(|lock| Lock { resource, lock })
            .map_err(|e| Error::from_failure(e.kind, e.report))
    }

    /// Extends `lock` to a fresh `ttl` (counted from now), if a majority
    /// still holds it within its validity. On success `lock` has the new
    /// validity; on failure it is left as it was.
    pub async fn extend(&mut self, lock: &mut Lock<'_>, ttl: Duration) -> Result<(), Error> {
        let held: &Lock<'_> = lock;
        let mut call =
            Call::new(|e: &mut Engine<'a, C, G, SERVERS, IN, OUT>| Ok(e.extend(held, ttl)?));
        self.call(&mut call).await?;
        let extended = call.outcome()?;
        lock.lock = extended.map_err(|e| Error::from_failure(e.kind, e.report))?;
        Ok(())
    }

    /// Releases `lock` on every server. `Err(NotReleased)` when fewer than a
    /// majority confirmed (the key may stay until its ttl ends).
    pub async fn unlock(&mut self, lock: &Lock<'_>) -> Result<Released, Error> {
        let mut call = Call::new(|e: &mut Engine<'a, C, G, SERVERS, IN, OUT>| Ok(e.release(lock)));
        self.call(&mut call).await?;
        confirmed(call.outcome()?)
    }

    /// Releases `resource` if it holds `token`.
    pub async fn unlock_token(&mut self, resource: &[u8], token: &[u8]) -> Result<Released, Error> {
        self.engine.check_resource(resource)?;
        let mut call = Call::new(|e: &mut Engine<'a, C, G, SERVERS, IN, OUT>| {
            Ok(e.release_token(resource, token)?)
        });
        self.call(&mut call).await?;
        confirmed(call.outcome()?)
    }

    /// Who holds `resource` on each server, and for how long (F3).
    pub async fn inspect(&mut self, resource: &[u8]) -> Result<Inspection, Error> {
        self.engine.check_resource(resource)?;
        let mut call =
            Call::new(|e: &mut Engine<'a, C, G, SERVERS, IN, OUT>| Ok(e.inspect(resource)));
        self.call(&mut call).await?;
        call.outcome()
    }

    /// F1, an operator's repair: raises `resource`'s fence counter to at
    /// least `floor` on every server (never lowers it).
    pub async fn fence_repair(
        &mut self,
        resource: &[u8],
        floor: u64,
    ) -> Result<FenceRepaired, Error> {
        self.engine.check_resource(resource)?;
        let mut call = Call::new(|e: &mut Engine<'a, C, G, SERVERS, IN, OUT>| {
            Ok(e.fence_repair(resource, floor))
        });
        self.call(&mut call).await?;
        call.outcome()?
            .map_err(|e| Error::from_failure(e.kind, e.report))
    }

    /// Before an operation, as the blocking client's: (re)connects the
    /// servers that are down and past their backoff, and waits until each
    /// on its first attempt is through its handshake or has failed.
    async fn prepare(&mut self) {
        let end = self.engine.prepare_end();
        // Never `Err`: only an operation's requests fail the loop.
        let _ = self.settle(None, end).await;
    }

    /// Every call: prepares the connections, builds the operation (which
    /// needs what the handshakes told), and drives it to its end. Not
    /// generic, so that its future's code exists once for every kind of
    /// call.
    async fn call(
        &mut self,
        call: &mut dyn Build<Engine<'a, C, G, SERVERS, IN, OUT>>,
    ) -> Result<(), Error> {
        self.prepare().await;
        let op = call.build(&mut self.engine)?;
        self.engine.begin();
        self.settle(Some(op), Instant::ZERO).await
    }

    /// The engine's loop over the streams, beside the timer, until it is
    /// done.
    async fn settle(
        &mut self,
        mut op: Option<&mut (dyn Driven + '_)>,
        end: Instant,
    ) -> Result<(), Error> {
        let AsyncClient {
            engine,
            delay,
            links,
        } = self;
        let links: &Links<S, SERVERS> = links;
        // The deadline the timer waits for.
        let mut armed: Option<Instant> = None;
        // The engine has just made a pass (whose wakers stand) and asked for
        // the timer: the next poll need not make another.
        let mut just_passed = false;
        loop {
            // At most LONGEST_WAIT: it fits a `u32` of microseconds.
            let wait = match armed {
                Some(at) => u32::try_from(
                    at.saturating_duration_since(engine.clock.now())
                        .min(LONGEST_WAIT)
                        .as_micros(),
                )
                .unwrap_or(u32::MAX),
                None => 0,
            };
            let timer = async {
                match armed {
                    Some(_) => delay.delay_us(wait).await,
                    None => core::future::pending().await,
                }
            };
            let step = poll_fn(|cx| {
                if core::mem::take(&mut just_passed) {
                    return Poll::Pending;
                }
                // A connect that lands wakes this task.
                register(&links.client, cx.waker());
                let mut io = Polled { cx, links };
                match engine.pump(&mut io, op.as_deref_mut(), end) {
                    Err(e) => Poll::Ready(Err(e)),
                    Ok(Flow::Done) => Poll::Ready(Ok(None)),
                    Ok(Flow::Wait(until)) if armed.is_none_or(|a| until < a) => {
                        Poll::Ready(Ok(Some(until)))
                    }
                    Ok(Flow::Wait(_)) => Poll::Pending,
                }
            });
            match select(step, timer).await {
                Either::First(Err(e)) => return Err(e),
                Either::First(Ok(None)) => return Ok(()),
                Either::First(Ok(Some(until))) => {
                    armed = Some(until);
                    just_passed = true;
                }
                // The timer rang.
                Either::Second(()) => armed = None,
            }
        }
    }
}
