//! `redlock bench`: lock + unlock cycles from N threads sharing one client,
//! with latency percentiles and throughput.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use core::time::Duration;
use std::io::{IsTerminal, Write};
use std::time::Instant;

use redlock_std::{Client, Error};

use crate::args::{
    ClientOptions, ONE_ATTEMPT_OPTIONS, Spec, acquire_options_help, server_options_help, usage,
};
use crate::{EX_UNAVAILABLE, Failure, client, json, parse, servers};

fn help() -> String {
    format!(
        "\
redlock bench [SERVER OPTIONS] [--restart-guard D] [--clients N] [--duration D] [--resources same|distinct] [--ttl D] [--json]

Runs lock + unlock cycles (one attempt each, no retries) from N threads that
share one client (their requests are pipelined on one connection per
server), then prints acquire and release latency percentiles and cycles per
second. With a terminal, a progress line is shown while it runs.

  --clients N       threads (default 1)
  --duration D      how long to run (default 5s)
  --resources R     distinct: one resource per thread (default); same: all
                    threads contend for one resource (conflicts are counted)
  --ttl D           lock time to live (default 10s)
  --json            one JSON object: servers, clients, resources, cycles,
                    cycles_per_sec, acquire_us and release_us (p50, p90, p99,
                    p999, max), conflicts, errors

Server options:
{}{}
Exit statuses: 0; 69 when no cycle succeeded because servers did not answer.",
        server_options_help(),
        acquire_options_help(false)
    )
}

/// What one thread measured.
#[derive(Default)]
struct Samples {
    acquire_ns: Vec<u64>,
    release_ns: Vec<u64>,
    conflicts: u64,
    errors: u64,
    last_error: Option<String>,
}

pub(crate) fn bench(raw: &[String]) -> Result<u8, Failure> {
    let spec = Spec {
        client: ONE_ATTEMPT_OPTIONS,
        with_value: &["clients", "duration", "resources", "ttl"],
        flags: &["json"],
        short: &[],
        command_after: None,
    };
    let Some(args) = parse(raw, &spec, &help())? else {
        return Ok(0);
    };
    args.expect_positionals(&[])?;
    let servers = servers(&args)?;
    let clients: usize = match args.value("clients") {
        Some(v) => v
            .parse()
            .ok()
            .filter(|n| (1..=1024).contains(n))
            .ok_or_else(|| {
                usage(format!(
                    "--clients: {} is not a number from 1 to 1024",
                    crate::args::shown(v)
                ))
            })?,
        None => 1,
    };
    let duration = args.duration("duration", Duration::from_secs(5))?;
    let ttl = args.duration("ttl", Duration::from_secs(10))?;
    let same = match args.value("resources").unwrap_or("distinct") {
        "distinct" => false,
        "same" => true,
        other => {
            return Err(usage(format!(
                "--resources: {} is neither same nor distinct",
                crate::args::shown(other)
            ))
            .into());
        }
    };
    let json_out = args.flag("json");
    let options = ClientOptions::from_args(&args)?;
    options.check_against_ttl(ttl)?;
    let client = client(&servers, &options, ttl, false)?;
    let progress = !json_out && std::io::stdout().is_terminal() && std::io::stderr().is_terminal();

    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    let prefix = format!("redlock-bench:{}:", std::process::id());
    let started = Instant::now();
    let samples: Vec<Samples> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..clients)
            .map(|t| {
                let (client, stop, done) = (&client, &stop, &done);
                let resource = if same {
                    format!("{prefix}same")
                } else {
                    format!("{prefix}{t}")
                };
                scope.spawn(move || worker(client, resource.as_bytes(), ttl, stop, done))
            })
            .collect();
        let end = started + duration;
        let mut last_shown = Instant::now();
        while Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20).min(end - Instant::now().min(end)));
            if progress && last_shown.elapsed() >= Duration::from_millis(250) {
                last_shown = Instant::now();
                let secs = started.elapsed().as_secs_f64();
                let n = done.load(Ordering::Relaxed);
                eprint!(
                    "\r  {secs:5.1}s  {n:>9} cycles  {:>9.0}/s ",
                    n as f64 / secs.max(1e-9)
                );
                let _ = std::io::stderr().flush();
            }
        }
        stop.store(true, Ordering::SeqCst);
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let elapsed = started.elapsed().as_secs_f64();
    if progress {
        eprint!("\r{:60}\r", "");
    }

    let mut acquire: Vec<u64> = samples
        .iter()
        .flat_map(|s| s.acquire_ns.iter().copied())
        .collect();
    let mut release: Vec<u64> = samples
        .iter()
        .flat_map(|s| s.release_ns.iter().copied())
        .collect();
    acquire.sort_unstable();
    release.sort_unstable();
    let cycles = release.len() as u64;
    let conflicts: u64 = samples.iter().map(|s| s.conflicts).sum();
    let errors: u64 = samples.iter().map(|s| s.errors).sum();
    let per_sec = cycles as f64 / elapsed.max(1e-9);
    let a = percentiles(&acquire);
    let r = percentiles(&release);
    if json_out {
        let mut o = json::Object::new();
        o.int("servers", servers.len() as i64);
        o.int("clients", clients as i64);
        o.string("resources", if same { "same" } else { "distinct" });
        o.int("cycles", cycles);
        o.float("cycles_per_sec", per_sec);
        o.raw("acquire_us", &percentiles_json(&a));
        o.raw("release_us", &percentiles_json(&r));
        o.int("conflicts", conflicts);
        o.int("errors", errors);
        say!("{}", o.finish());
    } else {
        say!(
            "{} servers, {clients} client thread{} sharing one client, {} resources, {elapsed:.1} s",
            servers.len(),
            if clients == 1 { "" } else { "s" },
            if same { "one contended" } else { "distinct" },
        );
        say!("cycles: {cycles} ({per_sec:.1}/s), conflicts: {conflicts}, errors: {errors}");
        say!(
            "{:<10}{:>10}{:>10}{:>10}{:>10}{:>10}",
            "µs",
            "p50",
            "p90",
            "p99",
            "p99.9",
            "max"
        );
        for (name, p) in [("acquire", a), ("release", r)] {
            say!(
                "{name:<10}{:>10.1}{:>10.1}{:>10.1}{:>10.1}{:>10.1}",
                p[0],
                p[1],
                p[2],
                p[3],
                p[4]
            );
        }
    }
    if cycles == 0 && conflicts == 0 {
        let why = samples
            .iter()
            .find_map(|s| s.last_error.clone())
            .unwrap_or_else(|| "no cycle ran".into());
        return Err(Failure::new(
            EX_UNAVAILABLE,
            format!("no cycle succeeded: {why}"),
        ));
    }
    Ok(0)
}

fn worker(
    client: &Client,
    resource: &[u8],
    ttl: Duration,
    stop: &AtomicBool,
    done: &AtomicU64,
) -> Samples {
    let mut s = Samples {
        acquire_ns: Vec::with_capacity(1 << 16),
        release_ns: Vec::with_capacity(1 << 16),
        ..Samples::default()
    };
    while !stop.load(Ordering::Relaxed) {
        let t0 = Instant::now();
        match client.try_lock(resource, ttl) {
            Ok(lock) => {
                let t1 = Instant::now();
                let released = client.unlock(&lock);
                let t2 = Instant::now();
                s.acquire_ns.push(nanos(t1 - t0));
                if released.is_ok() {
                    s.release_ns.push(nanos(t2 - t1));
                    done.fetch_add(1, Ordering::Relaxed);
                } else {
                    s.errors += 1;
                }
            }
            Err(Error::Conflict(_)) => s.conflicts += 1,
            Err(e) => {
                s.errors += 1;
                s.last_error = Some(e.to_string());
                // Do not spin on servers that are down.
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
    s
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// p50, p90, p99, p99.9 and max in µs of sorted nanoseconds (NaN when empty).
fn percentiles(sorted: &[u64]) -> [f64; 5] {
    let at = |p: f64| -> f64 {
        if sorted.is_empty() {
            return f64::NAN;
        }
        let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1] as f64 / 1000.0
    };
    [at(0.50), at(0.90), at(0.99), at(0.999), at(1.0)]
}

fn percentiles_json(p: &[f64; 5]) -> String {
    let mut o = json::Object::new();
    for (k, v) in ["p50", "p90", "p99", "p999", "max"].iter().zip(p) {
        o.float(k, *v);
    }
    o.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u64> = (1..=1000).map(|i| i * 1000).collect();
        assert_eq!(percentiles(&v), [500.0, 900.0, 990.0, 999.0, 1000.0]);
        assert!(percentiles(&[]).iter().all(|x| x.is_nan()));
    }
}
