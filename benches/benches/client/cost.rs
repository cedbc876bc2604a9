//! What the client process spends: CPU time and context switches.

use core::time::Duration;

/// CPU time (user + sys) and context switches (voluntary + involuntary) of
/// the whole process, every thread included (those that ended too), from
/// `getrusage(RUSAGE_SELF)`. The redis-servers are other processes and are
/// not counted.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Cost {
    pub(crate) cpu: Duration,
    pub(crate) switches: u64,
}

impl Cost {
    /// The process's totals so far.
    #[allow(unsafe_code)]
    pub(crate) fn now() -> Cost {
        let mut ru = core::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: `ru` is a properly aligned, writable `rusage` that
        // getrusage fills; RUSAGE_SELF is a valid `who`.
        let r = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
        assert_eq!(r, 0, "getrusage failed");
        // SAFETY: zero bytes are a valid `rusage` (plain integers), and
        // getrusage succeeded, so it is fully written.
        let ru = unsafe { ru.assume_init() };
        let tv = |t: libc::timeval| {
            Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
                + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
        };
        Cost {
            cpu: tv(ru.ru_utime) + tv(ru.ru_stime),
            switches: u64::try_from(ru.ru_nvcsw).unwrap_or(0)
                + u64::try_from(ru.ru_nivcsw).unwrap_or(0),
        }
    }

    /// What was spent since `earlier`.
    pub(crate) fn since(self, earlier: Cost) -> Cost {
        Cost {
            cpu: self.cpu.saturating_sub(earlier.cpu),
            switches: self.switches.saturating_sub(earlier.switches),
        }
    }

    /// The sum of two spans.
    pub(crate) fn plus(self, other: Cost) -> Cost {
        Cost {
            cpu: self.cpu + other.cpu,
            switches: self.switches + other.switches,
        }
    }

    /// CPU seconds per 1000 of `cycles`.
    pub(crate) fn cpu_per_1000(&self, cycles: u64) -> f64 {
        self.cpu.as_secs_f64() / cycles.max(1) as f64 * 1000.0
    }

    /// Context switches per one of `cycles`.
    pub(crate) fn switches_per(&self, cycles: u64) -> f64 {
        self.switches as f64 / cycles.max(1) as f64
    }
}

/// Voluntary + involuntary context switches of the calling thread so far
/// (`/proc/thread-self/status`). Every implementation's latency cycles run
/// on the main thread (rslock's and the async API's on a current-thread
/// runtime); the async API's driver thread is not counted here, only in
/// [`Cost`].
pub(crate) fn thread_switches() -> u64 {
    std::fs::read_to_string("/proc/thread-self/status")
        .unwrap()
        .lines()
        .filter(|l| l.contains("ctxt_switches:"))
        .map(|l| l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap())
        .sum()
}
