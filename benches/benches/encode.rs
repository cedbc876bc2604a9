//! Command encoding: `redlock-resp` against `redis-protocol` and `redis-rs`,
//! one criterion group per command, each peer in the same group.
//!
//! Every encoder writes into a buffer that outlives the loop: ours and
//! redis-protocol into a stack array, redis-rs into a reused `Vec` (its
//! `Cmd` builder itself allocates, which is the cost of its API).
#![allow(clippy::unwrap_used)]

use core::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use redis_protocol::resp2::{encode::encode_borrowed, types::BorrowedFrame};
use redlock_benches::{KEY, TOKEN, TTL_MS};
use redlock_resp::{Arg, encode, script::RELEASE};

fn set_nx_px(c: &mut Criterion) {
    let mut g = c.benchmark_group("encode/set_nx_px");

    g.bench_function("ours", |b| {
        let mut buf = [0u8; 128];
        b.iter(|| {
            let n = encode::set_nx_px(
                &mut buf,
                black_box(KEY),
                black_box(TOKEN),
                black_box(TTL_MS),
            )
            .unwrap();
            black_box(&buf[..n]);
        });
    });

    g.bench_function("redis-protocol", |b| {
        let mut buf = [0u8; 128];
        b.iter(|| {
            let ttl = i64::try_from(black_box(TTL_MS)).unwrap();
            let args = [
                BorrowedFrame::BulkString(b"SET"),
                BorrowedFrame::BulkString(black_box(KEY)),
                BorrowedFrame::BulkString(black_box(TOKEN)),
                BorrowedFrame::BulkString(b"NX"),
                BorrowedFrame::BulkString(b"PX"),
                BorrowedFrame::Integer(ttl),
            ];
            // `true`: integers go out as bulk strings, as Redis expects.
            let n = encode_borrowed(&mut buf, &BorrowedFrame::Array(&args), true).unwrap();
            black_box(&buf[..n]);
        });
    });

    g.bench_function("redis-rs", |b| {
        let mut out = Vec::with_capacity(128);
        b.iter(|| {
            out.clear();
            redis::cmd("SET")
                .arg(black_box(KEY))
                .arg(black_box(TOKEN))
                .arg("NX")
                .arg("PX")
                .arg(black_box(TTL_MS))
                .write_packed_command(&mut out);
            black_box(&out);
        });
    });

    g.finish();
}

fn evalsha_release(c: &mut Criterion) {
    let mut g = c.benchmark_group("encode/evalsha_release");

    g.bench_function("ours", |b| {
        let mut buf = [0u8; 160];
        b.iter(|| {
            let n = encode::evalsha_script(
                &mut buf,
                black_box(&RELEASE),
                &[black_box(KEY)],
                &[Arg::Bytes(black_box(TOKEN))],
            )
            .unwrap();
            black_box(&buf[..n]);
        });
    });

    g.bench_function("redis-protocol", |b| {
        let mut buf = [0u8; 160];
        b.iter(|| {
            let args = [
                BorrowedFrame::BulkString(b"EVALSHA"),
                BorrowedFrame::BulkString(black_box(RELEASE.sha1).as_bytes()),
                BorrowedFrame::Integer(1),
                BorrowedFrame::BulkString(black_box(KEY)),
                BorrowedFrame::BulkString(black_box(TOKEN)),
            ];
            let n = encode_borrowed(&mut buf, &BorrowedFrame::Array(&args), true).unwrap();
            black_box(&buf[..n]);
        });
    });

    g.bench_function("redis-rs", |b| {
        let mut out = Vec::with_capacity(160);
        b.iter(|| {
            out.clear();
            redis::cmd("EVALSHA")
                .arg(black_box(RELEASE.sha1))
                .arg(1u64)
                .arg(black_box(KEY))
                .arg(black_box(TOKEN))
                .write_packed_command(&mut out);
            black_box(&out);
        });
    });

    g.finish();
}

criterion_group!(benches, set_nx_px, evalsha_release);
criterion_main!(benches);
