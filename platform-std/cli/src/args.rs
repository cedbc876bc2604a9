//! Command-line arguments shared by several subcommands, as clap
//! definitions written once and flattened into each subcommand that takes
//! them (see `cli.rs`); the values they take (durations, exit statuses,
//! file and host names) and what they build (the client's options, how to
//! wait); and what may hold a password.

use core::fmt;
use core::time::Duration;
use std::path::PathBuf;

use clap::{ArgAction, Args, ValueEnum};

/// A usage error (exit status 64).
#[derive(Debug)]
pub(crate) struct Usage(pub(crate) String);

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

pub(crate) fn usage(msg: impl Into<String>) -> Usage {
    Usage(msg.into())
}

/// The help heading of [`ServerArgs`] (every subcommand that talks to
/// servers).
pub(crate) const SERVER_OPTIONS: &str = "Server options";
/// The help heading of what [`OneAttemptArgs`] and [`RetryingArgs`] add to
/// [`ServerArgs`].
pub(crate) const ACQUIRE_OPTIONS: &str = "Acquire options";
/// The help heading of [`WaitArgs`] (`lock`, `acquire`) and of
/// [`ConflictArgs`] (also `unlock`).
pub(crate) const WAITING: &str = "When the lock is held";

/// `-v`, `-vv`, `--verbose`: taken before the subcommand and after it, and
/// counted in both places (`redlock -v unlock --verbose` is `-vv`). Not a
/// clap `global` argument: a global one keeps the count of one place only.
#[derive(Debug, Args)]
pub(crate) struct Verbosity {
    // How many times it was given.
    #[arg(
        short,
        long,
        action = ArgAction::Count,
        help = "log on stderr what each operation did, every server by address, and the \
                library's warnings; -vv: also its debug records (also before the subcommand)"
    )]
    pub(crate) verbose: u8,
}

/// `-v` and RESOURCE, last of the arguments of every subcommand that names
/// a lock (after them: `unlock`'s TOKEN, `lock`'s command).
#[derive(Debug, Args)]
pub(crate) struct Target {
    #[command(flatten)]
    pub(crate) verbosity: Verbosity,
    #[arg(
        value_name = "RESOURCE",
        value_parser = resource_name,
        help = "the lock's name"
    )]
    pub(crate) resource: String,
}

/// The options of every subcommand that talks to servers: where they are,
/// how long they may take, TLS, and which commands they get.
// Each argument names its heading: a struct's `next_help_heading` would
// stay for the arguments after it (clap_derive does not restore it).
#[derive(Debug, Args)]
pub(crate) struct ServerArgs {
    // As given: see `ServerArgs::servers`.
    #[arg(
        long,
        help_heading = SERVER_OPTIONS,
        value_name = "URL[,URL..]",
        value_hint = clap::ValueHint::Other,
        allow_hyphen_values = true,
        help = "the servers [default: $REDLOCK_SERVERS]; each URL is \
                redis://[[user]:password@]host[:port][/db], rediss://... (TLS) or host:port"
    )]
    pub(crate) servers: Option<String>,
    #[arg(
        long,
        help_heading = SERVER_OPTIONS,
        value_name = "D",
        allow_hyphen_values = true,
        value_parser = timeout,
        value_hint = clap::ValueHint::Other,
        help = request_timeout_help()
    )]
    request_timeout: Option<Duration>,
    #[arg(
        long,
        help_heading = SERVER_OPTIONS,
        value_name = "D",
        allow_hyphen_values = true,
        value_parser = timeout,
        value_hint = clap::ValueHint::Other,
        help = "how long a connect (with its TLS handshake) may take [default: 1s]"
    )]
    connect_timeout: Option<Duration>,
    #[arg(
        long,
        help_heading = SERVER_OPTIONS,
        value_name = "FILE",
        allow_hyphen_values = true,
        value_parser = file_name,
        help = "rediss:// (TLS): trust only the CAs in this PEM file \
                [default: Mozilla's roots, built in]"
    )]
    tls_ca: Option<PathBuf>,
    #[arg(
        long,
        help_heading = SERVER_OPTIONS,
        value_name = "FILE",
        allow_hyphen_values = true,
        value_parser = file_name,
        help = "rediss://: a client certificate (PEM) for servers that ask for one \
                (tls-auth-clients), with --tls-key"
    )]
    tls_cert: Option<PathBuf>,
    #[arg(
        long,
        help_heading = SERVER_OPTIONS,
        value_name = "FILE",
        allow_hyphen_values = true,
        value_parser = file_name,
        help = "the client certificate's private key (PEM), with --tls-cert"
    )]
    tls_key: Option<PathBuf>,
    #[arg(
        long,
        help_heading = SERVER_OPTIONS,
        value_name = "NAME",
        allow_hyphen_values = true,
        value_parser = host_name,
        help = "check certificates against NAME instead of each URL's host \
                (servers reached by IP address)"
    )]
    tls_server_name: Option<String>,
    #[arg(
        long,
        help_heading = SERVER_OPTIONS,
        value_name = "MODE",
        help = "auto: native commands (no Lua) on servers that have them (Valkey 9.0+), \
                scripts elsewhere; scripts; native: refuse servers without them [default: auto]"
    )]
    commands: Option<CommandsMode>,
}

/// `--commands`: which commands the servers get (the library's
/// [`redlock_std::Commands`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum CommandsMode {
    // (No doc comments: clap would show them, in its long help format.)
    // Native commands (no Lua) on servers that have them (Valkey 9.0+),
    // scripts elsewhere.
    Auto,
    // The Lua scripts everywhere.
    Scripts,
    // The native commands only: servers without them are refused.
    Native,
}

impl From<CommandsMode> for redlock_std::Commands {
    fn from(mode: CommandsMode) -> redlock_std::Commands {
        match mode {
            CommandsMode::Auto => redlock_std::Commands::Auto,
            CommandsMode::Scripts => redlock_std::Commands::Scripts,
            CommandsMode::Native => redlock_std::Commands::Native,
        }
    }
}

/// The client options of subcommands that acquire one attempt at a time
/// (bench, demo): [`ServerArgs`] and `--restart-guard`.
#[derive(Debug, Args)]
pub(crate) struct OneAttemptArgs {
    #[command(flatten)]
    pub(crate) server: ServerArgs,
    #[arg(
        long,
        value_name = "D",
        allow_hyphen_values = true,
        value_parser = restart_guard,
        value_hint = clap::ValueHint::Other,
        help_heading = ACQUIRE_OPTIONS,
        help = "do not count the vote of a server that restarted less than D ago (give \
                the largest ttl any client uses on these servers; they must allow INFO) \
                [default: off]"
    )]
    restart_guard: Option<Duration>,
}

/// The client options of subcommands that acquire with retries (lock,
/// acquire): [`OneAttemptArgs`], `--retries` and `--retry-delay`.
#[derive(Debug, Args)]
pub(crate) struct RetryingArgs {
    #[command(flatten)]
    pub(crate) one_attempt: OneAttemptArgs,
    #[arg(
        long,
        value_name = "N",
        allow_hyphen_values = true,
        value_parser = retries,
        value_hint = clap::ValueHint::Other,
        help_heading = ACQUIRE_OPTIONS,
        help = retries_help()
    )]
    retries: Option<u32>,
    #[arg(
        long,
        value_name = "D",
        allow_hyphen_values = true,
        value_parser = parse_duration,
        value_hint = clap::ValueHint::Other,
        help_heading = ACQUIRE_OPTIONS,
        help = retry_delay_help()
    )]
    retry_delay: Option<Duration>,
}

/// `--request-timeout`'s help, with the library's default.
fn request_timeout_help() -> String {
    let default = redlock_core::Config::DEFAULT;
    let timeout = |ttl: redlock_core::Duration| {
        show_duration(Duration::from_micros(
            default.request_timeout_for(ttl).as_micros(),
        ))
    };
    format!(
        "how long each server may take to answer one request \
         [default: 1% of the ttl, from {} to {}]",
        timeout(redlock_core::Duration::ZERO),
        timeout(redlock_core::Duration::MAX),
    )
}

/// `--retries`' help, with the library's default.
fn retries_help() -> String {
    format!(
        "attempts after a failed one, without -w or -n [default: {}]",
        redlock_core::Config::DEFAULT.retry.retries
    )
}

/// `--retry-delay`'s help, with the library's default.
fn retry_delay_help() -> String {
    let jitter = redlock_core::Config::DEFAULT.retry.jitter;
    format!(
        "after a failed attempt, wait as long as it took plus a random part of at most D \
         [default: {}]",
        show_duration(Duration::from_micros(jitter.as_micros()))
    )
}

/// How the client talks to its servers, from the options of the subcommand
/// (each takes those that mean something to it). `None`: the library's
/// default.
#[derive(Debug, Default, Clone)]
pub(crate) struct ClientOptions {
    /// `--request-timeout D`: how long one server may take to answer one
    /// request.
    pub(crate) request_timeout: Option<Duration>,
    /// `--connect-timeout D`.
    pub(crate) connect_timeout: Option<Duration>,
    /// `--retries N`: attempts after a failed one.
    pub(crate) retries: Option<u32>,
    /// `--retry-delay D`: the largest random wait added between attempts.
    pub(crate) retry_delay: Option<Duration>,
    /// `--restart-guard D`: votes of servers that restarted less than D
    /// ago do not count.
    pub(crate) restart_guard: Option<Duration>,
    /// `--tls-ca FILE`: the CAs trusted for `rediss://` servers.
    pub(crate) tls_ca: Option<PathBuf>,
    /// `--tls-cert FILE` and `--tls-key FILE`: a client certificate.
    pub(crate) tls_client: Option<(PathBuf, PathBuf)>,
    /// `--tls-server-name NAME`: the name certificates are checked against.
    pub(crate) tls_server_name: Option<String>,
    /// `--commands auto|scripts|native`: which commands release, extend,
    /// fenced acquisitions and inspect send.
    pub(crate) commands: Option<redlock_std::Commands>,
}

impl ServerArgs {
    /// The servers: `--servers`, else `REDLOCK_SERVERS`; `None` when
    /// neither names one (a `--servers` that names none is not replaced by
    /// `REDLOCK_SERVERS`). A `REDLOCK_SERVERS` that is not UTF-8 is an
    /// error that does not show it (it may hold a password).
    pub(crate) fn servers(&self) -> Result<Option<Vec<String>>, Usage> {
        let list = match &self.servers {
            Some(v) => v.clone(),
            None => match std::env::var_os("REDLOCK_SERVERS") {
                None => return Ok(None),
                Some(v) => v.into_string().map_err(|_| {
                    usage(format!(
                        "REDLOCK_SERVERS is not valid UTF-8 (not shown: it may hold a \
                         password); {ESCAPE_HINT}"
                    ))
                })?,
            },
        };
        let servers: Vec<String> = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        Ok((!servers.is_empty()).then_some(servers))
    }

    /// The options given; a usage error for a client certificate without
    /// its key, or a key without its certificate.
    pub(crate) fn options(&self) -> Result<ClientOptions, Usage> {
        let tls_client = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some((cert.clone(), key.clone())),
            (None, None) => None,
            (Some(_), None) => return Err(usage("--tls-cert needs --tls-key (its private key)")),
            (None, Some(_)) => return Err(usage("--tls-key needs --tls-cert (its certificate)")),
        };
        Ok(ClientOptions {
            request_timeout: self.request_timeout,
            connect_timeout: self.connect_timeout,
            tls_ca: self.tls_ca.clone(),
            tls_client,
            tls_server_name: self.tls_server_name.clone(),
            commands: self.commands.map(redlock_std::Commands::from),
            ..ClientOptions::default()
        })
    }
}

impl OneAttemptArgs {
    /// The options given (see [`ServerArgs::options`]).
    pub(crate) fn options(&self) -> Result<ClientOptions, Usage> {
        Ok(ClientOptions {
            restart_guard: self.restart_guard,
            ..self.server.options()?
        })
    }
}

impl RetryingArgs {
    /// The options given (see [`ServerArgs::options`]).
    pub(crate) fn options(&self) -> Result<ClientOptions, Usage> {
        Ok(ClientOptions {
            retries: self.retries,
            retry_delay: self.retry_delay,
            ..self.one_attempt.options()?
        })
    }

    /// The servers (see [`ServerArgs::servers`]).
    pub(crate) fn server(&self) -> &ServerArgs {
        &self.one_attempt.server
    }
}

impl ClientOptions {
    /// A usage error when `--request-timeout` leaves nothing of `ttl`: an
    /// answer that takes that long leaves no validity.
    pub(crate) fn check_against_ttl(&self, ttl: Duration) -> Result<(), Usage> {
        match self.request_timeout {
            Some(t) if t >= ttl => Err(usage(format!(
                "--request-timeout ({}) must be shorter than the ttl ({})",
                show_duration(t),
                show_duration(ttl)
            ))),
            _ => Ok(()),
        }
    }
}

/// The options of `lock` and `acquire` that say how to wait for a lock that
/// is held, and what to exit with when it stays held: `flock(1)`'s `-w`,
/// `-n` and `-E`.
#[derive(Debug, Args)]
pub(crate) struct WaitArgs {
    #[arg(
        short,
        long,
        help_heading = WAITING,
        value_name = "D",
        allow_hyphen_values = true,
        value_parser = parse_wait,
        value_hint = clap::ValueHint::Other,
        help = "retry with jitter until D has passed (`forever`, `inf`: without bound; a \
                signal still stops it) [default: one call with the normal retries]"
    )]
    wait: Option<Duration>,
    #[arg(
        short,
        long,
        help_heading = WAITING,
        conflicts_with_all = ["wait", "retries"],
        help = "one attempt, no retries: fail at once when the lock is held \
                (not with -w or --retries)"
    )]
    nonblock: bool,
    #[command(flatten)]
    conflict: ConflictArgs,
}

/// `-E/--conflict-exit-code N` (`lock`, `acquire`, `unlock`).
#[derive(Debug, Args)]
pub(crate) struct ConflictArgs {
    #[arg(
        short = 'E',
        long,
        help_heading = WAITING,
        value_name = "N",
        allow_hyphen_values = true,
        default_value = "75",
        value_parser = exit_status,
        value_hint = clap::ValueHint::Other,
        help = "the exit status when the lock is held by someone else"
    )]
    pub(crate) conflict_exit_code: u8,
}

/// How an acquiring subcommand (`lock`, `acquire`) waits for a lock that is
/// held: `-n`, `-w`, or neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Neither: one call with the client's retries (`--retries`).
    Retries,
    /// `-n/--nonblock`: one attempt, no retries.
    Nonblock,
    /// `-w/--wait D`: retry with jitter until D has passed;
    /// `Duration::MAX` (`--wait forever`) never passes.
    For(Duration),
}

/// How `lock` and `acquire` acquire: how they wait, and what they exit with
/// when the lock is held by someone else.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Acquiring {
    pub(crate) wait: Wait,
    /// `-E/--conflict-exit-code N` (default 75).
    pub(crate) conflict_code: u8,
}

impl WaitArgs {
    /// How to acquire (`-n` with `-w` or `--retries` is refused by the
    /// parser).
    pub(crate) fn acquiring(&self) -> Acquiring {
        let wait = match (self.nonblock, self.wait) {
            (true, _) => Wait::Nonblock,
            (false, Some(d)) => Wait::For(d),
            (false, None) => Wait::Retries,
        };
        Acquiring {
            wait,
            conflict_code: self.conflict.conflict_exit_code,
        }
    }
}

/// A duration of at least 1ms (a timeout).
fn timeout(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d < Duration::from_millis(1) => Err("must be at least 1ms".into()),
        d => Ok(d),
    }
}

/// `--restart-guard`: a duration of at least 1ms.
fn restart_guard(s: &str) -> Result<Duration, String> {
    timeout(s).map_err(|e| format!("{e} (leave it out for no guard)"))
}

/// `--retries`: 0 to `u32::MAX`.
fn retries(s: &str) -> Result<u32, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("{} is not a number from 0 to {}", shown(s), u32::MAX))
}

/// An exit status: 0 to 255.
pub(crate) fn exit_status(s: &str) -> Result<u8, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("{} is not a number from 0 to 255", shown(s)))
}

/// A number from `LO` to `HI` (`--clients`, `--workers`).
pub(crate) fn number_in<const LO: usize, const HI: usize>(s: &str) -> Result<usize, String> {
    s.trim()
        .parse()
        .ok()
        .filter(|n| (LO..=HI).contains(n))
        .ok_or_else(|| format!("{} is not a number from {LO} to {HI}", shown(s)))
}

/// A file name: not empty.
fn file_name(s: &str) -> Result<PathBuf, String> {
    if s.is_empty() {
        Err("needs a file name".into())
    } else if is_server_url_with_password(s) {
        Err(URL_WITH_PASSWORD.into())
    } else {
        Ok(PathBuf::from(s))
    }
}

/// A host name: not blank, trimmed.
fn host_name(s: &str) -> Result<String, String> {
    match s.trim() {
        "" => Err("needs a host name".into()),
        name if is_server_url_with_password(name) => Err(URL_WITH_PASSWORD.into()),
        name => Ok(name.to_string()),
    }
}

/// `250ms`, `10s`, `2m`, `1h`, or a bare number of seconds (as `sleep(1)`,
/// `timeout(1)` and `flock -w` take them); a decimal fraction is fine
/// (`0.5`, `1.5s`, `2.5m`), down to the microsecond.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
        return Err(format!(
            "{} is not a duration (try 10 for ten seconds, 0.5, 250ms, 2m)",
            shown(s)
        ));
    }
    let micros_per_unit: u128 = match unit {
        "" | "s" => 1_000_000,
        "ms" => 1_000,
        "m" => 60_000_000,
        "h" => 3_600_000_000,
        _ => {
            return Err(format!(
                "{}: unknown unit {} (a bare number is seconds; or use ms, s, m or h)",
                shown(s),
                shown(unit)
            ));
        }
    };
    let too_large = || format!("{} is too large", shown(s));
    // Digits past the twelfth of a fraction are below a microsecond of any unit.
    let fraction = fraction.get(..fraction.len().min(12)).unwrap_or("");
    let whole: u128 = if whole.is_empty() {
        0
    } else if whole.len() > 20 {
        return Err(too_large());
    } else {
        whole.parse().map_err(|_| too_large())?
    };
    let fraction_micros = if fraction.is_empty() {
        0
    } else {
        let digits = u32::try_from(fraction.len()).map_err(|_| too_large())?;
        let value: u128 = fraction.parse().map_err(|_| too_large())?;
        value * micros_per_unit / 10u128.pow(digits)
    };
    whole
        .checked_mul(micros_per_unit)
        .and_then(|w| w.checked_add(fraction_micros))
        .and_then(|m| u64::try_from(m).ok())
        .map(Duration::from_micros)
        .ok_or_else(too_large)
}

/// Words for a wait without bound: `--wait forever`.
pub(crate) const FOREVER: [&str; 3] = ["forever", "inf", "infinity"];

/// A `--wait` value: a duration, or one of [`FOREVER`] (`Duration::MAX`,
/// which no deadline reaches).
pub(crate) fn parse_wait(s: &str) -> Result<Duration, String> {
    if FOREVER.contains(&s.trim().to_ascii_lowercase().as_str()) {
        Ok(Duration::MAX)
    } else {
        parse_duration(s).map_err(|e| format!("{e}; or `forever` to wait without bound"))
    }
}

/// `d` as `--ttl` would take it: `250ms`, `10s`, `1500ms`.
pub(crate) fn show_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 && !d.is_zero() {
        format!("{}us", d.as_micros())
    } else if ms >= 1000 && ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// How to give a password that has bytes a URL or an argument cannot hold
/// as they are.
pub(crate) const ESCAPE_HINT: &str = "in a server URL, write a password's `@`, `:`, `/`, `%` and other bytes as %-escapes \
     (%40 for @, %FF for the byte 0xFF)";

/// `arg`, quoted, for an error message, with whatever may be a password
/// hidden (see [`masked`]).
pub(crate) fn shown(arg: &str) -> String {
    format!("{:?}", masked(arg))
}

/// `arg` with whatever may be a password hidden: in an argument with an `@`
/// (a misplaced server URL, say), everything between its `scheme://` (if
/// it starts with one) and its last `@`, else everything before that `@`.
/// A password is never shown, even when the argument is not where it
/// belongs, is a list of URLs of which only a later one has a scheme, or
/// holds a `://` of its own (`u:pw://x@h`).
pub(crate) fn masked(arg: &str) -> String {
    match arg.rfind('@') {
        None => arg.to_string(),
        Some(at) => {
            let start = arg
                .find("://")
                .filter(|&i| is_scheme(arg.get(..i).unwrap_or("")))
                .map_or(0, |i| i + 3);
            let start = if start <= at { start } else { 0 };
            format!(
                "{}***{}",
                arg.get(..start).unwrap_or(""),
                arg.get(at..).unwrap_or("")
            )
        }
    }
}

/// A URL scheme (RFC 3986): a letter, then letters, digits, `+`, `-`, `.`.
fn is_scheme(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// Whether `s` looks like a server URL with a password (`scheme://…@…`):
/// a misplaced `--servers` value, refused wherever it would otherwise be
/// printed back (or, as a lock's name, stored on the servers as a key).
fn is_server_url_with_password(s: &str) -> bool {
    s.find("://")
        .is_some_and(|i| s.get(i..).is_some_and(|rest| rest.contains('@')))
}

/// What a usage error says of such a value (never the value).
const URL_WITH_PASSWORD: &str = "looks like a server URL with a password (not shown); servers go in --servers or \
     REDLOCK_SERVERS";

/// A lock's name, as given: anything but what looks like a server URL with
/// a password ([`is_server_url_with_password`]), refused without being
/// shown.
pub(crate) fn resource_name(s: &str) -> Result<String, String> {
    if is_server_url_with_password(s) {
        Err(URL_WITH_PASSWORD.into())
    } else {
        Ok(s.to_string())
    }
}

/// A token, as `redlock acquire` printed it: anything but what looks like a
/// server URL with a password, refused without being shown.
pub(crate) fn token(s: &str) -> Result<String, String> {
    resource_name(s)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        // Bare numbers are seconds, as for sleep(1) and flock -w.
        assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("0.5").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration(".25").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2.5m").unwrap(), Duration::from_secs(150));
        assert_eq!(
            parse_duration("1.5ms").unwrap(),
            Duration::from_micros(1500)
        );
        assert_eq!(
            parse_duration("0.0000001").unwrap(),
            Duration::ZERO,
            "below a microsecond"
        );
        for bad in [
            "",
            ".",
            "ms",
            "10x",
            "-5s",
            "1.5.5s",
            "1,5s",
            "99999999999999999999999",
            "99999999999999999999h",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        for forever in ["forever", "inf", "Infinity"] {
            assert_eq!(parse_wait(forever).unwrap(), Duration::MAX);
        }
        assert_eq!(parse_wait("5").unwrap(), Duration::from_secs(5));
        assert!(parse_wait("never").is_err());
    }

    #[test]
    fn what_may_be_a_password_is_never_shown() {
        for (arg, shown_as) in [
            ("redis://:pw@host:1", "redis://***@host:1"),
            ("redis://u:p@ss@h", "redis://***@h"),
            ("u:pw@h:1", "***@h:1"),
            ("--redis://:pw@h", "***@h"),
            // A `://` inside the password is no scheme.
            ("u:pw://x@h:1", "***@h:1"),
            ("redis://u:pw://x@h:1", "redis://***@h:1"),
            ("pw@h://x", "***@h://x"),
            // A list whose first URL has no scheme, a later one has.
            ("u:pw@h1,redis://:pw@h2", "***@h2"),
            ("redis://:pw@h1,redis://:pw@h2", "redis://***@h2"),
            ("plain", "plain"),
            ("127.0.0.1:6379", "127.0.0.1:6379"),
        ] {
            assert_eq!(masked(arg), shown_as, "{arg}");
            assert!(!shown(arg).contains("pw"), "{arg}");
        }
        // A server URL given as a lock's name is refused, unseen.
        for url in ["redis://:pw@h", "rediss://u:pw@h:1/0", "x://pw@h"] {
            let bad = resource_name(url).unwrap_err();
            assert!(!bad.contains("pw"), "{bad}");
        }
        for name in ["orders", "user@example.com", "a://b", "http://x/y"] {
            assert_eq!(resource_name(name).unwrap(), name);
        }
        for url in ["redis://:pw@h", "rediss://u:pw@h:1/0"] {
            for bad in [
                token(url).unwrap_err(),
                file_name(url).unwrap_err(),
                host_name(url).unwrap_err(),
            ] {
                assert!(!bad.contains("pw"), "{bad}");
            }
        }
        let bad = parse_duration("redis://:pw@h").unwrap_err();
        assert!(!bad.contains("pw"), "{bad}");
        for bad in [
            retries("redis://:pw@h").unwrap_err(),
            exit_status("redis://:pw@h").unwrap_err(),
            number_in::<1, 2>("redis://:pw@h").unwrap_err(),
        ] {
            assert!(!bad.contains("pw"), "{bad}");
        }
    }

    #[test]
    fn values_of_the_client_options() {
        assert_eq!(timeout("300ms").unwrap(), Duration::from_millis(300));
        assert_eq!(timeout("1ms").unwrap(), Duration::from_millis(1));
        for bad in ["0", "0ms", "999us", "soon"] {
            assert!(timeout(bad).is_err(), "{bad}");
        }
        assert!(restart_guard("0").unwrap_err().contains("no guard"));
        assert_eq!(retries("0").unwrap(), 0);
        assert_eq!(retries(" 4294967295 ").unwrap(), u32::MAX);
        for bad in ["-1", "many", "4294967296", ""] {
            assert!(retries(bad).is_err(), "{bad}");
        }
        assert_eq!(exit_status("0").unwrap(), 0);
        assert_eq!(exit_status("255").unwrap(), 255);
        for bad in ["256", "-1", "x"] {
            assert!(exit_status(bad).is_err(), "{bad}");
        }
        assert_eq!(number_in::<1, 64>("64").unwrap(), 64);
        for bad in ["0", "65", "x"] {
            assert!(number_in::<1, 64>(bad).is_err(), "{bad}");
        }
        assert!(file_name("").is_err());
        assert_eq!(file_name("ca.pem").unwrap(), PathBuf::from("ca.pem"));
        assert!(host_name(" ").is_err());
        assert_eq!(host_name(" db.example ").unwrap(), "db.example");
    }

    #[test]
    fn the_ttl_bounds_the_request_timeout() {
        let o = ClientOptions {
            request_timeout: Some(Duration::from_millis(300)),
            ..ClientOptions::default()
        };
        assert!(o.check_against_ttl(Duration::from_secs(1)).is_ok());
        assert!(o.check_against_ttl(Duration::from_millis(300)).is_err());
        assert!(
            ClientOptions::default()
                .check_against_ttl(Duration::from_millis(1))
                .is_ok()
        );
    }
}
