//! `-v`, `-vv` and `RUST_LOG`: the library's `log` records on stderr, by
//! `env_logger`.

use std::io::Write as _;
use std::time::Instant;

/// Installs the logger for `verbose` `-v`s (those given before the
/// subcommand and after it): 1 shows the library's warnings and what it decides (info),
/// 2 its debug records too, 3 everything. `RUST_LOG`, when set, is read
/// first (env_logger's syntax); the `-v`s then set the level of the
/// `redlock` targets. Without either, nothing is installed: the command's
/// output is all there is.
pub(crate) fn install(verbose: u8) {
    let rust_log = std::env::var("RUST_LOG")
        .ok()
        .filter(|s| !s.trim().is_empty());
    if verbose == 0 && rust_log.is_none() {
        return;
    }
    let mut builder = env_logger::Builder::new();
    if let Some(filters) = &rust_log {
        builder.parse_filters(filters);
    }
    let level = match verbose {
        0 => None,
        1 => Some(log::LevelFilter::Info),
        2 => Some(log::LevelFilter::Debug),
        _ => Some(log::LevelFilter::Trace),
    };
    if let Some(level) = level {
        // `redlock` (the core's records), `redlock_std::..` (the
        // transport's), and this command's own.
        builder.filter_module("redlock", level);
    }
    let start = Instant::now();
    builder
        .target(env_logger::Target::Stderr)
        .format(move |buf, record| {
            let t = start.elapsed();
            writeln!(
                buf,
                "[{:>4}.{:03}s {:<5} {}] {}",
                t.as_secs(),
                t.subsec_millis(),
                record.level(),
                record.target(),
                record.args()
            )
        });
    // Only one logger per process; a second install is a no-op.
    let _ = builder.try_init();
}
