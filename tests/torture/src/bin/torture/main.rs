//! `torture`: a Jepsen-style run against real processes (issue 15).
//!
//! ```text
//! cargo run -p redlock-tests --bin torture -- run --profile safe --seed 7 --duration 60s --out DIR
//! ```
//!
//! `run` starts five `redis-server` processes, each behind a fault proxy;
//! the fenced resource (a thread of the run); six worker processes (two
//! with the library's watchdog, two with plain lock/extend/unlock, two
//! looping over the real `redlock lock --fence`); a nemesis on a schedule
//! drawn from the seed (`nemesis.rs`); and an operator that repairs lost
//! fence counters (`operator.rs`). At the end, or on SIGINT/SIGTERM/SIGHUP,
//! it stops every process it started, merges the workers' records and the
//! resource's accesses into a history, checks it, and writes
//! `DIR/history.json`, `DIR/report.txt`, `DIR/report.json`,
//! `DIR/timeline.svg` and `DIR/run.json` (the plan, the processes, the
//! operator's repairs). It prints the text report (`--json`: the JSON
//! report) and exits 0 if the verdict passes for the profile, 1 if not, 2
//! if the run could not be set up, 130 if interrupted, 64 for bad usage.
//!
//! `report --out DIR` checks `DIR/history.json` again and rewrites the
//! reports. `worker` and `step` are the run's own child processes
//! (`worker.rs`).

extern crate alloc;

mod args;
mod cluster;
mod nemesis;
mod operator;
mod procs;
mod record;
mod redlock_bin;
mod run;
mod worker;

use std::process::ExitCode;

use args::Usage;

const HELP: &str = "\
torture: a Jepsen-style run of the Redlock client against real redis-servers

Usage:
  torture run [--profile safe|unsafe|unsafe-guarded] [--seed N] [--duration D]
              --out DIR [--workers K] [--json] [--redlock PATH]

  --profile   safe: faults inside the algorithm's assumptions (kill with a
              delayed restart, server pauses, worker pauses past the ttl,
              proxy delay/hold/blackhole/reset); unsafe: also restarts at
              once without persistence (overlapping holders are expected,
              stale writes must still be refused); unsafe-guarded: the same
              schedule with the client's restart guard on (default safe)
  --seed      the nemesis' and the workers' seed (default 1)
  --duration  how long the run lasts (default 60s; at least 12s)
  --out       the folder for the history and the reports
  --workers   how many workers, in turn watchdog, plain, cli (default 6)
  --json      print the JSON report instead of the text one
  --redlock   the redlock binary for the CLI workers (default: $REDLOCK_BIN,
              else built with cargo when run by cargo, else next to this
              binary, else on the PATH)

  torture report --out DIR [--json]

  checks DIR/history.json again and rewrites the reports (after a change to
  the checker, say)

Exit status: 0 the verdict passes for the profile, 1 it does not, 2 the run
could not be set up, 130 interrupted, 64 bad usage.

(torture worker ... and torture step ... are the run's own child processes.)";

fn main() -> ExitCode {
    let raw: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let Some((sub, rest)) = raw.split_first() else {
        eprintln!("{HELP}");
        return ExitCode::from(64);
    };
    let result = match sub.as_str() {
        "run" => {
            set_time_limit(rest);
            run::run(rest)
        }
        "report" => run::report(rest),
        "worker" => worker::worker(rest),
        "step" => worker::step(rest),
        "help" | "-h" | "--help" => {
            eprintln!("{HELP}");
            return ExitCode::SUCCESS;
        }
        other => Err(Usage(format!("unknown subcommand {other:?}"))),
    };
    match result {
        Ok(code) => code,
        Err(Usage(why)) => {
            eprintln!("torture: {why}\n\n{HELP}");
            ExitCode::from(64)
        }
    }
}

/// The harness stops a process that started servers after 10 minutes
/// unless `REDLOCK_TEST_LIMIT_SECS` says otherwise: a run's limit is its
/// duration and five minutes (a hung run still ends), unless the caller
/// set one.
#[allow(unsafe_code)]
fn set_time_limit(rest: &[String]) {
    if std::env::var_os("REDLOCK_TEST_LIMIT_SECS").is_some() {
        return;
    }
    let Some(duration) = run::duration_of(rest) else {
        return;
    };
    // SAFETY: `main` calls this first, before this process has started any
    // thread: nothing reads or writes the environment at the same time.
    unsafe {
        std::env::set_var(
            "REDLOCK_TEST_LIMIT_SECS",
            run::limit_secs(duration).to_string(),
        );
    }
}
