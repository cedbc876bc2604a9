//! The workers: child processes of the run (`torture worker ...`), each
//! looping lock, read the register with its fence, pause, write `value + 1`
//! with its fence, unlock, and recording its attempts and holds (see
//! `record.rs`).
//!
//! - `watchdog`: the library's `lock_auto_extend_with`; the watchdog
//!   extends in the background and reports a loss through its callback.
//! - `plain`: the library's `lock`; the worker extends when less than a
//!   third of the ttl is left and its pause goes on; a failed extension
//!   records the hold as lost.
//! - `cli`: the real `redlock lock --fence RESOURCE -- torture step ...`;
//!   the step (`step`) is the command run under the lock: it reads
//!   `REDLOCK_FENCE`, does the read/pause/write and records the attempt
//!   and the hold; the worker then corrects the hold from the events
//!   `redlock lock -v` logged (see `worker/cli.rs`).
//!
//! After a hold a worker rests 50-250 ms (seeded), so that holds spread
//! over the workers. Every worker writes even when its validity ended
//! meanwhile (a paused
//! worker, a lost lock): the resource must refuse a stale write, and the
//! write says whether the worker knew it was past its validity.
//!
//! A worker stops when its standard input closes: the run closes it to end
//! the run, and it closes by itself when the run dies, even by SIGKILL. It
//! finishes its current cycle first, with its pause cut short.

use alloc::sync::Arc;
use core::net::SocketAddr;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use core::time::Duration;
use std::io::Read as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use redlock_std::{AutoLock, Client, Error, Lock};
use redlock_tests::sim::SimRng;
use redlock_torture::history::{Attempt, AttemptOutcome, Hold, Micros, RunClock, WorkerKind};
use redlock_torture::resource::ResourceClient;

use crate::args::{Options, Usage, show_duration};
use crate::record::{Journal, Record, run_time};

/// The resource every worker locks (its fence counter is `torture:fence`).
pub(crate) const RESOURCE: &str = "torture";

/// How long a `redlock lock` may run before the CLI worker kills it: far
/// beyond a cycle (a ttl of retries, a pause, an unlock), so only a hang.
const CLI_LIMIT: Duration = Duration::from_secs(60);

/// A gap this large (in ttls) in the step's own sleep means it was stopped
/// (SIGSTOP): its lock may have expired meanwhile.
const FROZEN_GAP_DIVISOR: u32 = 2;

/// Set once the worker's standard input closed: finish and exit.
static STOPPING: AtomicBool = AtomicBool::new(false);

fn stopping() -> bool {
    STOPPING.load(Ordering::Relaxed)
}

/// Sets [`STOPPING`] when standard input reaches its end.
fn watch_stdin() {
    let spawned = std::thread::Builder::new()
        .name("stdin-watch".into())
        .spawn(|| {
            let mut buf = [0u8; 64];
            let mut stdin = std::io::stdin();
            loop {
                match stdin.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
            STOPPING.store(true, Ordering::Relaxed);
        });
    if spawned.is_err() {
        STOPPING.store(true, Ordering::Relaxed);
    }
}

/// Sleeps `d`, in short slices, returning early once the worker stops.
fn nap(d: Duration) {
    let until = Instant::now() + d;
    while !stopping() {
        let now = Instant::now();
        if now >= until {
            break;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(20)));
    }
}

/// What every kind of worker (and the step) is told.
#[derive(Debug, Clone)]
pub(crate) struct WorkerArgs {
    kind: WorkerKind,
    id: u32,
    servers: Vec<String>,
    resource: SocketAddr,
    clock: RunClock,
    ttl: Duration,
    out: PathBuf,
    seed: u64,
    restart_guard: Option<Duration>,
    redlock: Option<PathBuf>,
}

impl WorkerArgs {
    /// The options of `torture worker`.
    pub(crate) const WITH_VALUE: &[&str] = &[
        "kind",
        "id",
        "servers",
        "resource",
        "epoch-unix-micros",
        "ttl",
        "out",
        "seed",
        "restart-guard",
        "redlock",
    ];

    pub(crate) fn parse(o: &Options) -> Result<WorkerArgs, Usage> {
        let kind = match o.required("kind")? {
            "watchdog" => WorkerKind::Watchdog,
            "plain" => WorkerKind::Plain,
            "cli" => WorkerKind::Cli,
            k => {
                return Err(Usage(format!(
                    "--kind: {k:?} is not watchdog, plain or cli"
                )));
            }
        };
        let redlock = o.value("redlock").map(PathBuf::from);
        if kind == WorkerKind::Cli && redlock.is_none() {
            return Err(Usage("--kind cli needs --redlock PATH".into()));
        }
        Ok(WorkerArgs {
            kind,
            id: id(o)?,
            servers: o
                .required("servers")?
                .split(',')
                .map(str::to_owned)
                .collect(),
            resource: resource(o)?,
            clock: clock(o)?,
            ttl: o
                .duration("ttl")?
                .ok_or_else(|| Usage("--ttl is required".into()))?,
            out: PathBuf::from(o.required("out")?),
            seed: o.number("seed")?.unwrap_or(0),
            restart_guard: o.duration("restart-guard")?,
            redlock,
        })
    }

    /// The arguments that make `torture worker` parse back to these.
    pub(crate) fn to_args(&self) -> Vec<String> {
        let kind = match self.kind {
            WorkerKind::Watchdog => "watchdog",
            WorkerKind::Plain => "plain",
            WorkerKind::Cli => "cli",
        };
        let mut args = vec![
            "worker".to_owned(),
            "--kind".into(),
            kind.into(),
            "--id".into(),
            self.id.to_string(),
            "--servers".into(),
            self.servers.join(","),
            "--resource".into(),
            self.resource.to_string(),
            "--epoch-unix-micros".into(),
            self.clock.epoch_unix_micros.to_string(),
            "--ttl".into(),
            show_duration(self.ttl),
            "--out".into(),
            self.out.display().to_string(),
            "--seed".into(),
            self.seed.to_string(),
        ];
        if let Some(g) = self.restart_guard {
            args.extend(["--restart-guard".into(), show_duration(g)]);
        }
        if let Some(r) = &self.redlock {
            args.extend(["--redlock".into(), r.display().to_string()]);
        }
        args
    }

    /// A worker's settings (the run builds them).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        kind: WorkerKind,
        id: u32,
        servers: Vec<String>,
        resource: SocketAddr,
        clock: RunClock,
        ttl: Duration,
        out: PathBuf,
        seed: u64,
        restart_guard: Option<Duration>,
        redlock: Option<PathBuf>,
    ) -> WorkerArgs {
        WorkerArgs {
            kind,
            id,
            servers,
            resource,
            clock,
            ttl,
            out,
            seed,
            restart_guard,
            redlock,
        }
    }
}

fn id(o: &Options) -> Result<u32, Usage> {
    let id = o
        .number("id")?
        .ok_or_else(|| Usage("--id is required".into()))?;
    u32::try_from(id).map_err(|_| Usage(format!("--id: {id} is too large")))
}

fn resource(o: &Options) -> Result<SocketAddr, Usage> {
    let r = o.required("resource")?;
    r.parse()
        .map_err(|_| Usage(format!("--resource: {r:?} is not an address")))
}

fn clock(o: &Options) -> Result<RunClock, Usage> {
    Ok(RunClock {
        epoch_unix_micros: o
            .number("epoch-unix-micros")?
            .ok_or_else(|| Usage("--epoch-unix-micros is required".into()))?,
    })
}

/// The pause between the read and the write: mostly 50-800 ms; one time in
/// ten 0.6 to 1.2 ttls, which needs an extension (by the plain worker, the
/// watchdog, or `redlock lock`'s watchdog).
fn pause(rng: &mut SimRng, ttl: Duration) -> Duration {
    let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
    if rng.chance(100_000) {
        Duration::from_millis(rng.range(ttl_ms * 6 / 10, ttl_ms * 12 / 10))
    } else {
        Duration::from_millis(rng.range(50, 800))
    }
}

/// How a failed lock call is recorded.
fn outcome_of(e: &Error) -> AttemptOutcome {
    match e {
        Error::Conflict(_) => AttemptOutcome::Conflict,
        Error::Unavailable(_) => AttemptOutcome::Unavailable,
        Error::Expired(_) => AttemptOutcome::Expired,
        Error::FenceLost(_) => AttemptOutcome::FenceLost,
        other => AttemptOutcome::Other(other.to_string()),
    }
}

/// The fenced register, reconnected after an error.
#[derive(Debug)]
struct Register {
    addr: SocketAddr,
    conn: Option<ResourceClient>,
}

impl Register {
    fn new(addr: SocketAddr) -> Register {
        Register { addr, conn: None }
    }

    fn conn(&mut self) -> Option<&mut ResourceClient> {
        if self.conn.is_none() {
            self.conn = ResourceClient::connect(self.addr).ok();
        }
        self.conn.as_mut()
    }

    /// The value, `Err(max fence)` if refused, `None` if the resource
    /// could not be asked.
    fn read(&mut self, worker: u32, fence: u64) -> Option<Result<u64, u64>> {
        let answer = self.conn()?.read(worker, fence);
        answer.map_err(|_| self.conn = None).ok()
    }

    /// `value + 1` of what was read (1 if nothing was), with its fence.
    fn write(&mut self, worker: u32, fence: u64, read: Option<Result<u64, u64>>, past: bool) {
        let read = match read {
            Some(Ok(v)) => v,
            _ => 0,
        };
        let Some(conn) = self.conn() else { return };
        if conn
            .write(worker, fence, read.saturating_add(1), read, past)
            .is_err()
        {
            self.conn = None;
        }
    }
}

/// The library workers' lock: plain, or kept alive by the watchdog.
enum Held {
    Plain(Box<Lock>),
    Watchdog {
        auto: AutoLock,
        /// When the watchdog reported the loss, plus one (0: not lost).
        lost: Arc<AtomicU64>,
    },
}

impl Held {
    fn lock(&self) -> Lock {
        match self {
            Held::Plain(lock) => (**lock).clone(),
            Held::Watchdog { auto, .. } => auto.lock(),
        }
    }

    fn lost_at(&self) -> Option<Micros> {
        match self {
            Held::Plain(_) => None,
            Held::Watchdog { lost, .. } => lost.load(Ordering::SeqCst).checked_sub(1),
        }
    }

    fn release(self, client: &Client) {
        let _ = match self {
            Held::Plain(lock) => client.unlock(&lock),
            Held::Watchdog { auto, .. } => auto.release(),
        };
    }
}

/// `torture worker --kind watchdog|plain|cli ...`.
pub(crate) fn worker(raw: &[String]) -> Result<ExitCode, Usage> {
    let o = Options::parse(raw, WorkerArgs::WITH_VALUE, &[])?;
    let args = WorkerArgs::parse(&o)?;
    watch_stdin();
    let mut journal = match Journal::open(&args.out) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("torture worker {}: {}: {e}", args.id, args.out.display());
            return Ok(ExitCode::from(2));
        }
    };
    let result = match args.kind {
        WorkerKind::Cli => cli::cli_loop(&args, &mut journal),
        WorkerKind::Watchdog | WorkerKind::Plain => library_loop(&args, &mut journal),
    };
    Ok(match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("torture worker {}: {e}", args.id);
            ExitCode::from(2)
        }
    })
}

fn library_loop(args: &WorkerArgs, journal: &mut Journal) -> Result<(), String> {
    let client = Client::builder()
        .servers(&args.servers)
        .fencing(true)
        .ttl(args.ttl)
        .restart_guard(args.restart_guard)
        .build()
        .map_err(|e| format!("cannot build the client: {e}"))?;
    let mut rng = SimRng::new(args.seed);
    let mut register = Register::new(args.resource);
    let clock = args.clock;
    while !stopping() {
        let start = clock.now();
        let held = match args.kind {
            WorkerKind::Watchdog => {
                let lost = Arc::new(AtomicU64::new(0));
                let flag = lost.clone();
                client
                    .lock_auto_extend_with(RESOURCE, args.ttl, move |_| {
                        let _ = flag.compare_exchange(
                            0,
                            clock.now().saturating_add(1),
                            Ordering::SeqCst,
                            Ordering::SeqCst,
                        );
                    })
                    .map(|auto| Held::Watchdog { auto, lost })
            }
            _ => client
                .lock(RESOURCE, args.ttl)
                .map(|lock| Held::Plain(Box::new(lock))),
        };
        let end = clock.now();
        let held = match held {
            Ok(held) => held,
            Err(e) => {
                journal.write(&Record::Attempt(Attempt {
                    worker: args.id,
                    kind: args.kind,
                    start,
                    end,
                    outcome: outcome_of(&e),
                }));
                nap(Duration::from_millis(rng.range(0, 20)));
                continue;
            }
        };
        let fence = held.lock().fence().unwrap_or(0);
        journal.write(&Record::Attempt(Attempt {
            worker: args.id,
            kind: args.kind,
            start,
            end,
            outcome: AttemptOutcome::Acquired { fence },
        }));
        let pause = pause(&mut rng, args.ttl);
        journal.write(&Record::Intent {
            worker: args.id,
            token: held.lock().token().to_owned(),
            pause_ms: u64::try_from(pause.as_millis()).unwrap_or(u64::MAX),
        });
        cycle(args, journal, &client, &mut register, held, end, pause);
        nap(after_release(&mut rng));
    }
    Ok(())
}

/// A worker rests a little after a hold, so that the worker that just
/// released does not take the lock again before the others' retries come
/// round (the holds would pile up on one worker).
fn after_release(rng: &mut SimRng) -> Duration {
    Duration::from_millis(rng.range(50, 250))
}

/// One hold of a library worker: read, pause (extending a plain lock when
/// needed), write, release.
fn cycle(
    args: &WorkerArgs,
    journal: &mut Journal,
    client: &Client,
    register: &mut Register,
    mut held: Held,
    acquired: Micros,
    pause: Duration,
) {
    let clock = args.clock;
    let fence = held.lock().fence().unwrap_or(0);
    let mut hold = Hold {
        worker: args.id,
        kind: args.kind,
        fence,
        acquired,
        valid_until: run_time(&clock, held.lock().valid_until()),
        released: None,
        lost: None,
    };
    journal.write(&Record::Hold(hold.clone()));
    let read = register.read(args.id, fence);
    let until = Instant::now() + pause;
    while !stopping() && Instant::now() < until {
        if let Held::Plain(lock) = &mut held {
            if hold.lost.is_none() && lock.remaining() < args.ttl / 3 {
                match client.extend(lock, args.ttl) {
                    Ok(()) => hold.valid_until = run_time(&clock, lock.valid_until()),
                    Err(_) => hold.lost = Some(clock.now()),
                }
                journal.write(&Record::Hold(hold.clone()));
            }
        }
        let valid_until = run_time(&clock, held.lock().valid_until());
        let lost = hold.lost.or(held.lost_at());
        // A watchdog's extension moved the validity on (a difference of a
        // few microseconds is the two clocks' reading, not an extension).
        if valid_until > hold.valid_until.saturating_add(1000) || lost != hold.lost {
            hold.valid_until = valid_until;
            hold.lost = lost;
            journal.write(&Record::Hold(hold.clone()));
        }
        std::thread::sleep(
            until
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(20)),
        );
    }
    // Always write: a stale write must be refused by the resource.
    let past = Instant::now() >= held.lock().valid_until();
    register.write(args.id, fence, read, past);
    // The validity of the last successful extension (a failed one leaves
    // the lock's validity as it was).
    hold.valid_until = run_time(&clock, held.lock().valid_until());
    hold.lost = hold.lost.or(held.lost_at());
    hold.released = Some(clock.now());
    journal.write(&Record::Hold(hold));
    held.release(client);
}

mod cli;

pub(crate) use cli::step;
