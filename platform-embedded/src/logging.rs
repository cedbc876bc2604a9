//! `defmt` logging of the driver's decisions (a server failed, refused, was
//! reconnected) behind the `defmt` feature; without it the macro type-checks
//! its arguments and emits nothing.

#[cfg(feature = "defmt")]
macro_rules! rl_log {
    (debug, $($arg:tt)+) => { ::defmt::debug!($($arg)+) };
    (info, $($arg:tt)+) => { ::defmt::info!($($arg)+) };
    (warn, $($arg:tt)+) => { ::defmt::warn!($($arg)+) };
}

#[cfg(not(feature = "defmt"))]
macro_rules! rl_log {
    ($level:ident, $($arg:tt)+) => {{
        if false {
            let _ = ::core::format_args!($($arg)+);
        }
    }};
}
