//! `redlock-embedded`'s async client on the host: a [`TcpConnect`] of tokio
//! streams (through `embedded-io-adapters`), a [`DelayNs`] over tokio's
//! timer, and [`BlockOn`], a blocking face over a current-thread runtime
//! whose `LocalSet` runs the client's [`Connector`], so that the blocking
//! client's tests run on the async client unchanged.

use core::net::SocketAddr;
use std::collections::HashMap;
use std::io;
use std::sync::Mutex;

use embedded_hal_async::delay::DelayNs;
use embedded_io_adapters::tokio_1::FromTokio;
use embedded_nal_async::TcpConnect;
use redlock_embedded::{
    AsyncClient, Buffers, Config, Connector, Credentials, Duration, Error, FenceRepaired,
    Inspection, Instant, Links, Lock, Options, Released,
};
use tokio::runtime::Runtime;
use tokio::task::LocalSet;

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

/// A stream of [`TokioStack`].
pub type TokioStream = FromTokio<tokio::net::TcpStream>;

/// The async client over tokio streams, with the host's clock and RNG.
pub type AsyncEmbedded<const N: usize> =
    AsyncClient<'static, TokioStream, StdClock, OsRng, TokioDelay, N>;

/// A call past this is a hang: the test fails.
const LIMIT: core::time::Duration = core::time::Duration::from_secs(60);

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
/// current-thread tokio runtime, with its connector on the runtime's
/// `LocalSet` (which runs while a call runs, and between calls whenever
/// [`block_on`](BlockOn::block_on) runs anything).
pub struct BlockOn<const N: usize> {
    /// The runtime.
    pub rt: Runtime,
    /// Where the connector runs.
    pub local: LocalSet,
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
        let links: &'static mut Links<TokioStream, N> = Box::leak(Box::new(Links::new()));
        let (client_links, connector_links) = links.split();
        let client = AsyncClient::new(
            client_links,
            StdClock,
            TokioDelay,
            OsRng,
            config,
            creds,
            buffers,
        )?;
        let local = LocalSet::new();
        let mut connector = Connector::new(stack, addrs, connector_links);
        local.spawn_local(async move { connector.run().await });
        Ok(BlockOn {
            rt,
            local,
            client,
            stack,
            addrs,
            view: NetView {
                connects: vec![0; N],
                notice_close: false,
            },
        })
    }

    /// Runs `fut` to its end with the connector beside it; panics past a
    /// minute (a hang is a bug).
    #[allow(clippy::expect_used)] // a test harness: a hang fails the test
    pub fn block_on<F: core::future::Future>(&self, fut: F) -> F::Output {
        self.local
            .block_on(&self.rt, async { tokio::time::timeout(LIMIT, fut).await })
            .expect("an async call ran past its limit")
    }

    /// The async client itself.
    pub fn inner(&mut self) -> &mut AsyncEmbedded<N> {
        &mut self.client
    }

    /// The runtime, the `LocalSet` where the connector runs, and the
    /// client: to run a call with other futures beside it
    /// (`local.block_on(rt, ...)`).
    pub fn parts(&mut self) -> (&Runtime, &LocalSet, &mut AsyncEmbedded<N>) {
        (&self.rt, &self.local, &mut self.client)
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
        Self::run(&self.rt, &self.local, self.client.connect())
    }

    /// See `AsyncClient::lock`.
    pub fn lock<'r>(&mut self, resource: &'r [u8], ttl: Duration) -> Result<Lock<'r>, Error> {
        Self::run(&self.rt, &self.local, self.client.lock(resource, ttl))
    }

    /// See `AsyncClient::lock_until`.
    pub fn lock_until<'r>(
        &mut self,
        resource: &'r [u8],
        ttl: Duration,
        deadline: Instant,
    ) -> Result<Lock<'r>, Error> {
        Self::run(
            &self.rt,
            &self.local,
            self.client.lock_until(resource, ttl, deadline),
        )
    }

    /// See `AsyncClient::try_lock`.
    pub fn try_lock<'r>(&mut self, resource: &'r [u8], ttl: Duration) -> Result<Lock<'r>, Error> {
        Self::run(&self.rt, &self.local, self.client.try_lock(resource, ttl))
    }

    /// See `AsyncClient::extend`.
    pub fn extend(&mut self, lock: &mut Lock<'_>, ttl: Duration) -> Result<(), Error> {
        Self::run(&self.rt, &self.local, self.client.extend(lock, ttl))
    }

    /// See `AsyncClient::unlock`.
    pub fn unlock(&mut self, lock: &Lock<'_>) -> Result<Released, Error> {
        Self::run(&self.rt, &self.local, self.client.unlock(lock))
    }

    /// See `AsyncClient::unlock_token`.
    pub fn unlock_token(&mut self, resource: &[u8], token: &[u8]) -> Result<Released, Error> {
        Self::run(
            &self.rt,
            &self.local,
            self.client.unlock_token(resource, token),
        )
    }

    /// See `AsyncClient::inspect`.
    pub fn inspect(&mut self, resource: &[u8]) -> Result<Inspection, Error> {
        Self::run(&self.rt, &self.local, self.client.inspect(resource))
    }

    /// See `AsyncClient::fence_repair`.
    pub fn fence_repair(&mut self, resource: &[u8], floor: u64) -> Result<FenceRepaired, Error> {
        Self::run(
            &self.rt,
            &self.local,
            self.client.fence_repair(resource, floor),
        )
    }

    /// [`block_on`](BlockOn::block_on), on parts of `self` (while the
    /// client is borrowed by the call).
    #[allow(clippy::expect_used)] // a test harness: a hang fails the test
    fn run<F: core::future::Future>(rt: &Runtime, local: &LocalSet, fut: F) -> F::Output {
        local
            .block_on(rt, async { tokio::time::timeout(LIMIT, fut).await })
            .expect("an async call ran past its limit")
    }
}
