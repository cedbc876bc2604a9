//! Finding the `redlock` command for the CLI workers.
//!
//! `CARGO_BIN_EXE_redlock` exists only for the package that owns the
//! binary (`redlock-cli`), and a dependency's binaries are not built for a
//! dependent package. So, in this order:
//!
//! 1. `--redlock PATH`, or the environment variable `REDLOCK_BIN`: used as
//!    given.
//! 2. Run by cargo (`cargo run`, `cargo test`: the environment has
//!    `CARGO`): `$CARGO build -p redlock-cli --bin redlock`
//!    with this binary's profile and target folder, so that the CLI is
//!    never older than the sources (a no-op when it is up to date; its
//!    output goes to `DIR/build-redlock.log`), then 3.
//! 3. `redlock` next to this binary (`target/<profile>/redlock`).
//! 4. `redlock` on the `PATH`.

use core::sync::atomic::{AtomicBool, Ordering};
use core::time::Duration;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::run::BUILD_LIMIT;

/// The `redlock` binary to run, building it first when run by cargo.
/// A signal that sets `interrupted` stops the build (the run then ends).
pub(crate) fn find(
    given: Option<&str>,
    out: &Path,
    interrupted: &AtomicBool,
) -> Result<PathBuf, String> {
    if let Some(p) = given
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("REDLOCK_BIN").map(PathBuf::from))
    {
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("no redlock binary at {}", p.display()))
        };
    }
    let me = std::env::current_exe().map_err(|e| format!("cannot find myself: {e}"))?;
    let dir = me
        .parent()
        .ok_or("this binary is in no folder")?
        .to_path_buf();
    if let Some(cargo) = std::env::var_os("CARGO") {
        build(Path::new(&cargo), &dir, out, interrupted)?;
    }
    let sibling = dir.join("redlock");
    if sibling.is_file() {
        return Ok(sibling);
    }
    if let Some(path) = std::env::var_os("PATH") {
        for d in std::env::split_paths(&path) {
            let p = d.join("redlock");
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    Err(format!(
        "no redlock binary: build it (cargo build -p redlock-cli --bin redlock), \
         run this one through cargo, or give --redlock PATH; looked next to {}",
        me.display()
    ))
}

/// `cargo build` of the CLI into the target folder `dir` is in
/// (`target/<profile>`), with that profile.
fn build(cargo: &Path, dir: &Path, out: &Path, interrupted: &AtomicBool) -> Result<(), String> {
    let profile_dir = dir.file_name().and_then(|n| n.to_str()).unwrap_or("debug");
    // `target/debug/deps` when run as a test's dependency: one folder up.
    let (dir, profile_dir) = if profile_dir == "deps" {
        let up = dir.parent().unwrap_or(dir);
        (
            up,
            up.file_name().and_then(|n| n.to_str()).unwrap_or("debug"),
        )
    } else {
        (dir, profile_dir)
    };
    let profile = match profile_dir {
        "debug" => "dev",
        other => other,
    };
    let Some(target_dir) = dir.parent() else {
        return Ok(());
    };
    let log_path = out.join("build-redlock.log");
    let log = std::fs::File::create(&log_path)
        .map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let mut child = Command::new(cargo)
        .args(["build", "--quiet", "-p", "redlock-cli"])
        .args(["--bin", "redlock", "--profile", profile])
        .arg("--manifest-path")
        .arg(manifest)
        .env("CARGO_TARGET_DIR", target_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", cargo.display()))?;
    let deadline = Instant::now() + BUILD_LIMIT;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => {
                return Err(format!(
                    "cargo build of redlock failed ({status}): see {}",
                    log_path.display()
                ));
            }
            Ok(None) if interrupted.load(Ordering::Relaxed) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("interrupted during the cargo build of redlock".to_owned());
            }
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "cargo build of redlock took longer than {}s",
                    BUILD_LIMIT.as_secs()
                ));
            }
            Err(e) => return Err(format!("cannot wait for cargo: {e}")),
        }
    }
}
