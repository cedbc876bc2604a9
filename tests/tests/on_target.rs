//! The on-target tests: builds the firmware's `vectors` binary (test vectors
//! of `redlock-resp` and `redlock-core`, see
//! `platform-embedded/firmware/src/bin/vectors/`) for the Cortex-M4F, runs it
//! under QEMU's `mps2-an386` with semihosting (with the harness's
//! [`redlock_tests::qemu`]: a hard time limit, QEMU killed on drop), and
//! checks its verdict: exit status 0 and a last line `N passed, 0 failed`.
//!
//! Needs `qemu-system-arm` on the `PATH` and the `thumbv7em-none-eabihf`
//! target installed; without QEMU the test fails and says so.

use core::time::Duration;
use std::path::Path;
use std::process::ExitStatus;

use redlock_tests::qemu::{Qemu, build_firmware, require_qemu};

/// How long one run of the vectors may take (it takes well under a second):
/// QEMU is killed after this.
const RUN_LIMIT: Duration = Duration::from_secs(60);

/// The fewest vectors the binary must run.
const MIN_VECTORS: u32 = 40;

/// What one run of the firmware printed, and how it ended.
struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Runs `elf` under QEMU until it exits, killing it after [`RUN_LIMIT`].
fn run_qemu(elf: &Path) -> Run {
    let mut qemu = Qemu::boot(elf, "", RUN_LIMIT)
        .unwrap_or_else(|e| panic!("cannot start QEMU for {}: {e}", elf.display()));
    let mut stdout = String::new();
    while let Some(line) = qemu.next_line() {
        stdout.push_str(&line);
        stdout.push('\n');
    }
    let (status, stderr) = qemu.wait();
    Run {
        status,
        stdout,
        stderr,
    }
}

/// The counts of a summary line `N passed, M failed`.
fn summary(line: &str) -> Option<(u32, u32)> {
    let (passed, failed) = line.trim().split_once(" passed, ")?;
    let failed = failed.strip_suffix(" failed")?;
    Some((passed.parse().ok()?, failed.parse().ok()?))
}

#[test]
fn codec_and_core_vectors_pass_on_a_cortex_m4_under_qemu() {
    require_qemu();
    let elf = build_firmware("vectors", &["vectors"]);
    let run = run_qemu(&elf);
    let context = format!(
        "{}: {}\n--- stdout\n{}--- stderr\n{}",
        elf.display(),
        run.status,
        run.stdout,
        run.stderr
    );
    let failures: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("FAIL "))
        .collect();
    assert!(failures.is_empty(), "vectors failed on target:\n{context}");
    let last = run.stdout.lines().rev().find(|l| !l.trim().is_empty());
    let Some((passed, failed)) = last.and_then(summary) else {
        panic!("no final `N passed, M failed` line:\n{context}");
    };
    assert_eq!(failed, 0, "{context}");
    assert!(
        passed >= MIN_VECTORS,
        "only {passed} vectors ran (at least {MIN_VECTORS} expected):\n{context}"
    );
    assert_eq!(run.status.code(), Some(0), "QEMU's exit status:\n{context}");

    // The vectors are deterministic: a second run prints the same.
    let again = run_qemu(&elf);
    assert_eq!(again.status.code(), Some(0), "second run: {}", again.stdout);
    assert_eq!(again.stdout, run.stdout, "two runs printed differently");
}

#[test]
fn the_summary_line_is_read() {
    assert_eq!(summary("81 passed, 0 failed"), Some((81, 0)));
    assert_eq!(summary("81 passed, 2 failed\n"), Some((81, 2)));
    assert_eq!(summary("FAIL x: y"), None);
    assert_eq!(summary("passed"), None);
}
