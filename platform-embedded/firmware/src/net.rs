//! The network: the LAN9118 as a smoltcp [`Device`], and redlock-embedded's
//! [`Network`] over one smoltcp TCP socket per server.

use embedded_io::{ErrorKind, ErrorType, Read, ReadReady, Write};
use redlock_embedded::{Instant, Link, Network};
use smoltcp::iface::{Config, Interface, PollResult, SocketHandle, SocketSet, SocketStorage};
use smoltcp::phy::{self, Device, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpCidr, IpEndpoint, Ipv4Address};

use crate::clock::Clock;
use crate::lan9118::Lan9118;

/// The largest Ethernet frame (header included) sent or taken in. It is
/// the interface's MTU, so the TCP MSS smoltcp announces (`MTU - 54` =
/// 536 bytes, the IPv4 default) keeps the peer's segments within it;
/// smaller than 1514 to keep the two frame buffers small.
pub const FRAME: usize = 590;

/// The NIC as a smoltcp device: one receive and one transmit frame buffer.
pub struct Nic {
    lan: Lan9118,
    rx: [u8; FRAME],
    tx: [u8; FRAME],
}

impl Nic {
    /// Wraps the probed controller.
    pub fn new(lan: Lan9118) -> Nic {
        Nic {
            lan,
            rx: [0; FRAME],
            tx: [0; FRAME],
        }
    }

    /// The controller's MAC address.
    pub fn mac(&self) -> [u8; 6] {
        self.lan.mac()
    }
}

/// A received frame, already copied out of the RX FIFO.
pub struct RxToken<'a>(&'a [u8]);

impl phy::RxToken for RxToken<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(self.0)
    }
}

/// Room for one frame to send, pushed into the TX FIFO when filled.
pub struct TxToken<'a> {
    lan: &'a mut Lan9118,
    buf: &'a mut [u8; FRAME],
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        self.lan.transmit(self.buf, len, f)
    }
}

impl Device for Nic {
    type RxToken<'a> = RxToken<'a>;
    type TxToken<'a> = TxToken<'a>;

    fn receive(
        &mut self,
        _timestamp: smoltcp::time::Instant,
    ) -> Option<(RxToken<'_>, TxToken<'_>)> {
        let Nic { lan, rx, tx } = self;
        let len = lan.receive(rx)?;
        Some((
            RxToken(rx.get(..len).unwrap_or_default()),
            TxToken { lan, buf: tx },
        ))
    }

    fn transmit(&mut self, _timestamp: smoltcp::time::Instant) -> Option<TxToken<'_>> {
        if !self.lan.can_send(FRAME) {
            return None;
        }
        Some(TxToken {
            lan: &mut self.lan,
            buf: &mut self.tx,
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = FRAME;
        caps.max_burst_size = Some(1);
        caps
    }
}

/// One socket's buffers: `RX` bytes received and not yet read, `TX` bytes
/// written and not yet acknowledged.
pub struct SocketBuffers<const RX: usize, const TX: usize> {
    rx: [u8; RX],
    tx: [u8; TX],
}

impl<const RX: usize, const TX: usize> SocketBuffers<RX, TX> {
    /// Zeroed buffers.
    pub const fn new() -> Self {
        SocketBuffers {
            rx: [0; RX],
            tx: [0; TX],
        }
    }
}

impl<const RX: usize, const TX: usize> Default for SocketBuffers<RX, TX> {
    fn default() -> Self {
        Self::new()
    }
}

/// The addresses of the guest and of its router (QEMU's user-mode
/// networking: guest 10.0.2.15/24, host 10.0.2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Addressing {
    /// This station's address.
    pub address: Ipv4Address,
    /// The prefix length of its subnet.
    pub prefix: u8,
    /// The default router.
    pub router: Ipv4Address,
}

impl Addressing {
    /// QEMU's user-mode (slirp) defaults.
    pub const SLIRP: Addressing = Addressing {
        address: Ipv4Address::new(10, 0, 2, 15),
        prefix: 24,
        router: Ipv4Address::new(10, 0, 2, 2),
    };
}

/// The first local port used for connections; each connect takes the next.
const FIRST_PORT: u16 = 49_152;

/// redlock-embedded's [`Network`] on smoltcp: one TCP socket per server,
/// the interface polled in [`wait`](Network::wait) (and in
/// [`poll`](Gateway::poll)), `WFI` while nothing happens.
pub struct Gateway<'a, const N: usize> {
    iface: Interface,
    nic: Nic,
    sockets: SocketSet<'a>,
    handles: [SocketHandle; N],
    servers: [IpEndpoint; N],
    next_port: u16,
    clock: Clock,
}

impl<'a, const N: usize> Gateway<'a, N> {
    /// An interface on `nic` with `addressing`, and one TCP socket per
    /// server in `servers`, each with its `buffers` (held in `storage`).
    pub fn new<const RX: usize, const TX: usize>(
        mut nic: Nic,
        clock: Clock,
        addressing: Addressing,
        servers: [IpEndpoint; N],
        storage: &'a mut [SocketStorage<'a>; N],
        buffers: &'a mut [SocketBuffers<RX, TX>; N],
    ) -> Self {
        let config = Config::new(HardwareAddress::Ethernet(EthernetAddress(nic.mac())));
        let mut iface = Interface::new(config, &mut nic, timestamp(clock));
        iface.update_ip_addrs(|addrs| {
            let cidr = IpCidr::new(addressing.address.into(), addressing.prefix);
            let _ = addrs.push(cidr);
        });
        let _ = iface.routes_mut().add_default_ipv4_route(addressing.router);
        let mut sockets = SocketSet::new(&mut storage[..]);
        let mut buffers = buffers.iter_mut();
        let handles = core::array::from_fn(|_| {
            let (rx, tx): (&'a mut [u8], &'a mut [u8]) = match buffers.next() {
                Some(b) => (&mut b.rx, &mut b.tx),
                None => (&mut [], &mut []),
            };
            let mut socket =
                tcp::Socket::new(tcp::SocketBuffer::new(rx), tcp::SocketBuffer::new(tx));
            // Requests are small and each waits for its reply: send them
            // at once, and acknowledge replies at once.
            socket.set_nagle_enabled(false);
            socket.set_ack_delay(None);
            sockets.add(socket)
        });
        Gateway {
            iface,
            nic,
            sockets,
            handles,
            servers,
            next_port: FIRST_PORT,
            clock,
        }
    }

    /// Moves packets once (no waiting); `true` if a socket may have changed.
    pub fn poll(&mut self) -> bool {
        let now = timestamp(self.clock);
        self.iface.poll(now, &mut self.nic, &mut self.sockets) == PollResult::SocketStateChanged
    }

    /// Keeps the network going until `until` (sleeping between packets).
    pub fn idle_until(&mut self, until: Instant) {
        while redlock_embedded::Clock::now(&self.clock) < until {
            if !self.poll() {
                cortex_m::asm::wfi();
            }
        }
    }

    /// Closes every connection gracefully (FIN) and keeps polling for up to
    /// `linger` so that the FINs go out before the program ends.
    pub fn shutdown(&mut self, linger: redlock_embedded::Duration) {
        for &h in &self.handles {
            self.sockets.get_mut::<tcp::Socket>(h).close();
        }
        let until = redlock_embedded::Clock::now(&self.clock).saturating_add(linger);
        while redlock_embedded::Clock::now(&self.clock) < until {
            let open = self
                .handles
                .iter()
                .any(|&h| self.sockets.get::<tcp::Socket>(h).is_open());
            if !open {
                break;
            }
            if !self.poll() {
                cortex_m::asm::wfi();
            }
        }
    }

    fn tcp(&mut self, server: usize) -> Option<&mut tcp::Socket<'a>> {
        let h = *self.handles.get(server)?;
        Some(self.sockets.get_mut::<tcp::Socket>(h))
    }

    /// The next local port (49152-65535, then around again).
    fn local_port(&mut self) -> u16 {
        let port = self.next_port;
        self.next_port = port.checked_add(1).unwrap_or(FIRST_PORT);
        port
    }
}

/// smoltcp's time from the board clock.
fn timestamp(clock: Clock) -> smoltcp::time::Instant {
    smoltcp::time::Instant::from_micros(i64::try_from(clock.micros()).unwrap_or(i64::MAX))
}

/// A server's socket, borrowed for one read or write.
pub struct TcpIo<'s, 'a> {
    socket: &'s mut tcp::Socket<'a>,
}

impl ErrorType for TcpIo<'_, '_> {
    type Error = ErrorKind;
}

impl Read for TcpIo<'_, '_> {
    /// Received bytes; `Ok(0)` once the peer closed (or the connection is
    /// gone) and everything was read.
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, ErrorKind> {
        if buf.is_empty() || !self.socket.can_recv() {
            return Ok(0);
        }
        self.socket
            .recv_slice(buf)
            .map_err(|_| ErrorKind::NotConnected)
    }
}

impl ReadReady for TcpIo<'_, '_> {
    /// Bytes are waiting, or nothing more can come (end of stream).
    fn read_ready(&mut self) -> Result<bool, ErrorKind> {
        Ok(self.socket.can_recv() || !self.socket.may_recv())
    }
}

impl Write for TcpIo<'_, '_> {
    fn write(&mut self, buf: &[u8]) -> Result<usize, ErrorKind> {
        self.socket
            .send_slice(buf)
            .map_err(|_| ErrorKind::NotConnected)
    }

    /// Nothing to do: the interface sends when it is polled.
    fn flush(&mut self) -> Result<(), ErrorKind> {
        Ok(())
    }
}

impl<'a, const N: usize> Network for Gateway<'a, N> {
    type Socket<'s>
        = TcpIo<'s, 'a>
    where
        Self: 's;

    fn connect(&mut self, server: usize) -> Result<(), ErrorKind> {
        let endpoint = *self.servers.get(server).ok_or(ErrorKind::InvalidInput)?;
        let socket = self.tcp(server).ok_or(ErrorKind::InvalidInput)?;
        if socket.state() != tcp::State::Closed {
            // Reset the old connection and let the RST go out.
            socket.abort();
            self.poll();
        }
        let port = self.local_port();
        let (socket, cx) = match self.handles.get(server) {
            Some(&h) => (self.sockets.get_mut::<tcp::Socket>(h), self.iface.context()),
            None => return Err(ErrorKind::InvalidInput),
        };
        socket
            .connect(cx, endpoint, port)
            .map_err(|_| ErrorKind::AddrNotAvailable)?;
        // Send the SYN now rather than at the next wait.
        self.poll();
        Ok(())
    }

    fn link(&mut self, server: usize) -> Link {
        match self.tcp(server).map(|s| s.state()) {
            Some(tcp::State::SynSent | tcp::State::SynReceived) => Link::Connecting,
            Some(tcp::State::Established) => Link::Up,
            _ => Link::Down,
        }
    }

    fn socket(&mut self, server: usize) -> Option<TcpIo<'_, 'a>> {
        self.tcp(server).map(|socket| TcpIo { socket })
    }

    fn write_ready(&mut self, server: usize) -> bool {
        self.tcp(server).is_some_and(|s| s.can_send())
    }

    fn close(&mut self, server: usize) {
        if let Some(socket) = self.tcp(server) {
            socket.abort();
        }
        self.poll();
    }

    fn wait(&mut self, until: Instant) {
        loop {
            if self.poll() {
                return;
            }
            if redlock_embedded::Clock::now(&self.clock) >= until {
                return;
            }
            // Woken by SysTick within a millisecond at the latest.
            cortex_m::asm::wfi();
        }
    }
}

/// The same network, borrowed: so that a client can use a `Gateway` that
/// lives elsewhere (a static), and the client stays small to construct.
impl<'a, const N: usize> Network for &mut Gateway<'a, N> {
    type Socket<'s>
        = TcpIo<'s, 'a>
    where
        Self: 's;

    fn connect(&mut self, server: usize) -> Result<(), ErrorKind> {
        (**self).connect(server)
    }

    fn link(&mut self, server: usize) -> Link {
        (**self).link(server)
    }

    fn socket(&mut self, server: usize) -> Option<TcpIo<'_, 'a>> {
        (**self).socket(server)
    }

    fn write_ready(&mut self, server: usize) -> bool {
        (**self).write_ready(server)
    }

    fn close(&mut self, server: usize) {
        (**self).close(server)
    }

    fn wait(&mut self, until: Instant) {
        (**self).wait(until)
    }
}
