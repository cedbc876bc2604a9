//! The torture run (issue 15): real `redis-server` processes, real worker
//! processes (the std client with and without the watchdog, and the
//! `redlock` command), a fenced resource server, and a nemesis on a seeded
//! schedule; afterwards a checker reads the recorded history.
//!
//! - [`history`]: what is recorded (this module's shared vocabulary);
//! - `resource`: the fenced register, a small TCP service;
//! - `check`: the checker over a [`history::History`];
//! - `report`: the human-readable report and its JSON;
//! - `svg`: the timeline picture.
//!
//! The `torture` binary (`src/bin/torture/`) runs it. A crate of its own,
//! so that the integration tests do not link it (nor serde).

extern crate alloc;

pub mod check;
pub mod history;
pub mod report;
pub mod resource;
pub mod svg;
