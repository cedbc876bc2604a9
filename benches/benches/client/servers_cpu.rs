//! The servers' CPU time, from `/proc/<pid>/stat` (Linux): what the
//! `redis-server` / `valkey-server` processes of a benchmark spend, every
//! thread of each, next to the client's own (`cost.rs`).

use core::time::Duration;

use redlock_tests::RedisServer;

/// The servers' CPU time: their pids, and the length of a clock tick.
pub(crate) struct ServersCpu {
    pids: Vec<u32>,
    /// Clock ticks per second.
    hz: f64,
}

impl ServersCpu {
    #[allow(unsafe_code)]
    pub(crate) fn new(servers: &[RedisServer]) -> ServersCpu {
        // SAFETY: sysconf has no preconditions; _SC_CLK_TCK is a valid name.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        assert!(hz > 0, "sysconf(_SC_CLK_TCK) = {hz}");
        ServersCpu {
            pids: servers.iter().map(RedisServer::pid).collect(),
            hz: hz as f64,
        }
    }

    /// utime + stime of every server process so far (all its threads).
    pub(crate) fn now(&self) -> Duration {
        self.each().into_iter().sum()
    }

    /// utime + stime so far of each server process (all its threads), in
    /// the order of the servers given.
    pub(crate) fn each(&self) -> Vec<Duration> {
        self.pids
            .iter()
            .map(|pid| {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
                // The fields after the command name, which is in parentheses
                // and may hold spaces: state is field 3, utime 14, stime 15.
                let rest = &stat[stat.rfind(')').unwrap() + 1..];
                let fields: Vec<&str> = rest.split_whitespace().collect();
                let ticks = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
                Duration::from_secs_f64(ticks as f64 / self.hz)
            })
            .collect()
    }
}
