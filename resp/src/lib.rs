#![doc = include_str!("../README.md")]
#![no_std]
#![forbid(unsafe_code)]
// Input comes from the network: no index or arithmetic that can panic.
#![warn(clippy::indexing_slicing, clippy::arithmetic_side_effects)]

pub mod decode;
pub mod encode;
pub mod script;
mod server_error;

pub use decode::{
    Aggregate, AggregateKind, Elements, Limits, MAX_DEPTH_CAP, ParseError, Parser, Reply, Status,
    parse_reply,
};
pub use encode::{Arg, Command, EncodeError, command, command_args};
pub use script::Script;
pub use server_error::{ErrorKind, ServerError};
