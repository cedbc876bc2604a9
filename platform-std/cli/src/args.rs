//! Command-line arguments: options, durations, servers, usage errors.

use core::fmt;
use core::time::Duration;

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

/// The parsed arguments of one subcommand: options, then positionals, then
/// (for `lock`) the command after `--`.
#[derive(Debug, Default)]
pub(crate) struct Args {
    options: Vec<(String, Option<String>)>,
    pub(crate) positionals: Vec<String>,
    pub(crate) command: Vec<String>,
    pub(crate) help: bool,
    /// How many times `-v` (or `--verbose`) was given.
    pub(crate) verbose: u8,
}

/// Which options take a value, and which are flags.
pub(crate) struct Spec {
    /// The options of [`ClientOptions`] (and `--servers`) it takes: one of
    /// [`SERVER_OPTIONS`], [`ONE_ATTEMPT_OPTIONS`], [`RETRYING_OPTIONS`].
    pub(crate) client: &'static [&'static str],
    /// Its own options that take a value.
    pub(crate) with_value: &'static [&'static str],
    pub(crate) flags: &'static [&'static str],
    /// Short forms (`-w` for `--wait`), of options with a value or flags.
    /// `-h` (help) and `-v` (verbose) are understood everywhere.
    pub(crate) short: &'static [(char, &'static str)],
    /// Everything after `--` (or after the positionals are complete) is a command.
    pub(crate) command_after: Option<usize>,
}

impl Args {
    /// Parses `raw` (the arguments after the subcommand) by `spec`.
    pub(crate) fn parse(raw: &[String], spec: &Spec) -> Result<Args, Usage> {
        let mut args = Args::default();
        let mut i = 0;
        while let Some(arg) = raw.get(i) {
            i += 1;
            if arg == "--" {
                if spec.command_after.is_none() {
                    return Err(usage("unexpected `--`"));
                }
                args.command = raw.get(i..).unwrap_or_default().to_vec();
                break;
            }
            if arg == "-h" || arg == "--help" {
                args.help = true;
                continue;
            }
            if let Some(long) = arg.strip_prefix("--") {
                let (name, inline) = match long.split_once('=') {
                    Some((n, v)) => (n, Some(v.to_string())),
                    None => (long, None),
                };
                if name == "verbose" && inline.is_none() {
                    args.verbose = args.verbose.saturating_add(1);
                } else if spec.flags.contains(&name) {
                    if inline.is_some() {
                        return Err(usage(format!("--{name} takes no value")));
                    }
                    args.options.push((name.to_string(), None));
                } else if spec.with_value.contains(&name) || spec.client.contains(&name) {
                    let value = match inline {
                        Some(v) => v,
                        None => {
                            let v = raw
                                .get(i)
                                .ok_or_else(|| usage(format!("--{name} needs a value")))?;
                            i += 1;
                            v.clone()
                        }
                    };
                    args.options.push((name.to_string(), Some(value)));
                } else {
                    return Err(usage(format!(
                        "unknown option {}",
                        shown(&format!("--{name}"))
                    )));
                }
                continue;
            }
            if let Some(letters) = arg.strip_prefix('-').filter(|l| !l.is_empty()) {
                // `-n`, `-w 5`, `-w5`, `-E 1`, and flags together: `-nvv`.
                for (at, letter) in letters.char_indices() {
                    match letter {
                        'h' => args.help = true,
                        'v' => args.verbose = args.verbose.saturating_add(1),
                        _ => {
                            let Some(&(_, name)) = spec.short.iter().find(|(c, _)| *c == letter)
                            else {
                                return Err(usage(if letters.chars().count() == 1 {
                                    format!("unknown option -{letter}")
                                } else {
                                    format!("unknown option -{letter} in {}", shown(arg))
                                }));
                            };
                            if spec.flags.contains(&name) {
                                args.options.push((name.to_string(), None));
                                continue;
                            }
                            let rest = letters.get(at + letter.len_utf8()..).unwrap_or("");
                            let value = if rest.is_empty() {
                                let v = raw.get(i).ok_or_else(|| {
                                    usage(format!("-{letter} (--{name}) needs a value"))
                                })?;
                                i += 1;
                                v.clone()
                            } else {
                                rest.to_string()
                            };
                            args.options.push((name.to_string(), Some(value)));
                            break;
                        }
                    }
                }
                continue;
            }
            args.positionals.push(arg.clone());
            let rest = raw.get(i..).unwrap_or_default();
            if spec.command_after == Some(args.positionals.len()) && !rest.iter().any(|a| a == "--")
            {
                // `redlock lock RESOURCE CMD ...` without `--` also works;
                // with a `--` further on, options may still come before it.
                args.command = rest.to_vec();
                break;
            }
        }
        Ok(args)
    }

    /// The last value given for `--name`.
    pub(crate) fn value(&self, name: &str) -> Option<&str> {
        self.options
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.as_deref())
    }

    /// True when the flag `--name` was given.
    pub(crate) fn flag(&self, name: &str) -> bool {
        self.options.iter().any(|(n, _)| n == name)
    }

    /// `--name` as a duration, or `default`.
    pub(crate) fn duration(&self, name: &str, default: Duration) -> Result<Duration, Usage> {
        match self.value(name) {
            Some(v) => parse_duration(v).map_err(|e| usage(format!("--{name}: {e}"))),
            None => Ok(default),
        }
    }

    /// `--name` as a duration, if given.
    pub(crate) fn duration_opt(&self, name: &str) -> Result<Option<Duration>, Usage> {
        self.value(name)
            .map(|v| parse_duration(v).map_err(|e| usage(format!("--{name}: {e}"))))
            .transpose()
    }

    /// The servers: `--servers`, else `REDLOCK_SERVERS`; `None` when
    /// neither names one. A `REDLOCK_SERVERS` that is not UTF-8 is an error
    /// that does not show it (it may hold a password).
    pub(crate) fn servers(&self) -> Result<Option<Vec<String>>, Usage> {
        let list = match self.value("servers") {
            Some(v) => v.to_string(),
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

    /// Exactly `n` positionals, named for the error message.
    pub(crate) fn expect_positionals(&self, names: &[&str]) -> Result<(), Usage> {
        if self.positionals.len() == names.len() {
            return Ok(());
        }
        if self.positionals.len() < names.len() {
            let missing = names.get(self.positionals.len()..).unwrap_or_default();
            return Err(usage(format!("missing {}", missing.join(" "))));
        }
        let extra = self.positionals.get(names.len()).map_or("", String::as_str);
        Err(usage(format!("unexpected argument {}", shown(extra))))
    }
}

/// How the client talks to its servers: the options of the subcommands
/// that build a client (each takes those that mean something to it: see
/// [`Spec::client`]). `None`: the library's default.
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
    pub(crate) tls_ca: Option<std::path::PathBuf>,
    /// `--tls-cert FILE` and `--tls-key FILE`: a client certificate.
    pub(crate) tls_client: Option<(std::path::PathBuf, std::path::PathBuf)>,
    /// `--tls-server-name NAME`: the name certificates are checked against.
    pub(crate) tls_server_name: Option<String>,
    /// `--commands auto|scripts|native`: which commands release, extend,
    /// fenced acquisitions and inspect send.
    pub(crate) commands: Option<redlock_std::Commands>,
}

/// The client options of subcommands that only read or release:
/// `--servers` and the timeouts.
pub(crate) const SERVER_OPTIONS: &[&str] = &[
    "servers",
    "request-timeout",
    "connect-timeout",
    "tls-ca",
    "tls-cert",
    "tls-key",
    "tls-server-name",
    "commands",
];

/// The client options of subcommands that acquire one attempt at a time
/// (bench, demo): also `--restart-guard`.
pub(crate) const ONE_ATTEMPT_OPTIONS: &[&str] = &[
    "servers",
    "request-timeout",
    "connect-timeout",
    "tls-ca",
    "tls-cert",
    "tls-key",
    "tls-server-name",
    "commands",
    "restart-guard",
];

/// The client options of subcommands that acquire with retries (lock,
/// acquire): also `--retries` and `--retry-delay`.
pub(crate) const RETRYING_OPTIONS: &[&str] = &[
    "servers",
    "request-timeout",
    "connect-timeout",
    "tls-ca",
    "tls-cert",
    "tls-key",
    "tls-server-name",
    "commands",
    "restart-guard",
    "retries",
    "retry-delay",
];

impl ClientOptions {
    /// The options given in `args`; a usage error for a bad value.
    pub(crate) fn from_args(args: &Args) -> Result<ClientOptions, Usage> {
        let at_least_1ms = |name: &str, hint: &str| -> Result<Option<Duration>, Usage> {
            match args.duration_opt(name)? {
                Some(d) if d < Duration::from_millis(1) => {
                    Err(usage(format!("--{name} must be at least 1ms{hint}")))
                }
                d => Ok(d),
            }
        };
        let retries = match args.value("retries") {
            None => None,
            Some(v) => Some(v.trim().parse::<u32>().map_err(|_| {
                usage(format!(
                    "--retries: {} is not a number from 0 to {}",
                    shown(v),
                    u32::MAX
                ))
            })?),
        };
        let file = |name: &str| -> Result<Option<std::path::PathBuf>, Usage> {
            match args.value(name) {
                Some("") => Err(usage(format!("--{name} needs a file name"))),
                v => Ok(v.map(std::path::PathBuf::from)),
            }
        };
        let tls_client = match (file("tls-cert")?, file("tls-key")?) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            (Some(_), None) => return Err(usage("--tls-cert needs --tls-key (its private key)")),
            (None, Some(_)) => return Err(usage("--tls-key needs --tls-cert (its certificate)")),
        };
        let tls_server_name = match args.value("tls-server-name") {
            Some(n) if n.trim().is_empty() => {
                return Err(usage("--tls-server-name needs a host name"));
            }
            n => n.map(|n| n.trim().to_string()),
        };
        let commands = match args.value("commands") {
            None => None,
            Some(v) => Some(redlock_std::Commands::from_name(v.trim()).ok_or_else(|| {
                usage(format!(
                    "--commands: {} is not auto, scripts or native",
                    shown(v)
                ))
            })?),
        };
        Ok(ClientOptions {
            commands,
            tls_ca: file("tls-ca")?,
            tls_client,
            tls_server_name,
            request_timeout: at_least_1ms("request-timeout", "")?,
            connect_timeout: at_least_1ms("connect-timeout", "")?,
            retries,
            retry_delay: args.duration_opt("retry-delay")?,
            restart_guard: at_least_1ms("restart-guard", " (leave it out for no guard)")?,
        })
    }

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

/// The help for [`SERVER_OPTIONS`], with the library's defaults.
pub(crate) fn server_options_help() -> String {
    let default = redlock_core::Config::DEFAULT;
    let timeout = |ttl: redlock_core::Duration| {
        show_duration(Duration::from_micros(
            default.request_timeout_for(ttl).as_micros(),
        ))
    };
    format!(
        "  --servers URL[,URL..]   the servers (default: $REDLOCK_SERVERS); each URL is
                          redis://[[user]:password@]host[:port][/db], rediss://...
                          (TLS) or host:port
  --request-timeout D     how long each server may take to answer one request
                          (default: 1% of the ttl, from {} to {})
  --connect-timeout D     how long a connect (with its TLS handshake) may take
                          (default 1s)
  --tls-ca FILE           rediss:// (TLS): trust only the CAs in this PEM file
                          (default: Mozilla's roots, built in)
  --tls-cert FILE         rediss://: a client certificate (PEM) for servers
                          that ask for one (tls-auth-clients), with --tls-key
  --tls-key FILE          the client certificate's private key (PEM)
  --tls-server-name NAME  check certificates against NAME instead of each
                          URL's host (servers reached by IP address)
  --commands MODE         auto: native commands (no Lua) on servers that have
                          them (Valkey 9.0+), scripts elsewhere; scripts;
                          native: refuse servers without them (default auto)
",
        timeout(redlock_core::Duration::ZERO),
        timeout(redlock_core::Duration::MAX),
    )
}

/// The help for the options that [`RETRYING_OPTIONS`] (with `retries`) or
/// [`ONE_ATTEMPT_OPTIONS`] add to [`SERVER_OPTIONS`], with the library's
/// defaults.
pub(crate) fn acquire_options_help(retries: bool) -> String {
    let retry = redlock_core::Config::DEFAULT.retry;
    let mut help = String::new();
    if retries {
        help.push_str(&format!(
            "  --retries N             attempts after a failed one, without -w or -n
                          (default {})
  --retry-delay D         after a failed attempt, wait as long as it took plus
                          a random part of at most D (default {})
",
            retry.retries,
            show_duration(Duration::from_micros(retry.jitter.as_micros())),
        ));
    }
    help.push_str(
        "  --restart-guard D       do not count the vote of a server that restarted less
                          than D ago (give the largest ttl any client uses on
                          these servers; they must allow INFO) (default: off)
",
    );
    help
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

/// The options of `lock` and `acquire` that say how to wait, and what to
/// exit with when the lock is held by someone else.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Acquiring {
    pub(crate) wait: Wait,
    /// `-E/--conflict-exit-code N` (default 75).
    pub(crate) conflict_code: u8,
}

/// The short letters of the options [`Acquiring`] reads (`--wait`,
/// `--nonblock`, `--conflict-exit-code`), as `flock(1)` has them.
pub(crate) const ACQUIRING_SHORT: &[(char, &str)] = &[
    ('w', "wait"),
    ('n', "nonblock"),
    ('E', "conflict-exit-code"),
];

impl Acquiring {
    /// The options given in `args`; a usage error for a bad value or for
    /// `-n` with `-w` (or with `--retries`).
    pub(crate) fn from_args(args: &Args) -> Result<Acquiring, Usage> {
        let wait = args
            .value("wait")
            .map(|v| parse_wait(v).map_err(|e| usage(format!("--wait: {e}"))))
            .transpose()?;
        let wait = match (args.flag("nonblock"), wait) {
            (true, Some(_)) => {
                return Err(usage(
                    "-n/--nonblock (one attempt) and -w/--wait (retry until D has passed) \
                     exclude each other",
                ));
            }
            (true, None) if args.value("retries").is_some() => {
                return Err(usage(
                    "-n/--nonblock makes one attempt: leave out --retries",
                ));
            }
            (true, None) => Wait::Nonblock,
            (false, Some(d)) => Wait::For(d),
            (false, None) => Wait::Retries,
        };
        Ok(Acquiring {
            wait,
            conflict_code: conflict_code(args)?,
        })
    }
}

/// `-E/--conflict-exit-code N`: 0 to 255, default 75.
pub(crate) fn conflict_code(args: &Args) -> Result<u8, Usage> {
    match args.value("conflict-exit-code") {
        None => Ok(crate::EX_TEMPFAIL),
        Some(v) => v.trim().parse::<u8>().map_err(|_| {
            usage(format!(
                "--conflict-exit-code: {} is not a number from 0 to 255",
                shown(v)
            ))
        }),
    }
}

/// The help for the options [`Acquiring`] reads.
pub(crate) const ACQUIRING_HELP: &str =
    "  -w, --wait D            retry with jitter until D has passed (`forever`, `inf`:
                          without bound; a signal still stops it) (default:
                          one call with the normal retries)
  -n, --nonblock          one attempt, no retries: fail at once when the lock
                          is held (not with -w or --retries)
  -E, --conflict-exit-code N
                          the exit status when the lock is held by someone
                          else (default 75)
";

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
/// any, and if no `@` comes before it) and its last `@`. A password is never
/// shown, even when the argument is not where it belongs, or is a list of
/// URLs of which only a later one has a scheme.
pub(crate) fn masked(arg: &str) -> String {
    match arg.rfind('@') {
        None => arg.to_string(),
        Some(at) => {
            let start = arg.find("://").map_or(0, |i| i + 3);
            let before = arg.get(..start).unwrap_or("");
            let start = if start <= at && !before.contains('@') {
                start
            } else {
                0
            };
            format!(
                "{}***{}",
                arg.get(..start).unwrap_or(""),
                arg.get(at..).unwrap_or("")
            )
        }
    }
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
            ("--redis://:pw@h", "--redis://***@h"),
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
        let bad = parse_duration("redis://:pw@h").unwrap_err();
        assert!(!bad.contains("pw"), "{bad}");
    }

    #[test]
    fn client_options() {
        let spec = Spec {
            client: RETRYING_OPTIONS,
            with_value: &["ttl"],
            flags: &[],
            short: &[],
            command_after: None,
        };
        let parsed =
            |a: &[&str]| ClientOptions::from_args(&Args::parse(&strings(a), &spec).unwrap());
        let o = parsed(&[
            "--request-timeout",
            "300ms",
            "--connect-timeout=2s",
            "--retries",
            "0",
            "--retry-delay",
            "0",
            "--restart-guard",
            "1h",
        ])
        .unwrap();
        assert_eq!(o.request_timeout, Some(Duration::from_millis(300)));
        assert_eq!(o.connect_timeout, Some(Duration::from_secs(2)));
        assert_eq!(o.retries, Some(0));
        assert_eq!(o.retry_delay, Some(Duration::ZERO));
        assert_eq!(o.restart_guard, Some(Duration::from_secs(3600)));
        let none = parsed(&[]).unwrap();
        assert!(none.request_timeout.is_none() && none.retries.is_none());
        for bad in [
            &["--request-timeout", "0"][..],
            &["--request-timeout", "soon"],
            &["--connect-timeout", "0ms"],
            &["--retries", "-1"],
            &["--retries", "many"],
            &["--retries", "4294967296"],
            &["--retry-delay", "1,5s"],
            &["--restart-guard", "0"],
        ] {
            assert!(parsed(bad).is_err(), "{bad:?}");
        }
        assert!(o.check_against_ttl(Duration::from_secs(1)).is_ok());
        assert!(o.check_against_ttl(Duration::from_millis(300)).is_err());
        // Options a subcommand does not take are unknown to it.
        let unlock = Spec {
            client: SERVER_OPTIONS,
            with_value: &[],
            flags: &[],
            short: &[],
            command_after: None,
        };
        assert!(Args::parse(&strings(&["--retries", "1"]), &unlock).is_err());
        assert!(Args::parse(&strings(&["--request-timeout", "1s"]), &unlock).is_ok());
    }

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn options_positionals_and_command() {
        let spec = Spec {
            client: SERVER_OPTIONS,
            with_value: &["ttl"],
            flags: &["fence"],
            short: &[],
            command_after: Some(1),
        };
        let a = Args::parse(
            &strings(&["--ttl=5s", "--fence", "res", "--", "echo", "--ttl", "x"]),
            &spec,
        )
        .unwrap();
        assert_eq!(a.value("ttl"), Some("5s"));
        assert!(a.flag("fence"));
        assert_eq!(a.positionals, ["res"]);
        assert_eq!(a.command, ["echo", "--ttl", "x"]);
        let a = Args::parse(&strings(&["res", "ls", "-l"]), &spec).unwrap();
        assert_eq!(a.command, ["ls", "-l"]);
        // Options after the resource, before `--`.
        let a = Args::parse(&strings(&["res", "--ttl", "5s", "--", "echo", "hi"]), &spec).unwrap();
        assert_eq!(a.value("ttl"), Some("5s"));
        assert_eq!(a.positionals, ["res"]);
        assert_eq!(a.command, ["echo", "hi"]);
        // A command whose own arguments include `--`.
        let a = Args::parse(&strings(&["res", "--", "cmd", "--", "x"]), &spec).unwrap();
        assert_eq!(a.command, ["cmd", "--", "x"]);
        assert!(Args::parse(&strings(&["--nope"]), &spec).is_err());
        assert!(Args::parse(&strings(&["--ttl"]), &spec).is_err());
        assert!(Args::parse(&strings(&["--fence=1"]), &spec).is_err());
    }

    #[test]
    fn short_options_as_flock_has_them() {
        let spec = Spec {
            client: RETRYING_OPTIONS,
            with_value: &["ttl", "wait", "conflict-exit-code"],
            flags: &["nonblock"],
            short: ACQUIRING_SHORT,
            command_after: Some(1),
        };
        let parse = |a: &[&str]| Args::parse(&strings(a), &spec);
        let a = parse(&["-w", "5", "-E", "1", "res", "cmd"]).unwrap();
        assert_eq!(a.value("wait"), Some("5"));
        assert_eq!(a.value("conflict-exit-code"), Some("1"));
        let how = Acquiring::from_args(&a).unwrap();
        assert_eq!(how.wait, Wait::For(Duration::from_secs(5)));
        assert_eq!(how.conflict_code, 1);
        let a = parse(&["-w5", "-E0", "res", "cmd"]).unwrap();
        assert_eq!(a.value("wait"), Some("5"));
        assert_eq!(Acquiring::from_args(&a).unwrap().conflict_code, 0);
        let a = parse(&["-nvv", "res", "cmd", "-n"]).unwrap();
        assert!(a.flag("nonblock"));
        assert_eq!(a.verbose, 2);
        assert_eq!(a.command, ["cmd", "-n"]);
        assert_eq!(Acquiring::from_args(&a).unwrap().wait, Wait::Nonblock);
        let a = parse(&["--wait", "forever", "-v", "--verbose", "res", "cmd"]).unwrap();
        assert_eq!(a.verbose, 2);
        assert_eq!(
            Acquiring::from_args(&a).unwrap().wait,
            Wait::For(Duration::MAX)
        );
        let a = parse(&["res", "cmd"]).unwrap();
        let how = Acquiring::from_args(&a).unwrap();
        assert_eq!((how.wait, how.conflict_code), (Wait::Retries, 75));
        for bad in [
            &["-n", "-w", "5", "res", "cmd"][..],
            &["-n", "--retries", "2", "res", "cmd"],
            &["-E", "256", "res", "cmd"],
            &["-E", "x", "res", "cmd"],
            &["-w", "soon", "res", "cmd"],
        ] {
            let parsed = parse(bad).and_then(|a| Acquiring::from_args(&a).map(|_| ()));
            assert!(parsed.is_err(), "{bad:?}");
        }
        for bad in [&["-x", "res", "cmd"][..], &["-w"], &["-nq", "res", "cmd"]] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        let err = parse(&["-redis://:pw@h", "res", "cmd"]).unwrap_err();
        assert!(!err.0.contains("pw"), "{err}");
    }
}
