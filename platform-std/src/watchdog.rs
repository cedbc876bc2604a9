//! `LockGuard` (release on drop) and the watchdog (SPEC F2): a lock kept
//! alive by extending it, that tells the application at once when it is lost.

use alloc::sync::Arc;
use core::ops::Deref;
use core::sync::atomic::{AtomicBool, Ordering};
use core::time::Duration;
use std::sync::{Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use redlock_core::{Extension, Loss, WatchAction, Watchdog};

use crate::{Client, Error, Lock, Released};

/// A lock released when dropped (errors on that release are ignored; call
/// [`LockGuard::release`] to see them).
#[derive(Debug)]
pub struct LockGuard {
    client: Client,
    lock: Option<Lock>,
}

impl LockGuard {
    pub(crate) fn new(client: Client, lock: Lock) -> LockGuard {
        LockGuard {
            client,
            lock: Some(lock),
        }
    }

    /// Releases now and returns what each server did.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// let guard = client.lock_guard("orders", Duration::from_secs(10))?;
    /// let released = guard.release()?; // errors are seen, unlike a drop
    /// assert_eq!(released.deleted(), 3);
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    pub fn release(mut self) -> Result<Released, Error> {
        match self.lock.take() {
            Some(lock) => self.client.unlock(&lock),
            None => Err(Error::AlreadyReleased),
        }
    }

    /// Gives the lock back without releasing it.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// let guard = client.lock_guard("orders", Duration::from_secs(10))?;
    /// let lock = guard.into_lock().expect("not released yet"); // no longer released on drop
    /// client.unlock(&lock)?;
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    pub fn into_lock(mut self) -> Option<Lock> {
        self.lock.take()
    }
}

impl Deref for LockGuard {
    type Target = Lock;
    fn deref(&self) -> &Lock {
        // Only `release` and `into_lock` take it, and both consume the guard.
        self.lock
            .as_ref()
            .unwrap_or_else(|| unreachable!("a guard always holds its lock until consumed"))
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if let Some(lock) = self.lock.take() {
            let _ = self.client.unlock(&lock);
        }
    }
}

/// Why a watched lock was lost.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Lost {
    /// A majority said the key is no longer ours (expired, deleted, or taken).
    NotHeld,
    /// Extensions kept failing (servers unavailable) and the validity was
    /// about to end.
    Unavailable,
    /// The extension limit was reached; the lock was given up before its
    /// validity ended.
    ExtensionLimit,
}

impl From<Loss> for Lost {
    fn from(why: Loss) -> Lost {
        match why {
            Loss::NotHeld => Lost::NotHeld,
            Loss::ExtensionLimit => Lost::ExtensionLimit,
            _ => Lost::Unavailable,
        }
    }
}

impl core::fmt::Display for Lost {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Lost::NotHeld => "the lock is no longer held on a majority of servers",
            Lost::Unavailable => "the lock could not be extended before its validity ended",
            Lost::ExtensionLimit => "the lock reached its extension limit",
        })
    }
}

/// A function called (from the watchdog thread) when a watched lock is lost.
pub type OnLost = Box<dyn Fn(&Lost) + Send + Sync>;

struct Watch {
    lock: Mutex<Lock>,
    lost: Mutex<Option<Lost>>,
    changed: Condvar,
    stop: AtomicBool,
    on_lost: Option<OnLost>,
}

impl core::fmt::Debug for Watch {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Watch")
            .field("lost", &self.lost)
            .finish_non_exhaustive()
    }
}

impl Watch {
    fn lose(&self, why: Lost) {
        let mut lost = self.lost.lock().unwrap_or_else(PoisonError::into_inner);
        if lost.is_none() {
            if let Some(cb) = &self.on_lost {
                cb(&why);
            }
            *lost = Some(why);
        }
        self.changed.notify_all();
    }

    fn lock(&self) -> Lock {
        self.lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// A lock kept alive by a watchdog thread (SPEC F2).
///
/// The watchdog extends the lock when a third of its validity is left
/// (honouring the extension limit), and declares it lost at once when a
/// majority says it is no longer ours, or before the local validity ends
/// when extensions keep failing. Learn of a loss by polling
/// [`AutoLock::is_lost`], by blocking in [`AutoLock::wait_lost`], or with the
/// callback given to [`Client::lock_auto_extend_with`]. Dropping it stops the
/// watchdog and releases the lock.
#[derive(Debug)]
pub struct AutoLock {
    client: Client,
    watch: Arc<Watch>,
    thread: Option<JoinHandle<()>>,
}

impl AutoLock {
    /// True once the lock is lost.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// let auto = client.lock_auto_extend("orders", Duration::from_secs(2))?;
    /// assert!(!auto.is_lost());
    /// auto.release()?;
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    pub fn is_lost(&self) -> bool {
        self.lost().is_some()
    }

    /// Why the lock was lost, if it was.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// let auto = client.lock_auto_extend("orders", Duration::from_secs(2))?;
    /// if let Some(why) = auto.lost() {
    ///     eprintln!("lost: {why}");
    /// }
    /// auto.release()?;
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    pub fn lost(&self) -> Option<Lost> {
        self.watch
            .lost
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Blocks until the lock is lost or `timeout` passes; returns why it was
    /// lost, or `None` on timeout.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// let auto = client.lock_auto_extend("orders", Duration::from_secs(2))?;
    /// // Sleeps like a timer, but wakes at once if the lock is lost.
    /// assert!(auto.wait_lost(Duration::from_millis(50)).is_none());
    /// auto.release()?;
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    pub fn wait_lost(&self, timeout: Duration) -> Option<Lost> {
        let guard = self
            .watch
            .lost
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (guard, _) = self
            .watch
            .changed
            .wait_timeout_while(guard, timeout, |lost| lost.is_none())
            .unwrap_or_else(PoisonError::into_inner);
        guard.clone()
    }

    /// The lock as last extended.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// let auto = client.lock_auto_extend("orders", Duration::from_secs(2))?;
    /// let now = auto.lock(); // a copy, with the latest validity
    /// println!("valid for {:?}, token {}", now.remaining(), now.token());
    /// auto.release()?;
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    pub fn lock(&self) -> Lock {
        self.watch.lock()
    }

    /// Stops the watchdog and releases the lock.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// let auto = client.lock_auto_extend("orders", Duration::from_secs(2))?;
    /// let released = auto.release()?;
    /// assert_eq!(released.deleted(), 3);
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    pub fn release(mut self) -> Result<Released, Error> {
        self.stop();
        let lock = self.watch.lock();
        self.client.unlock(&lock)
    }

    fn stop(&mut self) {
        self.watch.stop.store(true, Ordering::SeqCst);
        self.watch.changed.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for AutoLock {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.stop();
            let lock = self.watch.lock();
            let _ = self.client.unlock(&lock);
        }
    }
}

/// Sleeps until `until` unless the watch is stopped first; true if stopped.
fn sleep_until(watch: &Watch, until: Instant) -> bool {
    let mut guard = watch.lost.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        if watch.stop.load(Ordering::SeqCst) {
            return true;
        }
        let now = Instant::now();
        if now >= until {
            return false;
        }
        guard = watch
            .changed
            .wait_timeout(guard, until - now)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
}

fn run(client: Client, watch: Arc<Watch>, ttl: Duration) {
    let request_timeout = crate::core_duration(client.request_timeout(ttl));
    // The policy is the core's (F2): extend when a third of the validity is
    // left, try again after a request timeout, lost when a margin is left
    // without an extension or a majority says it is not ours.
    let mut dog = Watchdog::new(&watch.lock().inner, request_timeout);
    loop {
        let lock = watch.lock();
        match dog.poll(lock.core_now()) {
            WatchAction::Wait(until) => {
                if sleep_until(&watch, lock.std_instant(until)) {
                    return;
                }
            }
            WatchAction::Lost(why) => {
                watch.lose(Lost::from(why));
                return;
            }
            WatchAction::Extend => {
                if watch.stop.load(Ordering::SeqCst) {
                    return;
                }
                let mut attempt = lock;
                let outcome = client.extend(&mut attempt, ttl);
                let now = attempt.core_now();
                match outcome {
                    Ok(()) => {
                        dog.handle_extension(now, Extension::Extended(&attempt.inner));
                        *watch.lock.lock().unwrap_or_else(PoisonError::into_inner) = attempt;
                    }
                    Err(Error::Lost(_)) => dog.handle_extension(now, Extension::NotHeld),
                    Err(Error::Argument(redlock_core::ArgumentError::ExtensionLimit)) => {
                        dog.handle_extension(now, Extension::LimitReached);
                    }
                    Err(_) => dog.handle_extension(now, Extension::Failed),
                }
            }
        }
    }
}

impl Client {
    /// Acquires `resource` and returns a guard that releases it when dropped.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// {
    ///     let guard = client.lock_guard("orders", Duration::from_secs(10))?;
    ///     println!("token {}", guard.token()); // a guard derefs to the Lock
    /// } // released here
    /// assert!(client.try_lock("orders", Duration::from_secs(10)).is_ok());
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    pub fn lock_guard(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
    ) -> Result<LockGuard, Error> {
        let resource = resource.as_ref();

        Ok(LockGuard::new(self.clone(), self.lock(resource, ttl)?))
    }

    /// Acquires `resource` and keeps it alive with a watchdog (SPEC F2).
    ///
    /// ```
    /// use std::time::Duration;
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// let auto = client.lock_auto_extend("orders", Duration::from_secs(2))?;
    /// // ... long work, checking now and then ...
    /// if auto.is_lost() { /* stop touching the resource */ }
    /// auto.release()?;
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    pub fn lock_auto_extend(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
    ) -> Result<AutoLock, Error> {
        let resource = resource.as_ref();

        self.start_watch(resource, ttl, None)
    }

    /// Like [`Client::lock_auto_extend`], calling `on_lost` (from the
    /// watchdog thread) as soon as the lock is lost.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// let auto = client.lock_auto_extend_with("orders", Duration::from_secs(2), |why| {
    ///     eprintln!("lost the lock: {why}");
    /// })?;
    /// auto.release()?;
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    pub fn lock_auto_extend_with(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
        on_lost: impl Fn(&Lost) + Send + Sync + 'static,
    ) -> Result<AutoLock, Error> {
        let resource = resource.as_ref();
        self.start_watch(resource, ttl, Some(Box::new(on_lost)))
    }

    /// Keeps `lock`, acquired earlier with `ttl` (by [`Client::lock_until`],
    /// say), alive with a watchdog (SPEC F2), calling `on_lost` (from the
    /// watchdog thread) as soon as it is lost.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// # let (client, _servers) = redlock_tests::doc::client();
    /// let ttl = Duration::from_secs(2);
    /// let lock = client.lock_until("orders", ttl, Instant::now() + Duration::from_secs(5))?;
    /// let auto = client.auto_extend(lock, ttl, None)?;
    /// auto.release()?;
    /// # Ok::<(), redlock_std::Error>(())
    /// ```
    pub fn auto_extend(
        &self,
        lock: Lock,
        ttl: Duration,
        on_lost: Option<OnLost>,
    ) -> Result<AutoLock, Error> {
        self.watch(lock, ttl, on_lost)
    }

    fn start_watch(
        &self,
        resource: &[u8],
        ttl: Duration,
        on_lost: Option<OnLost>,
    ) -> Result<AutoLock, Error> {
        let lock = self.lock(resource, ttl)?;
        self.watch(lock, ttl, on_lost)
    }

    fn watch(&self, lock: Lock, ttl: Duration, on_lost: Option<OnLost>) -> Result<AutoLock, Error> {
        let watch = Arc::new(Watch {
            lock: Mutex::new(lock),
            lost: Mutex::new(None),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
            on_lost,
        });
        let (client, w) = (self.clone(), watch.clone());
        let thread = std::thread::Builder::new()
            .name("redlock-watchdog".into())
            .spawn(move || run(client, w, ttl))
            .map_err(|e| Error::Io(alloc::sync::Arc::new(e)))?;
        Ok(AutoLock {
            client: self.clone(),
            watch,
            thread: Some(thread),
        })
    }
}
