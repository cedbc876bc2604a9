//! The logging shim, in the style of smoltcp's `net_log!`: one set of
//! macros that route to `log` (feature `log`), to `defmt` (feature `defmt`,
//! when `log` is off), or to nothing. Records are written where the
//! algorithm decides something (a retry and its wait, a server given up on,
//! a `NOSCRIPT` fallback, a vote not counted, a late reply ignored), never
//! where bytes move. Arguments must be `Display` for `log` and
//! `defmt::Format` for `defmt`: integers, and the crate's small enums.
//! With `log`, every record's target is `redlock`.

#[cfg(feature = "log")]
macro_rules! rl_log {
    (trace, $($arg:tt)+) => { ::log::trace!(target: "redlock", $($arg)+) };
    (debug, $($arg:tt)+) => { ::log::debug!(target: "redlock", $($arg)+) };
    (info, $($arg:tt)+) => { ::log::info!(target: "redlock", $($arg)+) };
    (warn, $($arg:tt)+) => { ::log::warn!(target: "redlock", $($arg)+) };
}

#[cfg(all(feature = "defmt", not(feature = "log")))]
macro_rules! rl_log {
    (trace, $($arg:tt)+) => { ::defmt::trace!($($arg)+) };
    (debug, $($arg:tt)+) => { ::defmt::debug!($($arg)+) };
    (info, $($arg:tt)+) => { ::defmt::info!($($arg)+) };
    (warn, $($arg:tt)+) => { ::defmt::warn!($($arg)+) };
}

#[cfg(not(any(feature = "log", feature = "defmt")))]
macro_rules! rl_log {
    ($level:ident, $($arg:tt)+) => {{
        // Type-checks the arguments (and uses them) without emitting code.
        if false {
            let _ = ::core::format_args!($($arg)+);
        }
    }};
}
