//! The LAN9118 as an [`embassy_net_driver::Driver`], for embassy-net: one
//! receive and one transmit frame buffer over the controller's FIFOs
//! ([`crate::lan9118`]), the link from its PHY, the hardware address from
//! its MAC.
//!
//! # How the stack gets polled again
//!
//! The driver polls: it takes frames out of the RX FIFO when embassy-net's
//! runner asks, and uses no interrupt. (The LAN9118 can raise one on QEMU's
//! MPS2 boards, but without a peripheral-access crate the handler would
//! sit in cortex-m-rt's `DefaultHandler` and the driver would have to
//! share its waker with it; polling keeps the driver to plain code, and
//! the board already has a 1 kHz tick.) A polled driver must arrange to be
//! polled again, or a frame that arrives while the stack waits would sit in
//! the FIFO until some unrelated timer fired: every call of
//! [`receive`](Driver::receive) (and a [`transmit`](Driver::transmit) that
//! finds the TX FIFO full) hands the runner's waker to
//! [`crate::time_driver::wake_at_next_tick`], so the runner looks at the
//! FIFOs again at the next SysTick, within 1 ms. That is the latency the
//! smoltcp gateway has too (it sleeps in `WFI` until the next SysTick),
//! and it keeps the CPU asleep between ticks: a busy-polling vCPU starves
//! QEMU's main loop, where the user-mode network runs.
//!
//! Nothing read from the network can make it panic: frames that are in
//! error, empty or longer than [`FRAME`] are drained from the FIFO and
//! dropped, and a transmit request longer than [`FRAME`] is dropped too.

use core::task::Context;

use embassy_net_driver::{Capabilities, Driver, HardwareAddress, LinkState};

use crate::lan9118::Lan9118;
use crate::time_driver::wake_at_next_tick;

/// The largest Ethernet frame (header included) sent or taken in, and the
/// MTU announced to embassy-net: its TCP MSS (`FRAME - 54` = 536 bytes, the
/// IPv4 default) keeps the peer's segments within it. As the gateway's
/// (`crate::net::FRAME`), smaller than 1514 to keep the frame buffers small.
pub const FRAME: usize = 590;

/// How often the PHY's link bit is read, in microseconds: reading it takes
/// eight register accesses, and the runner polls every millisecond.
const LINK_CHECK_US: u64 = 100_000;

/// The LAN9118 as an embassy-net driver.
pub struct Lan9118Driver {
    lan: Lan9118,
    rx: [u8; FRAME],
    tx: [u8; FRAME],
    /// The link as last read from the PHY, and when (µs); `None`: never.
    link: Option<(LinkState, u64)>,
}

impl Lan9118Driver {
    /// Wraps the probed controller.
    pub fn new(lan: Lan9118) -> Lan9118Driver {
        Lan9118Driver {
            lan,
            rx: [0; FRAME],
            tx: [0; FRAME],
            link: None,
        }
    }
}

/// A received frame, already copied out of the RX FIFO.
pub struct RxToken<'a> {
    frame: &'a mut [u8],
}

impl embassy_net_driver::RxToken for RxToken<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, f: F) -> R {
        f(self.frame)
    }
}

/// Room for one frame to send, pushed into the TX FIFO once filled.
pub struct TxToken<'a> {
    lan: &'a mut Lan9118,
    buf: &'a mut [u8; FRAME],
}

impl embassy_net_driver::TxToken for TxToken<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        self.lan.transmit(self.buf, len, f)
    }
}

impl Driver for Lan9118Driver {
    type RxToken<'a>
        = RxToken<'a>
    where
        Self: 'a;
    type TxToken<'a>
        = TxToken<'a>
    where
        Self: 'a;

    fn receive(&mut self, cx: &mut Context<'_>) -> Option<(RxToken<'_>, TxToken<'_>)> {
        // On every call, not only when the FIFO is empty: the stack may
        // stop asking after a frame while more wait (see the module docs).
        wake_at_next_tick(cx.waker());
        let Lan9118Driver { lan, rx, tx, .. } = self;
        // The stack may answer a frame at once (an ACK, ARP) with the
        // token it came with: a frame waits in the FIFO until there is
        // room to answer it.
        if !lan.can_send(FRAME) {
            return None;
        }
        let len = lan.receive(rx)?;
        let frame = rx.get_mut(..len)?;
        Some((RxToken { frame }, TxToken { lan, buf: tx }))
    }

    fn transmit(&mut self, cx: &mut Context<'_>) -> Option<TxToken<'_>> {
        if !self.lan.can_send(FRAME) {
            // The stack sets no timer of its own when the device is out of
            // transmit room: look again at the next tick.
            wake_at_next_tick(cx.waker());
            return None;
        }
        Some(TxToken {
            lan: &mut self.lan,
            buf: &mut self.tx,
        })
    }

    fn link_state(&mut self, cx: &mut Context<'_>) -> LinkState {
        let now = embassy_time_driver::now();
        let state = match self.link {
            Some((state, at)) if now.saturating_sub(at) < LINK_CHECK_US => state,
            _ => {
                let state = if self.lan.link_up() {
                    LinkState::Up
                } else {
                    LinkState::Down
                };
                self.link = Some((state, now));
                state
            }
        };
        // A change is seen at the next check: keep being polled till then.
        wake_at_next_tick(cx.waker());
        state
    }

    fn capabilities(&self) -> Capabilities {
        // Checksums: computed and checked in software (the default).
        let mut caps = Capabilities::default();
        caps.max_transmission_unit = FRAME;
        caps.max_burst_size = Some(1);
        caps
    }

    fn hardware_address(&self) -> HardwareAddress {
        HardwareAddress::Ethernet(self.lan.mac())
    }
}
