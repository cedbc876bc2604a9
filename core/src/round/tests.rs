//! The engine's unit tests: rounds, stragglers, encodings, fallbacks.
#![allow(clippy::indexing_slicing)]
use super::*;

/// The bytes of a command made of `args`, by the generic encoder.
fn command(args: &[&[u8]]) -> heapless::Vec<u8, 1024> {
    let mut buf = [0u8; 1024];
    let n = redlock_resp::command(&mut buf, args).unwrap();
    heapless::Vec::from_slice(&buf[..n]).unwrap()
}

/// Sends every pending request of the round; returns the servers.
fn send_all(e: &mut Engine, s: &Subject<'_>) -> heapless::Vec<u8, 9> {
    let mut buf = [0u8; 1024];
    let mut sent = heapless::Vec::new();
    while let Some(t) = e.poll_transmit(Instant::ZERO, s, &mut buf).unwrap() {
        sent.push(t.server.0).unwrap();
    }
    sent
}

#[cfg(feature = "native")]
/// The bytes and reply count of the next request of `e`.
fn next(e: &mut Engine, s: &Subject<'_>) -> (heapless::Vec<u8, 1024>, u8) {
    let mut buf = [0u8; 1024];
    let t = e
        .poll_transmit(Instant::ZERO, s, &mut buf)
        .unwrap()
        .unwrap();
    (heapless::Vec::from_slice(&buf[..t.len]).unwrap(), t.replies)
}

#[cfg(all(feature = "native", feature = "fencing"))]
/// [`next`], its request then answered with nil (so that the next
/// round has room).
fn next_answered(e: &mut Engine, s: &Subject<'_>) -> (heapless::Vec<u8, 1024>, u8) {
    let sent = next(e, s);
    e.handle_reply(ServerId(0), &Reply::Nil).unwrap();
    sent
}

#[cfg(feature = "native")]
fn dialect_engine(d: crate::handshake::Dialect) -> Engine {
    let mut servers = Servers::new(1).unwrap();
    servers.set_dialect(ServerId(0), d);
    Engine::for_servers(&servers, Duration::from_millis(10))
}

#[test]
#[cfg(all(feature = "native", feature = "fencing"))]
fn native_requests_are_encoded_as_documented() {
    use crate::handshake::Dialect;
    let s = Subject {
        resource: b"res",
        token: b"tok",
        #[cfg(feature = "mutants")]
        bare_del_release: false,
    };
    let concat = |parts: &[&[&[u8]]]| {
        let mut all = heapless::Vec::<u8, 1024>::new();
        for p in parts {
            all.extend_from_slice(&command(p)).unwrap();
        }
        all
    };
    let mut e = dialect_engine(Dialect::Native);
    e.start_round(Request::Release);
    assert_eq!(
        next_answered(&mut e, &s),
        (command(&[b"DELIFEQ", b"res", b"tok"]), 1)
    );
    e.start_round(Request::Extend(U64(2_000)));
    assert_eq!(
        next_answered(&mut e, &s),
        (
            command(&[b"SET", b"res", b"tok", b"IFEQ", b"tok", b"PX", b"2000"]),
            1
        )
    );
    e.start_round(Request::Inspect);
    let want = concat(&[
        &[b"MULTI"],
        &[b"GET", b"res"],
        &[b"PTTL", b"res"],
        &[b"EXEC"],
    ]);
    assert_eq!(next_answered(&mut e, &s), (want, 4));
    e.start_round(Request::FencedSet(U64(30)));
    let want = concat(&[
        &[b"MULTI"],
        &[b"SET", b"res", b"tok", b"NX", b"PX", b"30"],
        &[b"GET", b"res:fence"],
        &[b"EXEC"],
    ]);
    assert_eq!(next_answered(&mut e, &s), (want, 4));
    // The vote counted with counter 5: the fence 9 adds 4.
    e.settle(ServerId(0), ServerOutcome::Ok, 5);
    e.start_round(Request::FenceWrite(U64(9)));
    assert_eq!(
        next_answered(&mut e, &s),
        (command(&[b"INCRBY", b"res:fence", b"4"]), 1)
    );
    // A server whose vote did not count gets no fence write.
    e.start_round(Request::FencedSet(U64(30)));
    let _ = next_answered(&mut e, &s);
    e.settle(ServerId(0), ServerOutcome::Held, 5);
    e.start_round(Request::FenceWrite(U64(9)));
    assert!(
        e.poll_transmit(Instant::ZERO, &s, &mut [0u8; 64])
            .unwrap()
            .is_none()
    );
    assert_eq!(e.report().get(ServerId(0)), Some(ServerOutcome::Held));
    // The operator's repair: `GET`, then `INCRBY` by what the floor
    // lacks where the counter was below it.
    e.start_round(Request::FenceRaise(U64(100)));
    assert_eq!(
        next_answered(&mut e, &s),
        (command(&[b"GET", b"res:fence"]), 1)
    );
    e.settle(ServerId(0), ServerOutcome::Pending, 40);
    e.start_round(Request::FenceTopUp(U64(100)));
    assert_eq!(
        next_answered(&mut e, &s),
        (command(&[b"INCRBY", b"res:fence", b"60"]), 1)
    );
    // `SET NX PX` has one form.
    e.start_round(Request::Set(U64(7)));
    assert_eq!(
        next_answered(&mut e, &s),
        (command(&[b"SET", b"res", b"tok", b"NX", b"PX", b"7"]), 1)
    );
}

#[test]
#[cfg(all(feature = "native", feature = "scripts"))]
fn auto_falls_back_to_the_script_on_a_plain_err_and_native_does_not() {
    use crate::handshake::Dialect;
    let s = Subject {
        resource: b"res",
        token: b"tok",
        #[cfg(feature = "mutants")]
        bare_del_release: false,
    };
    let unknown = Reply::Error(redlock_resp::ServerError::new(
        b"ERR unknown command 'DELIFEQ'",
    ));
    let mut e = dialect_engine(Dialect::NativeOrScripts);
    e.start_round(Request::Release);
    let (first, _) = next(&mut e, &s);
    assert!(first.starts_with(b"*3\r\n$7\r\nDELIFEQ"));
    assert_eq!(
        e.handle_reply(ServerId(0), &unknown),
        Ok(Disposition::Ignored)
    );
    let (again, replies) = next(&mut e, &s);
    assert!(again.windows(7).any(|w| w == b"EVALSHA"), "{again:?}");
    assert_eq!(replies, 1);
    assert_eq!(
        e.handle_flag_reply(ServerId(0), &Reply::Integer(1)),
        Ok(true)
    );
    assert_eq!(e.report().get(ServerId(0)), Some(ServerOutcome::Ok));
    // Not known yet: the script first; refused for want of permission,
    // the native form, kept for the operation's later rounds, and no
    // second fallback.
    let mut e = dialect_engine(Dialect::ScriptsOrNative);
    e.start_round(Request::Release);
    let (first, _) = next(&mut e, &s);
    assert!(first.windows(7).any(|w| w == b"EVALSHA"), "{first:?}");
    let noperm = Reply::Error(redlock_resp::ServerError::new(b"NOPERM no scripts"));
    assert_eq!(
        e.handle_reply(ServerId(0), &noperm),
        Ok(Disposition::Ignored)
    );
    assert_eq!(
        next(&mut e, &s),
        (command(&[b"DELIFEQ", b"res", b"tok"]), 1)
    );
    e.handle_flag_reply(ServerId(0), &Reply::Integer(1))
        .unwrap();
    e.start_round(Request::Extend(U64(5)));
    let (later, _) = next(&mut e, &s);
    assert!(later.starts_with(b"*7\r\n$3\r\nSET"), "{later:?}");
    assert_eq!(e.handle_flag_reply(ServerId(0), &unknown), Ok(true));
    assert!(!e.has_unsent(), "one fallback per server and operation");
    // Native only: the error is the answer.
    let mut e = dialect_engine(Dialect::Native);
    e.start_round(Request::Release);
    let _ = next(&mut e, &s);
    assert_eq!(e.handle_flag_reply(ServerId(0), &unknown), Ok(true));
    assert_eq!(
        e.report().get(ServerId(0)),
        Some(ServerOutcome::ServerError(ErrorKind::Err))
    );
    assert!(!e.has_unsent());
    // A `NOPERM` is not a missing command: no fallback either.
    let mut e = dialect_engine(Dialect::NativeOrScripts);
    e.start_round(Request::Extend(U64(5)));
    let _ = next(&mut e, &s);
    let denied = Reply::Error(redlock_resp::ServerError::new(b"NOPERM no"));
    assert_eq!(e.handle_flag_reply(ServerId(0), &denied), Ok(true));
    assert!(!e.has_unsent());
    // Extend's native answers: `+OK`, or nil where the key is not ours.
    for (reply, want) in [
        (Reply::Simple(b"OK"), ServerOutcome::Ok),
        (Reply::Nil, ServerOutcome::NotHeld),
        (Reply::Integer(1), ServerOutcome::UnexpectedReply),
    ] {
        let mut e = dialect_engine(Dialect::Native);
        e.start_round(Request::Extend(U64(5)));
        let _ = next(&mut e, &s);
        e.handle_flag_reply(ServerId(0), &reply).unwrap();
        assert_eq!(e.report().get(ServerId(0)), Some(want), "{reply:?}");
    }
}

/// A build with `native` and without `scripts`: every request is
/// native whatever the servers' dialect says, and no script is linked.
#[test]
#[cfg(all(feature = "native", not(feature = "scripts")))]
fn a_build_without_scripts_sends_native_commands_only() {
    use crate::handshake::{Commands, Dialect};
    assert!(crate::handshake::SCRIPTS.is_empty());
    for mode in [Commands::Auto, Commands::Scripts, Commands::Native] {
        assert_eq!(mode.dialect(Some(false)), Dialect::Native);
    }
    let s = Subject {
        resource: b"res",
        token: b"tok",
        #[cfg(feature = "mutants")]
        bare_del_release: false,
    };
    let mut e = dialect_engine(Dialect::Scripts);
    e.start_round_eval(Request::Release);
    assert_eq!(
        next(&mut e, &s),
        (command(&[b"DELIFEQ", b"res", b"tok"]), 1)
    );
}

#[test]
fn replies_to_earlier_rounds_are_stragglers() {
    let s = Subject {
        resource: b"res",
        token: b"tok",
        #[cfg(feature = "mutants")]
        bare_del_release: false,
    };
    let ok = Reply::Integer(1);
    let mut e = Engine::new(2, Duration::from_millis(10));
    // Nothing in flight: a reply is unsolicited.
    assert_eq!(e.handle_reply(ServerId(0), &ok), Err(Unsolicited));
    e.start_round(Request::Extend(U64(10)));
    assert_eq!(&send_all(&mut e, &s)[..], &[0, 1]);
    // Round 2 before server 0 answered round 1; server 1 answered.
    assert_eq!(e.handle_reply(ServerId(1), &ok), Ok(Disposition::Current));
    e.start_round(Request::Release);
    assert_eq!(&send_all(&mut e, &s)[..], &[0, 1]);
    e.start_round(Request::Extend(U64(10)));
    assert_eq!(&send_all(&mut e, &s)[..], &[0, 1]);
    // Server 0: two stragglers (rounds 1 and 2), then round 3.
    assert_eq!(e.handle_reply(ServerId(0), &ok), Ok(Disposition::Ignored));
    assert_eq!(e.handle_reply(ServerId(0), &ok), Ok(Disposition::Ignored));
    assert_eq!(e.handle_reply(ServerId(0), &ok), Ok(Disposition::Current));
    assert_eq!(e.handle_reply(ServerId(0), &ok), Err(Unsolicited));
    // Server 1: one straggler (round 2), then round 3.
    assert_eq!(e.handle_reply(ServerId(1), &ok), Ok(Disposition::Ignored));
    assert_eq!(e.handle_reply(ServerId(1), &ok), Ok(Disposition::Current));
    // A settled server ignores a second answer to the same round.
    e.start_round(Request::Release);
    assert_eq!(&send_all(&mut e, &s)[..], &[0, 1]);
    e.settle(ServerId(1), ServerOutcome::Ok, 0);
    assert_eq!(e.handle_reply(ServerId(1), &ok), Ok(Disposition::Ignored));
    // A connection error forgets what was in flight.
    e.server_unusable(ServerId(0), ServerOutcome::ConnectionError);
    assert_eq!(e.handle_reply(ServerId(0), &ok), Err(Unsolicited));
}

#[test]
fn a_server_that_does_not_answer_is_given_up_on() {
    let s = Subject {
        resource: b"res",
        token: b"tok",
        #[cfg(feature = "mutants")]
        bare_del_release: false,
    };
    let mut e = Engine::new(1, Duration::from_millis(10));
    // Ordinary rounds stop at half the room, one request per round.
    for _ in 0..IN_FLIGHT / 2 {
        e.start_round(Request::Extend(U64(10)));
        assert_eq!(&send_all(&mut e, &s)[..], &[0]);
    }
    e.start_round(Request::Extend(U64(10)));
    assert!(send_all(&mut e, &s).is_empty());
    assert_eq!(e.report().get(ServerId(0)), Some(ServerOutcome::TimedOut));
    // Releases use the rest of the room.
    for _ in 0..IN_FLIGHT / 2 {
        e.start_round_eval(Request::Release);
        assert_eq!(&send_all(&mut e, &s)[..], &[0]);
    }
    e.start_round_eval(Request::Release);
    assert!(send_all(&mut e, &s).is_empty());
}

#[test]
#[cfg(any(feature = "scripts", not(feature = "native")))]
fn every_request_is_encoded_as_documented() {
    let s = Subject {
        resource: b"res",
        token: b"tok",
        #[cfg(feature = "mutants")]
        bare_del_release: false,
    };
    let fence_key: &[u8] = b"res:fence";
    // (request, the arguments after `numkeys`)
    let scripted: [(Request, &[&[u8]]); 6] = [
        (
            Request::FencedSet(U64(30)),
            &[b"res", fence_key, b"tok", b"30"],
        ),
        (
            Request::FenceWrite(U64(7)),
            &[b"res", fence_key, b"tok", b"7"],
        ),
        (Request::Release, &[b"res", b"tok"]),
        (Request::Extend(U64(1_000)), &[b"res", b"tok", b"1000"]),
        (Request::Inspect, &[b"res"]),
        (Request::FenceRaise(U64(41)), &[fence_key, b"41"]),
    ];
    let mut buf = [0u8; 1024];
    for (request, rest) in scripted {
        let script = request.script().unwrap();
        let keys = match request {
            Request::FencedSet(_) | Request::FenceWrite(_) => "2",
            _ => "1",
        };
        for eval in [false, true] {
            let n = encode(request, Some(script), eval, &s, &mut buf).unwrap();
            let always_eval = matches!(request, Request::FenceRaise(_));
            let (name, body): (&[u8], &[u8]) = if eval || always_eval {
                (b"EVAL", script.source.as_bytes())
            } else {
                (b"EVALSHA", script.sha1.as_bytes())
            };
            let mut args: heapless::Vec<&[u8], 8> = heapless::Vec::new();
            args.extend_from_slice(&[name, body, keys.as_bytes()])
                .unwrap();
            args.extend_from_slice(rest).unwrap();
            assert_eq!(&buf[..n], &command(&args)[..], "{request:?} eval {eval}");
        }
    }
    let set = Request::Set(U64(10_000));
    assert_eq!(set.script(), None);
    let n = encode(set, None, false, &s, &mut buf).unwrap();
    let want = command(&[b"SET", b"res", b"tok", b"NX", b"PX", b"10000"]);
    assert_eq!(&buf[..n], &want[..]);
}
