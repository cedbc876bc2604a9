//! End-to-end tests of the `redlock` command against real `redis-server`
//! processes, by concern: running a command under a lock (`lock`), the
//! subcommands for shell scripts (`scripts`), usage, flags and secrets
//! (`options`), the benchmark and the demo (`demo`), and `rediss://` with
//! its certificates and refusals (`tls`); the helpers that start the
//! command and servers and kill what they started are in `common`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)] // test driver

mod common;
mod demo;
mod lock;
mod options;
mod scripts;
mod tls;
