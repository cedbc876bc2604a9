//! `redlock`: `flock(1)` across machines. Runs a command under a Redlock
//! lock, acquires and releases locks for shell scripts, inspects them,
//! benchmarks a set of servers, and demonstrates the algorithm on five local
//! `redis-server` processes.
//!
//! Exit statuses: the command's own (`lock`), 0 on success, 64 for bad
//! usage, 69 when too few servers answered, 70 for a lost lock or an
//! internal error, 74 when `acquire` cannot print its token, 75 when the
//! lock is held by someone else.
// Output goes through `say!` and `warn_user!`, never a macro that panics.
#![warn(clippy::print_stdout, clippy::print_stderr)]

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

/// `eprintln!` that ignores a closed stderr (`redlock ... 2>&1 | head`)
/// instead of panicking, as [`say!`] does for stdout.
macro_rules! warn_user {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

/// `eprint!` (no newline) that ignores a closed stderr.
macro_rules! warn_user_inline {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr().lock(), $($arg)*);
    }};
}

mod args;
mod bench;
mod cli;
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

use clap::Args;

use crate::args::{
    Acquiring, ClientOptions, ConflictArgs, RetryingArgs, ServerArgs, Target, Usage, Wait,
    WaitArgs, parse_duration, usage,
};
use crate::cli::{Parsed, Sub};

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
/// `acquire` could not print the token (the lock was given back).
pub(crate) const EX_IOERR: u8 = 74;

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

fn main() -> ExitCode {
    // As given: the command of `lock` may hold bytes that are not UTF-8;
    // redlock's own arguments may not (see `cli::parse`).
    let raw: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let cli = match cli::parse(raw) {
        Parsed::Run(cli) => cli,
        Parsed::Exit(code) => return ExitCode::from(code),
    };
    let sub = cli.command.name();
    let result = match &cli.command {
        // Its own process, output and lifetime: no logger.
        Sub::GroupGuard => Ok(guard::serve()),
        Sub::Completions(a) => {
            use std::io::Write as _;
            let _ = std::io::stdout()
                .lock()
                .write_all(&cli::completions(a.shell));
            Ok(0)
        }
        Sub::Man => {
            use std::io::Write as _;
            let _ = std::io::stdout().lock().write_all(&cli::man_page());
            Ok(0)
        }
        Sub::Version => {
            say!("redlock {}", env!("CARGO_PKG_VERSION"));
            Ok(0)
        }
        command => {
            logger::install(cli.verbosity.verbose.saturating_add(command.verbose()));
            match command {
                Sub::Lock(a) => run::lock(a),
                Sub::Acquire(a) => acquire(a),
                Sub::Unlock(a) => unlock(a),
                Sub::Inspect(a) => inspect(a),
                Sub::FenceRepair(a) => fence_repair(a),
                Sub::Bench(a) => bench::bench(a),
                Sub::Demo(a) => demo::demo(a),
                Sub::Completions(_) | Sub::Man | Sub::Version | Sub::GroupGuard => Ok(0),
            }
        }
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            if f.code == EX_USAGE {
                warn_user!("redlock {sub}: {} (see redlock {sub} --help)", f.message);
            } else {
                warn_user!("redlock {sub}: {}", f.message);
            }
            ExitCode::from(f.code)
        }
    }
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
pub(crate) fn servers(args: &ServerArgs) -> Result<Vec<String>, Failure> {
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

/// `redlock acquire`'s options.
#[derive(Debug, Args)]
pub(crate) struct AcquireArgs {
    #[arg(
        long,
        value_name = "D",
        default_value = "30s",
        allow_hyphen_values = true,
        value_parser = parse_duration,
        value_hint = clap::ValueHint::Other,
        help = "lock time to live (a bare number is seconds)"
    )]
    pub(crate) ttl: Duration,
    #[arg(long, help = "also take an F1 fencing token (printed third)")]
    pub(crate) fence: bool,
    #[command(flatten)]
    pub(crate) wait: WaitArgs,
    #[command(flatten)]
    pub(crate) client: RetryingArgs,
    #[command(flatten)]
    pub(crate) target: Target,
}

/// `redlock acquire --help`: what it does.
const ACQUIRE_ABOUT: &str = "\
Acquires RESOURCE and prints one line: TOKEN VALIDITY_MS [FENCE]. The lock is
not released when redlock exits: release it with `redlock unlock RESOURCE
TOKEN`, or let it expire after --ttl.";

/// `redlock acquire --help`: an example, the exit statuses.
const ACQUIRE_AFTER: &str = "\
  read -r token validity <<< \"$(redlock acquire -w 10 jobs)\"

Exit statuses: 0 acquired; 75 (or -E N) held by someone else; 69 too few
servers answered; 74 the token could not be printed (the lock was given
back); 64 bad usage.";

fn acquire(args: &AcquireArgs) -> Result<u8, Failure> {
    let servers = servers(args.client.server())?;
    let (ttl, fence) = (args.ttl, args.fence);
    let how = args.wait.acquiring();
    let options = args.client.options()?;
    options.check_against_ttl(ttl)?;
    let client = client(&servers, &options, ttl, fence)?;
    let lock = acquire_lock(&client, &args.target.resource, ttl, &how, &|| false)?;
    let mut line = format!("{} {}", lock.token(), lock.remaining().as_millis());
    if let Some(f) = lock.fence() {
        let _ = write!(line, " {f}");
    }
    // The token is the lock: if it cannot be told (stdout closed), nobody
    // could release it, so it is given back now.
    let told = {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}").and_then(|()| out.flush())
    };
    if let Err(e) = told {
        let released = match client.unlock(&lock) {
            Ok(_) => "released",
            Err(_) => "not released (it expires with --ttl)",
        };
        return Err(Failure::new(
            EX_IOERR,
            format!("cannot print the token ({e}); the lock was {released}"),
        ));
    }
    Ok(0)
}

/// `redlock unlock`'s options.
#[derive(Debug, Args)]
pub(crate) struct UnlockArgs {
    #[command(flatten)]
    pub(crate) conflict: ConflictArgs,
    #[command(flatten)]
    pub(crate) server: ServerArgs,
    #[command(flatten)]
    pub(crate) target: Target,
    #[arg(
        value_name = "TOKEN",
        value_parser = crate::args::token,
        help = "the token `redlock acquire` printed"
    )]
    pub(crate) token: String,
}

/// `redlock unlock --help`: what it does.
const UNLOCK_ABOUT: &str = "\
Releases RESOURCE on every server where it is held with TOKEN (as printed by
`redlock acquire`). Keys held with another token are left alone; releasing
twice is harmless. It says which case it was:

  released            deleted on some servers: exit 0
  nothing was held    TOKEN held RESOURCE nowhere (it expired, or was
                      released already): exit 0
  held by another     nothing deleted, and a majority holds RESOURCE with
                      another token: exit 75 (or -E N)

The last two are told apart by reading the servers just after the release:
a holder that comes or goes between the two is seen as it is then.";

/// `redlock unlock --help`: the exit statuses.
const UNLOCK_AFTER: &str = "\
Exit statuses: 0 released, or nothing was held; 75 (or -E N) held by
another token; 69 too few servers answered; 64 bad usage.";

fn unlock(args: &UnlockArgs) -> Result<u8, Failure> {
    let conflict_code = args.conflict.conflict_exit_code;
    let servers = servers(&args.server)?;
    let options = args.server.options()?;
    let client = client(&servers, &options, Duration::from_secs(30), false)?;
    let (resource, token) = (&args.target.resource, &args.token);
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

/// `redlock fence-repair`'s options.
#[derive(Debug, Args)]
pub(crate) struct FenceRepairArgs {
    #[arg(
        long,
        value_name = "N",
        required = true,
        allow_hyphen_values = true,
        value_parser = fence_floor,
        value_hint = clap::ValueHint::Other,
        help = "the highest fence the protected resource has accepted (only it, or its \
                operator, knows): every later fencing token is larger. Too low is safe (the \
                resource refuses the smaller tokens) but not live; too high skips numbers"
    )]
    pub(crate) at_least: u64,
    #[command(flatten)]
    pub(crate) server: ServerArgs,
    #[command(flatten)]
    pub(crate) target: Target,
}

/// `--at-least N`: a whole number from 0 up.
fn fence_floor(s: &str) -> Result<u64, String> {
    s.parse()
        .map_err(|_| format!("{} is not a whole number from 0 up", args::shown(s)))
}

/// `redlock fence-repair --help`: what it does.
const FENCE_REPAIR_ABOUT: &str = "\
Repairs RESOURCE's fencing-token counter after servers lost it (restarts
without persistence), when fenced acquisitions fail with exit status 65:
raises the counter to at least N on every server, never lowering it.
Running it again is harmless.";

/// `redlock fence-repair --help`: the exit statuses.
const FENCE_REPAIR_AFTER: &str = "\
Exit statuses: 0 when a majority raised the counter (a line names any server
that did not); 69 fewer than a majority did; 64 bad usage.";

fn fence_repair(args: &FenceRepairArgs) -> Result<u8, Failure> {
    let at_least = args.at_least;
    let servers = servers(&args.server)?;
    let options = args.server.options()?;
    let client = client(&servers, &options, Duration::from_secs(30), false)?;
    let resource = &args.target.resource;
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
        warn_user!(
            "redlock fence-repair: not every server was repaired: {}; run it again once they answer",
            per_server(&repaired.report, &urls)
        );
    }
    Ok(0)
}

/// `redlock inspect`'s options.
#[derive(Debug, Args)]
pub(crate) struct InspectArgs {
    #[arg(
        long,
        help = "one JSON object: {\"resource\": .., \"servers\": [{\"server\": .., \"answered\": .., \
                \"held\": .., \"token\": .., \"token_len\": .., \"pttl_ms\": ..}], \
                \"majority_holder\": ..} (a token longer than 64 bytes is cut; token_len is \
                its full length; a server that did not answer has \"error\": why, e.g. \
                \"not used: TLS failed: ...\")"
    )]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) server: ServerArgs,
    #[command(flatten)]
    pub(crate) target: Target,
}

/// `redlock inspect --help`: what it does.
const INSPECT_ABOUT: &str = "\
Shows, per server, whether RESOURCE is held, by which token, and its
remaining time to live; then the token held by a majority, if any.";

/// `redlock inspect --help`: the exit statuses.
const INSPECT_AFTER: &str =
    "Exit statuses: 0 when a majority answered; 69 too few servers answered.";

fn inspect(args: &InspectArgs) -> Result<u8, Failure> {
    let servers = servers(&args.server)?;
    let options = args.server.options()?;
    let client = client(&servers, &options, Duration::from_secs(30), false)?;
    let resource = &args.target.resource;
    let urls = client.server_urls();
    let inspection = client
        .inspect(resource.as_bytes())
        .map_err(|e| failure(&format!("cannot inspect {resource:?}"), &e, &urls))?;
    let entries = inspection.entries();
    let answered = entries.iter().filter(|h| h.outcome.answered()).count();
    if args.json {
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
