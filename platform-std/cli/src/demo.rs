//! `redlock demo`: five local `redis-server` processes, contending workers,
//! two servers killed half-way, an overlap check, latency percentiles.

use alloc::sync::Arc;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use core::time::Duration;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Instant;

use redlock_std::{Error, ServerUrl};

use clap::Args;

use crate::args::{OneAttemptArgs, Verbosity, number_in, parse_duration};
use crate::{EX_SOFTWARE, EX_UNAVAILABLE, Failure, builder, servers};

extern crate alloc;

/// `redlock demo`'s options.
#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    #[arg(
        long,
        value_name = "D",
        default_value = "4s",
        allow_hyphen_values = true,
        value_parser = parse_duration,
        value_hint = clap::ValueHint::Other,
        help = "how long the workers contend (a bare number is seconds)"
    )]
    pub(crate) duration: Duration,
    #[arg(
        long,
        value_name = "N",
        default_value = "4",
        allow_hyphen_values = true,
        value_parser = number_in::<1, 64>,
        value_hint = clap::ValueHint::Other,
        help = "contending workers"
    )]
    pub(crate) workers: usize,
    #[command(flatten)]
    pub(crate) client: OneAttemptArgs,
    #[command(flatten)]
    pub(crate) verbosity: Verbosity,
}

/// `redlock demo --help`: what it does.
pub(crate) fn about() -> String {
    format!(
        "\
Shows Redlock at work. Without --servers it starts five redis-server
processes on free loopback ports (in a temporary directory), runs contending
workers (each with its own client, as if on its own machine) for --duration,
prints who held the lock when, kills two of the five servers half-way to
show that locking goes on with a majority, checks that no two holders
overlapped and that fencing tokens only grew, prints latency percentiles,
and stops and removes everything, also on Ctrl-C.

With --servers it uses those servers instead (and stops none of them): its
resource gets a name of its own (redlock-demo-PID-N), and at the end, also
on Ctrl-C, it deletes the keys it made there: the lock's and its fence
counter's (RESOURCE:fence).

A fence counter key never expires, on purpose: a counter that expired
would start again from 1, and fencing tokens would go backwards, so a
resource that refuses smaller tokens than it has seen would refuse every
later holder, and one that does not would take stale work for new. Only the
demo deletes its own, because nothing will use that resource again.

Without --servers, the local servers just started would refuse every vote
with --restart-guard; --request-timeout is {} here unless given, since
the servers and the workers share this machine.",
        crate::args::show_duration(DEMO_REQUEST_TIMEOUT)
    )
}

/// `redlock demo --help`: its exit statuses.
pub(crate) const AFTER: &str = "\
Exit statuses: 0 when no two holders overlapped and fencing tokens only
grew; 70 when they did not, or no worker ever held the lock (the first
problem is named); 69 the local servers did not start; 128+N interrupted by
signal N; 64 bad usage.";

/// The resource on the demo's own servers.
const RESOURCE: &str = "redlock-demo";

/// The ttl of the workers' locks.
const TTL: Duration = Duration::from_secs(2);

/// The workers' request timeout unless `--request-timeout` says otherwise.
const DEMO_REQUEST_TIMEOUT: Duration = Duration::from_millis(200);

/// One time a worker held the lock.
#[derive(Debug, Clone, Copy)]
struct Hold {
    worker: usize,
    start: Instant,
    end: Instant,
    fence: Option<u64>,
}

/// `redis-server` processes in a temporary directory, stopped and removed
/// when dropped.
struct LocalServers {
    dir: PathBuf,
    children: Vec<(u16, Option<Child>)>,
}

impl LocalServers {
    fn start(n: usize) -> Result<LocalServers, Failure> {
        match Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
        {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Failure::new(
                    EX_UNAVAILABLE,
                    "redis-server is not installed or not on PATH (Debian/Ubuntu: \
                     apt-get install redis-server), or give --servers",
                ));
            }
            Err(e) => {
                return Err(Failure::new(
                    EX_UNAVAILABLE,
                    format!("cannot run redis-server: {e}"),
                ));
            }
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!("redlock-demo-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| {
            Failure::new(EX_SOFTWARE, format!("cannot create {}: {e}", dir.display()))
        })?;
        let mut servers = LocalServers {
            dir,
            children: Vec::new(),
        };
        for _ in 0..n {
            let (port, child) = servers.spawn_one()?;
            servers.children.push((port, Some(child)));
        }
        Ok(servers)
    }

    /// Starts one server on a free port, retrying if the port was taken.
    fn spawn_one(&self) -> Result<(u16, Child), Failure> {
        let mut last = String::new();
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .map_err(|e| Failure::new(EX_SOFTWARE, format!("no free port: {e}")))?;
            let mut command = Command::new("redis-server");
            command
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(&self.dir)
                .arg("--logfile")
                .arg(self.dir.join(format!("redis-{port}.log")))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                // Its own process group: Ctrl-C reaches redlock, which then
                // stops the servers itself.
                .process_group(0);
            sys::die_with_parent(&mut command);
            let mut child = command.spawn().map_err(|e| {
                Failure::new(EX_UNAVAILABLE, format!("cannot start redis-server: {e}"))
            })?;
            let ready_by = Instant::now() + Duration::from_secs(5);
            while Instant::now() < ready_by {
                if ping(port) {
                    return Ok((port, child));
                }
                if let Ok(Some(status)) = child.try_wait() {
                    last = format!("redis-server on port {port} exited: {status}");
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
            if last.is_empty() {
                last = format!("redis-server on port {port} did not answer PING");
            }
        }
        Err(Failure::new(EX_UNAVAILABLE, last))
    }

    fn urls(&self) -> Vec<String> {
        self.children
            .iter()
            .map(|(port, _)| format!("127.0.0.1:{port}"))
            .collect()
    }

    fn kill(&mut self, i: usize) -> Option<u16> {
        let (port, child) = self.children.get_mut(i)?;
        let mut child = child.take()?;
        let _ = child.kill();
        let _ = child.wait();
        Some(*port)
    }
}

impl Drop for LocalServers {
    fn drop(&mut self) {
        for i in 0..self.children.len() {
            self.kill(i);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
    let mut buf = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

/// The demo's output: one line at a time, each stamped with the time since
/// the start when it is printed, under one lock, so the lines come out in
/// the order of their stamps.
struct Timeline {
    t0: Instant,
    out: Mutex<()>,
}

impl Timeline {
    /// Prints `  1.234s  text` and returns the instant stamped.
    fn line(&self, text: &str) -> Instant {
        let _turn = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        say!(
            "  {:6.3}s  {text}",
            now.duration_since(self.t0).as_secs_f64()
        );
        now
    }
}

/// Deletes `keys` on the server at `url` over a plain connection of its
/// own (with `AUTH` and `SELECT` as the URL says): the demo's cleanup on
/// servers it did not start. The error never holds the password. Not for
/// TLS servers (`url.tls`).
fn delete_keys(url: &ServerUrl, keys: &[&[u8]]) -> std::io::Result<()> {
    let mut last = std::io::Error::other("the host has no address");
    let mut stream = None;
    for addr in (url.host.as_str(), url.port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = e,
        }
    }
    let mut stream = stream.ok_or(last)?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut commands: Vec<Vec<Vec<u8>>> = Vec::new();
    if let Some(password) = &url.password {
        let mut auth = vec![b"AUTH".to_vec()];
        auth.extend(url.user.as_ref().map(|u| u.as_bytes().to_vec()));
        auth.push(password.expose().to_vec());
        commands.push(auth);
    }
    if url.db != 0 {
        commands.push(vec![b"SELECT".to_vec(), url.db.to_string().into_bytes()]);
    }
    let mut del = vec![b"DEL".to_vec()];
    del.extend(keys.iter().map(|k| k.to_vec()));
    commands.push(del);
    let mut request = Vec::new();
    for args in &commands {
        request.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            request.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            request.extend_from_slice(a);
            request.extend_from_slice(b"\r\n");
        }
    }
    stream.write_all(&request)?;
    let mut replies = BufReader::new(stream);
    for _ in &commands {
        let mut line = String::new();
        replies.read_line(&mut line)?;
        if !(line.starts_with('+') || line.starts_with(':')) {
            return Err(std::io::Error::other(format!(
                "the server answered {:?}",
                line.trim_end()
            )));
        }
    }
    Ok(())
}

/// A small xorshift, seeded per worker, for hold times and back-off.
struct Jitter(u64);

impl Jitter {
    fn ms(&mut self, lo: u64, hi: u64) -> Duration {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        Duration::from_millis(lo + self.0 % (hi - lo + 1))
    }
}

/// What a lock and a fencing token are: the demo's first two lines.
fn explain() {
    say!(
        "A lock lets one worker at a time use something shared; Redlock takes it on a majority \
         of independent Redis servers, so losing a minority of them loses no lock."
    );
    say!(
        "A fencing token is a number that comes with each lock and grows with every new \
         holder: the shared thing can refuse a holder whose token is older than one it saw."
    );
}

pub(crate) fn demo(args: &DemoArgs) -> Result<u8, Failure> {
    let (duration, workers) = (args.duration, args.workers);
    // The signal that interrupted the demo, if one did.
    let interrupted = Arc::new(AtomicUsize::new(0));
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        signal_hook::flag::register_usize(sig, interrupted.clone(), sig as usize)
            .map_err(|e| Failure::new(EX_SOFTWARE, format!("cannot handle signal {sig}: {e}")))?;
    }

    let mut options = args.client.options()?;
    // Five servers and the workers share this machine's cores: a request
    // may wait longer than the 20 ms a 2 s ttl gives by default, and a
    // release that timed out would count as a problem of the demo.
    options.request_timeout = options.request_timeout.or(Some(DEMO_REQUEST_TIMEOUT));
    options.check_against_ttl(TTL)?;
    let mut local = None;
    let given = &args.client.server;
    let urls = match given.servers()? {
        Some(_) => servers(given)?,
        None if given.servers.is_some() => {
            return Err(crate::args::usage("--servers is empty").into());
        }
        None => {
            explain();
            say!("starting 5 redis-server processes on 127.0.0.1 ...");
            let started = LocalServers::start(5)?;
            let urls = started.urls();
            local = Some(started);
            urls
        }
    };
    let clients = (0..workers)
        .map(|_| {
            builder(&urls, &options)
                .fencing(true)
                .ttl(TTL)
                .build()
                .map_err(|e| Failure::new(crate::EX_USAGE, e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    // On the servers given, once their settings were checked (a usage
    // error prints nothing else); before starting local ones, above.
    if local.is_none() {
        explain();
    }
    // On servers it did not start, a name of its own: the keys it leaves
    // there (the fence counter never expires) are its own to delete.
    let resource = if local.is_some() {
        RESOURCE.to_string()
    } else {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        format!("{RESOURCE}-{}-{nanos}", std::process::id())
    };
    let resource = resource.as_str();
    let urls_given = clients
        .first()
        .map(redlock_std::Client::server_urls)
        .unwrap_or_default();
    // As the client shows them: a password given in --servers is hidden.
    let shown: Vec<String> = clients
        .first()
        .map(|c| c.server_urls().iter().map(|u| u.to_string()).collect())
        .unwrap_or_default();
    say!("servers: {}", shown.join(", "));
    say!(
        "{workers} workers contend for {resource:?} for {:.1} s (each with its own client, fencing on)",
        duration.as_secs_f64()
    );

    let t0 = Instant::now();
    let timeline = Timeline {
        t0,
        out: Mutex::new(()),
    };
    let end = t0 + duration;
    let stop = AtomicBool::new(false);
    let holds = Mutex::new(Vec::<Hold>::new());
    let latencies = Mutex::new((Vec::<u64>::new(), Vec::<u64>::new()));
    let errors = Mutex::new(Vec::<String>::new());
    let unavailable = AtomicUsize::new(0);
    let conflicts = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for (w, client) in clients.iter().enumerate() {
            let (stop, holds, latencies, errors, unavailable, conflicts, timeline) = (
                &stop,
                &holds,
                &latencies,
                &errors,
                &unavailable,
                &conflicts,
                &timeline,
            );
            scope.spawn(move || {
                let mut jitter = Jitter(
                    0x9e37_79b9_7f4a_7c15 ^ (w as u64 + 1).wrapping_mul(0x2545_f491_4f6c_dd1d),
                );
                let (mut acq, mut rel) = (Vec::new(), Vec::new());
                while !stop.load(Ordering::SeqCst) {
                    let a0 = Instant::now();
                    let result = client.try_lock(resource.as_bytes(), TTL);
                    acq.push(nanos(a0.elapsed()));
                    match result {
                        Ok(lock) => {
                            // Printed when it starts, under the lock: the
                            // lines come out in the order of their times.
                            let work = jitter.ms(40, 80);
                            let start = timeline.line(&format!(
                                "worker {} holds the lock for {:>3} ms   fence {}",
                                w + 1,
                                work.as_millis(),
                                lock.fence().map_or("-".into(), |f| f.to_string())
                            ));
                            std::thread::sleep(work);
                            let end = Instant::now();
                            let hold = Hold {
                                worker: w + 1,
                                start,
                                end,
                                fence: lock.fence(),
                            };
                            if end > lock.valid_until() {
                                lock_error(
                                    errors,
                                    format!("worker {} worked past its validity", w + 1),
                                );
                            }
                            holds.lock().unwrap_or_else(|p| p.into_inner()).push(hold);
                            let r0 = Instant::now();
                            if let Err(e) = client.unlock(&lock) {
                                lock_error(errors, format!("worker {} release: {e}", w + 1));
                            }
                            rel.push(nanos(r0.elapsed()));
                            std::thread::sleep(jitter.ms(5, 15));
                        }
                        Err(Error::Conflict(_)) => {
                            conflicts.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(jitter.ms(5, 15));
                        }
                        Err(e) => {
                            // Shown, but not a failure of the demo: servers
                            // are being killed on purpose.
                            warn_user!("  worker {}: {e}", w + 1);
                            unavailable.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(jitter.ms(5, 15));
                        }
                    }
                }
                let mut l = latencies.lock().unwrap_or_else(|p| p.into_inner());
                l.0.extend(acq);
                l.1.extend(rel);
            });
        }
        // Half-way: kill two of the five local servers.
        let half = t0 + duration / 2;
        let mut killed = false;
        while Instant::now() < end && interrupted.load(Ordering::SeqCst) == 0 {
            if !killed && Instant::now() >= half {
                killed = true;
                if let Some(servers) = local.as_mut() {
                    let ports: Vec<u16> = [3, 4].iter().filter_map(|&i| servers.kill(i)).collect();
                    timeline.line(&format!(
                        "--- killed the redis-servers on ports {ports:?}: 3 of 5 are left, still a majority ---"
                    ));
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        stop.store(true, Ordering::SeqCst);
    });
    drop(clients);
    // What was cleaned up: the servers it started, or its keys on the
    // servers it was given (which it leaves running).
    let clean_up = |local: Option<LocalServers>| -> String {
        if local.is_some() {
            drop(local);
            return "every server stopped, every file removed".into();
        }
        let fence = format!("{resource}:fence");
        let keys: [&[u8]; 2] = [resource.as_bytes(), fence.as_bytes()];
        let mut failed = Vec::new();
        for url in &urls_given {
            // Its own clean-up connection is plain TCP: never to a TLS
            // server (it would send the password in clear).
            if url.tls {
                failed.push(format!(
                    "{}: a TLS server (delete them with redis-cli --tls)",
                    url.address()
                ));
            } else if let Err(e) = delete_keys(url, &keys) {
                failed.push(format!("{}: {e}", url.address()));
            }
        }
        let done = format!(
            "removed the demo's keys ({resource:?} and its fence counter {fence:?}) from {} of {} \
             servers, left running",
            urls_given.len() - failed.len(),
            urls_given.len()
        );
        if failed.is_empty() {
            done
        } else {
            format!("{done}; not from {}", failed.join(", "))
        }
    };
    let sig = interrupted.load(Ordering::SeqCst);
    if sig != 0 {
        return Err(Failure::new(
            u8::try_from(128 + sig).unwrap_or(EX_SOFTWARE),
            format!("interrupted (signal {sig}); {}", clean_up(local)),
        ));
    }

    let mut holds = holds.into_inner().unwrap_or_else(|p| p.into_inner());
    holds.sort_by_key(|h| h.start);
    let mut problems = errors.into_inner().unwrap_or_else(|p| p.into_inner());
    for pair in holds.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if b.start < a.end {
            problems.push(format!("workers {} and {} overlapped", a.worker, b.worker));
        }
        if let (Some(fa), Some(fb)) = (a.fence, b.fence) {
            if fb <= fa {
                problems.push(format!("fencing token went from {fa} to {fb}"));
            }
        }
    }
    let by: alloc::collections::BTreeSet<usize> = holds.iter().map(|h| h.worker).collect();
    say!();
    say!(
        "{} holds by {} of {workers} workers; no two overlapped: {}; fencing tokens always grew: {}",
        holds.len(),
        by.len(),
        if problems.iter().any(|p| p.contains("overlapped")) {
            "NO"
        } else {
            "yes"
        },
        if problems.iter().any(|p| p.contains("fencing")) {
            "NO"
        } else {
            "yes"
        },
    );
    let (unavailable, conflicts) = (unavailable.into_inner(), conflicts.into_inner());
    let (mut acq, mut rel) = latencies.into_inner().unwrap_or_else(|p| p.into_inner());
    acq.sort_unstable();
    rel.sort_unstable();
    // Attempts: every try_lock call, one at a time (no retries inside):
    // most find the lock held and are tried again after a short pause.
    let mut attempts = format!(
        "acquire attempts: {} ({} got the lock, {conflicts} found it held and were tried again \
         after a pause",
        acq.len(),
        holds.len()
    );
    if unavailable > 0 {
        let _ = core::fmt::Write::write_fmt(
            &mut attempts,
            format_args!(", {unavailable} failed for want of servers (shown above)"),
        );
    }
    say!("{attempts}), {}", latency(&acq));
    say!("releases: {}, {}", rel.len(), latency(&rel));
    let cleaned = clean_up(local);
    if holds.is_empty() {
        problems.push("no worker ever held the lock".into());
    }
    match problems.first() {
        None => {
            say!("done: {cleaned}.");
            Ok(0)
        }
        Some(first) => Err(Failure::new(
            EX_SOFTWARE,
            format!("{} problem(s); first: {first}", problems.len()),
        )),
    }
}

fn lock_error(errors: &Mutex<Vec<String>>, e: String) {
    warn_user!("  {e}");
    errors.lock().unwrap_or_else(|p| p.into_inner()).push(e);
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// `latency p50 .. p90 .. p99 .. max ..` of sorted nanoseconds.
fn latency(sorted: &[u64]) -> String {
    format!(
        "latency p50 {} p90 {} p99 {} max {}",
        us(sorted, 0.5),
        us(sorted, 0.9),
        us(sorted, 0.99),
        us(sorted, 1.0)
    )
}

/// The `p` quantile of sorted nanoseconds, in µs or ms for display.
fn us(sorted: &[u64], p: f64) -> String {
    if sorted.is_empty() {
        return "-".into();
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    let ns = sorted[rank - 1];
    if ns >= 10_000_000 {
        format!("{:.1} ms", ns as f64 / 1e6)
    } else {
        format!("{:.0} µs", ns as f64 / 1e3)
    }
}

#[allow(unsafe_code)]
mod sys {
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    /// The child gets SIGKILL if redlock dies without stopping it (killed
    /// with SIGKILL, say): no server outlives the demo.
    pub(super) fn die_with_parent(command: &mut Command) {
        // SAFETY: the closure runs in the child between fork and exec; it
        // only calls prctl(2), which is async-signal-safe, and allocates
        // nothing.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
    }
}
