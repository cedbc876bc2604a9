//! The async API: [`AsyncClient`], the same operations as [`Client`] as
//! futures that never block their executor, on any runtime.
//!
//! # How it works
//!
//! An async call builds the same core operation as the blocking one and
//! moves it into a slot of the client's transport: its requests are
//! encoded and, when nothing else is in flight, written at once from the
//! calling task's thread (else they leave with the others' in one write
//! per socket). Then one of two things drives the connections.
//!
//! **On the runtime's own reactor** (features `tokio` and `async-io`; on by
//! default with either, see
//! [`Builder::drive_on_runtime`](crate::Builder::drive_on_runtime)): the
//! task that awaits the call leads the transport, as a blocking caller
//! does. A
//! duplicate of the transport's epoll descriptor is registered with the
//! runtime's reactor (tokio's `AsyncFd` for a task on a tokio runtime with
//! IO enabled, current-thread or multi-thread; async-io's `Async` for a
//! task on any other executor; on a tokio runtime without IO, the driver
//! thread serves the tasks). When
//! replies arrive the runtime wakes the leading task, which reads every
//! socket without waiting and completes every operation whose replies are
//! in, waking each owner once. Tasks that submit meanwhile queue their
//! requests and wake the leader once per turn (one write per socket for
//! all of them); while owners of finished operations have yet to run, the
//! leader waits for the last of them, so that their next requests leave
//! with the others. When the leader's call ends, or its future is dropped, the
//! role goes to another task that waits (else to a blocking caller, else
//! to the driver thread). No thread stands between a reply and its task.
//!
//! **On the driver thread** (without those features, or
//! `drive_on_runtime(false)`): the task leaves its
//! [`Waker`](core::task::Waker) and returns `Pending`; whichever thread
//! leads the transport (a blocking caller of the same client, or else the
//! client's *driver thread*) reads the replies and wakes the task once,
//! when its call is done. It depends on no runtime: tokio, smol,
//! `futures::executor` or a hand-written executor all work.
//!
//! The driver thread is started by the client's first async use and ends
//! when the last handle of the client is dropped. In both modes it keeps
//! the watched locks alive ([`AsyncAutoLock`]; the timers are its own, no
//! thread per lock) and runs what nobody waits for: the release of a
//! dropped guard, or the end of a dropped call. On the reactor it also
//! keeps the operations' time: it wakes the leading task when a deadline
//! is due, and leads in its place if that task does not turn (a future kept
//! but no longer polled).
//!
//! Why a registered epoll descriptor and not an async driver over
//! `embedded-io-async` streams: it keeps one transport for the blocking
//! and async faces (the same sessions, slots and leader). Measured against
//! the driver thread in `benches/README.md` ("The async API").
//!
//! Blocking and async calls share one transport: the same connections,
//! pipelined, and the same per-server reports.
//!
//! # Several cores
//!
//! On a tokio multi-thread runtime the tasks lead on its reactor too. The
//! tasks a turn finished run on several workers; the leader holds its next
//! turn until the last of them has taken its outcome (the one that does
//! wakes it), so that their next requests still leave in one write per
//! socket and the servers read them as one batch. Measured on 2 workers
//! (`benches/README.md`, "The leader waits for the tasks it woke" and "A
//! turn that only writes does not look"): 1.12–1.33× the driver thread's
//! cycles/s, 1.22–1.40× rslock's best. A
//! current-thread runtime per core, each with a client of its own, is a
//! little faster still (1.54× rslock's best): no task moves between
//! workers.
//!
//! # Cancellation
//!
//! Every future of this API may be dropped at any point:
//! - a lock future (`lock`, `try_lock`, `lock_until`, `lock_guard`,
//!   `lock_auto_extend`) dropped mid-flight starts no further attempt, and
//!   releases (A5) whatever its attempt wins, in the background, without
//!   blocking the dropping thread;
//! - an `unlock`, `extend`, `inspect` or `fence_repair` future dropped
//!   mid-flight runs to its end in the background; an unlock still
//!   releases even if it was dropped while it waited for a free slot
//!   (the others are then dropped unsent);
//! - dropping an [`AsyncLockGuard`] or an [`AsyncAutoLock`] releases in
//!   the background;
//! - no future holds a lock of the client's across an `.await`: every
//!   critical section is inside one `poll`, so nothing a task does can
//!   stall the driver. A future kept but no longer polled while it leads
//!   on the reactor holds up the others for at most about two watch
//!   periods (10–20 ms) past the moment work is owed: the driver then
//!   leads in its place. One kept after its call is done holds them up
//!   once, no longer than a sixteenth of their requests' time (the leader
//!   waits for the owners of the operations its turn finished, once).
//!
//! An operation that panics (the core's do not) panics the task that
//! awaits it.
//!
//! # Slots
//!
//! A client runs at most 64 operations at once; more calls wait in line,
//! first come first, and acquisitions may not take the last 8 slots
//! (kept for releases and extensions, so that a crowd of contenders never
//! starves a holder). A call woken because a slot was freed for it keeps
//! that turn until it is polled or dropped, as with a fair semaphore: a
//! future kept alive but no longer polled (a `select!` on `&mut fut` whose
//! other branch won, say) holds back the ones behind it until it is dropped.

use alloc::sync::Arc;
use core::future::Future;
use core::ops::Deref;
use core::pin::Pin;
use core::sync::atomic::{AtomicU64, Ordering};
use core::task::{Context, Poll};
use core::time::Duration;
use std::time::Instant as StdInstant;

use crate::call::CallKind;
use crate::transport::{Reactor, Ticket};
use crate::{
    Attempts, Client, Error, FenceRepaired, Inspection, Lock, Released, Resource, ServerUrl,
};

mod driver;
mod watch;

pub(crate) use driver::Driver;
use watch::WatchShared;
pub use watch::{AsyncAutoLock, WhenLost};

/// The async face of a [`Client`]: the same connections and operations,
/// as futures that never block their executor.
///
/// Get one with [`Client::to_async`] (or [`Builder::build_async`]). It is
/// `Send + Sync` and cheap to clone; any number of tasks may share it.
/// See the [module docs](crate::asynchronous) for how it works and what
/// cancellation does.
///
/// ```
/// use std::time::Duration;
/// # let (client, _servers) = redlock_tests::doc::client();
/// let client = client.to_async()?;
/// futures::executor::block_on(async {
///     let lock = client.lock("orders", Duration::from_secs(10)).await?;
///     // ... work, finishing before lock.remaining() runs out ...
///     client.unlock(&lock).await?;
///     Ok::<(), redlock_std::Error>(())
/// })?;
/// # Ok::<(), redlock_std::Error>(())
/// ```
///
/// [`Builder::build_async`]: crate::Builder::build_async
#[derive(Debug, Clone)]
pub struct AsyncClient {
    client: Client,
}

impl Client {
    /// This client's async face (sharing its connections). Starts the
    /// client's driver thread if it does not run yet.
    ///
    /// # Errors
    /// [`Error::Io`] when the driver thread cannot be started.
    ///
    /// ```
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// let client = client.to_async()?;
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    pub fn to_async(&self) -> Result<AsyncClient, Error> {
        self.ensure_driver()?;
        Ok(AsyncClient {
            client: self.clone(),
        })
    }
}

static NEXT_WAITER: AtomicU64 = AtomicU64::new(1);

/// Tasks may lead the transport on their runtime's reactor (features
/// `tokio`, `async-io`): see the module docs.
pub(crate) const ON_RUNTIME: bool = cfg!(any(feature = "tokio", feature = "async-io"));

/// One call of kind `K` in flight: submitted on its first poll, abandoned
/// if dropped.
struct Running<'a, K: CallKind> {
    client: &'a Client,
    call: Option<K>,
    ticket: Option<Ticket<K>>,
    /// Its place in the queue for a slot.
    waiter: u64,
    /// For an acquisition: its resource, to release what it may win after
    /// it is dropped.
    resource: Option<Resource>,
}

impl<'a, K: CallKind> Running<'a, K> {
    fn new(client: &'a Client, call: K) -> Running<'a, K> {
        Running {
            client,
            resource: call.resource(),
            call: Some(call),
            ticket: None,
            waiter: NEXT_WAITER.fetch_add(1, Ordering::Relaxed),
        }
    }
}

impl<K: CallKind> Future for Running<'_, K> {
    type Output = K::Out;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<K::Out> {
        let this = self.get_mut();
        let transport = &this.client.shared.transport;
        // This task leads on its runtime's reactor if one can serve it.
        let lead = this.client.shared.on_runtime && Reactor::available();
        let ticket = match this.ticket.take() {
            Some(ticket) => ticket,
            None => {
                let Some(call) = this.call.take() else {
                    panic!("a redlock future polled after it completed");
                };
                match transport.submit(call, cx.waker(), this.waiter, lead) {
                    Ok(ticket) => ticket,
                    Err(call) => {
                        // Every slot is taken: woken when one is freed.
                        this.call = Some(call);
                        return Poll::Pending;
                    }
                }
            }
        };
        // Taken out first: if the operation panicked, the ticket is spent.
        let polled = transport.poll_ticket(ticket, cx, lead);
        if polled.is_pending() {
            this.ticket = Some(ticket);
        }
        polled
    }
}

// (`Unpin`: `get_mut` above; nothing of it is pinned.)
impl<K: CallKind> Unpin for Running<'_, K> {}

impl<K: CallKind> Drop for Running<'_, K> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            self.client.abandon(ticket, self.resource.take());
        } else if let Some(call) = self.call.take() {
            // Still in line for a slot: nothing was sent. A release runs
            // all the same, in the background (the lock it gives back may
            // be known to nobody else any more: a guard's, a watched one's);
            // anything else is dropped unsent.
            self.client.shared.transport.cancel_wait(self.waiter);
            if let Some(release) = call.unsent() {
                self.client.run_in_background(release);
            }
        }
    }
}

impl AsyncClient {
    /// The blocking client it shares its connections with.
    pub fn blocking(&self) -> &Client {
        &self.client
    }

    /// The default ttl.
    pub fn ttl(&self) -> Duration {
        self.client.ttl()
    }

    /// The per-request timeout for operations with `ttl`.
    pub fn request_timeout(&self, ttl: Duration) -> Duration {
        self.client.request_timeout(ttl)
    }

    /// The servers, as given (passwords hidden when displayed).
    pub fn server_urls(&self) -> Vec<ServerUrl> {
        self.client.server_urls()
    }

    async fn run<K: CallKind>(&self, call: K) -> Result<K::Out, Error> {
        // (Started again should it ever have failed.)
        self.client.ensure_driver()?;
        Ok(Running::new(&self.client, call).await)
    }

    async fn acquire(
        &self,
        resource: &[u8],
        ttl: Duration,
        attempts: Attempts,
    ) -> Result<Lock, Error> {
        // No name lookup here (it may block): the driver does them.
        let (config, deadline) = self.client.attempts(attempts);
        let op = self.client.acquire_op(resource, ttl, config, deadline)?;
        let out = self.run(op).await?;
        self.client.acquired(resource, out)
    }

    /// Acquires `resource` for `ttl`, retrying as configured. Cancel-safe:
    /// dropped mid-flight, it starts no further attempt and releases what
    /// it wins (A5), in the background.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// # let client = client.to_async()?;
    /// # futures::executor::block_on(async {
    /// let lock = client.lock("orders", Duration::from_secs(10)).await?;
    /// client.unlock(&lock).await?;
    /// # Ok::<(), redlock_std::Error>(())
    /// # })?;
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Client::lock`].
    pub async fn lock(&self, resource: impl AsRef<[u8]>, ttl: Duration) -> Result<Lock, Error> {
        self.acquire(resource.as_ref(), ttl, Attempts::Configured)
            .await
    }

    /// One attempt, no retries. Cancel-safe as [`lock`](AsyncClient::lock).
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_std::Error;
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// # let client = client.to_async()?;
    /// # futures::executor::block_on(async {
    /// let held = client.try_lock("orders", Duration::from_secs(10)).await?;
    /// assert!(matches!(
    ///     client.try_lock("orders", Duration::from_secs(10)).await,
    ///     Err(Error::Conflict(_))
    /// ));
    /// client.unlock(&held).await?;
    /// # Ok::<(), redlock_std::Error>(())
    /// # })?;
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Client::try_lock`].
    pub async fn try_lock(&self, resource: impl AsRef<[u8]>, ttl: Duration) -> Result<Lock, Error> {
        self.acquire(resource.as_ref(), ttl, Attempts::Once).await
    }

    /// Retries with jitter until `deadline` (no retry starts after it).
    /// Cancel-safe as [`lock`](AsyncClient::lock): drop it (in a `select!`
    /// with a shutdown signal, say) to stop waiting.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// # let client = client.to_async()?;
    /// # futures::executor::block_on(async {
    /// let deadline = Instant::now() + Duration::from_secs(5);
    /// let lock = client.lock_until("nightly-report", Duration::from_secs(60), deadline).await?;
    /// client.unlock(&lock).await?;
    /// # Ok::<(), redlock_std::Error>(())
    /// # })?;
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Client::lock_until`].
    pub async fn lock_until(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
        deadline: StdInstant,
    ) -> Result<Lock, Error> {
        self.acquire(resource.as_ref(), ttl, Attempts::Until(deadline))
            .await
    }

    /// Releases `lock` on every server (A7). Dropped mid-flight, the
    /// release still runs to its end in the background.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// # let client = client.to_async()?;
    /// # futures::executor::block_on(async {
    /// let lock = client.lock("orders", Duration::from_secs(10)).await?;
    /// assert_eq!(client.unlock(&lock).await?.deleted(), 3);
    /// # Ok::<(), redlock_std::Error>(())
    /// # })?;
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Client::unlock`].
    pub async fn unlock(&self, lock: &Lock) -> Result<Released, Error> {
        let op = self.client.release_op(lock);
        let out = self.run(op).await?;
        self.client.confirmed(out)
    }

    /// Releases `lock` without waiting: the driver runs the release.
    pub(crate) fn unlock_in_background(&self, lock: &Lock) {
        let op = self.client.release_op(lock);
        self.client.run_in_background(op);
    }

    /// Releases `resource` held with `token` (a lock taken by another
    /// process). As [`unlock`](AsyncClient::unlock).
    ///
    /// # Errors
    /// As [`Client::unlock_token`].
    pub async fn unlock_token(
        &self,
        resource: impl AsRef<[u8]>,
        token: impl AsRef<[u8]>,
    ) -> Result<Released, Error> {
        let op = self
            .client
            .release_token_op(resource.as_ref(), token.as_ref())?;
        let out = self.run(op).await?;
        self.client.confirmed(out)
    }

    /// Extends `lock` to a fresh `ttl`. On failure, or if the future is
    /// dropped before it completes, the lock keeps its old validity.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// # let client = client.to_async()?;
    /// # futures::executor::block_on(async {
    /// let mut lock = client.lock("orders", Duration::from_secs(10)).await?;
    /// client.extend(&mut lock, Duration::from_secs(30)).await?;
    /// assert_eq!(lock.extensions(), 1);
    /// client.unlock(&lock).await?;
    /// # Ok::<(), redlock_std::Error>(())
    /// # })?;
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Client::extend`].
    pub async fn extend(&self, lock: &mut Lock, ttl: Duration) -> Result<(), Error> {
        let op = self.client.extend_op(lock, ttl)?;
        let out = self.run(op).await?;
        self.client.extended(lock, out)
    }

    /// Per server: who holds `resource`, and for how long.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// # let client = client.to_async()?;
    /// # futures::executor::block_on(async {
    /// let lock = client.lock("orders", Duration::from_secs(10)).await?;
    /// let inspection = client.inspect("orders").await?;
    /// assert_eq!(inspection.majority_holder(), Some(lock.token().as_bytes()));
    /// # Ok::<(), redlock_std::Error>(())
    /// # })?;
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Io`] when the client's driver thread cannot be started.
    pub async fn inspect(&self, resource: impl AsRef<[u8]>) -> Result<Inspection, Error> {
        let op = self.client.inspect_op(resource.as_ref());
        let out = self.run(op).await?;
        let transport = &self.client.shared.transport;
        Ok(Inspection::from_core(&out, |i, o| transport.note(i, o)))
    }

    /// F1 repair, for an operator: as [`Client::fence_repair`].
    ///
    /// # Errors
    /// As [`Client::fence_repair`].
    pub async fn fence_repair(
        &self,
        resource: impl AsRef<[u8]>,
        at_least: u64,
    ) -> Result<FenceRepaired, Error> {
        let op = self.client.fence_repair_op(resource.as_ref(), at_least);
        let out = self.run(op).await?;
        self.client.fence_repaired(out)
    }

    /// Acquires `resource` and returns a guard that releases it, in the
    /// background, when dropped.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// # let client = client.to_async()?;
    /// # futures::executor::block_on(async {
    /// let guard = client.lock_guard("orders", Duration::from_secs(10)).await?;
    /// println!("token {}", guard.token());
    /// guard.release().await?; // or drop it: released in the background
    /// # Ok::<(), redlock_std::Error>(())
    /// # })?;
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`lock`](AsyncClient::lock).
    pub async fn lock_guard(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
    ) -> Result<AsyncLockGuard, Error> {
        let lock = self.lock(resource, ttl).await?;
        Ok(AsyncLockGuard {
            client: self.clone(),
            lock: Some(lock),
        })
    }

    /// Acquires `resource` and keeps it alive from the driver thread (SPEC
    /// F2) until released or dropped.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// # let client = client.to_async()?;
    /// # futures::executor::block_on(async {
    /// let auto = client.lock_auto_extend("orders", Duration::from_secs(2)).await?;
    /// assert!(!auto.is_lost());
    /// auto.release().await?;
    /// # Ok::<(), redlock_std::Error>(())
    /// # })?;
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`lock`](AsyncClient::lock).
    pub async fn lock_auto_extend(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
    ) -> Result<AsyncAutoLock, Error> {
        let lock = self.lock(resource, ttl).await?;
        Ok(self.auto_extend(lock, ttl))
    }

    /// Keeps `lock`, acquired earlier with `ttl`, alive from the driver
    /// thread (SPEC F2).
    pub fn auto_extend(&self, lock: Lock, ttl: Duration) -> AsyncAutoLock {
        let watch = Arc::new(WatchShared::new(lock, ttl));
        self.client.drive_watch(watch.clone());
        AsyncAutoLock::new(self.clone(), watch)
    }

    /// Runs `body` while holding `resource`, kept alive by the driver, and
    /// releases it when the body ends, on every path: its return, an error
    /// it returns, a panic, or this future being dropped (then in the
    /// background). `body` gets a [`WhenLost`] future that completes if the
    /// lock is lost meanwhile, so that it can stop (`select!` on it).
    ///
    /// Returns the body's output; a release that fails is logged (the key
    /// then expires with its ttl).
    ///
    /// ```
    /// use std::time::Duration;
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// # let client = client.to_async()?;
    /// # futures::executor::block_on(async {
    /// let rows = client
    ///     .with_lock("nightly-report", Duration::from_secs(5), |lost| async move {
    ///         // select! { _ = lost => ..., rows = work() => ... }
    ///         drop(lost);
    ///         42
    ///     })
    ///     .await?;
    /// assert_eq!(rows, 42);
    /// # Ok::<(), redlock_std::Error>(())
    /// # })?;
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    ///
    /// # Errors
    /// When the lock is not acquired (as [`lock`](AsyncClient::lock));
    /// the body does not run then.
    pub async fn with_lock<T, F, Fut>(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
        body: F,
    ) -> Result<T, Error>
    where
        F: FnOnce(WhenLost) -> Fut,
        Fut: Future<Output = T>,
    {
        // Dropped on every exit: released in the background unless
        // released below.
        let auto = self.lock_auto_extend(resource, ttl).await?;
        let out = body(auto.when_lost()).await;
        if let Err(e) = auto.release().await {
            log::warn!("redlock: with_lock's release failed: {e}");
        }
        Ok(out)
    }
}

/// A lock released in the background when dropped (the async
/// [`LockGuard`](crate::LockGuard)); [`release`](AsyncLockGuard::release)
/// releases and tells what each server did.
#[derive(Debug)]
pub struct AsyncLockGuard {
    client: AsyncClient,
    lock: Option<Lock>,
}

impl AsyncLockGuard {
    /// Releases now and returns what each server did.
    ///
    /// # Errors
    /// As [`AsyncClient::unlock`].
    pub async fn release(mut self) -> Result<Released, Error> {
        match self.lock.take() {
            Some(lock) => self.client.unlock(&lock).await,
            None => Err(Error::AlreadyReleased),
        }
    }

    /// Gives the lock back without releasing it.
    pub fn into_lock(mut self) -> Option<Lock> {
        self.lock.take()
    }
}

impl Deref for AsyncLockGuard {
    type Target = Lock;
    fn deref(&self) -> &Lock {
        // Only `release` and `into_lock` take it, and both consume the guard.
        self.lock
            .as_ref()
            .unwrap_or_else(|| unreachable!("a guard always holds its lock until consumed"))
    }
}

impl Drop for AsyncLockGuard {
    fn drop(&mut self) {
        if let Some(lock) = self.lock.take() {
            self.client.unlock_in_background(&lock);
        }
    }
}
