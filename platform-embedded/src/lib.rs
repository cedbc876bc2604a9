#![doc = include_str!("../README.md")]
#![no_std]
#![forbid(unsafe_code)]
// Input comes from the network: no index or arithmetic that can panic.
#![warn(clippy::indexing_slicing, clippy::arithmetic_side_effects)]

#[macro_use]
mod logging;
#[cfg(feature = "async")]
mod asynch;
mod client;
mod conn;
mod engine;
mod error;
mod io;
mod net;

#[cfg(feature = "async")]
pub use asynch::{AsyncClient, ClientLinks, Connector, ConnectorLinks, Links};
pub use client::Client;
pub use conn::Buffers;
pub use engine::{Lock, Options};
pub use error::Error;
pub use net::{Clock, Link, Network};
pub use redlock_core;
pub use redlock_core::session::Credentials;
pub use redlock_core::{
    Config, Duration, FenceRepaired, Inspection, Instant, Released, Report, Retry, ServerId,
    ServerOutcome,
};
