//! The async watched lock (SPEC F2): [`AsyncAutoLock`], kept alive by the
//! client's driver thread, and [`WhenLost`], the future that completes
//! when it is lost.

use alloc::sync::Arc;
use core::future::Future;
use core::pin::Pin;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use core::task::{Context, Poll, Waker};
use core::time::Duration;
use std::sync::{Mutex, MutexGuard};

use crate::watchdog::Lost;
use crate::{Error, Lock, Released, relock};

use super::AsyncClient;

/// A watched lock, shared by its [`AsyncAutoLock`], its [`WhenLost`]
/// futures and the driver that extends it.
#[derive(Debug)]
pub(crate) struct WatchShared {
    lock: Mutex<Lock>,
    lost: Mutex<LostState>,
    stop: AtomicBool,
    /// The ttl each extension asks for.
    pub(crate) ttl: Duration,
}

#[derive(Debug, Default)]
struct LostState {
    why: Option<Lost>,
    /// The wakers of the `WhenLost` futures that wait, by their ids.
    waiting: Vec<(u64, Waker)>,
}

static NEXT_LISTENER: AtomicU64 = AtomicU64::new(1);

impl WatchShared {
    pub(crate) fn new(lock: Lock, ttl: Duration) -> WatchShared {
        WatchShared {
            lock: Mutex::new(lock),
            lost: Mutex::new(LostState::default()),
            stop: AtomicBool::new(false),
            ttl,
        }
    }

    /// The lock as last extended.
    pub(crate) fn lock(&self) -> Lock {
        relock(self.lock.lock()).clone()
    }

    pub(crate) fn update(&self, f: impl FnOnce(&mut Lock)) {
        let mut lock = relock(self.lock.lock());
        f(&mut lock);
    }

    fn lost_state(&self) -> MutexGuard<'_, LostState> {
        relock(self.lost.lock())
    }

    /// Why it was lost, if it was.
    pub(crate) fn lost(&self) -> Option<Lost> {
        self.lost_state().why.clone()
    }

    /// Declares the lock lost (once) and wakes whoever waits for that.
    pub(crate) fn lose(&self, why: Lost) {
        let waiting = {
            let mut st = self.lost_state();
            if st.why.is_some() {
                return;
            }
            log::warn!("redlock: a watched lock was lost: {why}");
            st.why = Some(why);
            core::mem::take(&mut st.waiting)
        };
        for (_, w) in waiting {
            w.wake();
        }
    }

    /// The driver stops extending it (released or dropped).
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

/// A future that completes, with why, when a watched lock is lost (see
/// [`AsyncAutoLock::when_lost`]). It never completes while the lock is
/// kept alive; once the lock is released it stays pending. Cheap to make:
/// make one per `select!` loop turn if you like.
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct WhenLost {
    watch: Arc<WatchShared>,
    id: u64,
}

impl Future for WhenLost {
    type Output = Lost;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Lost> {
        let mut st = self.watch.lost_state();
        if let Some(why) = &st.why {
            return Poll::Ready(why.clone());
        }
        match st.waiting.iter_mut().find(|(id, _)| *id == self.id) {
            Some((_, w)) => {
                if !w.will_wake(cx.waker()) {
                    w.clone_from(cx.waker());
                }
            }
            None => st.waiting.push((self.id, cx.waker().clone())),
        }
        Poll::Pending
    }
}

impl Drop for WhenLost {
    fn drop(&mut self) {
        let mut st = self.watch.lost_state();
        st.waiting.retain(|(id, _)| *id != self.id);
    }
}

/// A lock kept alive by the client's driver thread (SPEC F2), for the
/// async API: no thread of its own.
///
/// The driver extends the lock when a third of its validity is left
/// (honouring the extension limit), and declares it lost at once when a
/// majority says it is no longer ours, or before the local validity ends
/// when extensions keep failing. Learn of a loss with [`is_lost`]
/// (polling) or by awaiting [`when_lost`] (in a `select!` with the work).
///
/// Dropping it stops the extensions and releases the lock in the
/// background, without blocking; [`release`] releases and tells what
/// each server did.
///
/// [`is_lost`]: AsyncAutoLock::is_lost
/// [`when_lost`]: AsyncAutoLock::when_lost
/// [`release`]: AsyncAutoLock::release
#[derive(Debug)]
pub struct AsyncAutoLock {
    client: AsyncClient,
    watch: Arc<WatchShared>,
    released: bool,
}

impl AsyncAutoLock {
    pub(crate) fn new(client: AsyncClient, watch: Arc<WatchShared>) -> AsyncAutoLock {
        AsyncAutoLock {
            client,
            watch,
            released: false,
        }
    }

    /// True once the lock is lost.
    pub fn is_lost(&self) -> bool {
        self.watch.lost().is_some()
    }

    /// Why the lock was lost, if it was.
    pub fn lost(&self) -> Option<Lost> {
        self.watch.lost()
    }

    /// A future that completes when the lock is lost.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// # let client = client.to_async()?;
    /// # futures::executor::block_on(async {
    /// let auto = client.lock_auto_extend("orders", Duration::from_secs(2)).await?;
    /// let lost = auto.when_lost();
    /// // futures::select! { _ = lost => stop(), _ = work() => {} }
    /// drop(lost);
    /// auto.release().await?;
    /// # Ok::<(), redlock_std::Error>(())
    /// # })?;
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    pub fn when_lost(&self) -> WhenLost {
        WhenLost {
            watch: self.watch.clone(),
            id: NEXT_LISTENER.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// The lock as last extended (a copy, with the latest validity).
    pub fn lock(&self) -> Lock {
        self.watch.lock()
    }

    /// Stops the extensions and releases the lock.
    ///
    /// # Errors
    /// As [`AsyncClient::unlock`].
    pub async fn release(mut self) -> Result<Released, Error> {
        self.released = true;
        self.watch.stop();
        let lock = self.watch.lock();
        self.client.unlock(&lock).await
    }
}

impl Drop for AsyncAutoLock {
    fn drop(&mut self) {
        if !self.released {
            self.watch.stop();
            let lock = self.watch.lock();
            self.client.unlock_in_background(&lock);
        }
    }
}
