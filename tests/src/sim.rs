//! A deterministic simulation of Redlock: N simulated Redis servers, a
//! simulated network and M clients running the real `redlock-core`, all
//! driven from one seed.
//!
//! - **Servers** keep keys with expiry on their own clocks (Redis' millisecond
//!   semantics), evaluate the product's scripts faithfully, answer `NOSCRIPT`
//!   for unknown digests, forget their script cache on restart, and keep or
//!   lose their data on restart (persistence on or off).
//! - **Network**: one TCP-like connection per client and server: messages
//!   are delayed (with occasional long spikes) but never reordered within a
//!   connection; connections reset (in-flight bytes are lost); servers can be
//!   partitioned (traffic is held until the partition heals).
//! - **Clocks** of clients and servers run at rates within a drift bound
//!   (parts per million); clients can be paused (SIGSTOP-like: their clock
//!   runs, they do nothing).
//! - Every request and reply is encoded and parsed with `redlock-resp`.
//!
//! Checkers: (1) no two clients' lock uses overlap in real time; (2) fencing
//! tokens strictly increase in grant order; (3) liveness: with a majority up
//! and no contention, every acquisition succeeds at the first attempt; (4) no
//! key is left behind by a failed acquisition once stragglers settle.

// Test support: a broken invariant of the simulation itself is a panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use alloc::collections::{BTreeMap, BinaryHeap, VecDeque};
use core::cmp::Reverse;

use redlock_core::redlock_resp::script::{
    EXTEND, FENCE_WRITE, FENCED_ACQUIRE, INSPECT, RELEASE, Script,
};
use redlock_core::redlock_resp::{Command, Reply, Status, parse_reply};
use redlock_core::{
    Acquire, Config, Duration, Instant, Lock, Operation, Release, Retry, ServerId, Servers,
};

const RESOURCE: &[u8] = b"res";

/// Simulated time starts here (µs), so that servers have been up a while.
const START: u64 = 100_000_000;

/// splitmix64: the simulation's only source of randomness.
#[derive(Debug, Clone)]
pub struct SimRng(u64);

impl SimRng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> SimRng {
        SimRng(seed ^ 0x5DEE_CE66_D1A4_F87D)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            lo
        } else {
            lo + self.next_u64() % (hi - lo + 1)
        }
    }

    /// True with probability `per_million` / 1e6.
    pub fn chance(&mut self, per_million: u64) -> bool {
        self.next_u64() % 1_000_000 < per_million
    }
}

impl rand_core::TryRng for SimRng {
    type Error = core::convert::Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        Ok(self.next_u64() as u32)
    }
    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        Ok(self.next_u64())
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        for chunk in dst.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
        Ok(())
    }
}
// Deterministic on purpose: the simulation must replay from its seed.
impl rand_core::TryCryptoRng for SimRng {}

/// Server crashes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Crashes {
    /// Chance per million, per server and per millisecond, of a crash.
    pub per_ms_ppm: u64,
    /// Keys survive a restart (`appendfsync always`).
    pub persistent: bool,
    /// How long a crashed server stays down, in ms (range).
    pub down_ms: (u64, u64),
    /// Only the first this-many servers crash (a minority, for fault models
    /// that allow only that many data losses).
    pub only_first: usize,
}

/// Everything that varies between runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// The seed of every random choice in the run.
    pub seed: u64,
    /// Number of servers.
    pub servers: usize,
    /// Number of clients, all on one resource.
    pub clients: usize,
    /// Lock cycles per client.
    pub cycles: usize,
    /// Lock ttl in ms.
    pub ttl_ms: u64,
    /// The core's configuration (fencing, guard, mutants, retries...).
    pub config: Config,
    /// One-way delay range in µs.
    pub delay_us: (u64, u64),
    /// Chance per million of a delay spike on a message, and its size in µs.
    pub spike: (u64, u64),
    /// Chance per million that sending a message resets its connection.
    pub reset_ppm: u64,
    /// Chance per million, per ms, of a partition of one server, and its length in ms.
    pub partition: (u64, u64),
    /// Server crashes, if any.
    pub crashes: Option<Crashes>,
    /// Clock rates are within ± this many parts per million.
    pub clock_ppm: u64,
    /// Clocks at the bound in the worst direction: servers fast, clients slow.
    pub clock_extreme: bool,
    /// Client pauses: chance per cycle (per million) and length range in ms.
    pub pause: (u64, (u64, u64)),
    /// Pauses may hit a client while it holds the lock (outside the assumptions).
    pub pause_while_holding: bool,
    /// A client uses the lock for this fraction of its validity (per mille range).
    pub hold_permille: (u64, u64),
    /// Idle time between a client's cycles, in ms.
    pub idle_ms: (u64, u64),
    /// Servers down for the whole run (liveness scenarios).
    pub down_from_start: usize,
}

impl Scenario {
    fn quiet(&self) -> bool {
        self.reset_ppm == 0
            && self.partition.0 == 0
            && self.crashes.is_none()
            && self.pause.0 == 0
            && self.spike.0 == 0
    }

    /// Checker 3 applies: one client, a majority up, nothing else going wrong.
    fn liveness_applies(&self) -> bool {
        let timeout = self
            .config
            .request_timeout_for(Duration::from_millis(self.ttl_ms))
            .as_micros();
        self.quiet()
            && self.clients == 1
            && self.down_from_start * 2 < self.servers
            && 2 * self.delay_us.1 < timeout
    }

    /// A liveness scenario: one client, no contention, a minority of servers
    /// down for the whole run, a quiet network with delays well under the
    /// request timeout.
    pub fn liveness(seed: u64) -> Scenario {
        let mut sc = Scenario::within_assumptions(seed);
        let mut r = SimRng::new(seed ^ 0xABCD);
        sc.clients = 1;
        sc.reset_ppm = 0;
        sc.partition = (0, 0);
        sc.crashes = None;
        sc.pause = (0, (0, 0));
        sc.spike = (0, 0);
        sc.delay_us = (20, 1_000);
        sc.ttl_ms = sc.ttl_ms.max(100);
        // The first fenced acquisition of a resource needs every server
        // (see the core's F1 repair rule): fenced runs have all servers up.
        sc.down_from_start = if sc.config.fencing {
            0
        } else {
            r.range(0, (sc.servers as u64 - 1) / 2) as usize
        };
        sc
    }
}

impl Scenario {
    /// A scenario within the algorithm's assumptions, varied by `seed`:
    /// delays, spikes, resets, partitions, crash-restarts (with persistence,
    /// or without it but restarted after more than the ttl), pauses outside
    /// the critical section, clock rates within the drift bound, fencing on
    /// or off, the restart guard on or off.
    pub fn within_assumptions(seed: u64) -> Scenario {
        let mut r = SimRng::new(seed);
        let servers = [1, 3, 3, 5, 5, 5, 7][r.range(0, 6) as usize];
        let ttl_ms = r.range(50, 400);
        let fencing = r.chance(400_000);
        let persistent = fencing || r.chance(500_000);
        // Without persistence, a restart is either delayed beyond the ttl, or
        // immediate with the client-side restart guard on.
        let guard = !persistent && r.chance(500_000);
        let crashes = r.chance(400_000).then_some(Crashes {
            per_ms_ppm: r.range(10, 200),
            persistent,
            down_ms: if persistent || guard {
                (1, 50)
            } else {
                (ttl_ms + 1, ttl_ms * 2)
            },
            only_first: servers,
        });
        let quiet = r.chance(250_000);
        let config = Config {
            restart_guard: guard.then_some(Duration::from_millis(ttl_ms)),
            fencing,
            retry: Retry {
                retries: r.range(0, 6) as u32,
                jitter: Duration::from_millis(r.range(1, 40)),
            },
            ..Config::DEFAULT
        };
        Scenario {
            seed,
            servers,
            clients: r.range(1, 5) as usize,
            cycles: r.range(2, 6) as usize,
            ttl_ms,
            config,
            delay_us: (r.range(20, 200), r.range(200, 3_000)),
            // A quarter of the runs have a quiet network (for checker 4).
            spike: if quiet {
                (0, 0)
            } else {
                (r.range(0, 20_000), r.range(1_000, ttl_ms * 2_000))
            },
            reset_ppm: if quiet { 0 } else { r.range(0, 20_000) },
            partition: if quiet {
                (0, 0)
            } else {
                (r.range(0, 300), r.range(1, ttl_ms))
            },
            crashes: if quiet { None } else { crashes },
            // Bounded drift: 0.25% each side; drift allowance is >= 1% + 2 ms.
            clock_ppm: r.range(0, 2_500),
            clock_extreme: false,
            pause: if quiet {
                (0, (0, 0))
            } else {
                (r.range(0, 300_000), (1, ttl_ms * 2))
            },
            pause_while_holding: false,
            hold_permille: (r.range(100, 500), r.range(500, 1_000)),
            idle_ms: (0, r.range(1, 30)),
            down_from_start: 0,
        }
    }
}

/// What went wrong in a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Violation {
    /// Two clients used the lock at the same real time (checker 1).
    Overlap {
        /// First client and its use window in µs.
        a: (usize, u64, u64),
        /// Second client and its use window in µs.
        b: (usize, u64, u64),
    },
    /// A fence token did not exceed the previous grant's (checker 2).
    FenceRegression {
        /// Previous (grant time, fence).
        prev: (u64, u64),
        /// This (grant time, fence).
        this: (u64, u64),
    },
    /// An acquisition failed although a majority was up without contention (checker 3).
    NotLive {
        /// The client.
        client: usize,
        /// Attempts it made.
        attempts: u32,
    },
    /// A failed acquisition's key was still on a server after settling (checker 4).
    LeftBehind {
        /// The server.
        server: usize,
        /// The token.
        token: String,
    },
}

/// The result of a run.
#[derive(Debug, Clone, Default)]
pub struct RunReport {
    /// Every violation found.
    pub violations: Vec<Violation>,
    /// Successful acquisitions.
    pub grants: usize,
    /// Failed acquisitions.
    pub failures: usize,
    /// Simulated time at the end, µs.
    pub end_us: u64,
}

/// A clock running at `1 + ppm/1e6` times real time, from an offset.
#[derive(Debug, Clone, Copy)]
struct Clock {
    offset: u64,
    ppm: i64,
}

impl Clock {
    fn local(&self, real: u64) -> u64 {
        let scaled = (real as i128) * (1_000_000 + self.ppm as i128) / 1_000_000;
        self.offset + scaled as u64
    }

    /// The earliest real time at which the local clock reads `local`.
    fn real(&self, local: u64) -> u64 {
        let l = local.saturating_sub(self.offset) as i128;
        let rate = 1_000_000 + self.ppm as i128;
        let mut r = (l * 1_000_000 + rate - 1) / rate;
        while self.local(r as u64) < local {
            r += 1;
        }
        r as u64
    }
}

#[derive(Debug, Clone)]
struct Entry {
    value: Vec<u8>,
    /// Redis semantics: the key lives while `now_ms <= when` (server clock, ms).
    when_ms: Option<u64>,
}

/// A simulated Redis server (public for the differential test against a
/// real `redis-server`).
#[derive(Debug)]
pub struct Server {
    clock: Clock,
    up: bool,
    persistent: bool,
    started_real: u64,
    data: BTreeMap<Vec<u8>, Entry>,
    scripts: Vec<&'static str>,
    crashes_since: u64,
}

impl Server {
    fn now_ms(&self, real: u64) -> u64 {
        self.clock.local(real) / 1_000
    }

    fn get(&mut self, key: &[u8], real: u64) -> Option<Vec<u8>> {
        let now = self.now_ms(real);
        let expired =
            matches!(self.data.get(key), Some(Entry { when_ms: Some(w), .. }) if now > *w);
        if expired {
            self.data.remove(key);
        }
        self.data.get(key).map(|e| e.value.clone())
    }

    fn pttl(&mut self, key: &[u8], real: u64) -> i64 {
        let now = self.now_ms(real);
        if self.get(key, real).is_none() {
            return -2;
        }
        match self.data.get(key).and_then(|e| e.when_ms) {
            Some(w) => (w - now) as i64,
            None => -1,
        }
    }

    fn set_px(&mut self, key: &[u8], value: &[u8], ttl_ms: Option<u64>, real: u64) {
        let when_ms = ttl_ms.map(|t| self.now_ms(real) + t);
        self.data.insert(
            key.to_vec(),
            Entry {
                value: value.to_vec(),
                when_ms,
            },
        );
    }

    /// A fresh server with a clock at real time, no persistence.
    pub fn new_for_test() -> Server {
        Server {
            clock: Clock { offset: 0, ppm: 0 },
            up: true,
            persistent: false,
            started_real: 0,
            data: BTreeMap::new(),
            scripts: Vec::new(),
            crashes_since: 0,
        }
    }

    /// Executes one command at real time `real` (µs); returns the RESP reply bytes.
    pub fn execute(&mut self, args: &[Vec<u8>], real: u64) -> Vec<u8> {
        let name = args[0].to_ascii_uppercase();
        match name.as_slice() {
            b"SET" => {
                // SET key value NX PX ms
                let ttl: u64 = core::str::from_utf8(&args[5]).unwrap().parse().unwrap();
                if self.get(&args[1], real).is_some() {
                    return b"$-1\r\n".to_vec();
                }
                self.set_px(&args[1], &args[2], Some(ttl), real);
                b"+OK\r\n".to_vec()
            }
            b"DEL" => {
                let existed = self.get(&args[1], real).is_some();
                self.data.remove(&args[1]);
                format!(":{}\r\n", u8::from(existed)).into_bytes()
            }
            b"EVALSHA" | b"EVAL" => {
                let all = [RELEASE, EXTEND, FENCED_ACQUIRE, FENCE_WRITE, INSPECT];
                let script: Option<&Script> = if name == b"EVAL" {
                    let s = all
                        .iter()
                        .find(|s| s.source.as_bytes() == args[1].as_slice());
                    if let Some(s) = s {
                        if !self.scripts.contains(&s.sha1) {
                            self.scripts.push(s.sha1);
                        }
                    }
                    s
                } else {
                    all.iter().find(|s| {
                        s.sha1.as_bytes() == args[1].as_slice() && self.scripts.contains(&s.sha1)
                    })
                };
                let Some(script) = script else {
                    return b"-NOSCRIPT No matching script. Please use EVAL.\r\n".to_vec();
                };
                let nkeys: usize = core::str::from_utf8(&args[2]).unwrap().parse().unwrap();
                let keys = &args[3..3 + nkeys];
                let argv = &args[3 + nkeys..];
                self.run_script(script, keys, argv, real)
            }
            _ => b"-ERR unknown command\r\n".to_vec(),
        }
    }

    /// The scripts of `redlock-resp`, evaluated as Redis' Lua would.
    fn run_script(
        &mut self,
        script: &Script,
        keys: &[Vec<u8>],
        argv: &[Vec<u8>],
        real: u64,
    ) -> Vec<u8> {
        let int = |n: i64| format!(":{n}\r\n").into_bytes();
        let num = |b: &[u8]| core::str::from_utf8(b).unwrap().parse::<u64>().unwrap();
        if script.sha1 == RELEASE.sha1 {
            if self.get(&keys[0], real).as_deref() == Some(&argv[0][..]) {
                self.data.remove(&keys[0]);
                return int(1);
            }
            int(0)
        } else if script.sha1 == EXTEND.sha1 {
            if self.get(&keys[0], real).as_deref() == Some(&argv[0][..]) {
                let value = argv[0].clone();
                self.set_px(&keys[0], &value, Some(num(&argv[1])), real);
                return int(1);
            }
            int(0)
        } else if script.sha1 == FENCED_ACQUIRE.sha1 {
            let counter = self.get(&keys[1], real);
            let set = self.get(&keys[0], real).is_none();
            if set {
                self.set_px(&keys[0], &argv[0], Some(num(&argv[1])), real);
            }
            let mut out = format!("*2\r\n:{}\r\n", u8::from(set)).into_bytes();
            match counter {
                Some(c) => {
                    out.extend_from_slice(format!("${}\r\n", c.len()).as_bytes());
                    out.extend_from_slice(&c);
                    out.extend_from_slice(b"\r\n");
                }
                None => out.extend_from_slice(b"$-1\r\n"),
            }
            out
        } else if script.sha1 == FENCE_WRITE.sha1 {
            if self.get(&keys[0], real).as_deref() == Some(&argv[0][..]) {
                let current = self.get(&keys[1], real).map_or(0, |c| num(&c));
                if current < num(&argv[1]) {
                    let t = argv[1].clone();
                    self.set_px(&keys[1], &t, None, real);
                }
                return int(1);
            }
            int(0)
        } else {
            // INSPECT
            let value = self.get(&keys[0], real);
            let pttl = self.pttl(&keys[0], real);
            let mut out = b"*2\r\n".to_vec();
            match value {
                Some(v) => {
                    out.extend_from_slice(format!("${}\r\n", v.len()).as_bytes());
                    out.extend_from_slice(&v);
                    out.extend_from_slice(b"\r\n");
                }
                None => out.extend_from_slice(b"$-1\r\n"),
            }
            out.extend_from_slice(format!(":{pttl}\r\n").as_bytes());
            out
        }
    }
}

#[derive(Debug, Default, Clone)]
struct Conn {
    epoch: u32,
    /// Last delivery time scheduled in each direction (TCP keeps order).
    last_to_server: u64,
    last_to_client: u64,
    /// Operation serial of each request sent and not yet answered.
    pending_ops: VecDeque<u64>,
    /// The incarnation of the server this connection was opened to.
    server_crashes: u64,
}

#[allow(clippy::large_enum_variant)] // one per simulated client
enum State {
    Idle,
    Acquiring {
        op: Acquire<&'static [u8]>,
        started_real: u64,
    },
    Holding {
        lock: Lock,
        granted_real: u64,
        until_local: u64,
    },
    Releasing(Release<&'static [u8]>),
    Finished,
}

struct Client {
    clock: Clock,
    state: State,
    cycles_left: usize,
    op_serial: u64,
    paused_until: u64,
    servers: Servers,
    /// Drained releases of failed acquisitions still running (A5).
    background: Vec<(u64, Acquire<&'static [u8]>)>,
    wake_gen: u64,
    /// What arrived while paused, in arrival order.
    inbox: VecDeque<Event>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A message arrives (to the server, or back to the client).
    Deliver {
        to_server: bool,
        client: usize,
        server: usize,
        epoch: u32,
        bytes: Vec<u8>,
        op: u64,
    },
    /// A client timer (wake generation, to ignore superseded timers).
    Wake {
        client: usize,
        generation: u64,
    },
    Crash {
        server: usize,
    },
    Restart {
        server: usize,
    },
    Partition {
        server: usize,
        until: u64,
    },
    /// A paused client resumes and handles what arrived meanwhile.
    Resume {
        client: usize,
    },
    /// Checker 4: look for a failed acquisition's token.
    CheckLeftBehind {
        token: Vec<u8>,
        crashes: Vec<u64>,
    },
}

/// One simulation run.
#[allow(missing_debug_implementations)] // holds operations mid-flight; nothing useful to print
pub struct Sim {
    sc: Scenario,
    rng: SimRng,
    now: u64,
    seq: u64,
    queue: BinaryHeap<Reverse<(u64, u64, Event)>>,
    servers: Vec<Server>,
    partitioned_until: Vec<u64>,
    clients: Vec<Client>,
    conns: Vec<Vec<Conn>>,
    uses: Vec<(usize, u64, u64)>,
    grants: Vec<(u64, Option<u64>)>,
    report: RunReport,
    /// `SIM_TRACE=1`: print every command a server executes.
    trace: bool,
}

impl Sim {
    /// Sets up a run of `sc`.
    pub fn new(sc: Scenario) -> Sim {
        let mut rng = SimRng::new(sc.seed.wrapping_mul(31).wrapping_add(7));
        let bound = sc.clock_ppm as i64;
        let clock = |rng: &mut SimRng, worst: i64| Clock {
            offset: rng.range(0, 1_000_000_000),
            ppm: if sc.clock_extreme {
                worst
            } else {
                rng.range(0, 2 * sc.clock_ppm) as i64 - bound
            },
        };
        let servers = (0..sc.servers)
            .map(|i| Server {
                clock: clock(&mut rng, bound),
                up: i >= sc.down_from_start,
                persistent: sc.crashes.is_some_and(|c| c.persistent),
                started_real: 0,
                data: BTreeMap::new(),
                scripts: Vec::new(),
                crashes_since: 0,
            })
            .collect();
        let clients = (0..sc.clients)
            .map(|_| Client {
                clock: clock(&mut rng, -bound),
                state: State::Idle,
                cycles_left: sc.cycles,
                op_serial: 0,
                paused_until: 0,
                servers: Servers::new(sc.servers).unwrap(),
                background: Vec::new(),
                wake_gen: 0,
                inbox: VecDeque::new(),
            })
            .collect();
        let conns = vec![vec![Conn::default(); sc.servers]; sc.clients];
        Sim {
            partitioned_until: vec![0; sc.servers],
            sc,
            rng,
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            servers,
            clients,
            conns,
            uses: Vec::new(),
            grants: Vec::new(),
            report: RunReport::default(),
            trace: std::env::var_os("SIM_TRACE").is_some(),
        }
    }

    fn push(&mut self, at: u64, ev: Event) {
        self.seq += 1;
        self.queue.push(Reverse((at, self.seq, ev)));
    }

    /// Runs to the end and checks the invariants.
    pub fn run(mut self) -> RunReport {
        self.now = START;
        for c in 0..self.sc.clients {
            let at = START + self.rng.range(0, 5_000);
            self.wake_at_real(c, at);
        }
        self.schedule_faults();
        // Bounded: every client does a fixed number of cycles.
        let limit = START + 600_000_000u64;
        while let Some(Reverse((at, _, ev))) = self.queue.pop() {
            self.now = at;
            if at > limit {
                break;
            }
            self.handle(ev);
            if self
                .clients
                .iter()
                .all(|c| matches!(c.state, State::Finished) && c.background.is_empty())
                && !self.queue.iter().any(|Reverse((_, _, e))| {
                    matches!(e, Event::CheckLeftBehind { .. } | Event::Deliver { .. })
                })
            {
                break;
            }
        }
        self.report.end_us = self.now;
        self.check_overlaps();
        self.check_fences();
        self.report
    }

    fn schedule_faults(&mut self) {
        // Faults are drawn per millisecond over the expected run length.
        let horizon_ms =
            (self.sc.cycles as u64 + 2) * (self.sc.ttl_ms + self.sc.idle_ms.1 + 50) * 2;
        let crashing = self
            .sc
            .crashes
            .map_or(0, |c| c.only_first.min(self.sc.servers));
        for s in 0..self.sc.servers {
            let mut t = 0;
            while t < horizon_ms {
                t += 1;
                if self.sc.partition.0 > 0 && self.rng.chance(self.sc.partition.0) {
                    let until = START + (t + self.rng.range(1, self.sc.partition.1)) * 1_000;
                    self.push(START + t * 1_000, Event::Partition { server: s, until });
                }
                if let Some(c) = self.sc.crashes {
                    if s < crashing && self.rng.chance(c.per_ms_ppm) {
                        self.push(START + t * 1_000, Event::Crash { server: s });
                        let down = self.rng.range(c.down_ms.0, c.down_ms.1);
                        t += down;
                        self.push(START + t * 1_000, Event::Restart { server: s });
                    }
                }
            }
        }
    }

    fn wake_at_real(&mut self, c: usize, at: u64) {
        let client = &mut self.clients[c];
        client.wake_gen += 1;
        let generation = client.wake_gen;
        self.push(
            at,
            Event::Wake {
                client: c,
                generation,
            },
        );
    }

    fn handle(&mut self, ev: Event) {
        match ev {
            Event::Deliver {
                to_server: true,
                client,
                server,
                epoch,
                bytes,
                op,
            } => self.deliver_to_server(client, server, epoch, bytes, op),
            Event::Deliver {
                to_server: false,
                client,
                ..
            }
            | Event::Wake { client, .. }
                if self.clients[client].paused_until > self.now
                    || !self.clients[client].inbox.is_empty() =>
            {
                // A paused process reads nothing; it will, in order, on resume.
                self.clients[client].inbox.push_back(ev);
            }
            Event::Resume { client } => {
                if self.clients[client].paused_until > self.now {
                    return;
                }
                while let Some(ev) = self.clients[client].inbox.pop_front() {
                    self.handle_now(ev);
                }
            }
            ev @ (Event::Deliver {
                to_server: false, ..
            }
            | Event::Wake { .. }) => self.handle_now(ev),
            Event::Crash { server } => {
                let s = &mut self.servers[server];
                s.up = false;
                s.crashes_since += 1;
                s.scripts.clear();
                if !s.persistent {
                    s.data.clear();
                }
                // Every connection to it breaks.
                for c in 0..self.sc.clients {
                    self.reset(c, server);
                }
            }
            Event::Restart { server } => {
                let s = &mut self.servers[server];
                s.up = true;
                s.started_real = self.now;
            }
            Event::Partition { server, until } => {
                self.partitioned_until[server] = self.partitioned_until[server].max(until);
            }
            Event::CheckLeftBehind { token, crashes } => {
                if self.trace {
                    eprintln!("{} check {}", self.now, String::from_utf8_lossy(&token));
                }
                for (i, s) in self.servers.iter_mut().enumerate() {
                    if !s.up || s.crashes_since != crashes[i] {
                        continue;
                    }
                    let now = self.now;
                    if s.get(RESOURCE, now).as_deref() == Some(&token[..]) {
                        self.report.violations.push(Violation::LeftBehind {
                            server: i,
                            token: String::from_utf8_lossy(&token).into_owned(),
                        });
                    }
                }
            }
        }
    }

    /// Handles a client event taken from its inbox (the pause is over).
    fn handle_now(&mut self, ev: Event) {
        match ev {
            Event::Deliver {
                to_server: false,
                client,
                server,
                epoch,
                bytes,
                op,
            } => self.deliver_to_client(client, server, epoch, bytes, op),
            Event::Wake { client, generation } => {
                if generation == self.clients[client].wake_gen {
                    self.step(client);
                }
            }
            other => self.handle(other),
        }
    }

    fn delay(&mut self) -> u64 {
        let mut d = self.rng.range(
            self.sc.delay_us.0,
            self.sc.delay_us.1.max(self.sc.delay_us.0),
        );
        if self.sc.spike.0 > 0 && self.rng.chance(self.sc.spike.0) {
            d += self.rng.range(0, self.sc.spike.1);
        }
        d
    }

    /// Resets the connection of `c` to `s`: in-flight bytes are lost and
    /// the client's operations hear of it.
    fn reset(&mut self, c: usize, s: usize) {
        let conn = &mut self.conns[c][s];
        conn.epoch += 1;
        let had = !conn.pending_ops.is_empty();
        conn.pending_ops.clear();
        if had {
            let now = self.client_now(c);
            let client = &mut self.clients[c];
            match &mut client.state {
                State::Acquiring { op, .. } => op.handle_connection_error(now, ServerId(s as u8)),
                State::Releasing(op) => op.handle_connection_error(now, ServerId(s as u8)),
                _ => {}
            }
            for (_, op) in &mut client.background {
                op.handle_connection_error(now, ServerId(s as u8));
            }
            let now = self.now;
            self.wake_at_real(c, now);
        }
    }

    fn client_now(&self, c: usize) -> Instant {
        Instant::from_micros(self.clients[c].clock.local(self.now))
    }

    fn send(&mut self, c: usize, s: usize, bytes: Vec<u8>, op: u64) {
        if self.sc.reset_ppm > 0 && self.rng.chance(self.sc.reset_ppm) {
            self.conns[c][s].pending_ops.push_back(op);
            self.reset(c, s);
            return;
        }
        if !self.servers[s].up {
            // Connection refused.
            self.conns[c][s].pending_ops.push_back(op);
            self.reset(c, s);
            return;
        }
        // A (re)connection learns the server's incarnation (INFO server:
        // uptime_in_seconds, rounded down like Redis does).
        let server_crashes = self.servers[s].crashes_since;
        if self.conns[c][s].pending_ops.is_empty()
            && self.conns[c][s].server_crashes != server_crashes
        {
            self.conns[c][s].server_crashes = server_crashes;
        }
        if self.sc.config.restart_guard.is_some() {
            let uptime_s = (self.now - self.servers[s].started_real) / 1_000_000;
            let local = self.clients[c].clock.local(self.now);
            let started = Instant::from_micros(local.saturating_sub(uptime_s * 1_000_000));
            let client = &mut self.clients[c];
            client.servers.set_incarnation(ServerId(s as u8), started);
            // The running acquisitions hear of it too (a platform learns it on connect).
            if let State::Acquiring { op, .. } = &mut client.state {
                op.set_incarnation(ServerId(s as u8), started);
            }
            for (_, op) in &mut client.background {
                op.set_incarnation(ServerId(s as u8), started);
            }
        }
        let mut at = self.now + self.delay();
        at = at.max(self.partitioned_until[s]);
        let conn = &mut self.conns[c][s];
        at = at.max(conn.last_to_server);
        conn.last_to_server = at;
        conn.pending_ops.push_back(op);
        let epoch = conn.epoch;
        self.push(
            at,
            Event::Deliver {
                to_server: true,
                client: c,
                server: s,
                epoch,
                bytes,
                op,
            },
        );
    }

    fn deliver_to_server(&mut self, c: usize, s: usize, epoch: u32, bytes: Vec<u8>, op: u64) {
        if epoch != self.conns[c][s].epoch || !self.servers[s].up {
            return;
        }
        let Ok(Status::Complete((Reply::Aggregate(a), used))) = parse_reply(&bytes) else {
            panic!("the client sent bytes that do not parse as a command");
        };
        assert_eq!(used, bytes.len());
        let args: Vec<Vec<u8>> = a.iter().map(|r| r.as_bytes().unwrap().to_vec()).collect();
        let now = self.now;
        let reply = self.servers[s].execute(&args, now);
        if self.trace {
            let shown: Vec<String> = args
                .iter()
                .map(|a| String::from_utf8_lossy(&a[..a.len().min(12)]).into_owned())
                .collect();
            eprintln!(
                "{now} c{c} -> s{s} op{op} {shown:?} => {:?}",
                String::from_utf8_lossy(&reply)
            );
        }
        let mut at = self.now + self.delay();
        at = at.max(self.partitioned_until[s]);
        let conn = &mut self.conns[c][s];
        at = at.max(conn.last_to_client);
        conn.last_to_client = at;
        self.push(
            at,
            Event::Deliver {
                to_server: false,
                client: c,
                server: s,
                epoch,
                bytes: reply,
                op,
            },
        );
    }

    fn deliver_to_client(&mut self, c: usize, s: usize, epoch: u32, bytes: Vec<u8>, op: u64) {
        if epoch != self.conns[c][s].epoch {
            return;
        }
        if self.trace {
            eprintln!(
                "{} s{s} -> c{c} op{op} {:?} current op{}",
                self.now,
                String::from_utf8_lossy(&bytes),
                self.clients[c].op_serial
            );
        }
        let front = self.conns[c][s].pending_ops.pop_front();
        assert_eq!(front, Some(op), "replies come back in order");
        let Ok(Status::Complete((reply, _))) = parse_reply(&bytes) else {
            panic!("bad reply bytes")
        };
        let now = self.client_now(c);
        let server = ServerId(s as u8);
        let client = &mut self.clients[c];
        // Replies go to the operation that sent the request, if it still runs.
        if let Some((_, bg)) = client
            .background
            .iter_mut()
            .find(|(serial, _)| *serial == op)
        {
            assert!(bg.handle_reply(now, server, reply).is_ok());
        } else if op == client.op_serial {
            let r = match &mut client.state {
                State::Acquiring { op, .. } => op.handle_reply(now, server, reply),
                State::Releasing(op) => op.handle_reply(now, server, reply),
                _ => Ok(()),
            };
            assert!(r.is_ok(), "the core saw an unsolicited reply");
        }
        self.step(c);
    }

    /// Drains an operation's transmits onto the network.
    fn flush(&mut self, c: usize) {
        let now = self.client_now(c);
        let mut buf = vec![0u8; 1024];
        loop {
            let client = &mut self.clients[c];
            let serial = client.op_serial;
            let t = match &mut client.state {
                State::Acquiring { op, .. } => op.poll_transmit(now, &mut buf).unwrap(),
                State::Releasing(op) => op.poll_transmit(now, &mut buf).unwrap(),
                _ => None,
            };
            let Some(t) = t else { break };
            self.send(c, t.server.index(), buf[..t.len].to_vec(), serial);
        }
        let mut i = 0;
        while i < self.clients[c].background.len() {
            let (serial, op) = &mut self.clients[c].background[i];
            let serial = *serial;
            match op.poll_transmit(now, &mut buf).unwrap() {
                Some(t) => self.send(c, t.server.index(), buf[..t.len].to_vec(), serial),
                None => i += 1,
            }
        }
        // A background op is done once nothing is left to send and no reply is awaited.
        let conns = &self.conns[c];
        self.clients[c]
            .background
            .retain(|(serial, _)| conns.iter().any(|k| k.pending_ops.contains(serial)));
    }

    /// Advances client `c`'s state machine at the current time.
    fn step(&mut self, c: usize) {
        let now = self.client_now(c);
        if let State::Acquiring { op, .. } = &mut self.clients[c].state {
            op.handle_timeout(now);
        }
        if let State::Releasing(op) = &mut self.clients[c].state {
            op.handle_timeout(now);
        }
        self.flush(c);
        let state = core::mem::replace(&mut self.clients[c].state, State::Idle);
        let next = match state {
            State::Idle => {
                if self.clients[c].cycles_left == 0 {
                    State::Finished
                } else {
                    self.clients[c].cycles_left -= 1;
                    self.maybe_pause(c, false);
                    self.clients[c].op_serial += 1;
                    let ttl = Duration::from_millis(self.sc.ttl_ms);
                    let servers = self.clients[c].servers;
                    let op = Acquire::new(
                        &self.sc.config,
                        &servers,
                        RESOURCE,
                        ttl,
                        None,
                        &mut self.rng,
                        now,
                    )
                    .unwrap();
                    self.clients[c].state = State::Acquiring {
                        op,
                        started_real: self.now,
                    };
                    return self.step(c);
                }
            }
            State::Acquiring {
                mut op,
                started_real,
            } => match op.poll_outcome() {
                None => State::Acquiring { op, started_real },
                Some(Ok(lock)) => {
                    // Checker 3's bound: four round trips (the fenced acquire
                    // and the fence write, each possibly NOSCRIPT then EVAL).
                    if self.sc.liveness_applies()
                        && self.now - started_real > 4 * 2 * self.sc.delay_us.1 + 1_000
                    {
                        self.report.violations.push(Violation::NotLive {
                            client: c,
                            attempts: 1,
                        });
                    }
                    self.report.grants += 1;
                    self.grants.push((self.now, lock.fence()));
                    let permille = self
                        .rng
                        .range(self.sc.hold_permille.0, self.sc.hold_permille.1);
                    let hold = lock.validity().as_micros() * permille / 1_000;
                    if self.sc.pause_while_holding {
                        self.maybe_pause(c, true);
                    }
                    State::Holding {
                        lock,
                        granted_real: self.now,
                        until_local: now.as_micros() + hold,
                    }
                }
                Some(Err(e)) => {
                    if self.trace {
                        eprintln!(
                            "{} c{c} op{} failed {:?} {:?}",
                            self.now,
                            self.clients[c].op_serial,
                            op.token(),
                            e
                        );
                    }
                    self.report.failures += 1;
                    if self.sc.liveness_applies() {
                        self.report.violations.push(Violation::NotLive {
                            client: c,
                            attempts: e.attempts,
                        });
                    }
                    if self.sc.quiet() {
                        // Well within the ttl: a left-behind key would still be there.
                        let settle = self.sc.delay_us.1 * 4 + 1_000;
                        let crashes = self.servers.iter().map(|s| s.crashes_since).collect();
                        let token = op.token().as_bytes().to_vec();
                        self.push(self.now + settle, Event::CheckLeftBehind { token, crashes });
                    }
                    let serial = self.clients[c].op_serial;
                    if !op.is_finished()
                        || self.conns[c]
                            .iter()
                            .any(|k| k.pending_ops.contains(&serial))
                    {
                        self.clients[c].background.push((serial, op));
                        self.flush(c);
                    }
                    self.idle(c)
                }
            },
            State::Holding {
                lock,
                granted_real,
                until_local,
            } => {
                if now.as_micros() < until_local {
                    State::Holding {
                        lock,
                        granted_real,
                        until_local,
                    }
                } else {
                    // The critical section ends now (in real time).
                    self.uses.push((c, granted_real, self.now));
                    self.clients[c].op_serial += 1;
                    let servers = self.clients[c].servers;
                    let op = Release::for_lock(&self.sc.config, &servers, RESOURCE, &lock);
                    self.clients[c].state = State::Releasing(op);
                    return self.step(c);
                }
            }
            State::Releasing(mut op) => match op.poll_outcome() {
                None => State::Releasing(op),
                Some(_) => self.idle(c),
            },
            State::Finished => State::Finished,
        };
        self.clients[c].state = next;
        self.schedule_wake(c);
    }

    fn idle(&mut self, c: usize) -> State {
        let ms = self.rng.range(self.sc.idle_ms.0, self.sc.idle_ms.1);
        let at = self.clients[c].clock.local(self.now) + ms * 1_000;
        self.clients[c].state = State::Idle;
        let real = self.clients[c].clock.real(at);
        self.wake_at_real(c, real);
        State::Idle
    }

    fn maybe_pause(&mut self, c: usize, holding: bool) {
        if self.sc.pause.0 > 0 && self.rng.chance(self.sc.pause.0) {
            let (lo, hi) = self.sc.pause.1;
            let len = self.rng.range(lo, hi) * 1_000;
            // A pause while holding starts just after the grant.
            let start = self.now + if holding { 1 } else { 0 };
            let until = self.clients[c].paused_until.max(start + len);
            self.clients[c].paused_until = until;
            self.push(until, Event::Resume { client: c });
        }
    }

    fn schedule_wake(&mut self, c: usize) {
        let local = match &self.clients[c].state {
            State::Acquiring { op, .. } => op.poll_timeout().map(Instant::as_micros),
            State::Releasing(op) => op.poll_timeout().map(Instant::as_micros),
            State::Holding { until_local, .. } => Some(*until_local),
            State::Idle | State::Finished => return,
        };
        if let Some(local) = local {
            let real = self.clients[c].clock.real(local).max(self.now);
            self.wake_at_real(c, real);
        }
    }

    fn check_overlaps(&mut self) {
        let mut uses = self.uses.clone();
        uses.sort_by_key(|u| u.1);
        for (i, a) in uses.iter().enumerate() {
            for b in &uses[i + 1..] {
                if b.1 >= a.2 {
                    break;
                }
                if a.0 != b.0 {
                    self.report
                        .violations
                        .push(Violation::Overlap { a: *a, b: *b });
                }
            }
        }
    }

    fn check_fences(&mut self) {
        let mut prev: Option<(u64, u64)> = None;
        for &(at, fence) in &self.grants {
            let Some(f) = fence else { continue };
            if let Some(p) = prev {
                if f <= p.1 {
                    self.report.violations.push(Violation::FenceRegression {
                        prev: p,
                        this: (at, f),
                    });
                }
            }
            prev = Some((at, f));
        }
    }
}

/// Runs `sc` and returns what was found.
pub fn run(sc: Scenario) -> RunReport {
    Sim::new(sc).run()
}

/// Encodes a command for tests of the simulated server.
pub fn encode_args(args: &[&[u8]]) -> Vec<u8> {
    let mut buf = vec![0u8; 4096];
    let mut cmd = Command::new(&mut buf, args.len());
    for a in args {
        cmd.arg(a);
    }
    let n = cmd.finish().unwrap();
    buf.truncate(n);
    buf
}
