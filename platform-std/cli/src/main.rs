//! `redlock`: `flock(1)` across machines. Runs a command under a Redlock
//! lock, acquires and releases locks for shell scripts, inspects them,
//! benchmarks a set of servers, and demonstrates the algorithm on five local
//! `redis-server` processes.
//!
//! Exit statuses: the command's own (`lock`), 0 on success, 64 for bad
//! usage, 69 when too few servers answered, 70 for a lost lock or an
//! internal error, 75 when the lock is held by someone else.

// A command-line program: printing is its job.
#![allow(clippy::print_stdout, clippy::print_stderr)]

/// `println!` that ignores a closed stdout (`redlock demo | head`) instead
/// of panicking: the work goes on, and its cleanup with it.
macro_rules! say {
    () => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock());
    }};
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

mod args;
mod bench;
mod demo;
mod guard;
mod json;
mod logger;
mod run;

use core::fmt::Write as _;
use core::time::Duration;
use std::process::ExitCode;
use std::time::Instant;

use redlock_core::Config;
use redlock_std::{Builder, Client, Error, Lock, Report, ServerUrl, describe};

use crate::args::{
    ACQUIRING_HELP, ACQUIRING_SHORT, Acquiring, Args, ClientOptions, RETRYING_OPTIONS,
    SERVER_OPTIONS, Spec, Usage, Wait, acquire_options_help, server_options_help, usage,
};

/// Bad usage.
pub(crate) const EX_USAGE: u8 = 64;
/// Too few servers answered.
pub(crate) const EX_UNAVAILABLE: u8 = 69;
/// A lost lock or an internal error.
pub(crate) const EX_SOFTWARE: u8 = 70;
/// The lock is held by someone else.
pub(crate) const EX_TEMPFAIL: u8 = 75;
/// Fenced acquisition refused: the fence counters were lost (repair them).
pub(crate) const EX_DATAERR: u8 = 65;

/// Why redlock itself ends with a non-zero status: the status and a
/// one-line message for stderr.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: u8,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(code: u8, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }
}

impl From<Usage> for Failure {
    fn from(u: Usage) -> Failure {
        Failure::new(EX_USAGE, u.0)
    }
}

/// The top-level help.
fn help() -> String {
    format!(
        "\
redlock: a distributed lock over N independent Redis masters (Redlock).

Usage:
  redlock lock [SERVER OPTIONS] [ACQUIRE OPTIONS] [--ttl D] [-w D|forever | -n] [-E N] [--fence] [--grace D] RESOURCE -- CMD [ARGS..]
  redlock acquire [SERVER OPTIONS] [ACQUIRE OPTIONS] [--ttl D] [-w D|forever | -n] [-E N] [--fence] RESOURCE
  redlock unlock [SERVER OPTIONS] [-E N] RESOURCE TOKEN
  redlock inspect [SERVER OPTIONS] [--json] RESOURCE
  redlock fence-repair [SERVER OPTIONS] --at-least N RESOURCE
  redlock bench [SERVER OPTIONS] [--restart-guard D] [--clients N] [--async] [--duration D] [--resources same|distinct] [--ttl D] [--json]
  redlock demo [SERVER OPTIONS] [--restart-guard D] [--duration D] [--workers N]
Every subcommand also takes -h/--help and -v/--verbose (also before the
subcommand: redlock -vv lock ...).

Server options (every subcommand):
{}
Acquire options (lock and acquire; bench and demo take --restart-guard only):
{}
Waiting (lock and acquire; unlock takes -E), as flock(1) has them:
{}  --ttl D                 lock time to live (default 30s; bench: 10s)
  --fence                 also take an F1 fencing token
  --grace D               (lock) how long a command whose lock was lost has
                          between SIGTERM and SIGKILL (default 5s)

Logging (to stderr): -v says what each operation did, every server by
address (held, held by another, not asked, refused and why) and the time
it took, with the library's warnings and what it decides (retries, servers
given up on); -vv also its debug records (connections);
RUST_LOG (env_logger's syntax, e.g. RUST_LOG=redlock=debug) works too.
Without either, nothing is logged.

A password's `@`, `:`, `/`, `%` and bytes that are not UTF-8 are written as
%-escapes in a URL (%40 for @, %FF for the byte 0xFF). Passwords are never
printed.
Durations: a bare number is seconds (10, 0.5), as for sleep(1) and flock -w;
or with a unit: 250ms, 10s, 2m, 1h (1.5s works too).

Exit statuses: the command's own (lock); 64 bad usage; 65 fence counters
lost (see fence-repair); 69 too few servers answered; 70 lock lost or
internal error; 75 (or -E N) held by someone else.

Run `redlock SUBCOMMAND --help` for more.",
        server_options_help(),
        acquire_options_help(true),
        ACQUIRING_HELP,
    )
}

fn main() -> ExitCode {
    let mut raw = Vec::new();
    for (i, arg) in std::env::args_os().enumerate().skip(1) {
        match arg.into_string() {
            Ok(arg) => raw.push(arg),
            Err(_) => {
                // Not shown: it may be a server URL with its password.
                eprintln!(
                    "redlock: argument {i} is not valid UTF-8 (not shown: it may hold a \
                     password); {}",
                    args::ESCAPE_HINT
                );
                return ExitCode::from(EX_USAGE);
            }
        }
    }
    // `redlock -vv lock ...`: the `-v`s before the subcommand.
    let leading = raw.iter().take_while(|a| logger::take_leading(a)).count();
    let raw = raw.split_off(leading);
    let (sub, rest) = match raw.split_first() {
        Some((sub, rest)) => (sub.as_str(), rest),
        None => {
            eprintln!("{}", help());
            return ExitCode::from(EX_USAGE);
        }
    };
    let result = match sub {
        "-h" | "--help" | "help" => {
            say!("{}", help());
            Ok(0)
        }
        "-V" | "--version" | "version" => {
            say!("redlock {}", env!("CARGO_PKG_VERSION"));
            Ok(0)
        }
        "lock" => run::lock(rest),
        "acquire" => acquire(rest),
        "unlock" => unlock(rest),
        "inspect" => inspect(rest),
        "fence-repair" => fence_repair(rest),
        "bench" => bench::bench(rest),
        "demo" => demo::demo(rest),
        // Not a subcommand for people: the process that kills a `lock`
        // command's process group if redlock dies (see guard.rs).
        guard::SUBCOMMAND => Ok(guard::serve()),
        other => {
            eprintln!(
                "redlock: unknown subcommand {} (try redlock --help)",
                args::shown(other)
            );
            return ExitCode::from(EX_USAGE);
        }
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            if f.code == EX_USAGE {
                eprintln!("redlock {sub}: {} (see redlock {sub} --help)", f.message);
            } else {
                eprintln!("redlock {sub}: {}", f.message);
            }
            ExitCode::from(f.code)
        }
    }
}

/// Parses `raw` by `spec`; `Ok(None)` after printing `help` for `--help`.
pub(crate) fn parse(raw: &[String], spec: &Spec, help: &str) -> Result<Option<Args>, Failure> {
    let args = Args::parse(raw, spec)?;
    if args.help {
        say!("{help}");
        return Ok(None);
    }
    logger::install(args.verbose);
    Ok(Some(args))
}

/// The client for `servers`, set up by `options`.
pub(crate) fn client(
    servers: &[String],
    options: &ClientOptions,
    ttl: Duration,
    fencing: bool,
) -> Result<Client, Failure> {
    if ttl < Duration::from_millis(1) {
        return Err(usage("the ttl must be at least 1ms").into());
    }
    builder(servers, options)
        .ttl(ttl)
        .fencing(fencing)
        .build()
        .map_err(|e| Failure::new(EX_USAGE, e.to_string()))
}

/// A client builder for `servers`, set up by `options` (the library's
/// defaults for what they leave out).
pub(crate) fn builder(servers: &[String], options: &ClientOptions) -> Builder {
    let mut b = Client::builder().servers(servers);
    if let Some(t) = options.request_timeout {
        b = b.request_timeout(t);
    }
    if let Some(t) = options.connect_timeout {
        b = b.connect_timeout(t);
    }
    if options.retries.is_some() || options.retry_delay.is_some() {
        let default = Config::DEFAULT.retry;
        b = b.retry(
            options.retries.unwrap_or(default.retries),
            options
                .retry_delay
                .unwrap_or_else(|| Duration::from_micros(default.jitter.as_micros())),
        );
    }
    if let Some(guard) = options.restart_guard {
        b = b.restart_guard(Some(guard));
    }
    if let Some(commands) = options.commands {
        b = b.commands(commands);
    }
    if let Some(ca) = &options.tls_ca {
        b = b.tls_ca_file(ca);
    }
    if let Some((cert, key)) = &options.tls_client {
        b = b.tls_client_cert(cert, key);
    }
    if let Some(name) = &options.tls_server_name {
        b = b.tls_server_name(name);
    }
    b
}

/// The servers given, or a usage error.
pub(crate) fn servers(args: &Args) -> Result<Vec<String>, Failure> {
    args.servers()?.ok_or_else(|| {
        Failure::from(usage(
            "no servers: give --servers URL[,URL...] or set REDLOCK_SERVERS",
        ))
    })
}

/// The exit status and one-line explanation of a failed call, naming what
/// each server answered (by address, with the servers' own words when they
/// refused the handshake).
pub(crate) fn failure(what: &str, e: &Error, urls: &[ServerUrl]) -> Failure {
    let (code, why) = match e {
        Error::Conflict(_) => (EX_TEMPFAIL, "held by another holder"),
        Error::Unavailable(_) => (EX_UNAVAILABLE, "too few servers answered"),
        Error::Expired(_) => (
            EX_UNAVAILABLE,
            "a majority answered, too late for any validity to be left",
        ),
        Error::Lost(_) => (EX_SOFTWARE, "the lock is no longer held on a majority"),
        // The library's message says what happened and what to do.
        Error::FenceLost(_) => (EX_DATAERR, ""),
        Error::Argument(_)
        | Error::Url(_)
        | Error::ServerCount(_)
        | Error::DuplicateServer { .. } => (EX_USAGE, ""),
        _ => (EX_SOFTWARE, ""),
    };
    let message = match (e.outcomes(), e.report()) {
        (Some(_), _) if why.is_empty() => format!("{what}: {e}"),
        (Some(outcomes), _) => format!("{what}: {why} ({outcomes})"),
        (None, Some(report)) => format!("{what}: {why} ({})", per_server(report, urls)),
        (None, None) if why.is_empty() => format!("{what}: {e}"),
        (None, None) => format!("{what}: {why}"),
    };
    Failure::new(code, message)
}

/// `-v`: what an operation did, every server by address (with a refused
/// server's own words), and how long it took, at info level.
pub(crate) fn tell(
    client: &Client,
    what: &str,
    started: Instant,
    result: &str,
    report: Option<&Report>,
) {
    if !log::log_enabled!(log::Level::Info) {
        return;
    }
    let took = started.elapsed();
    let servers = report.map_or_else(String::new, |r| format!(" ({})", client.outcomes(*r)));
    log::info!(
        "{what}: {result} in {}.{:03} ms{servers}",
        took.as_millis(),
        took.as_micros() % 1000
    );
}

/// `host:port: answer, ...` for every server of `report`.
pub(crate) fn per_server(report: &Report, urls: &[ServerUrl]) -> String {
    let mut out = String::new();
    for (i, (server, outcome)) in report.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let address = urls.get(server.index()).map_or_else(
            || format!("the server at position {} of the list", server.index() + 1),
            ServerUrl::address,
        );
        let _ = write!(out, "{address}: {}", describe(outcome));
    }
    out
}

/// Acquires `resource` as `how` says: one attempt (`-n`), retrying until
/// the wait runs out (`-w`), or one call with the normal retry policy. A long
/// wait is cut into slices so that `interrupted` (a signal) is noticed
/// within a quarter of a second; `--wait forever` is a wait no deadline
/// reaches.
pub(crate) fn acquire_lock(
    client: &Client,
    resource: &str,
    ttl: Duration,
    how: &Acquiring,
    interrupted: &dyn Fn() -> bool,
) -> Result<Lock, Failure> {
    let started = Instant::now();
    let result = match how.wait {
        Wait::For(wait) => {
            // `None`: a wait too long for the clock, which is forever.
            let deadline = Instant::now().checked_add(wait);
            loop {
                let now = Instant::now();
                let slice = now + Duration::from_millis(250);
                let slice = deadline.map_or(slice, |d| d.min(slice));
                match client.lock_until(resource.as_bytes(), ttl, slice) {
                    Err(Error::Conflict(_) | Error::Unavailable(_) | Error::Expired(_))
                        if deadline.is_none_or(|d| Instant::now() < d) && !interrupted() => {}
                    other => break other,
                }
            }
        }
        Wait::Nonblock => client.try_lock(resource.as_bytes(), ttl),
        Wait::Retries => client.lock(resource.as_bytes(), ttl),
    };
    let what = format!("acquire {resource:?}");
    match &result {
        Ok(lock) => {
            let fence = lock
                .fence()
                .map_or_else(String::new, |f| format!(", fence {f}"));
            let held = format!(
                "held, {} ms of validity{fence}",
                lock.remaining().as_millis()
            );
            tell(client, &what, started, &held, Some(lock.report()));
        }
        Err(e) => tell(client, &what, started, &e.to_string(), e.report()),
    }
    result.map_err(|e| match &e {
        Error::Conflict(outcomes) => {
            // Often an earlier run of this command (by the same user) that
            // still holds it: say who holds it, and for how long.
            let holder =
                other_holder(client, resource, &[]).map_or_else(String::new, |h| format!(": {h}"));
            Failure::new(
                how.conflict_code,
                format!(
                    "cannot acquire {resource:?}: held by another holder (another process, or \
                     an earlier run of redlock that still holds it){holder} ({outcomes})"
                ),
            )
        }
        _ => failure(
            &format!("cannot acquire {resource:?}"),
            &e,
            &client.server_urls(),
        ),
    })
}

/// Milliseconds left, as a person reads them: `850ms`, `28.1s`.
fn show_left(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else {
        format!("{}.{}s", ms / 1000, ms % 1000 / 100)
    }
}

/// A holder's value for display, marked when the server's value was longer
/// than what was kept of it.
fn holder_text(kept: &[u8], full_len: usize) -> String {
    if full_len > kept.len() {
        format!("{}... ({full_len} bytes)", printable(kept))
    } else {
        printable(kept)
    }
}

/// A token or value for display: as is when printable, else escaped.
pub(crate) fn printable(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

fn acquire_help() -> String {
    format!(
        "\
redlock acquire [SERVER OPTIONS] [ACQUIRE OPTIONS] [--ttl D] [-w D|forever | -n] [-E N] [--fence] RESOURCE

Acquires RESOURCE and prints one line: TOKEN VALIDITY_MS [FENCE]. The lock is
not released when redlock exits: release it with `redlock unlock RESOURCE
TOKEN`, or let it expire after --ttl (default 30s).

  --ttl D     lock time to live (default 30s; a bare number is seconds)
{}  --fence     also take an F1 fencing token (printed third)

Server options:
{}
Acquire options:
{}
  read -r token validity <<< \"$(redlock acquire -w 10 jobs)\"

Exit statuses: 0 acquired; 75 (or -E N) held by someone else; 69 too few
servers answered; 64 bad usage.",
        ACQUIRING_HELP,
        server_options_help(),
        acquire_options_help(true)
    )
}

fn acquire(raw: &[String]) -> Result<u8, Failure> {
    let spec = Spec {
        client: RETRYING_OPTIONS,
        with_value: &["ttl", "wait", "conflict-exit-code"],
        flags: &["fence", "nonblock"],
        short: ACQUIRING_SHORT,
        command_after: None,
    };
    let Some(args) = parse(raw, &spec, &acquire_help())? else {
        return Ok(0);
    };
    args.expect_positionals(&["RESOURCE"])?;
    let servers = servers(&args)?;
    let ttl = args.duration("ttl", Duration::from_secs(30))?;
    let how = Acquiring::from_args(&args)?;
    let fence = args.flag("fence");
    let options = ClientOptions::from_args(&args)?;
    options.check_against_ttl(ttl)?;
    let client = client(&servers, &options, ttl, fence)?;
    let lock = acquire_lock(&client, &args.positionals[0], ttl, &how, &|| false)?;
    let mut line = format!("{} {}", lock.token(), lock.remaining().as_millis());
    if let Some(f) = lock.fence() {
        let _ = write!(line, " {f}");
    }
    say!("{line}");
    Ok(0)
}

fn unlock_help() -> String {
    format!(
        "\
redlock unlock [SERVER OPTIONS] [-E N] RESOURCE TOKEN

Releases RESOURCE on every server where it is held with TOKEN (as printed by
`redlock acquire`). Keys held with another token are left alone; releasing
twice is harmless. It says which case it was:

  released            deleted on some servers: exit 0
  nothing was held    TOKEN held RESOURCE nowhere (it expired, or was
                      released already): exit 0
  held by another     nothing deleted, and a majority holds RESOURCE with
                      another token: exit 75 (or -E N)

The last two are told apart by reading the servers just after the release:
a holder that comes or goes between the two is seen as it is then.

  -E, --conflict-exit-code N   the exit status when RESOURCE is held by
                               another token (default 75)

Server options:
{}
Exit statuses: 0 released, or nothing was held; 75 (or -E N) held by
another token; 69 too few servers answered; 64 bad usage.",
        server_options_help()
    )
}

fn unlock(raw: &[String]) -> Result<u8, Failure> {
    let spec = Spec {
        client: SERVER_OPTIONS,
        with_value: &["conflict-exit-code"],
        flags: &[],
        short: &[('E', "conflict-exit-code")],
        command_after: None,
    };
    let Some(args) = parse(raw, &spec, &unlock_help())? else {
        return Ok(0);
    };
    args.expect_positionals(&["RESOURCE", "TOKEN"])?;
    let conflict_code = args::conflict_code(&args)?;
    let servers = servers(&args)?;
    let options = ClientOptions::from_args(&args)?;
    let client = client(&servers, &options, Duration::from_secs(30), false)?;
    let (resource, token) = (&args.positionals[0], &args.positionals[1]);
    let urls = client.server_urls();
    let started = Instant::now();
    let released = client.unlock_token(resource.as_bytes(), token.as_bytes());
    let what = format!("release {resource:?}");
    match &released {
        Ok(r) => tell(
            &client,
            &what,
            started,
            &format!("deleted on {}", r.deleted()),
            Some(&r.report),
        ),
        Err(e) => tell(&client, &what, started, &e.to_string(), e.report()),
    }
    let released =
        released.map_err(|e| failure(&format!("cannot release {resource:?}"), &e, &urls))?;
    if released.deleted() > 0 {
        say!(
            "released {resource:?}: deleted on {} of {} servers",
            released.deleted(),
            servers.len()
        );
        return Ok(0);
    }
    // Nothing deleted: either the lock is gone (expired, released), or
    // someone else holds it. Which, the servers say now; a holder that
    // comes or goes in between is reported as it is at this read.
    if let Some(other) = other_holder(&client, resource, token.as_bytes()) {
        return Err(Failure::new(
            conflict_code,
            format!(
                "{resource:?} is held by another token ({other}); TOKEN {} released \
                 nothing",
                printable(token.as_bytes())
            ),
        ));
    }
    say!(
        "nothing was held: {resource:?} is not held with this token on any server (it \
         expired, or was released already); nothing deleted"
    );
    Ok(0)
}

/// When a majority of the servers holds `resource` with some token other
/// than `ours`: that holder in words (`token ABC.., 28.1s left`, or `several
/// tokens` when they differ), from one `inspect`. `None` otherwise, and
/// when the inspection fails.
fn other_holder(client: &Client, resource: &str, ours: &[u8]) -> Option<String> {
    let inspection = client.inspect(resource.as_bytes()).ok()?;
    let entries = inspection.entries();
    let others: Vec<_> = entries
        .iter()
        .filter(|h| h.outcome.answered())
        .filter_map(|h| h.holder.as_ref().filter(|t| t[..] != *ours).map(|t| (t, h)))
        .collect();
    // The quorum is the core's (R2).
    if others.len() < redlock_core::majority(entries.len()) {
        return None;
    }
    Some(match inspection.majority_holder() {
        Some(t) if t != ours => {
            let left = others
                .iter()
                .filter(|(held, _)| held[..] == *t)
                .filter_map(|(_, h)| u64::try_from(h.pttl_ms).ok())
                .min();
            let shown = others
                .iter()
                .find(|(held, _)| held[..] == *t)
                .map_or_else(|| printable(t), |(held, h)| holder_text(held, h.holder_len));
            match left {
                Some(ms) => format!("token {shown}, {} left", show_left(ms)),
                None => format!("token {shown}, no expiry"),
            }
        }
        _ => format!(
            "several tokens on {} of {} servers",
            others.len(),
            entries.len()
        ),
    })
}

fn fence_repair_help() -> String {
    format!(
        "\
redlock fence-repair [SERVER OPTIONS] --at-least N RESOURCE

Repairs RESOURCE's fencing-token counter after servers lost it (restarts
without persistence), when fenced acquisitions fail with exit status 65:
raises the counter to at least N on every server, never lowering it.

  --at-least N   the highest fence the protected resource has accepted
                 (only it, or its operator, knows): every later fencing
                 token is larger. Too low is safe (the resource refuses
                 the smaller tokens) but not live; too high skips numbers.

Running it again is harmless.

Server options:
{}
Exit statuses: 0 when a majority raised the counter (a line names any server
that did not); 69 fewer than a majority did; 64 bad usage.",
        server_options_help()
    )
}

fn fence_repair(raw: &[String]) -> Result<u8, Failure> {
    let spec = Spec {
        client: SERVER_OPTIONS,
        with_value: &["at-least"],
        flags: &[],
        short: &[],
        command_after: None,
    };
    let Some(args) = parse(raw, &spec, &fence_repair_help())? else {
        return Ok(0);
    };
    args.expect_positionals(&["RESOURCE"])?;
    let at_least = match args.value("at-least") {
        Some(n) => n.parse::<u64>().map_err(|_| {
            usage(format!(
                "--at-least must be a whole number from 0 up, not {}",
                args::shown(n)
            ))
        })?,
        None => {
            return Err(usage(
                "--at-least N is required: the highest fence the protected resource has accepted",
            )
            .into());
        }
    };
    let servers = servers(&args)?;
    let options = ClientOptions::from_args(&args)?;
    let client = client(&servers, &options, Duration::from_secs(30), false)?;
    let resource = &args.positionals[0];
    let urls = client.server_urls();
    let started = Instant::now();
    let repaired = client.fence_repair(resource.as_bytes(), at_least);
    let what = format!("fence-repair {resource:?}");
    match &repaired {
        Ok(r) => tell(
            &client,
            &what,
            started,
            &format!("counter at least {at_least}, highest {}", r.counter),
            Some(&r.report),
        ),
        Err(e) => tell(&client, &what, started, &e.to_string(), e.report()),
    }
    let repaired =
        repaired.map_err(|e| failure(&format!("cannot repair {resource:?}"), &e, &urls))?;
    say!(
        "repaired {resource:?}: fence counter at least {at_least} on {} of {} servers \
         (highest now {}); the next fencing token is larger",
        repaired.report.count(redlock_std::ServerOutcome::Ok),
        servers.len(),
        repaired.counter
    );
    if !repaired.complete() {
        eprintln!(
            "redlock fence-repair: not every server was repaired: {}; run it again once they answer",
            per_server(&repaired.report, &urls)
        );
    }
    Ok(0)
}

fn inspect_help() -> String {
    format!(
        "\
redlock inspect [SERVER OPTIONS] [--json] RESOURCE

Shows, per server, whether RESOURCE is held, by which token, and its
remaining time to live; then the token held by a majority, if any.

  --json    one JSON object: {{\"resource\": .., \"servers\": [{{\"server\": ..,
            \"answered\": .., \"held\": .., \"token\": .., \"token_len\": ..,
            \"pttl_ms\": ..}}] (a token longer than 64 bytes is cut; token_len
            is its full length; a server that did not answer has
            \"error\": why, e.g. \"not used: TLS failed: ...\"),
            \"majority_holder\": ..}}

Server options:
{}
Exit statuses: 0 when a majority answered; 69 too few servers answered.",
        server_options_help()
    )
}

fn inspect(raw: &[String]) -> Result<u8, Failure> {
    let spec = Spec {
        client: SERVER_OPTIONS,
        with_value: &[],
        flags: &["json"],
        short: &[],
        command_after: None,
    };
    let Some(args) = parse(raw, &spec, &inspect_help())? else {
        return Ok(0);
    };
    args.expect_positionals(&["RESOURCE"])?;
    let servers = servers(&args)?;
    let options = ClientOptions::from_args(&args)?;
    let client = client(&servers, &options, Duration::from_secs(30), false)?;
    let resource = &args.positionals[0];
    let urls = client.server_urls();
    let inspection = client
        .inspect(resource.as_bytes())
        .map_err(|e| failure(&format!("cannot inspect {resource:?}"), &e, &urls))?;
    let entries = inspection.entries();
    let answered = entries.iter().filter(|h| h.outcome.answered()).count();
    if args.flag("json") {
        let mut out = json::Object::new();
        out.string("resource", resource);
        let mut list = json::Array::new();
        for (i, h) in entries.iter().enumerate() {
            let mut o = json::Object::new();
            o.string(
                "server",
                &urls.get(i).map(ServerUrl::address).unwrap_or_default(),
            );
            o.bool("answered", h.outcome.answered());
            if h.outcome.answered() {
                o.bool("held", h.holder.is_some());
                match &h.holder {
                    Some(t) => o.string("token", &String::from_utf8_lossy(t)),
                    None => o.null("token"),
                }
                o.int("token_len", h.holder_len as i64);
                o.int("pttl_ms", h.pttl_ms);
            } else {
                o.string("error", &h.describe());
            }
            list.push_raw(&o.finish());
        }
        out.raw("servers", &list.finish());
        match inspection.majority_holder() {
            Some(t) => out.string("majority_holder", &String::from_utf8_lossy(t)),
            None => out.null("majority_holder"),
        }
        say!("{}", out.finish());
    } else {
        say!("{:<28} {:<6} {:>10}  TOKEN", "SERVER", "STATE", "TTL");
        for (i, h) in entries.iter().enumerate() {
            let server = urls.get(i).map(ServerUrl::address).unwrap_or_default();
            if !h.outcome.answered() {
                say!("{server:<28} {:<6} {:>10}  {}", "error", "-", h.describe());
                continue;
            }
            let (state, ttl, token) = match &h.holder {
                Some(t) => (
                    "held",
                    if let Ok(ms) = u64::try_from(h.pttl_ms) {
                        show_left(ms)
                    } else {
                        "no expiry".into()
                    },
                    holder_text(t, h.holder_len),
                ),
                None => ("free", "-".into(), "-".into()),
            };
            say!("{server:<28} {state:<6} {ttl:>10}  {token}");
        }
        match inspection.majority_holder() {
            Some(t) => say!("held by a majority: {}", printable(t)),
            None => say!("held by a majority: nobody"),
        }
    }
    if answered <= entries.len() / 2 {
        return Err(Failure::new(
            EX_UNAVAILABLE,
            format!("only {answered} of {} servers answered", entries.len()),
        ));
    }
    Ok(0)
}
