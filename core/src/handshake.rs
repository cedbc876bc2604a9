//! The connection handshake, judged fail-closed, and what counts as one server.
//!
//! A platform opens a connection and sends, before any lock command, the
//! handshake [`steps`]: `AUTH` (with a password), `SELECT` (for a database
//! other than 0), `INFO server` (the restart guard reads the server's uptime
//! from it, and the choice of commands its version), then `SCRIPT LOAD` of
//! every script in [`SCRIPTS`] if the server is to get scripts (see
//! [`Commands`]: a server with the native commands gets none). Each
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

/// Which commands release, extend, fenced acquire and inspect use on a
/// server.
///
/// The scripts (`EVALSHA`) work on every Redis and Valkey with Lua. The
/// native commands need no Lua and no `@scripting` permission: release is
/// `DELIFEQ key token`, extend `SET key token IFEQ token PX ttl`, inspect
/// `MULTI` / `GET` / `PTTL` / `EXEC`, and a fenced acquire `MULTI` / `SET
/// NX PX` / `GET counter` / `EXEC` then `INCRBY counter` (SPEC F1 says why
/// that is as safe as the script). A server has them when its `INFO`
/// reports Valkey 9.0 or later ([`ServerInfo::native`]); `DELEX` (Redis
/// 8.4, Valkey 9.2) is not used, so Redis servers get scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Commands {
    /// Per server, learned again at every handshake: the native commands
    /// where its `INFO` says it has them, else the scripts. A native
    /// command answered with a plain `ERR` (an unknown command, a syntax
    /// error: a server replaced by an older one since) is sent again as a
    /// script.
    #[default]
    Auto,
    /// The scripts everywhere (the behaviour before native commands).
    Scripts,
    /// The native commands only: a server without them is refused at the
    /// handshake ([`SetupError::NoNative`]), and no script is ever sent.
    Native,
}

impl Commands {
    /// `"auto"`, `"scripts"` or `"native"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Commands::Auto => "auto",
            Commands::Scripts => "scripts",
            Commands::Native => "native",
        }
    }

    /// The mode named `name` (as [`as_str`](Commands::as_str) writes it).
    pub fn from_name(name: &str) -> Option<Commands> {
        [Commands::Auto, Commands::Scripts, Commands::Native]
            .into_iter()
            .find(|c| c.as_str() == name)
    }

    /// What a server gets in this mode: `native` is what its handshake
    /// learned (`None`: no handshake passed yet).
    pub fn dialect(self, native: Option<bool>) -> Dialect {
        if !crate::SCRIPTS {
            // Not built in: every mode is native only.
            return Dialect::Native;
        }
        if !crate::NATIVE {
            // Not built in: the scripts (a native-only client refuses every
            // server at the handshake).
            return Dialect::Scripts;
        }
        match (self, native) {
            (Commands::Scripts, _) | (Commands::Auto, Some(false)) => Dialect::Scripts,
            (Commands::Native, _) => Dialect::Native,
            (Commands::Auto, Some(true)) => Dialect::NativeOrScripts,
            // Not known yet (a request made before the server's first
            // handshake passed): the scripts, which every server with Lua
            // runs, and the native form where they are denied.
            (Commands::Auto, None) => Dialect::ScriptsOrNative,
        }
    }
}

/// The commands one server gets from an operation (see [`Commands`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Dialect {
    /// The scripts.
    Scripts,
    /// The native commands.
    Native,
    /// The native commands; a release or an extend answered with a plain
    /// `ERR` is sent again as the script.
    NativeOrScripts,
    /// The scripts; a request refused with `NOPERM` (a user without
    /// `@scripting`) is sent again in its native form. For a server whose
    /// handshake has not passed yet.
    ScriptsOrNative,
}

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
    /// The client sends native commands only ([`Commands::Native`]) and the
    /// server's `INFO` does not report them (Valkey 9.0 or later), or
    /// could not be read.
    NoNative,
    /// The server has no native commands, so it needs the scripts, and
    /// `SCRIPT LOAD` was refused (`NOPERM`: a user without `@scripting`;
    /// a server without Lua).
    ScriptsDenied {
        /// The server's error, by kind.
        kind: ErrorKind,
    },
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
            SetupError::NoNative => f.write_str(
                "no native commands (SET IFEQ, DELIFEQ: Valkey 9.0 or later), and the client uses no scripts",
            ),
            SetupError::ScriptsDenied { kind } => write!(
                f,
                "no native commands (SET IFEQ, DELIFEQ: Valkey 9.0 or later), and scripts denied: SCRIPT LOAD failed ({})",
                kind.as_str()
            ),
        }
    }
}

impl core::error::Error for SetupError {}

/// The scripts a handshake loads (`SCRIPT LOAD`), so that `EVALSHA` finds
/// them: every script of [`redlock_resp::script::ALL`] with the `fencing`
/// feature; without it, those of a lock client that does not fence
/// (release, extend, inspect), so that a firmware does not carry the fenced
/// scripts' sources.
///
/// None in a build without the scripts (`native` without `scripts`).
pub const SCRIPTS: &[Script] = if !crate::SCRIPTS {
    &[]
} else if cfg!(feature = "fencing") {
    &script::ALL
} else {
    &[script::RELEASE, script::EXTEND, script::INSPECT]
};

/// What the handshake of one connection sends, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Plan {
    /// Which commands the server gets, so which scripts it loads.
    pub commands: Commands,
    /// Send `AUTH` (a password is configured).
    pub auth: bool,
    /// Send `SELECT` (a database other than 0).
    pub select: bool,
    /// An error to `INFO`, or an `INFO` without `uptime_in_seconds`, fails
    /// the handshake (the restart guard is on).
    pub info_required: bool,
}

/// The steps of `plan` for a server without the native commands (the
/// longest handshake), in the order they are sent: `AUTH`, `SELECT`,
/// `INFO server`, one `SCRIPT LOAD` per script of [`SCRIPTS`] (none with
/// [`Commands::Native`]).
pub fn steps(plan: Plan) -> impl Iterator<Item = Step> {
    (0..step_count(plan, false)).filter_map(move |k| step(plan, false, k))
}

/// The scripts a server loads: `native` is what its `INFO` said.
fn scripts_for(plan: Plan, native: bool) -> &'static [Script] {
    match plan.commands.dialect(Some(native)) {
        Dialect::Scripts | Dialect::ScriptsOrNative => SCRIPTS,
        Dialect::Native | Dialect::NativeOrScripts => &[],
    }
}

/// How many steps come before the scripts (`AUTH`, `SELECT`, `INFO`):
/// those sent before the server's `INFO` is known.
pub fn steps_before_info(plan: Plan) -> usize {
    usize::from(plan.auth)
        .saturating_add(usize::from(plan.select))
        .saturating_add(1)
}

/// How many steps `plan` has for a server whose `INFO` said `native`.
pub fn step_count(plan: Plan, native: bool) -> usize {
    steps_before_info(plan).saturating_add(scripts_for(plan, native).len())
}

/// Step number `k` of `plan` (in the order of [`steps`]) for a server whose
/// `INFO` said `native` (the steps up to `INFO` do not depend on it);
/// `None` past the last step. For a platform that writes the handshake a
/// step at a time.
pub fn step(plan: Plan, native: bool, k: usize) -> Option<Step> {
    step_and_script(plan, native, k).map(|(step, _)| step)
}

/// [`step`], with the script a `SCRIPT LOAD` step loads.
pub fn step_and_script(
    plan: Plan,
    native: bool,
    k: usize,
) -> Option<(Step, Option<&'static Script>)> {
    let mut k = k;
    for (on, step) in [
        (plan.auth, Step::Auth),
        (plan.select, Step::Select),
        (true, Step::Info),
    ] {
        if on {
            if k == 0 {
                return Some((step, None));
            }
            k = k.saturating_sub(1);
        }
    }
    scripts_for(plan, native)
        .get(k)
        .map(|script| (Step::ScriptLoad, Some(script)))
}

/// What `INFO server` told about the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ServerInfo<'a> {
    /// `uptime_in_seconds`.
    pub uptime_secs: Option<u64>,
    /// `run_id`: unique per server process.
    pub run_id: Option<&'a [u8]>,
    /// The server has the native commands ([`Commands`]): its
    /// `valkey_version` is 9.0 or later (`DELIFEQ` came in 9.0, `SET ...
    /// IFEQ` in 8.1). Redis reports no `valkey_version` (Valkey reports a
    /// `redis_version` of 7.2.4 for compatibility, which says nothing).
    pub native: bool,
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
            } else if let Some(v) = line
                .strip_prefix(b"valkey_version:")
                .filter(|_| crate::NATIVE)
            {
                // `major.minor.patch`: 9.0 or later.
                let mut parts = v.split(|&b| b == b'.');
                info.native = parts
                    .next()
                    .and_then(parse_u64)
                    .is_some_and(|major| major >= 9)
                    && parts.next().and_then(parse_u64).is_some();
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
    // A build without the scripts is native only, whatever the plan says.
    let native_only = plan.commands == Commands::Native || !crate::SCRIPTS;
    if let Reply::Error(e) = reply {
        if step == Step::Info && !plan.info_required {
            // The restart guard does not need it. Without the version, a
            // server gets the scripts, or is refused when the client sends
            // native commands only.
            return if native_only {
                Err(SetupError::NoNative)
            } else {
                Ok(Verdict::Info(ServerInfo::default()))
            };
        }
        if crate::NATIVE
            && step == Step::ScriptLoad
            && plan.commands == Commands::Auto
            && e.kind() == ErrorKind::NoPerm
        {
            // Loaded only because the server has no native commands, and
            // denied (a `LOADING` or `BUSY` is a refusal like any other).
            return Err(SetupError::ScriptsDenied { kind: e.kind() });
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
            if native_only && !info.native {
                return Err(SetupError::NoNative);
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
        commands: Commands::Scripts,
        auth: true,
        select: true,
        info_required: true,
    };
    const NO_GUARD: Plan = Plan {
        info_required: false,
        ..GUARD
    };

    #[test]
    #[cfg(any(feature = "scripts", not(feature = "native")))]
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
    #[cfg(any(feature = "scripts", not(feature = "native")))]
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
                native: false,
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

    /// A build without the scripts refuses a server without the native
    /// commands in every mode.
    #[test]
    #[cfg(all(feature = "native", not(feature = "scripts")))]
    fn a_build_without_scripts_is_native_only() {
        let old = Reply::Bulk(b"redis_version:7.0.15\r\nuptime_in_seconds:5\r\n");
        for commands in [Commands::Auto, Commands::Scripts, Commands::Native] {
            let plan = Plan {
                commands,
                ..NO_GUARD
            };
            assert_eq!(judge(Step::Info, &old, plan), Err(SetupError::NoNative));
            assert_eq!(step_count(plan, false), 3, "AUTH, SELECT, INFO");
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
    #[cfg(any(feature = "scripts", not(feature = "native")))]
    fn the_plan_has_every_script() {
        let plan = Plan {
            commands: Commands::Scripts,
            auth: false,
            select: true,
            info_required: false,
        };
        let all: heapless::Vec<Step, 16> = steps(plan).collect();
        assert_eq!(all[0], Step::Select);
        assert_eq!(all[1], Step::Info);
        assert_eq!(all.len(), 2 + SCRIPTS.len());
        assert_eq!(all.last(), Some(&Step::ScriptLoad));
    }

    #[test]
    #[cfg(feature = "native")]
    fn scripts_are_loaded_only_where_they_are_sent() {
        let plan = |commands| Plan {
            commands,
            auth: true,
            select: false,
            info_required: false,
        };
        // Scripts: every server loads them, whatever it has.
        for native in [false, true] {
            assert_eq!(
                step_count(plan(Commands::Scripts), native),
                2 + SCRIPTS.len()
            );
        }
        // Auto: only a server without the native commands.
        assert_eq!(step_count(plan(Commands::Auto), false), 2 + SCRIPTS.len());
        assert_eq!(step_count(plan(Commands::Auto), true), 2);
        assert_eq!(step(plan(Commands::Auto), true, 2), None);
        // Native: never.
        for native in [false, true] {
            assert_eq!(step_count(plan(Commands::Native), native), 2);
        }
        assert_eq!(steps_before_info(plan(Commands::Auto)), 2);
    }

    #[test]
    #[cfg(feature = "native")]
    fn the_version_tells_the_native_commands() {
        let native = |text: &[u8]| ServerInfo::parse(text).native;
        assert!(native(
            b"redis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:9.1.2\r\n"
        ));
        assert!(native(b"valkey_version:9.0.0"));
        assert!(native(b"valkey_version:10.0.0\r\n"));
        // Valkey 8 (no DELIFEQ), Redis of any version, nonsense.
        for text in [
            &b"valkey_version:8.1.1\r\n"[..],
            b"redis_version:8.4.0\r\n",
            b"redis_version:7.2.4\r\n",
            b"valkey_version:9\r\n",
            b"valkey_version:x.1.2\r\n",
            b"valkey_version:\r\n",
            b"valkey_version:-9.0.0\r\n",
            b"",
        ] {
            assert!(!native(text), "{text:?}");
        }
    }

    #[test]
    #[cfg(feature = "native")]
    fn native_only_refuses_a_server_without_them() {
        let plan = Plan {
            commands: Commands::Native,
            ..NO_GUARD
        };
        let old = Reply::Bulk(b"redis_version:7.0.15\r\nuptime_in_seconds:5\r\n");
        assert_eq!(judge(Step::Info, &old, plan), Err(SetupError::NoNative));
        let denied = Reply::Error(ServerError::new(b"NOPERM no info"));
        assert_eq!(judge(Step::Info, &denied, plan), Err(SetupError::NoNative));
        let new = Reply::Bulk(b"valkey_version:9.1.2\r\nuptime_in_seconds:5\r\n");
        assert!(matches!(
            judge(Step::Info, &new, plan),
            Ok(Verdict::Info(ServerInfo { native: true, .. }))
        ));
        // Auto: scripts refused where they are needed says so.
        let noperm = Reply::Error(ServerError::new(b"NOPERM this user has no permissions"));
        let auto = Plan {
            commands: Commands::Auto,
            ..NO_GUARD
        };
        assert_eq!(
            judge(Step::ScriptLoad, &noperm, auto),
            Err(SetupError::ScriptsDenied {
                kind: ErrorKind::NoPerm
            })
        );
        let loading = Reply::Error(ServerError::new(b"LOADING Valkey is loading"));
        assert_eq!(
            judge(Step::ScriptLoad, &loading, auto),
            Err(SetupError::Refused {
                step: Step::ScriptLoad,
                kind: ErrorKind::Loading
            })
        );
    }

    #[test]
    fn each_plan_s_steps_one_at_a_time() {
        for (auth, select) in [(false, false), (true, false), (false, true), (true, true)] {
            let plan = Plan {
                commands: Commands::Scripts,
                auth,
                select,
                info_required: false,
            };
            let loads = core::iter::repeat_n(Step::ScriptLoad, SCRIPTS.len());
            let mut want = [(auth, Step::Auth), (select, Step::Select)]
                .into_iter()
                .filter_map(|(on, step)| on.then_some(step))
                .chain([Step::Info])
                .chain(loads);
            let n = step_count(plan, false);
            assert_eq!(n, steps(plan).count());
            let mut loaded = 0;
            for k in 0..n {
                let (this, script) = step_and_script(plan, false, k).unwrap();
                assert_eq!(Some(this), want.next(), "{plan:?} {k}");
                assert_eq!(step(plan, false, k), Some(this));
                if this == Step::ScriptLoad {
                    assert_eq!(script, Some(&SCRIPTS[loaded]));
                    loaded += 1;
                } else {
                    assert_eq!(script, None);
                }
            }
            assert_eq!(loaded, SCRIPTS.len());
            assert_eq!(want.next(), None);
            assert_eq!(step_and_script(plan, false, n), None);
            assert_eq!(step(plan, false, n + 100), None);
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
