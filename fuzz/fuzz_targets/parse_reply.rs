#![no_main]
//! Fuzzes the RESP reply parser: no panic, `consumed <= input.len()`, and the
//! prefix / trailing-bytes invariants of `check.rs`.

#[path = "../check.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
