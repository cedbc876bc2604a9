//! The schedule of a run's faults, drawn from its seed before the run
//! starts (see the module docs of `nemesis` for the faults and their
//! spacing).

use core::time::Duration;

use redlock_tests::proxy::Fault as ProxyFault;
use redlock_tests::sim::SimRng;
use redlock_torture::history::{FaultKind, Profile};

use super::{HOLDER_WAIT, INTENT_WAIT, OVERLAP_WAIT};

/// What the plan allows for restarting killed servers (in parallel): a
/// restart takes 50-200 ms here. A longer one only shortens the calm after
/// it; one that fails is a run error.
const RESTART_ALLOWANCE: Duration = Duration::from_secs(1);

/// The overlap scenario's length at most, as planned: the wait for a
/// majority holder, the last look at its intent, and the restarts.
const OVERLAP_LENGTH: Duration = OVERLAP_WAIT
    .saturating_add(INTENT_WAIT)
    .saturating_add(RESTART_ALLOWANCE);

/// One step of the server lane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ServerStep {
    /// SIGKILL, restart after `down`.
    KillDelayed { servers: Vec<usize>, down: Duration },
    /// SIGSTOP, SIGCONT after `span`.
    PauseServers { servers: Vec<usize>, span: Duration },
    /// The proxies apply `fault` for `span`.
    Proxy {
        kind: FaultKind,
        fault: ProxyFault,
        servers: Vec<usize>,
        span: Duration,
    },
    /// SIGKILL and restart at once (unsafe profiles).
    KillImmediate { server: usize },
    /// The overlap scenario (unsafe profiles; see the module docs).
    Overlap { held: [usize; 2], restarted: usize },
}

/// One pause of the worker lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WorkerStep {
    /// Which worker, as an index into the run's workers: the one paused if
    /// it holds the lock within [`HOLDER_WAIT`], else whichever worker
    /// holds it first within another [`HOLDER_WAIT`], else this one.
    pub(crate) worker: usize,
    /// How long into the chosen worker's hold (from when the nemesis saw it
    /// begin) it is paused: before its read, or between its read and its
    /// write.
    pub(crate) into_hold: Duration,
    /// For how long.
    pub(crate) span: Duration,
}

/// The schedule: each step with when it is due (since the run began).
#[derive(Debug, Clone, Default)]
pub(crate) struct Plan {
    pub(crate) servers: Vec<(Duration, ServerStep)>,
    pub(crate) workers: Vec<(Duration, WorkerStep)>,
}

fn ms(rng: &mut SimRng, lo: u64, hi: u64) -> Duration {
    Duration::from_millis(rng.range(lo, hi))
}

/// `count` distinct servers of `n`.
fn pick(rng: &mut SimRng, n: usize, count: usize) -> Vec<usize> {
    let mut all: Vec<usize> = (0..n).collect();
    let mut chosen = Vec::with_capacity(count);
    for _ in 0..count.min(n) {
        let k = usize::try_from(rng.range(0, all.len() as u64 - 1)).unwrap_or(0);
        chosen.push(all.remove(k));
    }
    chosen
}

/// How many kinds of server fault [`safe_step`] has.
const SAFE_KINDS: u64 = 6;

/// The safe kinds in a seeded order, drawn without replacement: every run
/// of [`SAFE_KINDS`] safe steps has each kind once.
#[derive(Debug, Default)]
struct Bag(Vec<u64>);

impl Bag {
    fn draw(&mut self, rng: &mut SimRng) -> u64 {
        if self.0.is_empty() {
            self.0 = (0..SAFE_KINDS).collect();
        }
        let k = usize::try_from(rng.range(0, self.0.len() as u64 - 1)).unwrap_or(0);
        self.0.remove(k)
    }
}

/// A fault of `kind` inside the assumptions, with how long it takes.
fn safe_step(rng: &mut SimRng, n: usize, max_ttl: Duration, kind: u64) -> (ServerStep, Duration) {
    // A minority: one or two of five.
    let count = usize::try_from(rng.range(1, ((n - 1) / 2) as u64)).unwrap_or(1);
    let servers = pick(rng, n, count);
    let proxy = |kind, fault, servers, span| {
        (
            ServerStep::Proxy {
                kind,
                fault,
                servers,
                span,
            },
            span,
        )
    };
    match kind {
        0 => {
            let down = max_ttl + ms(rng, 500, 1500);
            (ServerStep::KillDelayed { servers, down }, down)
        }
        1 => {
            let span = ms(rng, 500, 3000);
            (ServerStep::PauseServers { servers, span }, span)
        }
        2 => {
            let delay = ms(rng, 10, 80);
            let span = ms(rng, 1000, 4000);
            proxy(
                FaultKind::ProxyDelay,
                ProxyFault::Delay(delay),
                servers,
                span,
            )
        }
        3 => {
            let span = ms(rng, 300, 2000);
            proxy(FaultKind::ProxyHold, ProxyFault::Hold, servers, span)
        }
        4 => {
            let span = ms(rng, 500, 3000);
            proxy(
                FaultKind::ProxyBlackhole,
                ProxyFault::Blackhole,
                servers,
                span,
            )
        }
        _ => {
            let span = ms(rng, 200, 1500);
            proxy(FaultKind::ProxyReset, ProxyFault::Reset, servers, span)
        }
    }
}

/// Draws the schedule for a run of `profile` whose faults fall in
/// `window` (since the run began), over `n` servers and workers with these
/// ttls.
pub(crate) fn plan(
    profile: Profile,
    seed: u64,
    window: (Duration, Duration),
    n: usize,
    ttls: &[Duration],
) -> Plan {
    let max_ttl = ttls.iter().copied().max().unwrap_or_default();
    let mut plan = Plan::default();

    let mut rng = SimRng::new(seed);
    let mut bag = Bag::default();
    let unsafe_profile = profile != Profile::Safe;
    let mut t = window.0;
    let mut k = 0u32;
    while t < window.1 {
        // Unsafe profiles: two restart steps, then a safe fault; every
        // fourth restart step is a single kill and immediate restart.
        let (step, length) = if unsafe_profile && k % 3 != 2 {
            if k % 6 == 4 {
                let server = pick(&mut rng, n, 1).first().copied().unwrap_or(0);
                (ServerStep::KillImmediate { server }, RESTART_ALLOWANCE)
            } else {
                let s = pick(&mut rng, n, 3);
                let step = ServerStep::Overlap {
                    held: [
                        s.first().copied().unwrap_or(0),
                        s.get(1).copied().unwrap_or(1),
                    ],
                    restarted: s.get(2).copied().unwrap_or(2),
                };
                (step, OVERLAP_LENGTH)
            }
        } else {
            let kind = bag.draw(&mut rng);
            safe_step(&mut rng, n, max_ttl, kind)
        };
        if t + length > window.1 {
            break;
        }
        // After a restart, the calm lets a guarded client count the
        // restarted servers' votes again (the largest ttl) and the operator
        // repair the fence counters, before the next fault.
        let calm = match step {
            ServerStep::KillImmediate { .. }
            | ServerStep::Overlap { .. }
            | ServerStep::KillDelayed { .. }
                if unsafe_profile =>
            {
                max_ttl + ms(&mut rng, 2000, 3500)
            }
            _ => ms(&mut rng, 1000, 2500),
        };
        plan.servers.push((t, step));
        t += length + calm;
        k += 1;
    }

    let mut rng = SimRng::new(seed ^ 0x9E37_79B9_7F4A_7C15);
    let mut t = window.0 + ms(&mut rng, 1000, 4000);
    while !ttls.is_empty() {
        let worker = usize::try_from(rng.range(0, ttls.len() as u64 - 1)).unwrap_or(0);
        let into_hold = ms(&mut rng, 0, 400);
        let span = ttls.get(worker).copied().unwrap_or_default() + ms(&mut rng, 1000, 2500);
        // The wait for a holder may take two HOLDER_WAITs.
        if t + HOLDER_WAIT * 2 + into_hold + span > window.1 {
            break;
        }
        plan.workers.push((
            t,
            WorkerStep {
                worker,
                into_hold,
                span,
            },
        ));
        t += HOLDER_WAIT + span + ms(&mut rng, 4000, 8000);
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ttls() -> Vec<Duration> {
        vec![Duration::from_secs(2), Duration::from_secs(3)]
    }

    #[test]
    fn the_plan_follows_from_the_seed() {
        let w = (Duration::from_secs(2), Duration::from_secs(60));
        let a = plan(Profile::Unsafe, 7, w, 5, &ttls());
        let b = plan(Profile::UnsafeGuarded, 7, w, 5, &ttls());
        assert_eq!(a.servers, b.servers);
        assert_eq!(a.workers, b.workers);
        let c = plan(Profile::Unsafe, 8, w, 5, &ttls());
        assert_ne!(a.servers, c.servers);
    }

    #[test]
    fn safe_plans_stay_inside_the_assumptions_and_the_window() {
        let w = (Duration::from_secs(2), Duration::from_secs(120));
        for seed in 0..50 {
            let p = plan(Profile::Safe, seed, w, 5, &ttls());
            assert!(!p.servers.is_empty() && !p.workers.is_empty());
            for (at, step) in &p.servers {
                assert!(*at >= w.0 && *at < w.1);
                let servers = match step {
                    ServerStep::KillDelayed { servers, down } => {
                        assert!(
                            *down > Duration::from_secs(3),
                            "restart after the largest ttl"
                        );
                        servers
                    }
                    ServerStep::PauseServers { servers, .. }
                    | ServerStep::Proxy { servers, .. } => servers,
                    other => panic!("{other:?} in the safe profile"),
                };
                assert!((1..=2).contains(&servers.len()), "{servers:?}");
            }
            for (at, step) in &p.workers {
                assert!(*at + step.span <= w.1);
                let ttl = ttls().get(step.worker).copied().unwrap_or_default();
                assert!(step.span > ttl, "longer than the worker's ttl");
            }
        }
    }

    #[test]
    fn six_safe_steps_are_the_six_kinds() {
        let w = (Duration::from_secs(2), Duration::from_secs(600));
        for seed in 0..20 {
            let p = plan(Profile::Safe, seed, w, 5, &ttls());
            let kind = |s: &ServerStep| match s {
                ServerStep::KillDelayed { .. } => "kill".to_owned(),
                ServerStep::PauseServers { .. } => "pause".to_owned(),
                ServerStep::Proxy { kind, .. } => format!("{kind:?}"),
                other => panic!("{other:?} in the safe profile"),
            };
            for six in p.servers.chunks_exact(6) {
                let mut kinds: Vec<String> = six.iter().map(|(_, s)| kind(s)).collect();
                kinds.sort();
                kinds.dedup();
                assert_eq!(kinds.len(), 6, "seed {seed}: {six:?}");
            }
        }
    }

    #[test]
    fn the_calm_after_a_restart_step_follows_its_longest_length() {
        let w = (Duration::from_secs(2), Duration::from_secs(600));
        let calm = Duration::from_secs(3 + 2);
        for seed in 0..20 {
            let p = plan(Profile::Unsafe, seed, w, 5, &ttls());
            for pair in p.servers.windows(2) {
                let ((at, step), (next, _)) = (&pair[0], &pair[1]);
                let longest = match step {
                    ServerStep::Overlap { .. } => OVERLAP_WAIT + INTENT_WAIT + RESTART_ALLOWANCE,
                    ServerStep::KillImmediate { .. } => RESTART_ALLOWANCE,
                    _ => continue,
                };
                assert!(*next - *at >= longest + calm, "seed {seed}: {pair:?}");
            }
        }
    }

    #[test]
    fn unsafe_plans_have_overlap_scenarios() {
        let w = (Duration::from_secs(2), Duration::from_secs(25));
        let p = plan(Profile::Unsafe, 7, w, 5, &ttls());
        let overlaps = p
            .servers
            .iter()
            .filter(|(_, s)| matches!(s, ServerStep::Overlap { .. }))
            .count();
        assert!(overlaps >= 2, "{p:?}");
    }
}
