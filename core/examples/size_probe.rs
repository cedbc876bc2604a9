//! A bare-metal binary that uses every operation of `redlock-core` and the
//! `redlock-resp` parser, to measure their flash cost and to prove they need
//! no allocator (linking fails if anything pulls in `alloc`).
//!
//! ```sh
//! cargo build -p redlock-core --example size_probe --features size-probe \
//!     --target thumbv7em-none-eabihf --profile size
//! llvm-size target/thumbv7em-none-eabihf/size/examples/size_probe
//! ```

#![no_std]
#![no_main]
// The entry point and panic handler of a bare-metal binary need these.
#![allow(unsafe_code, missing_docs)]

use core::hint::black_box;

use redlock_core::handshake::{self, Plan};
use redlock_core::redlock_resp::{Status, parse_reply};
use redlock_core::{
    Acquire, Config, Duration, Extend, FenceRepair, Inspect, Instant, Lock, Operation, Release,
    ServerId, Servers,
};

/// A stand-in RNG: the probe measures size, not randomness.
struct ProbeRng(u64);

impl rand_core::TryRng for ProbeRng {
    type Error = core::convert::Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        Ok(self.try_next_u64()? as u32)
    }
    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        self.0 = black_box(
            self.0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1),
        );
        Ok(self.0)
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        for b in dst {
            *b = self.try_next_u64()? as u8;
        }
        Ok(())
    }
}
impl rand_core::TryCryptoRng for ProbeRng {}

/// Feeds `op` the reply bytes in `input` for every server, as a platform would.
fn drive<O: Operation>(op: &mut O, n: usize, input: &[u8], now: Instant) -> Option<O::Output> {
    let mut buf = [0u8; 256];
    while let Ok(Some(t)) = op.poll_transmit(now, &mut buf) {
        black_box(&buf[..t.len]);
    }
    for server in 0..n {
        if let Ok(Status::Complete((reply, _))) = parse_reply(black_box(input)) {
            let _ = op.handle_reply(now, ServerId(server as u8), reply);
        } else {
            op.handle_connection_error(now, ServerId(server as u8));
        }
    }
    op.handle_timeout(black_box(now));
    black_box(op.poll_timeout());
    op.poll_outcome()
}

#[unsafe(no_mangle)]
pub extern "C" fn _start() -> ! {
    let mut config = black_box(Config::DEFAULT);
    config.fencing = black_box(false);
    let n = black_box(5);
    let Ok(servers) = Servers::new(n) else {
        loop {}
    };
    let now = Instant::from_micros(black_box(1_000));
    let ttl = Duration::from_millis(black_box(10_000));
    let reply = black_box(b"+OK\r\n".as_slice());
    let mut rng = ProbeRng(black_box(7));
    if let Ok(mut acquire) = Acquire::new(&config, &servers, b"resource", ttl, None, &mut rng, now)
    {
        if let Some(Ok(lock)) = drive(&mut acquire, n, reply, now) {
            black_box(lock_round(&config, &servers, &lock, now));
        }
    }
    let mut inspect = Inspect::new(&servers, b"resource", ttl);
    black_box(drive(&mut inspect, n, reply, now));
    let mut repair = FenceRepair::new(&config, &servers, b"resource", black_box(41), ttl);
    black_box(drive(&mut repair, n, black_box(b"$2\r\n41\r\n"), now));
    black_box(judge_handshake(reply));
    loop {}
}

/// The handshake's plan and the verdict on each of its replies.
fn judge_handshake(input: &[u8]) -> usize {
    let plan = Plan {
        commands: black_box(redlock_core::Commands::Auto),
        auth: black_box(true),
        select: black_box(true),
        info_required: black_box(true),
    };
    let Ok(Status::Complete((reply, _))) = parse_reply(input) else {
        return 0;
    };
    handshake::steps(plan)
        .filter(|&step| handshake::judge(step, &reply, plan).is_ok())
        .count()
}

fn lock_round(config: &Config, servers: &Servers, lock: &Lock, now: Instant) -> usize {
    let mut extend = match Extend::new(config, servers, b"resource", lock, lock.ttl(), now) {
        Ok(e) => e,
        Err(_) => return 0,
    };
    let extended = drive(&mut extend, servers.len(), black_box(b":1\r\n"), now);
    let lock = match extended {
        Some(Ok(l)) => l,
        _ => *lock,
    };
    let mut release = Release::for_lock(config, servers, b"resource", &lock);
    drive(&mut release, servers.len(), black_box(b":1\r\n"), now).map_or(0, |r| r.deleted())
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    loop {}
}
