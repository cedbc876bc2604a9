//! A request's bytes: the script form (`EVALSHA` / `EVAL`, and `SET NX
//! PX`) and the native form (SPEC N1).

use redlock_resp::script::Script;
use redlock_resp::{Command, EncodeError};

use super::{FENCE_SUFFIX, Request, Subject};

/// The native form of `request` (see [`Commands`](crate::handshake::Commands)):
/// its bytes, and how many replies the server sends for them. `base` is the
/// counter the server reported in the fenced acquire (for `INCRBY`).
pub(super) fn encode_native(
    request: Request,
    base: i64,
    s: &Subject<'_>,
    buf: &mut [u8],
) -> Result<(usize, u8), EncodeError> {
    // A `MULTI` block: `MULTI`, two commands, `EXEC` (one write, so that
    // nothing of another request comes between them on the connection).
    let block = |buf: &mut [u8],
                 first: &dyn Fn(&mut [u8]) -> Result<usize, EncodeError>,
                 second: &dyn Fn(&mut [u8]) -> Result<usize, EncodeError>| {
        let mut at = redlock_resp::command(buf, &[b"MULTI"])?;
        at = at.saturating_add(first(buf.get_mut(at..).unwrap_or_default())?);
        at = at.saturating_add(second(buf.get_mut(at..).unwrap_or_default())?);
        at = at.saturating_add(redlock_resp::command(
            buf.get_mut(at..).unwrap_or_default(),
            &[b"EXEC"],
        )?);
        Ok((at, 4))
    };
    match request {
        // R3: deletes the key only if it holds the token; 1 or 0.
        Request::Release => Ok((
            redlock_resp::command(buf, &[b"DELIFEQ", s.resource, s.token])?,
            1,
        )),
        // R4: a new expiry only if the key holds the token (a missing key
        // is not created); `+OK` or nil.
        Request::Extend(ttl) => {
            let mut cmd = Command::new(buf, 7);
            cmd.arg(b"SET")
                .arg(s.resource)
                .arg(s.token)
                .arg(b"IFEQ")
                .arg(s.token)
                .arg(b"PX")
                .arg_uint(ttl.0);
            Ok((cmd.finish()?, 1))
        }
        // F3: value and remaining time at one instant.
        Request::Inspect => block(
            buf,
            &|b| redlock_resp::command(b, &[b"GET", s.resource]),
            &|b| redlock_resp::command(b, &[b"PTTL", s.resource]),
        ),
        // F1, first step: the vote and the counter at one instant, as the
        // script's `{set, counter}`.
        Request::FencedSet(ttl) if cfg!(feature = "fencing") => block(
            buf,
            &|b| {
                let mut cmd = Command::new(b, 6);
                cmd.arg(b"SET")
                    .arg(s.resource)
                    .arg(s.token)
                    .arg(b"NX")
                    .arg(b"PX")
                    .arg_uint(ttl.0);
                cmd.finish()
            },
            &|b| get_counter(s, b),
        ),
        // F1, second step: the counter raised by what takes it from the
        // value this server reported to the fence (SPEC F1: counters only
        // rise, so it ends at the fence or above).
        Request::FenceWrite(fence) if cfg!(feature = "fencing") => {
            Ok((raise_counter(s, base, fence.0, buf)?, 1))
        }
        // F1 repair, first step: the counter (raised in a second step
        // where it is below the floor: `FenceTopUp`).
        Request::FenceRaise(_) => Ok((get_counter(s, buf)?, 1)),
        Request::FenceTopUp(floor) => Ok((raise_counter(s, base, floor.0, buf)?, 1)),
        // `SET NX PX` has one form (and a build without fencing never
        // sends the fenced requests).
        Request::Set(_) | Request::FencedSet(_) | Request::FenceWrite(_) => {
            encode(request, None, false, s, buf).map(|len| (len, 1))
        }
    }
}

/// `GET counter`.
fn get_counter(s: &Subject<'_>, buf: &mut [u8]) -> Result<usize, EncodeError> {
    let mut cmd = Command::new(buf, 2);
    cmd.arg(b"GET").arg_parts(&[s.resource, FENCE_SUFFIX]);
    cmd.finish()
}

/// `INCRBY counter (to - from)`, `from` the counter read earlier: counters
/// only rise (SPEC F1), so it ends at `to` or above.
fn raise_counter(
    s: &Subject<'_>,
    from: i64,
    to: u64,
    buf: &mut [u8],
) -> Result<usize, EncodeError> {
    let from = u64::try_from(from).unwrap_or(0);
    let mut cmd = Command::new(buf, 3);
    cmd.arg(b"INCRBY")
        .arg_parts(&[s.resource, FENCE_SUFFIX])
        .arg_uint(to.saturating_sub(from));
    cmd.finish()
}

pub(super) fn encode(
    request: Request,
    script: Option<&'static Script>,
    eval: bool,
    s: &Subject<'_>,
    buf: &mut [u8],
) -> Result<usize, EncodeError> {
    #[cfg(feature = "mutants")]
    if s.bare_del_release && request == Request::Release {
        return redlock_resp::command(buf, &[b"DEL", s.resource]);
    }
    // Every request is `name body [numkeys] [resource] [fence key] [token]
    // [NX PX] [number]`: one copy of the encoding code for all of them.
    let (name, body) = match script {
        // R1: `SET resource token NX PX ttl`.
        None => (&b"SET"[..], s.resource),
        // FENCE_RAISE is never loaded: always EVAL.
        Some(script) if eval || matches!(request, Request::FenceRaise(_)) => {
            (&b"EVAL"[..], script.source.as_bytes())
        }
        Some(script) => (&b"EVALSHA"[..], script.sha1.as_bytes()),
    };
    // Which of the optional arguments the request has, and how many
    // arguments that makes in all.
    let (layout, argc) = match request {
        // The resource is the body of `SET`.
        Request::Set(_) => (TOKEN | NX_PX | NUMBER, 6),
        Request::FencedSet(_) | Request::FenceWrite(_) => {
            (NUMKEYS | KEY | FENCE_KEY | TOKEN | NUMBER, 7)
        }
        Request::Extend(_) => (NUMKEYS | KEY | TOKEN | NUMBER, 6),
        Request::Release => (NUMKEYS | KEY | TOKEN, 5),
        // The counter key is the only key.
        Request::FenceRaise(_) | Request::FenceTopUp(_) => (NUMKEYS | FENCE_KEY | NUMBER, 5),
        Request::Inspect => (NUMKEYS | KEY, 4),
    };
    let number = match request {
        Request::Set(n)
        | Request::FencedSet(n)
        | Request::FenceWrite(n)
        | Request::Extend(n)
        | Request::FenceRaise(n)
        | Request::FenceTopUp(n) => n.0,
        Request::Release | Request::Inspect => 0,
    };
    let has = |part: u8| layout & part != 0;
    let mut cmd = Command::new(buf, argc);
    cmd.arg(name).arg(body);
    if has(NUMKEYS) {
        cmd.arg(if has(KEY) && has(FENCE_KEY) {
            b"2"
        } else {
            b"1"
        });
    }
    if has(KEY) {
        cmd.arg(s.resource);
    }
    if has(FENCE_KEY) {
        cmd.arg_parts(&[s.resource, FENCE_SUFFIX]);
    }
    if has(TOKEN) {
        cmd.arg(s.token);
    }
    if has(NX_PX) {
        cmd.arg(b"NX").arg(b"PX");
    }
    if has(NUMBER) {
        cmd.arg_uint(number);
    }
    cmd.finish()
}

// The optional arguments of a request (see `encode`).
/// `numkeys` (scripts).
const NUMKEYS: u8 = 1;
/// The resource key.
const KEY: u8 = 2;
/// The fence counter key.
const FENCE_KEY: u8 = 4;
/// The token.
const TOKEN: u8 = 8;
/// `NX PX` (`SET`).
const NX_PX: u8 = 16;
/// The number (a ttl, a fence).
const NUMBER: u8 = 32;
