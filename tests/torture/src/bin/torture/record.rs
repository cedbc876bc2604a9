//! What a worker records: one JSON line per event in its own file, written
//! with one `write` each (appended, unbuffered), so that a worker killed
//! with SIGKILL loses at most the event it was writing. A hold is written
//! when it begins and again whenever it changes (extended, lost, released):
//! the last line for a hold wins.

use core::time::Duration;
use std::fs::{File, OpenOptions};
use std::io::{self, Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::time::Instant;

use redlock_torture::history::{Attempt, Hold, Micros, RunClock};
use serde::{Deserialize, Serialize};

/// One line of a worker's file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum Record {
    /// A lock attempt ended.
    Attempt(Attempt),
    /// A hold began or changed.
    Hold(Hold),
    /// A CLI worker's hold, rebuilt from `redlock lock`'s own events once it
    /// exited (see `worker.rs`): replaces the hold `worker` recorded as
    /// acquired at `acquired` (the step's view), or is added if there is
    /// none.
    HoldFix {
        /// The worker.
        worker: u32,
        /// The `acquired` of the hold it replaces.
        acquired: Micros,
        /// The hold as `redlock lock` saw it.
        hold: Hold,
    },
    /// What a worker means to do with a hold it just got: the nemesis'
    /// overlap scenario picks a holder that will hold long enough (see
    /// `nemesis.rs`). Not part of the history.
    Intent {
        /// The worker.
        worker: u32,
        /// The lock's token (as the servers hold it).
        token: String,
        /// How long it will pause between its read and its write.
        pause_ms: u64,
    },
}

/// A worker's file, appended to.
#[derive(Debug)]
pub(crate) struct Journal {
    file: File,
}

impl Journal {
    /// Opens (creates) `path` for appending.
    pub(crate) fn open(path: &Path) -> io::Result<Journal> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Journal { file })
    }

    /// Appends one record with a single write.
    pub(crate) fn write(&mut self, record: &Record) {
        match serde_json::to_string(record) {
            Ok(mut line) => {
                line.push('\n');
                if let Err(e) = self.file.write_all(line.as_bytes()) {
                    eprintln!("torture: cannot record {record:?}: {e}");
                }
            }
            Err(e) => eprintln!("torture: cannot encode {record:?}: {e}"),
        }
    }
}

/// Reads a file of records from `offset` on: the complete lines' records
/// and the offset after the last complete line. Lines that do not parse (a
/// line cut by SIGKILL) are counted in the third value.
pub(crate) fn read_from(path: &Path, offset: u64) -> io::Result<(Vec<Record>, u64, usize)> {
    let mut file = File::open(path)?;
    file.seek(SeekFrom::Start(offset))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let mut records = Vec::new();
    let mut bad = 0;
    for line in bytes
        .get(..complete)
        .unwrap_or_default()
        .split(|&b| b == b'\n')
    {
        if line.is_empty() {
            continue;
        }
        match serde_json::from_slice(line) {
            Ok(r) => records.push(r),
            Err(_) => bad += 1,
        }
    }
    Ok((records, offset + complete as u64, bad))
}

/// The attempts and holds of several workers' files: each hold once, as
/// its last record left it (a hold is known by its worker and the time it
/// was acquired). Also the number of lines that did not parse.
pub(crate) fn merge(files: &[PathBuf]) -> (Vec<Attempt>, Vec<Hold>, usize) {
    let mut attempts = Vec::new();
    let mut holds: Vec<Hold> = Vec::new();
    let mut bad = 0;
    for path in files {
        let records = match read_from(path, 0) {
            Ok((records, _, b)) => {
                bad += b;
                records
            }
            Err(e) => {
                eprintln!("torture: cannot read {}: {e}", path.display());
                continue;
            }
        };
        for record in records {
            match record {
                Record::Intent { .. } => {}
                Record::Attempt(a) => attempts.push(a),
                Record::Hold(h) => {
                    let (worker, acquired) = (h.worker, h.acquired);
                    replace(&mut holds, worker, acquired, h);
                }
                Record::HoldFix {
                    worker,
                    acquired,
                    hold,
                } => replace(&mut holds, worker, acquired, hold),
            }
        }
    }
    attempts.sort_by_key(|a| (a.start, a.worker));
    holds.sort_by_key(|h| (h.acquired, h.worker));
    (attempts, holds, bad)
}

/// Puts `hold` in place of `worker`'s hold acquired at `acquired`, or adds
/// it.
fn replace(holds: &mut Vec<Hold>, worker: u32, acquired: Micros, hold: Hold) {
    match holds
        .iter_mut()
        .find(|x| x.worker == worker && x.acquired == acquired)
    {
        Some(known) => *known = hold,
        None => holds.push(hold),
    }
}

/// The run-clock time of a monotonic instant (in the past or the future).
///
/// Both clocks are read back to back, and again if the process was
/// descheduled (or stopped) between the two readings.
pub(crate) fn run_time(clock: &RunClock, at: Instant) -> Micros {
    let (now, run_now) = loop {
        let before = Instant::now();
        let run_now = clock.now();
        let after = Instant::now();
        if after.duration_since(before) < Duration::from_millis(1) {
            break (before, run_now);
        }
    };
    let micros = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    if at >= now {
        run_now.saturating_add(micros(at.duration_since(now)))
    } else {
        run_now.saturating_sub(micros(now.duration_since(at)))
    }
}

/// Microseconds in `d`.
pub(crate) fn micros(d: Duration) -> Micros {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}
