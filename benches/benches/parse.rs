//! Reply parsing: `redlock-resp` against `redis-protocol` (RESP2) and
//! `redis-rs`, one criterion group per reply, each peer in the same group.
//!
//! Our parser borrows from the input and decodes aggregate elements lazily,
//! while the peers build their values eagerly; so for an aggregate our
//! benchmark also walks the elements and hands each one to `black_box`.
//!
//! - `redis-protocol`: `resp2::decode::decode_range`, its zero-copy decoder
//!   (frames are offsets into the input; only arrays allocate), the fastest
//!   of its decoders. `redis-protocol-owned` is `resp2::decode::decode`, which
//!   copies every string into an `OwnedFrame`.
//! - `redis-rs`: one `redis::Parser` reused across iterations, fed the slice
//!   through `parse_value` (`parse_redis_value` builds a new parser per call).
#![allow(clippy::unwrap_used)]

use core::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use redlock_benches::REPLIES;
use redlock_resp::{Reply, Status, parse_reply};

fn parse(c: &mut Criterion) {
    for (name, input) in REPLIES {
        let mut g = c.benchmark_group(format!("parse/{name}"));

        g.bench_function("ours", |b| {
            b.iter(|| match parse_reply(black_box(input)) {
                Ok(Status::Complete((reply, used))) => {
                    if let Reply::Aggregate(agg) = reply {
                        for element in agg.iter() {
                            black_box(element);
                        }
                    }
                    black_box((reply, used))
                }
                _ => unreachable!("the inputs are whole, valid replies"),
            });
        });

        g.bench_function("redis-protocol", |b| {
            b.iter(|| redis_protocol::resp2::decode::decode_range(black_box(input)).unwrap());
        });

        g.bench_function("redis-protocol-owned", |b| {
            b.iter(|| redis_protocol::resp2::decode::decode(black_box(input)).unwrap());
        });

        g.bench_function("redis-rs", |b| {
            let mut parser = redis::Parser::new();
            b.iter(|| parser.parse_value(black_box(input)).unwrap());
        });

        g.bench_function("redis-rs-fn", |b| {
            b.iter(|| redis::parse_redis_value(black_box(input)).unwrap());
        });

        g.finish();
    }
}

criterion_group!(benches, parse);
criterion_main!(benches);
