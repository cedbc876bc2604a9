//! `redlock-embedded`'s async client on the host: a [`TcpConnect`] of tokio
//! streams (through `embedded-io-adapters`), a [`DelayNs`] over tokio's
//! timer, and [`BlockOn`], a blocking face over a current-thread runtime,
//! so that the blocking client's tests run on the async client unchanged.

use core::net::SocketAddr;
use std::collections::HashMap;
use std::io;
use std::sync::Mutex;

use embedded_hal_async::delay::DelayNs;
use embedded_io_adapters::tokio_1::FromTokio;
use embedded_nal_async::TcpConnect;
use redlock_embedded::{
    AsyncClient, Buffers, Config, Credentials, Duration, Error, FenceRepaired, Inspection, Instant,
    Lock, Options, Released,
};
use tokio::runtime::Runtime;

use crate::embedded::{OsRng, StdClock};

/// Opens tokio TCP streams, and counts the connects per address.
#[derive(Debug, Default)]
pub struct TokioStack {
    connects: Mutex<HashMap<SocketAddr, usize>>,
}

impl TokioStack {
    /// Connects started to `addr`.
    pub fn connects(&self, addr: SocketAddr) -> usize {
        self.connects
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&addr)
            .copied()
            .unwrap_or(0)
    }
}

impl TcpConnect for TokioStack {
    type Error = io::Error;
    type Connection<'a> = FromTokio<tokio::net::TcpStream>;

    async fn connect<'a>(&'a self, remote: SocketAddr) -> Result<Self::Connection<'a>, io::Error> {
        *self
            .connects
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(remote)
            .or_default() += 1;
        let stream = tokio::net::TcpStream::connect(remote).await?;
        stream.set_nodelay(true)?;
        Ok(FromTokio::new(stream))
    }
}

/// Waits on tokio's timer.
#[derive(Debug, Default, Clone, Copy)]
pub struct TokioDelay;

impl DelayNs for TokioDelay {
    async fn delay_ns(&mut self, ns: u32) {
        tokio::time::sleep(core::time::Duration::from_nanos(u64::from(ns))).await;
    }
}

/// The async client over tokio, with the host's clock and RNG.
pub type AsyncEmbedded<const N: usize> =
    AsyncClient<'static, TokioStack, StdClock, OsRng, TokioDelay, N>;

/// What the tests look at of the network: the connects per server (as
/// [`StdNet`](crate::embedded::StdNet)'s).
#[derive(Debug)]
pub struct NetView {
    /// Connects started, per server.
    pub connects: Vec<usize>,
    /// Kept for the tests that set it on `StdNet`: the async client learns
    /// that a peer closed only by reading, as `StdNet` with this off.
    pub notice_close: bool,
}

/// The async client behind blocking calls, each run to its end on a
/// current-thread tokio runtime.
pub struct BlockOn<const N: usize> {
    rt: Runtime,
    client: AsyncEmbedded<N>,
    stack: &'static TokioStack,
    addrs: [SocketAddr; N],
    view: NetView,
}

impl<const N: usize> core::fmt::Debug for BlockOn<N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BlockOn")
            .field("client", &self.client)
            .finish()
    }
}

impl<const N: usize> BlockOn<N> {
    /// A client over `addrs`, with its own stack, runtime and buffers (kept
    /// for the rest of the process).
    #[allow(clippy::expect_used)] // a test harness: without a runtime, no test
    pub fn new(
        addrs: [SocketAddr; N],
        config: Config,
        creds: [Credentials<'static>; N],
    ) -> Result<BlockOn<N>, Error> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let stack: &'static TokioStack = Box::leak(Box::default());
        let buffers: &'static mut Buffers<N> = Box::leak(Box::default());
        let client = AsyncClient::new(
            stack, addrs, StdClock, TokioDelay, OsRng, config, creds, buffers,
        )?;
        Ok(BlockOn {
            rt,
            client,
            stack,
            addrs,
            view: NetView {
                connects: vec![0; N],
                notice_close: false,
            },
        })
    }

    /// The async client itself.
    pub fn inner(&mut self) -> &mut AsyncEmbedded<N> {
        &mut self.client
    }

    /// See `AsyncClient::set_options`.
    pub fn set_options(&mut self, options: Options) {
        self.client.set_options(options);
    }

    /// See `AsyncClient::now`.
    pub fn now(&self) -> Instant {
        self.client.now()
    }

    /// See `AsyncClient::max_resource_len`.
    pub fn max_resource_len(&self) -> usize {
        self.client.max_resource_len()
    }

    /// The connects per server so far.
    pub fn net_mut(&mut self) -> &mut NetView {
        self.view.connects = self.addrs.iter().map(|a| self.stack.connects(*a)).collect();
        &mut self.view
    }

    /// See `AsyncClient::connect`.
    pub fn connect(&mut self) -> usize {
        self.rt.block_on(self.client.connect())
    }

    /// See `AsyncClient::lock`.
    pub fn lock<'r>(&mut self, resource: &'r [u8], ttl: Duration) -> Result<Lock<'r>, Error> {
        self.rt.block_on(self.client.lock(resource, ttl))
    }

    /// See `AsyncClient::lock_until`.
    pub fn lock_until<'r>(
        &mut self,
        resource: &'r [u8],
        ttl: Duration,
        deadline: Instant,
    ) -> Result<Lock<'r>, Error> {
        self.rt
            .block_on(self.client.lock_until(resource, ttl, deadline))
    }

    /// See `AsyncClient::try_lock`.
    pub fn try_lock<'r>(&mut self, resource: &'r [u8], ttl: Duration) -> Result<Lock<'r>, Error> {
        self.rt.block_on(self.client.try_lock(resource, ttl))
    }

    /// See `AsyncClient::extend`.
    pub fn extend(&mut self, lock: &mut Lock<'_>, ttl: Duration) -> Result<(), Error> {
        self.rt.block_on(self.client.extend(lock, ttl))
    }

    /// See `AsyncClient::unlock`.
    pub fn unlock(&mut self, lock: &Lock<'_>) -> Result<Released, Error> {
        self.rt.block_on(self.client.unlock(lock))
    }

    /// See `AsyncClient::unlock_token`.
    pub fn unlock_token(&mut self, resource: &[u8], token: &[u8]) -> Result<Released, Error> {
        self.rt.block_on(self.client.unlock_token(resource, token))
    }

    /// See `AsyncClient::inspect`.
    pub fn inspect(&mut self, resource: &[u8]) -> Result<Inspection, Error> {
        self.rt.block_on(self.client.inspect(resource))
    }

    /// See `AsyncClient::fence_repair`.
    pub fn fence_repair(&mut self, resource: &[u8], floor: u64) -> Result<FenceRepaired, Error> {
        self.rt.block_on(self.client.fence_repair(resource, floor))
    }
}
