//! A small polled (PIO) driver for the SMSC LAN9118 Ethernet controller of
//! the MPS2 boards, as QEMU models it (`hw/net/lan9118.c`): one frame at a
//! time through the RX and TX data FIFOs, no interrupts, no DMA.
//!
//! All the hardware access is in [`read`] and [`write`], the only `unsafe`
//! of this module; every register they can reach is a [`Reg`].

/// Where the LAN9118's register block sits on MPS2 (AN385/AN386/AN500).
const BASE: usize = 0x4020_0000;

/// `BYTE_TEST` always reads this on a LAN9118 (endianness probe).
const BYTE_TEST_VALUE: u32 = 0x8765_4321;

/// The controller's 32-bit registers (offsets from [`BASE`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
enum Reg {
    /// Read: the next word of the frame being received.
    RxData = 0x00,
    /// Write: TX commands A and B, then the frame's words.
    TxData = 0x20,
    /// Read: pops the next received frame's status.
    RxStatus = 0x40,
    /// Read: pops the next transmitted frame's status.
    TxStatus = 0x48,
    /// Chip id and revision.
    IdRev = 0x50,
    /// Endianness probe, see [`BYTE_TEST_VALUE`].
    ByteTest = 0x64,
    /// Transmitter control (bit 1: TX_ON).
    TxCfg = 0x70,
    /// Hardware configuration (bit 0: soft reset).
    HwCfg = 0x74,
    /// RX FIFO levels (bits 23:16: statuses waiting).
    RxFifoInf = 0x7C,
    /// TX FIFO levels (bits 23:16: statuses waiting, 15:0: free data bytes).
    TxFifoInf = 0x80,
    /// Indirect MAC register access: command (bit 31 busy, bit 30 read).
    MacCsrCmd = 0xA4,
    /// Indirect MAC register access: data.
    MacCsrData = 0xA8,
}

/// Indirect MAC registers (through [`Reg::MacCsrCmd`]).
const MAC_CR: u32 = 1;
const MAC_ADDRH: u32 = 2;
const MAC_ADDRL: u32 = 3;
/// Indirect MAC registers reaching the PHY: MII address/command and data.
const MAC_MII_ACC: u32 = 6;
const MAC_MII_DATA: u32 = 7;
/// `MII_ACC`: the internal PHY's address (bits 15:11), the PHY register
/// (bits 10:6), and bit 0 (MIIBZY), set to start an access and clear when
/// it is done; bit 1 clear means read.
const MII_PHY_INTERNAL: u32 = 1 << 11;
const MII_BUSY: u32 = 1;
/// The PHY's basic status register and its link-status bit.
const PHY_BMSR: u32 = 1;
const BMSR_LINK_UP: u32 = 1 << 2;
/// `MAC_CR`: transmitter and receiver on; exact-match and broadcast only.
const MAC_CR_TXEN_RXEN: u32 = (1 << 3) | (1 << 2);
const CSR_BUSY: u32 = 1 << 31;
const CSR_READ: u32 = 1 << 30;

/// Reads register `reg`.
fn read(reg: Reg) -> u32 {
    // SAFETY: `BASE + reg` is a 4-byte aligned register of the LAN9118's
    // MMIO block, mapped on every MPS2 board and owned by this driver only
    // (a `Lan9118` exists once, see `Lan9118::probe`). A volatile read
    // has no effect on Rust-visible memory; popping a FIFO is what the
    // callers of the FIFO registers intend.
    unsafe { core::ptr::read_volatile((BASE + reg as usize) as *const u32) }
}

/// Writes `value` to register `reg`.
fn write(reg: Reg, value: u32) {
    // SAFETY: as for `read`: an aligned register of the device's MMIO
    // block, not memory that Rust code owns.
    unsafe { core::ptr::write_volatile((BASE + reg as usize) as *mut u32, value) }
}

/// Spins until `done` or `limit` polls passed; `true` if `done`.
fn spin_until(limit: u32, mut done: impl FnMut() -> bool) -> bool {
    (0..limit).any(|_| done())
}

/// The LAN9118, reset and with its transmitter and receiver on.
#[derive(Debug)]
pub struct Lan9118 {
    mac: [u8; 6],
    tag: u16,
}

/// Why [`Lan9118::probe`] found no usable controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeError {
    /// `BYTE_TEST` did not read `0x87654321`: no LAN9118 at the address.
    Absent(u32),
    /// The soft reset or a MAC register access did not finish.
    Stuck,
}

impl core::fmt::Display for ProbeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ProbeError::Absent(v) => write!(f, "no LAN9118 (BYTE_TEST reads {v:#010x})"),
            ProbeError::Stuck => f.write_str("the LAN9118 did not finish a reset or MAC access"),
        }
    }
}

impl Lan9118 {
    /// Finds the controller, soft-resets it and turns on its transmitter
    /// and receiver, keeping the MAC address it came up with (QEMU loads
    /// the `-nic` one). Call it once: the driver assumes it owns the chip.
    pub fn probe() -> Result<Lan9118, ProbeError> {
        let probe = read(Reg::ByteTest);
        if probe != BYTE_TEST_VALUE {
            return Err(ProbeError::Absent(probe));
        }
        write(Reg::HwCfg, 1);
        if !spin_until(100_000, || read(Reg::HwCfg) & 1 == 0) {
            return Err(ProbeError::Stuck);
        }
        let low = mac_read(MAC_ADDRL)?.to_le_bytes();
        let high = mac_read(MAC_ADDRH)?.to_le_bytes();
        mac_write(MAC_CR, MAC_CR_TXEN_RXEN)?;
        write(Reg::TxCfg, 1 << 1);
        Ok(Lan9118 {
            mac: [low[0], low[1], low[2], low[3], high[0], high[1]],
            tag: 0,
        })
    }

    /// The chip id and revision (`0x01180001` for QEMU's model).
    pub fn id_rev(&self) -> u32 {
        read(Reg::IdRev)
    }

    /// The station's MAC address.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// Whether the PHY reports a link (its basic status register's link
    /// bit); `false` if the PHY does not answer. Eight register accesses:
    /// callers that poll should not ask on every poll.
    pub fn link_up(&mut self) -> bool {
        phy_read(PHY_BMSR).is_ok_and(|bmsr| bmsr & BMSR_LINK_UP != 0)
    }

    /// Takes the next good frame (without its CRC) out of the RX FIFO into
    /// `buf` and returns its length; `None` when no frame is waiting.
    /// Frames with an error, or longer than `buf`, are dropped.
    pub fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
        while (read(Reg::RxFifoInf) >> 16) & 0xff != 0 {
            let status = read(Reg::RxStatus);
            let len = ((status >> 16) & 0x3fff) as usize;
            let words = len.div_ceil(4);
            let error = status & (1 << 15) != 0;
            // The length counts the 4-byte CRC, which is dropped.
            let frame = len.saturating_sub(4);
            let fits = !error && frame <= buf.len() && frame > 0;
            for k in 0..words {
                let word = read(Reg::RxData).to_le_bytes();
                let at = k * 4;
                let n = frame.saturating_sub(at).min(4);
                if let (true, Some(dst), Some(src)) = (fits, buf.get_mut(at..at + n), word.get(..n))
                {
                    dst.copy_from_slice(src);
                }
            }
            if fits {
                return Some(frame);
            }
        }
        None
    }

    /// Whether the TX FIFO has room for a frame of `len` bytes (plus its
    /// two command words).
    pub fn can_send(&self, len: usize) -> bool {
        (read(Reg::TxFifoInf) & 0xffff) as usize >= len.div_ceil(4) * 4 + 8
    }

    /// A network stack's transmit token: lets `fill` write the `len` bytes
    /// of a frame into `buf`, then queues them. The stacks ask for at most
    /// the MTU their drivers announce, `buf.len()`; a larger request (none
    /// is made) gets a shorter buffer, and the frame is not sent. A full
    /// FIFO drops the frame, as a busy wire would; TCP retransmits it.
    pub fn transmit<R>(
        &mut self,
        buf: &mut [u8],
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> R,
    ) -> R {
        let room = buf.len();
        let fits = len <= room;
        let frame = &mut buf[..len.min(room)];
        let r = fill(frame);
        if fits {
            let _ = self.send(frame);
        }
        r
    }

    /// Queues `frame` for transmission; `false` (and nothing sent) when the
    /// FIFO has no room for it or it is longer than a frame can be.
    pub fn send(&mut self, frame: &[u8]) -> bool {
        self.reap_tx_status();
        let len = frame.len();
        if len == 0 || len > 0x7ff || !self.can_send(len) {
            return false;
        }
        self.tag = self.tag.wrapping_add(1);
        // Command A: first and last segment, buffer size; command B: tag
        // and packet length.
        write(Reg::TxData, (1 << 13) | (1 << 12) | len as u32);
        write(Reg::TxData, (u32::from(self.tag) << 16) | len as u32);
        for chunk in frame.chunks(4) {
            let mut word = [0u8; 4];
            word.iter_mut().zip(chunk).for_each(|(w, b)| *w = *b);
            write(Reg::TxData, u32::from_le_bytes(word));
        }
        true
    }

    /// Pops the TX status FIFO so that it never fills.
    fn reap_tx_status(&mut self) {
        while (read(Reg::TxFifoInf) >> 16) & 0xff != 0 {
            let _ = read(Reg::TxStatus);
        }
    }
}

/// Waits until the MAC CSR interface is idle.
fn mac_wait() -> Result<(), ProbeError> {
    if spin_until(100_000, || read(Reg::MacCsrCmd) & CSR_BUSY == 0) {
        Ok(())
    } else {
        Err(ProbeError::Stuck)
    }
}

/// Reads indirect MAC register `index`.
fn mac_read(index: u32) -> Result<u32, ProbeError> {
    mac_wait()?;
    write(Reg::MacCsrCmd, CSR_BUSY | CSR_READ | index);
    mac_wait()?;
    Ok(read(Reg::MacCsrData))
}

/// Writes indirect MAC register `index`.
fn mac_write(index: u32, value: u32) -> Result<(), ProbeError> {
    mac_wait()?;
    write(Reg::MacCsrData, value);
    write(Reg::MacCsrCmd, CSR_BUSY | index);
    mac_wait()
}

/// Reads PHY register `reg` through the MAC's MII interface.
fn phy_read(reg: u32) -> Result<u32, ProbeError> {
    mac_write(MAC_MII_ACC, MII_PHY_INTERNAL | (reg & 0x1f) << 6 | MII_BUSY)?;
    for _ in 0..1_000 {
        if mac_read(MAC_MII_ACC)? & MII_BUSY == 0 {
            return Ok(mac_read(MAC_MII_DATA)? & 0xffff);
        }
    }
    Err(ProbeError::Stuck)
}
