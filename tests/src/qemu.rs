//! The example firmware (`platform-embedded/firmware`) under QEMU: build a
//! binary of it, boot it on `mps2-an386` with user-mode networking, and
//! read its semihosting console line by line, with a hard time limit.
//!
//! QEMU is required, never skipped: without `qemu-system-arm` the tests
//! that use this module fail and say so.

use core::time::Duration;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Instant;

/// The QEMU system emulator the firmware runs on.
pub const QEMU: &str = "qemu-system-arm";

/// The firmware's workspace (its own `.cargo/config.toml` picks the
/// target, the linker script and the runner).
pub fn firmware_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../platform-embedded/firmware")
}

/// Panics with a clear message when QEMU is not installed.
pub fn require_qemu() {
    let found = Command::new(QEMU)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "{QEMU} is not installed (or does not run): the firmware tests need it \
         (Debian: apt-get install -t bookworm-backports qemu-system-arm; CI installs it)"
    );
}

/// Builds firmware binary `bin` (release, `--locked`, with the firmware's
/// cargo `features`) and returns the path of its ELF, wherever the target
/// directory is (`CARGO_TARGET_DIR`, a cargo config): cargo's JSON messages
/// name the executable.
pub fn build_firmware(bin: &str, features: &[&str]) -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(firmware_dir())
        // The test's own flags and target must not override the firmware's
        // (its .cargo/config.toml sets the target and the linker script).
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .args(["build", "--release", "--locked", "--bin", bin])
        .args(features.iter().flat_map(|f| ["--features", f]))
        .arg("--message-format=json-render-diagnostics")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("cannot run cargo to build the firmware: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "building firmware binary {bin} failed ({})",
        out.status
    );
    stdout
        .lines()
        .filter(|l| l.contains(r#""reason":"compiler-artifact""#))
        .filter(|l| l.contains(&format!(r#""name":"{bin}""#)))
        .find_map(|l| json_string(l, "executable"))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("cargo did not report an executable for {bin}"))
}

/// The string value of `"key":"..."` in one line of cargo's JSON.
fn json_string(line: &str, key: &str) -> Option<String> {
    let start = line.find(&format!(r#""{key}":""#))? + key.len() + 4;
    let mut value = String::new();
    let mut chars = line.get(start..)?.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(value),
            '\\' => value.push(chars.next()?),
            c => value.push(c),
        }
    }
    None
}

/// A QEMU process running firmware: its console lines come through a
/// reader thread; it is killed when its time is up and when dropped (also
/// when the test panics).
#[derive(Debug)]
pub struct Qemu {
    child: Child,
    lines: Receiver<String>,
    deadline: Instant,
    limit: Duration,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Qemu {
    /// Boots `elf` on `mps2-an386` with semihosting (console and exit
    /// status), a LAN9118 on user-mode networking (the host's 127.0.0.1 is
    /// 10.0.2.2 to the guest), and `append` as its command line. It is
    /// killed after `limit`.
    pub fn boot(elf: &Path, append: &str, limit: Duration) -> io::Result<Qemu> {
        require_qemu();
        let mut child = Command::new(QEMU)
            .args(Qemu::args(elf, append))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let deadline = Instant::now() + limit;
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take();
        std::thread::spawn(move || {
            let Some(stdout) = stdout else { return };
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = child.stderr.take().map(|mut err| {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = err.read_to_string(&mut text);
                text
            })
        });
        Ok(Qemu {
            child,
            lines,
            deadline,
            limit,
            stderr,
        })
    }

    /// QEMU's arguments (after the program name), as documented in the
    /// firmware's README.
    pub fn args(elf: &Path, append: &str) -> Vec<String> {
        [
            "-cpu",
            "cortex-m4",
            "-machine",
            "mps2-an386",
            "-nographic",
            "-semihosting-config",
            "enable=on,target=native",
            "-nic",
            "user,model=lan9118",
            "-kernel",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([elf.display().to_string(), "-append".into(), append.into()])
        .collect()
    }

    /// The next console line; `None` at the end of the output. Panics
    /// (after killing QEMU) when the time limit passes first.
    pub fn next_line(&mut self) -> Option<String> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(left) {
            Ok(line) => Some(line),
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => {
                self.kill();
                panic!("QEMU ran past its {} s limit: killed", self.limit.as_secs());
            }
        }
    }

    /// Waits for QEMU to exit (killing it at the time limit) and returns its
    /// exit status and what it wrote to stderr.
    pub fn wait(mut self) -> (ExitStatus, String) {
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    let stderr = self
                        .stderr
                        .take()
                        .and_then(|h| h.join().ok())
                        .unwrap_or_default();
                    return (status, stderr);
                }
                Ok(None) if Instant::now() < self.deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                _ => {
                    self.kill();
                    panic!("QEMU ran past its {} s limit: killed", self.limit.as_secs());
                }
            }
        }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Qemu {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill();
        }
    }
}
