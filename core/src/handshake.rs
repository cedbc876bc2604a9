//! The connection handshake, judged fail-closed, and what counts as one server.
//!
//! A platform opens a connection and sends, before any lock command, the
//! handshake [`steps`]: `AUTH` (with a password), `SELECT` (for a database
//! other than 0), `SCRIPT LOAD` of every script in [`SCRIPTS`], and
//! `INFO server` (the restart guard reads the server's uptime from it). Each
//! reply is given to [`judge`]. The rule is *fail closed*: a connection whose
//! handshake got any error reply (to `AUTH`, `SELECT`, `SCRIPT LOAD`, or to
//! `INFO` while the restart guard needs it) is never used for lock commands,
//! so the platform must hold the operations' requests until every handshake
//! reply has been judged. Pipelining them behind the handshake would let a
//! `SET` run in database 0 after a `SELECT` failed, or as the wrong user
//! after an `AUTH` failed.
//!
//! The server then counts as unavailable for the operations that wanted it:
//! the platform tells them with `handle_setup_error`, and their report shows
//! [`ServerOutcome::Setup`](crate::ServerOutcome::Setup) with the step and the
//! server's error kind. The platform retries the connection with backoff, as
//! after a connection error.

use redlock_resp::{ErrorKind, Reply, Script, script};

use crate::report::ServerId;
use crate::{Duration, Instant};

/// A step of the connection handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Step {
    /// `AUTH [user] password`.
    Auth,
    /// `SELECT db`.
    Select,
    /// `SCRIPT LOAD` of one of the scripts.
    ScriptLoad,
    /// `INFO server`, read for the restart guard (and the server's identity).
    Info,
}

impl Step {
    /// The command, as a user would name it (`"SELECT"`).
    pub fn command(self) -> &'static str {
        match self {
            Step::Auth => "AUTH",
            Step::Select => "SELECT",
            Step::ScriptLoad => "SCRIPT LOAD",
            Step::Info => "INFO",
        }
    }
}

/// Why a server cannot be used: its handshake failed, or it is a server
/// already in the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum SetupError {
    /// The server answered a handshake step with an error (`WRONGPASS`,
    /// `NOPERM`, `ERR DB index is out of range`, ...).
    Refused {
        /// The step that failed.
        step: Step,
        /// The server's error, by kind (the platform keeps its text).
        kind: ErrorKind,
    },
    /// A handshake reply of the wrong shape (not `+OK` to `AUTH`, ...).
    Unexpected {
        /// The step that got it.
        step: Step,
    },
    /// The restart guard is on and `INFO` has no `uptime_in_seconds`: the
    /// server's restart time cannot be known, so its votes would not count.
    NoUptime,
    /// This entry is the same server as an earlier one (the same address
    /// and port, or the same `run_id`): one process must not vote twice.
    SameServer(ServerId),
    /// The secure channel (TLS) to the server failed: an untrusted or
    /// expired certificate, a name mismatch, an alert from the server, a
    /// peer that does not speak TLS. The platform keeps the details. Fail
    /// closed: the server is not used until a later connection passes.
    Tls,
}

impl core::fmt::Display for SetupError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SetupError::Refused {
                step: Step::Info,
                kind,
            } => write!(f, "restart time unknown: INFO denied ({})", kind.as_str()),
            SetupError::Refused { step, kind } => {
                write!(f, "{} failed ({})", step.command(), kind.as_str())
            }
            SetupError::Unexpected { step } => {
                write!(f, "unexpected reply to {}", step.command())
            }
            SetupError::NoUptime => {
                f.write_str("restart time unknown: INFO has no uptime_in_seconds")
            }
            SetupError::SameServer(first) => {
                write!(f, "the same server as entry {}", first.0)
            }
            SetupError::Tls => f.write_str("TLS failed"),
        }
    }
}

impl core::error::Error for SetupError {}

/// The scripts a handshake loads (`SCRIPT LOAD`), so that `EVALSHA` finds
/// them: every script of [`redlock_resp::script::ALL`] with the `fencing`
/// feature; without it, those of a lock client that does not fence
/// (release, extend, inspect), so that a firmware does not carry the fenced
/// scripts' sources.
pub const SCRIPTS: &[Script] = if cfg!(feature = "fencing") {
    &script::ALL
} else {
    &[script::RELEASE, script::EXTEND, script::INSPECT]
};

/// What the handshake of one connection sends, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Plan {
    /// Send `AUTH` (a password is configured).
    pub auth: bool,
    /// Send `SELECT` (a database other than 0).
    pub select: bool,
    /// An error to `INFO`, or an `INFO` without `uptime_in_seconds`, fails
    /// the handshake (the restart guard is on).
    pub info_required: bool,
}

/// The steps of `plan`, in the order they are sent: `AUTH`, `SELECT`, one
/// `SCRIPT LOAD` per script of [`SCRIPTS`], `INFO server`.
pub fn steps(plan: Plan) -> impl Iterator<Item = Step> {
    (0..step_count(plan)).filter_map(move |k| step(plan, k))
}

/// How many steps `plan` has.
pub fn step_count(plan: Plan) -> usize {
    usize::from(plan.auth)
        .saturating_add(usize::from(plan.select))
        .saturating_add(SCRIPTS.len())
        .saturating_add(1)
}

/// Step number `k` of `plan` (in the order of [`steps`]), and for a
/// `SCRIPT LOAD` the script it loads; `None` past the last step. For a
/// platform that writes the handshake a step at a time.
pub fn step(plan: Plan, k: usize) -> Option<Step> {
    step_and_script(plan, k).map(|(step, _)| step)
}

/// [`step`], with the script a `SCRIPT LOAD` step loads.
pub fn step_and_script(plan: Plan, k: usize) -> Option<(Step, Option<&'static Script>)> {
    let mut k = k;
    for (on, step) in [(plan.auth, Step::Auth), (plan.select, Step::Select)] {
        if on {
            if k == 0 {
                return Some((step, None));
            }
            k = k.saturating_sub(1);
        }
    }
    let scripts = SCRIPTS;
    match scripts.get(k) {
        Some(script) => Some((Step::ScriptLoad, Some(script))),
        None if k == scripts.len() => Some((Step::Info, None)),
        None => None,
    }
}

/// What `INFO server` told about the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ServerInfo<'a> {
    /// `uptime_in_seconds`.
    pub uptime_secs: Option<u64>,
    /// `run_id`: unique per server process.
    pub run_id: Option<&'a [u8]>,
}

impl<'a> ServerInfo<'a> {
    /// When the server's current incarnation began, read at `now` (C2),
    /// failing closed: `uptime_in_seconds` is a difference of two clock
    /// readings in whole seconds (`now` and the start, each truncated), so
    /// it can say 3 of a server up for just over 2 s. The server is taken
    /// to be as young as it can be: a second less than it says.
    pub fn started(&self, now: Instant) -> Option<Instant> {
        let uptime = self.uptime_secs?;
        Some(now.saturating_sub(Duration::from_secs(uptime.saturating_sub(1))))
    }

    /// Reads the fields of the text of `INFO server` (lines `name:value`).
    pub fn parse(text: &'a [u8]) -> ServerInfo<'a> {
        let mut info = ServerInfo::default();
        for line in text.split(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if let Some(v) = line.strip_prefix(b"uptime_in_seconds:") {
                info.uptime_secs = parse_u64(v);
            } else if let Some(v) = line.strip_prefix(b"run_id:") {
                if !v.is_empty() {
                    info.run_id = Some(v);
                }
            }
        }
        info
    }
}

/// 1 to 19 decimal digits, nothing else (19 digits never overflow `u64`:
/// 10^19 - 1 < 2^64, so the arithmetic below cannot wrap).
pub(crate) fn parse_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    let mut n = 0u64;
    for &d in digits {
        let digit = d.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        n = n.wrapping_mul(10).wrapping_add(u64::from(digit));
    }
    Some(n)
}

/// What a handshake reply means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// The step succeeded; go on.
    Ok,
    /// `INFO` answered (or, with the guard off, failed harmlessly): what it
    /// told, empty if nothing.
    Info(ServerInfo<'a>),
}

/// C1: judges the reply to one handshake step (fail closed): any error reply is
/// a [`SetupError`], except to `INFO` while the restart guard is off (then
/// nothing needs it).
pub fn judge<'a>(step: Step, reply: &Reply<'a>, plan: Plan) -> Result<Verdict<'a>, SetupError> {
    if let Reply::Error(e) = reply {
        if step == Step::Info && !plan.info_required {
            return Ok(Verdict::Info(ServerInfo::default()));
        }
        return Err(SetupError::Refused {
            step,
            kind: e.kind(),
        });
    }
    match step {
        Step::Auth | Step::Select if reply.is_ok() => Ok(Verdict::Ok),
        Step::ScriptLoad if matches!(reply, Reply::Bulk(_)) => Ok(Verdict::Ok),
        Step::Info => {
            let info = reply.as_bytes().map(ServerInfo::parse).unwrap_or_default();
            if plan.info_required && info.uptime_secs.is_none() {
                return Err(SetupError::NoUptime);
            }
            Ok(Verdict::Info(info))
        }
        step => Err(SetupError::Unexpected { step }),
    }
}

/// C3: the first pair of entries that are the same server, given each entry's
/// identities (its resolved addresses with port, or its `run_id`): two
/// entries sharing any identity are one server, whatever their database or
/// credentials. One server with several databases is not several masters:
/// it would give one process several votes.
pub fn same_server<I: PartialEq>(identities: &[&[I]]) -> Option<(ServerId, ServerId)> {
    for (j, later) in identities.iter().enumerate() {
        for (i, earlier) in identities.iter().enumerate().take(j) {
            if later.iter().any(|id| earlier.contains(id)) {
                return Some((ServerId(i as u8), ServerId(j as u8)));
            }
        }
    }
    None
}

/// Another entry that is the same server as entry `entry` (shares one of
/// its identities), if any: the lowest such entry.
pub fn twin_of<I: PartialEq>(identities: &[&[I]], entry: usize) -> Option<ServerId> {
    let mine = identities.get(entry)?;
    identities
        .iter()
        .enumerate()
        .filter(|&(k, _)| k != entry)
        .find(|(_, theirs)| mine.iter().any(|id| theirs.contains(id)))
        .map(|(k, _)| ServerId(k as u8))
}

/// [`twin_of`] for one identity per entry (a `run_id`, empty when not known):
/// the lowest entry other than `entry` whose identity is `mine`. An empty
/// identity matches nothing.
pub fn twin_by_id<'a, I>(identities: I, entry: usize, mine: &[u8]) -> Option<ServerId>
where
    I: IntoIterator<Item = &'a [u8]>,
{
    if mine.is_empty() {
        return None;
    }
    identities
        .into_iter()
        .enumerate()
        .find(|&(k, theirs)| k != entry && theirs == mine)
        .map(|(k, _)| ServerId(k as u8))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::indexing_slicing)]
    use super::*;
    use redlock_resp::ServerError;

    const GUARD: Plan = Plan {
        auth: true,
        select: true,
        info_required: true,
    };
    const NO_GUARD: Plan = Plan {
        info_required: false,
        ..GUARD
    };

    #[test]
    fn every_error_fails_the_handshake() {
        let err = Reply::Error(ServerError::new(b"ERR DB index is out of range"));
        for step in [Step::Auth, Step::Select, Step::ScriptLoad] {
            assert_eq!(
                judge(step, &err, NO_GUARD),
                Err(SetupError::Refused {
                    step,
                    kind: ErrorKind::Err
                })
            );
        }
        let denied = Reply::Error(ServerError::new(b"NOPERM no info for you"));
        assert_eq!(
            judge(Step::Info, &denied, GUARD),
            Err(SetupError::Refused {
                step: Step::Info,
                kind: ErrorKind::NoPerm
            })
        );
        // Without the guard nothing needs INFO.
        assert!(matches!(
            judge(Step::Info, &denied, NO_GUARD),
            Ok(Verdict::Info(_))
        ));
    }

    #[test]
    fn wrong_shapes_fail_the_handshake() {
        assert_eq!(
            judge(Step::Select, &Reply::Simple(b"QUEUED"), NO_GUARD),
            Err(SetupError::Unexpected { step: Step::Select })
        );
        assert_eq!(
            judge(Step::ScriptLoad, &Reply::Integer(1), NO_GUARD),
            Err(SetupError::Unexpected {
                step: Step::ScriptLoad
            })
        );
        assert_eq!(
            judge(Step::Auth, &Reply::Simple(b"OK"), NO_GUARD),
            Ok(Verdict::Ok)
        );
    }

    #[test]
    fn a_server_is_taken_to_be_as_young_as_its_uptime_allows() {
        // Up for just over 2 s can read "uptime_in_seconds:3".
        let now = Instant::from_micros(100_000_000);
        let info = ServerInfo::parse(b"uptime_in_seconds:3\r\n");
        assert_eq!(info.started(now), Some(Instant::from_micros(98_000_000)));
        let info = ServerInfo::parse(b"uptime_in_seconds:0\r\n");
        assert_eq!(info.started(now), Some(now));
        assert_eq!(ServerInfo::parse(b"run_id:x\r\n").started(now), None);
    }

    #[test]
    fn info_without_uptime_fails_only_with_the_guard() {
        let info = Reply::Bulk(b"# Server\r\nredis_version:7.0.0\r\n");
        assert_eq!(judge(Step::Info, &info, GUARD), Err(SetupError::NoUptime));
        assert!(judge(Step::Info, &info, NO_GUARD).is_ok());
        let good = Reply::Bulk(b"# Server\r\nrun_id:abc\r\nuptime_in_seconds:42\r\n");
        assert_eq!(
            judge(Step::Info, &good, GUARD),
            Ok(Verdict::Info(ServerInfo {
                uptime_secs: Some(42),
                run_id: Some(b"abc"),
            }))
        );
        for bad in [
            &b"uptime_in_seconds:-1"[..],
            b"uptime_in_seconds:",
            b"uptime_in_seconds:1x",
        ] {
            assert_eq!(ServerInfo::parse(bad).uptime_secs, None);
        }
    }

    #[test]
    fn parse_u64_takes_1_to_19_digits() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"0042"), Some(42));
        assert_eq!(
            parse_u64(b"9999999999999999999"),
            Some(9_999_999_999_999_999_999)
        );
        assert_eq!(
            parse_u64(b"1844674407370955161"),
            Some(1_844_674_407_370_955_161)
        );
        for bad in [
            &b""[..],
            b"10000000000000000000",
            b"-1",
            b"+1",
            b"1 ",
            b" 1",
            b"1/",
            b"1:",
            b"\xff",
        ] {
            assert_eq!(parse_u64(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_plan_has_every_script() {
        let plan = Plan {
            auth: false,
            select: true,
            info_required: false,
        };
        let all: heapless::Vec<Step, 16> = steps(plan).collect();
        assert_eq!(all[0], Step::Select);
        assert_eq!(all.len(), 2 + SCRIPTS.len());
        assert_eq!(all.last(), Some(&Step::Info));
    }

    #[test]
    fn each_plan_s_steps_one_at_a_time() {
        for (auth, select) in [(false, false), (true, false), (false, true), (true, true)] {
            let plan = Plan {
                auth,
                select,
                info_required: false,
            };
            let loads = core::iter::repeat_n(Step::ScriptLoad, SCRIPTS.len());
            let mut want = [(auth, Step::Auth), (select, Step::Select)]
                .into_iter()
                .filter_map(|(on, step)| on.then_some(step))
                .chain(loads)
                .chain([Step::Info]);
            let n = step_count(plan);
            assert_eq!(n, steps(plan).count());
            let mut loaded = 0;
            for k in 0..n {
                let (this, script) = step_and_script(plan, k).unwrap();
                assert_eq!(Some(this), want.next(), "{plan:?} {k}");
                assert_eq!(step(plan, k), Some(this));
                if this == Step::ScriptLoad {
                    assert_eq!(script, Some(&SCRIPTS[loaded]));
                    loaded += 1;
                } else {
                    assert_eq!(script, None);
                }
            }
            assert_eq!(loaded, SCRIPTS.len());
            assert_eq!(want.next(), None);
            assert_eq!(step_and_script(plan, n), None);
            assert_eq!(step(plan, n + 100), None);
        }
    }

    #[test]
    fn same_server_finds_shared_identities() {
        let a: &[u32] = &[1, 2];
        let b: &[u32] = &[3];
        let c: &[u32] = &[4, 2];
        assert_eq!(same_server(&[a, b]), None);
        assert_eq!(same_server(&[a, b, c]), Some((ServerId(0), ServerId(2))));
        assert_eq!(same_server::<u32>(&[&[], &[]]), None);
        assert_eq!(twin_of(&[a, b, c], 2), Some(ServerId(0)));
        assert_eq!(twin_of(&[a, b, c], 1), None);
        assert_eq!(twin_of(&[a, b, c], 7), None);
        // One identity per entry: the same answers.
        let ids: [&[u8]; 4] = [b"r1", b"r2", b"", b"r1"];
        assert_eq!(twin_by_id(ids, 3, b"r1"), Some(ServerId(0)));
        assert_eq!(twin_by_id(ids, 0, b"r1"), Some(ServerId(3)));
        assert_eq!(twin_by_id(ids, 1, b"r2"), None);
        assert_eq!(twin_by_id(ids, 2, b""), None);
        for entry in 0..4 {
            let mut lists: [&[&[u8]]; 4] = [&[]; 4];
            for (list, id) in lists.iter_mut().zip(ids.iter()) {
                if !id.is_empty() {
                    *list = core::slice::from_ref(id);
                }
            }
            assert_eq!(twin_by_id(ids, entry, ids[entry]), twin_of(&lists, entry));
        }
    }
}
