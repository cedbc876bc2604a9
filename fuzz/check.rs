// The invariant of the `parse_reply` fuzz target. Shared, by `#[path]`, with
// the stable test that replays the saved corpus (tests/tests/fuzz_corpus.rs).
//
// The first input byte picks the limits (default, or tiny ones that make
// every limit reachable); the rest is what a server sent.

use redlock_resp::{Limits, Parser, Reply, Status};

const TINY: Limits = Limits {
    max_bulk_len: 16,
    max_aggregate_len: 4,
    max_depth: 3,
    max_line_len: 24,
    max_frame_len: 96,
};

/// Panics if the parser breaks an invariant on `data`.
pub(crate) fn check(data: &[u8]) {
    let Some((&selector, input)) = data.split_first() else {
        return;
    };
    let parser = Parser::new(if selector & 1 == 0 {
        Limits::DEFAULT
    } else {
        TINY
    });
    match parser.parse(input) {
        Ok(Status::Complete((reply, used))) => {
            assert!(
                used > 0 && used <= input.len(),
                "used {used} of {}",
                input.len()
            );
            assert!(used <= parser.limits().max_frame_len);
            // The frame alone parses to the same reply; trailing bytes did not matter.
            assert_eq!(
                parser.parse(&input[..used]),
                Ok(Status::Complete((reply, used)))
            );
            // A strict prefix is incomplete.
            assert_eq!(parser.parse(&input[..used - 1]), Ok(Status::Incomplete));
            assert_eq!(parser.parse(&input[..used / 2]), Ok(Status::Incomplete));
            walk(reply, 0);
        }
        Ok(Status::Incomplete) => {
            // Never "incomplete" past what a frame may hold: a client would
            // buffer without bound.
            let limits = parser.limits();
            let bound = limits.max_frame_len + limits.max_line_len + 24;
            assert!(
                input.len() <= bound,
                "incomplete after {} bytes",
                input.len()
            );
        }
        Err(_) => {}
    }
}

/// Decodes every nested element, checking the counts.
fn walk(reply: Reply<'_>, depth: usize) {
    assert!(depth <= redlock_resp::MAX_DEPTH_CAP);
    if let Reply::Aggregate(agg) = reply {
        let mut n = 0;
        for element in agg.iter() {
            n += 1;
            walk(element, depth + 1);
        }
        assert_eq!(n, agg.len());
    }
}
