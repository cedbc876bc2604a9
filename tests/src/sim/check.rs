//! The checkers and what they report.

use super::{RESOURCE, Sim};

/// What went wrong in a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Violation {
    /// Two clients used the lock at the same real time (checker 1).
    Overlap {
        /// First client and its use window in µs.
        a: (usize, u64, u64),
        /// Second client and its use window in µs.
        b: (usize, u64, u64),
    },
    /// A fence token did not exceed the previous grant's (checker 2).
    FenceRegression {
        /// Previous (grant time, fence).
        prev: (u64, u64),
        /// This (grant time, fence).
        this: (u64, u64),
    },
    /// An acquisition failed although a majority was up without contention (checker 3).
    NotLive {
        /// The client.
        client: usize,
        /// Attempts it made.
        attempts: u32,
    },
    /// After the faults of a scenario that loses bytes ended, a client's
    /// connection still awaited a reply when the run ended: its session
    /// kept a connection out of step (checker 7).
    OutOfStep {
        /// The client.
        client: usize,
        /// The server.
        server: usize,
        /// Replies it still awaited.
        owed: usize,
    },
    /// An extension failed although a majority was up without contention (checker 3).
    NotExtended {
        /// The client.
        client: usize,
    },
    /// A failed acquisition's key was still on a server after settling (checker 4).
    LeftBehind {
        /// The server.
        server: usize,
        /// The token.
        token: String,
    },
    /// The run handled more events than any run needs: something fires
    /// again and again without time moving on (a broken variant).
    Stalled {
        /// The simulated time it stalled at (µs).
        at: u64,
    },
    /// A client used the lock after the validity it was given, extensions
    /// included, had ended (checker 5).
    UsedPastValidity {
        /// The client.
        client: usize,
        /// When the validity ended (real µs).
        validity_end: u64,
        /// When the client stopped using the lock (real µs).
        used_until: u64,
    },
    /// An extension counted after the validity it extended had ended (checker 6).
    LateExtension {
        /// The client.
        client: usize,
        /// When the validity it extended ended (real µs).
        validity_end: u64,
        /// When the extension counted (real µs).
        counted: u64,
    },
}

/// The result of a run.
#[derive(Debug, Clone, Default)]
pub struct RunReport {
    /// Every violation found.
    pub violations: Vec<Violation>,
    /// Successful acquisitions.
    pub grants: usize,
    /// Failed acquisitions.
    pub failures: usize,
    /// Extensions that counted.
    pub extensions: usize,
    /// Locks the watchdog declared lost.
    pub lost: usize,
    /// Simulated time at the end, µs.
    pub end_us: u64,
}

impl Sim {
    /// Records that client `c`, granted the lock at `granted` (real µs),
    /// stops using it now; checker 5: not after `validity_end` (real µs),
    /// the end of the last validity the core gave it.
    pub(super) fn check_use(&mut self, c: usize, granted: u64, validity_end: u64) {
        self.uses.push((c, granted, self.now));
        if self.now > validity_end {
            self.report.violations.push(Violation::UsedPastValidity {
                client: c,
                validity_end,
                used_until: self.now,
            });
        }
    }

    /// Checker 6: client `c` counts an extension now, which must be before
    /// `valid_until` (its local clock, µs), the end of the validity extended.
    pub(super) fn check_extension(&mut self, c: usize, valid_until: u64) {
        let validity_end = self.clients[c].clock.real(valid_until);
        if self.now >= validity_end {
            self.report.violations.push(Violation::LateExtension {
                client: c,
                validity_end,
                counted: self.now,
            });
        }
    }

    pub(super) fn check_overlaps(&mut self) {
        let mut uses = self.uses.clone();
        uses.sort_by_key(|u| u.1);
        for (i, a) in uses.iter().enumerate() {
            for b in &uses[i + 1..] {
                if b.1 >= a.2 {
                    break;
                }
                if a.0 != b.0 {
                    self.report
                        .violations
                        .push(Violation::Overlap { a: *a, b: *b });
                }
            }
        }
    }

    pub(super) fn check_fences(&mut self) {
        let mut prev: Option<(u64, u64)> = None;
        for &(at, fence) in &self.grants {
            let Some(f) = fence else { continue };
            if let Some(p) = prev {
                if f <= p.1 {
                    self.report.violations.push(Violation::FenceRegression {
                        prev: p,
                        this: (at, f),
                    });
                }
            }
            prev = Some((at, f));
        }
    }

    /// Checker 4: a failed acquisition's `token` is on no server that has
    /// not crashed since (`crashes`: each server's crash count then).
    pub(super) fn check_left_behind(&mut self, token: &[u8], crashes: &[u64]) {
        if self.trace {
            eprintln!("{} check {}", self.now, String::from_utf8_lossy(token));
        }
        for (i, s) in self.servers.iter_mut().enumerate() {
            if !s.up || s.crashes_since != crashes[i] {
                continue;
            }
            let now = self.now;
            if s.get(RESOURCE, now).as_deref() == Some(token) {
                self.report.violations.push(Violation::LeftBehind {
                    server: i,
                    token: String::from_utf8_lossy(token).into_owned(),
                });
            }
        }
    }
}
