//! The simulated server against a real `redis-server`: the same random
//! sequences of the commands and scripts the product sends must get the
//! same replies, byte for byte (PTTL values aside, which depend on timing).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test driver

use redlock_core::redlock_resp::script::{
    EXTEND, FENCE_WRITE, FENCED_ACQUIRE, INSPECT, RELEASE, Script,
};
use redlock_tests::RedisServer;
use redlock_tests::sim::{Server, SimRng};

fn script_call(r: &mut SimRng, script: &Script, keys: &[&[u8]], argv: &[Vec<u8>]) -> Vec<Vec<u8>> {
    // Mostly EVALSHA (NOSCRIPT until an EVAL loaded it), sometimes EVAL.
    let mut args = if r.chance(700_000) {
        vec![b"EVALSHA".to_vec(), script.sha1.as_bytes().to_vec()]
    } else {
        vec![b"EVAL".to_vec(), script.source.as_bytes().to_vec()]
    };
    args.push(keys.len().to_string().into_bytes());
    args.extend(keys.iter().map(|k| k.to_vec()));
    args.extend(argv.iter().cloned());
    args
}

fn random_command(r: &mut SimRng) -> Vec<Vec<u8>> {
    let resources: [&[u8]; 2] = [b"res", b"r\r\n\0x"];
    let res = resources[r.range(0, 1) as usize];
    let counter: Vec<u8> = [res, b":fence"].concat();
    let tokens: [&[u8]; 3] = [
        b"tok-a",
        b"tok-b",
        b"0123456789abcdef0123456789abcdef01234567",
    ];
    let token = tokens[r.range(0, 2) as usize].to_vec();
    // Large ttls: nothing expires during the test, so timing cannot differ.
    let ttl = (r.range(600, 900) * 1_000).to_string().into_bytes();
    match r.range(0, 6) {
        0 => vec![
            b"SET".to_vec(),
            res.to_vec(),
            token,
            b"NX".to_vec(),
            b"PX".to_vec(),
            ttl,
        ],
        1 => script_call(r, &RELEASE, &[res], &[token]),
        2 => script_call(r, &EXTEND, &[res], &[token, ttl]),
        3 => script_call(r, &FENCED_ACQUIRE, &[res, &counter], &[token, ttl]),
        4 => {
            let t = r.range(0, 30).to_string().into_bytes();
            script_call(r, &FENCE_WRITE, &[res, &counter], &[token, t])
        }
        5 => vec![b"DEL".to_vec(), res.to_vec()],
        _ => script_call(r, &INSPECT, &[res], &[]),
    }
}

/// PTTL values differ by a few ms between the two: compare them coarsely.
fn normalise(reply: &[u8], is_inspect: bool) -> Vec<u8> {
    if !is_inspect {
        return reply.to_vec();
    }
    let text = String::from_utf8_lossy(reply);
    match text.rfind(":") {
        Some(i) => {
            let pttl: i64 = text[i + 1..].trim_end().parse().unwrap();
            let coarse = if pttl > 0 {
                "positive".to_string()
            } else {
                pttl.to_string()
            };
            format!("{}{coarse}", &text[..i]).into_bytes()
        }
        None => reply.to_vec(),
    }
}

#[test]
fn the_simulated_server_answers_like_redis() {
    let real = RedisServer::start().unwrap();
    let mut conn = real.conn().unwrap();
    for seed in 0..20u64 {
        conn.request(&[b"FLUSHALL"]).unwrap();
        conn.request(&[b"SCRIPT", b"FLUSH"]).unwrap();
        let mut sim = Server::new_for_test();
        let mut r = SimRng::new(seed);
        for step in 0..200 {
            let args = random_command(&mut r);
            let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            conn.request(&refs).unwrap();
            let from_redis = conn.last_raw().to_vec();
            let from_sim = sim.execute(&args, 1_000_000 + step);
            let inspect = args
                .iter()
                .any(|a| a == INSPECT.sha1.as_bytes() || a == INSPECT.source.as_bytes());
            assert_eq!(
                String::from_utf8_lossy(&normalise(&from_sim, inspect)),
                String::from_utf8_lossy(&normalise(&from_redis, inspect)),
                "seed {seed} step {step}: {:?}",
                refs.iter()
                    .map(|a| String::from_utf8_lossy(a))
                    .collect::<Vec<_>>()
            );
        }
    }
}
