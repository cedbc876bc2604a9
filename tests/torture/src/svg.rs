//! The timeline picture of a torture run: an SVG, written by hand.
//!
//! Time runs left to right (an axis in seconds). Each worker has a row
//! with its holds as bars, coloured by how it holds locks and labelled with
//! the fence where there is room; accesses the resource refused are ticks
//! (red: writes, orange: reads), accepted stale accesses are magenta
//! diamonds, and overlapping holds are highlighted (orange: outside the
//! assumptions, the known limit; red: inside them, a violation). Below,
//! one row per group of faults (servers killed, servers paused, worker
//! paused, proxy) shows each fault as a bar; faults that break the
//! assumptions are crimson, and shade the workers' rows too. Every mark
//! has a `<title>` with its details (a tooltip in a browser).

use core::fmt::Write as _;

use super::check::Findings;
use super::history::{AccessOp, FaultKind, History, Hold, Micros, WorkerKind};
use super::report::{fault_label, worker_label};

const WIDTH: f64 = 1400.0;
const LEFT: f64 = 150.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 44.0;
const ROW: f64 = 24.0;
const BAR: f64 = 16.0;
const GAP: f64 = 14.0;

const OVERLAP_OUTSIDE: &str = "#ff9900";
const OVERLAP_INSIDE: &str = "#ff0000";
const REJECTED_WRITE: &str = "#c00000";
const REJECTED_READ: &str = "#ff7f0e";
const STALE_ACCEPTED: &str = "#ff00ff";
const BREAKING: &str = "#b3003b";

fn worker_colour(kind: WorkerKind) -> &'static str {
    match kind {
        WorkerKind::Watchdog => "#4c78a8",
        WorkerKind::Plain => "#54a24b",
        WorkerKind::Cli => "#9d755d",
    }
}

fn fault_colour(kind: FaultKind) -> &'static str {
    match kind {
        FaultKind::KillDelayedRestart => "#7f7f7f",
        FaultKind::KillImmediateRestart => "#444444",
        FaultKind::PauseServers => "#9467bd",
        FaultKind::PauseWorker => "#8c564b",
        FaultKind::ProxyDelay => "#9edae5",
        FaultKind::ProxyHold => "#17becf",
        FaultKind::ProxyBlackhole => "#0b6e79",
        FaultKind::ProxyReset => "#bcbd22",
    }
}

/// The fault rows, top to bottom, and the kinds each shows.
const FAULT_ROWS: [(&str, &[FaultKind]); 4] = [
    (
        "servers killed",
        &[
            FaultKind::KillDelayedRestart,
            FaultKind::KillImmediateRestart,
        ],
    ),
    ("servers paused", &[FaultKind::PauseServers]),
    ("worker paused", &[FaultKind::PauseWorker]),
    (
        "proxy faults",
        &[
            FaultKind::ProxyDelay,
            FaultKind::ProxyHold,
            FaultKind::ProxyBlackhole,
            FaultKind::ProxyReset,
        ],
    ),
];

/// Escapes text for SVG (XML) content and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Control characters are not allowed in XML 1.0.
            c if c.is_control() && c != '\n' && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// `1234567` µs as `1.235`.
fn secs(t: Micros) -> String {
    format!("{}.{:03}", t / 1_000_000, t % 1_000_000 / 1000)
}

/// A step for the time axis: at most about 12 ticks.
fn tick_step(span: Micros) -> Micros {
    const STEPS: [Micros; 16] = [
        100_000,
        200_000,
        500_000,
        1_000_000,
        2_000_000,
        5_000_000,
        10_000_000,
        15_000_000,
        30_000_000,
        60_000_000,
        120_000_000,
        300_000_000,
        600_000_000,
        900_000_000,
        1_800_000_000,
        3_600_000_000,
    ];
    STEPS
        .into_iter()
        .find(|&s| span / s <= 12)
        .unwrap_or(span.div_ceil(12).max(1))
}

/// How a hold ended, in words.
fn ended_by(x: &Hold) -> &'static str {
    let end = x.end();
    if x.released == Some(end) {
        "released"
    } else if x.lost == Some(end) {
        "lost"
    } else {
        "validity ran out"
    }
}

/// The longest span the picture draws: 30 days. A longer one (a garbled
/// time, a duration near `u64::MAX`) is cut to it.
const MAX_SPAN: Micros = 30 * 24 * 3600 * 1_000_000;

/// The time the picture spans: the run, and whatever was recorded after its
/// end, within reason. Holds may outlast the run (a validity still running
/// when it ended), by a few ttls at most; a time later than two ttls and a
/// second past the run's end is absurd (a garbled record), and is drawn at
/// the right edge instead of squashing the whole run into a sliver. When
/// the duration is unknown (0), the latest time counts, up to
/// [`MAX_SPAN`].
fn span(h: &History) -> Micros {
    let latest = h
        .holds
        .iter()
        .map(Hold::end)
        .chain(h.accesses.iter().map(|a| a.at))
        .chain(h.attempts.iter().map(|a| a.end))
        .chain(h.faults.iter().filter_map(|x| x.end))
        .max()
        .unwrap_or(0);
    let limit = if h.duration == 0 {
        MAX_SPAN
    } else {
        h.duration
            .saturating_add(h.max_ttl.saturating_mul(2))
            .saturating_add(1_000_000)
    };
    h.duration.max(latest.min(limit)).clamp(1, MAX_SPAN)
}

/// The plot: maps times to x.
struct Plot {
    span: Micros,
}

impl Plot {
    fn x(&self, t: Micros) -> f64 {
        LEFT + (WIDTH - LEFT - RIGHT) * (t.min(self.span) as f64) / (self.span as f64)
    }

    /// From `start` to `end`, at least half a pixel wide.
    fn span_x(&self, start: Micros, end: Micros) -> (f64, f64) {
        let x0 = self.x(start);
        (x0, (self.x(end) - x0).max(0.5))
    }
}

/// The timeline of a run, as an SVG document.
pub fn timeline(h: &History, f: &Findings) -> String {
    let mut s = String::new();
    // Writing to a String cannot fail.
    let _ = write_timeline(&mut s, h, f);
    s
}

fn write_timeline(s: &mut String, h: &History, f: &Findings) -> core::fmt::Result {
    // The workers, each with the kind it first showed.
    let mut workers: Vec<(u32, Option<WorkerKind>)> = h
        .holds
        .iter()
        .map(|x| (x.worker, Some(x.kind)))
        .chain(h.attempts.iter().map(|a| (a.worker, Some(a.kind))))
        .chain(h.accesses.iter().map(|a| (a.worker, None)))
        .collect();
    workers.sort_by_key(|&(w, k)| (w, k.is_none()));
    workers.dedup_by_key(|&mut (w, _)| w);
    let row_of = |worker: u32| -> f64 {
        let k = workers.partition_point(|&(w, _)| w < worker);
        let k = k as f64;
        TOP + ROW * k
    };

    let plot = Plot { span: span(h) };

    let worker_rows = workers.len() as f64;
    let workers_bottom = TOP + ROW * worker_rows;
    let faults_top = workers_bottom + GAP;
    let axis_y = faults_top + ROW * (FAULT_ROWS.len() as f64) + 4.0;
    let legend_top = axis_y + 36.0;
    let legend_items = legend();
    let legend_rows = legend_items.len().div_ceil(3) as f64;
    let height = legend_top + 18.0 * legend_rows + 10.0;

    writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0}" viewBox="0 0 {WIDTH} {height:.0}" font-family="sans-serif" font-size="11">"#
    )?;
    writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#)?;
    let verdict = f.verdict(h.profile);
    writeln!(
        s,
        r#"<text x="{LEFT}" y="20" font-size="14" font-weight="bold">{}</text>"#,
        escape(&format!(
            "torture run: profile {:?}, seed {}, {} s: {}",
            h.profile,
            h.seed,
            secs(h.duration),
            if verdict.pass { "PASS" } else { "FAIL" }
        ))
    )?;
    writeln!(
        s,
        r#"<text x="{LEFT}" y="36">{}</text>"#,
        escape(&format!(
            "holds {}, overlaps {} ({} outside the assumptions), accesses refused {}, faults {}",
            h.holds.len(),
            f.overlaps.len(),
            f.overlaps_outside_assumptions,
            f.fences.reads_rejected + f.fences.writes_rejected,
            h.faults.len()
        ))
    )?;

    // Row backgrounds and labels.
    for (i, &(w, kind)) in workers.iter().enumerate() {
        let y = row_of(w);
        if i % 2 == 0 {
            writeln!(
                s,
                r##"<rect x="{LEFT}" y="{y:.1}" width="{:.1}" height="{ROW}" fill="#f4f4f4"/>"##,
                WIDTH - LEFT - RIGHT
            )?;
        }
        let label = match kind {
            Some(k) => format!("worker {w} ({})", worker_label(k)),
            None => format!("worker {w}"),
        };
        writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            y + ROW / 2.0 + 4.0,
            escape(&label)
        )?;
    }

    // Faults shade the workers' rows: faintly, and crimson if they break
    // the assumptions.
    for x in &h.faults {
        let (x0, w) = plot.span_x(x.start, x.end.unwrap_or(plot.span));
        let (fill, opacity) = if x.breaks_assumptions {
            (BREAKING, 0.15)
        } else {
            ("#000000", 0.04)
        };
        writeln!(
            s,
            r#"<rect class="fault-band" x="{x0:.1}" y="{TOP}" width="{w:.1}" height="{:.1}" fill="{fill}" fill-opacity="{opacity}"/>"#,
            workers_bottom - TOP
        )?;
    }

    // Holds.
    for x in &h.holds {
        let (x0, w) = plot.span_x(x.acquired, x.end());
        let y = row_of(x.worker) + (ROW - BAR) / 2.0;
        let title = format!(
            "worker {} ({}), fence {}: {} s to {} s, {}",
            x.worker,
            worker_label(x.kind),
            x.fence,
            secs(x.acquired),
            secs(x.end()),
            ended_by(x)
        );
        writeln!(
            s,
            r#"<rect class="hold" x="{x0:.1}" y="{y:.1}" width="{w:.1}" height="{BAR}" fill="{}"><title>{}</title></rect>"#,
            worker_colour(x.kind),
            escape(&title)
        )?;
        let label = x.fence.to_string();
        let needs = 6.5 * label.len() as f64 + 4.0;
        if w >= needs {
            writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10" fill="white">{label}</text>"#,
                x0 + w / 2.0,
                y + BAR - 4.0
            )?;
        }
    }

    // Overlaps, on both workers' rows.
    for o in &f.overlaps {
        let (x0, w) = plot.span_x(o.from, o.until);
        let (fill, what) = match o.breaking_fault {
            Some(_) => (OVERLAP_OUTSIDE, "outside the assumptions (the known limit)"),
            None => (OVERLAP_INSIDE, "inside the assumptions: a violation"),
        };
        let title = format!(
            "overlap of workers {} and {} (fences {} and {}), {} s to {} s, {what}",
            o.workers[0],
            o.workers[1],
            o.fences[0],
            o.fences[1],
            secs(o.from),
            secs(o.until)
        );
        for worker in o.workers {
            writeln!(
                s,
                r#"<rect class="overlap" x="{x0:.1}" y="{:.1}" width="{w:.1}" height="{ROW}" fill="{fill}" fill-opacity="0.35" stroke="{fill}" stroke-width="1.5"><title>{}</title></rect>"#,
                row_of(worker),
                escape(&title)
            )?;
        }
    }

    // Refused accesses.
    for a in h.accesses.iter().filter(|a| !a.accepted) {
        let x = plot.x(a.at);
        let y = row_of(a.worker);
        let (colour, y0, y1, what) = match a.op {
            AccessOp::Write { past_validity, .. } => (
                REJECTED_WRITE,
                y + 1.0,
                y + ROW - 1.0,
                if past_validity {
                    "write past validity refused"
                } else {
                    "write refused"
                },
            ),
            AccessOp::Read => (REJECTED_READ, y + ROW / 2.0, y + ROW - 1.0, "read refused"),
        };
        // A write is also refused when its fence is not below the largest
        // fence but not above an earlier accepted write's (its own read
        // raised the largest fence to it, say).
        let why = if a.fence < a.max_fence_before {
            format!("fence {} below {}", a.fence, a.max_fence_before)
        } else {
            format!("fence {} not above an earlier accepted write's", a.fence)
        };
        let title = format!("worker {}: {what}, {why}, at {} s", a.worker, secs(a.at));
        writeln!(
            s,
            r#"<line class="rejected" x1="{x:.1}" y1="{y0:.1}" x2="{x:.1}" y2="{y1:.1}" stroke="{colour}" stroke-width="2"><title>{}</title></line>"#,
            escape(&title)
        )?;
    }

    // Accepted stale accesses: every one, from the resource's own record
    // (the checker keeps only a few examples).
    for a in h
        .accesses
        .iter()
        .filter(|a| a.accepted && a.fence < a.max_fence_before)
    {
        let (x, y) = (plot.x(a.at), row_of(a.worker) + ROW / 2.0);
        let what = match a.op {
            AccessOp::Read => "read",
            AccessOp::Write { .. } => "write",
        };
        let title = format!(
            "worker {}: stale {what} accepted, fence {} below {}, at {} s",
            a.worker,
            a.fence,
            a.max_fence_before,
            secs(a.at)
        );
        writeln!(
            s,
            r#"<path class="stale" d="M{x:.1} {:.1} L{:.1} {y:.1} L{x:.1} {:.1} L{:.1} {y:.1} Z" fill="{STALE_ACCEPTED}" stroke="black" stroke-width="0.5"><title>{}</title></path>"#,
            y - 6.0,
            x + 6.0,
            y + 6.0,
            x - 6.0,
            escape(&title)
        )?;
    }

    // Fault rows.
    for (i, (label, kinds)) in FAULT_ROWS.iter().enumerate() {
        let y = faults_top + ROW * i as f64;
        if i % 2 == 0 {
            writeln!(
                s,
                r##"<rect x="{LEFT}" y="{y:.1}" width="{:.1}" height="{ROW}" fill="#f4f4f4"/>"##,
                WIDTH - LEFT - RIGHT
            )?;
        }
        writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{label}</text>"#,
            LEFT - 6.0,
            y + ROW / 2.0 + 4.0
        )?;
        for x in h.faults.iter().filter(|x| kinds.contains(&x.kind)) {
            let (x0, w) = plot.span_x(x.start, x.end.unwrap_or(plot.span));
            let colour = if x.breaks_assumptions {
                BREAKING
            } else {
                fault_colour(x.kind)
            };
            let title = format!(
                "{} ({}): {} s to {}{}",
                fault_label(x.kind),
                x.target,
                secs(x.start),
                x.end.map_or_else(
                    || "the end (never healed)".to_owned(),
                    |e| format!("{} s", secs(e))
                ),
                if x.breaks_assumptions {
                    ", breaks the assumptions"
                } else {
                    ""
                }
            );
            writeln!(
                s,
                r#"<rect class="fault" x="{x0:.1}" y="{:.1}" width="{w:.1}" height="{BAR}" fill="{colour}"><title>{}</title></rect>"#,
                y + (ROW - BAR) / 2.0,
                escape(&title)
            )?;
        }
    }

    // The time axis, in seconds.
    writeln!(
        s,
        r#"<line x1="{LEFT}" y1="{axis_y:.1}" x2="{:.1}" y2="{axis_y:.1}" stroke="black"/>"#,
        WIDTH - RIGHT
    )?;
    let step = tick_step(plot.span);
    // By index, not `t += step`: no sum can overflow, and at most 13 ticks.
    for i in 0..=plot.span / step {
        let t = i * step;
        let x = plot.x(t);
        let label = if step.is_multiple_of(1_000_000) {
            format!("{}", t / 1_000_000)
        } else {
            format!("{}.{}", t / 1_000_000, t % 1_000_000 / 100_000)
        };
        writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#cccccc" stroke-width="0.5"/>"##,
            axis_y + 5.0
        )?;
        writeln!(
            s,
            r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{label}</text>"#,
            axis_y + 17.0
        )?;
    }
    writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="end">time (s)</text>"#,
        WIDTH - RIGHT,
        axis_y + 30.0
    )?;

    // The legend, three items a row.
    for (i, (colour, label)) in legend_items.iter().enumerate() {
        let (col, row) = ((i % 3) as f64, (i / 3) as f64);
        let (x, y) = (LEFT + 410.0 * col, legend_top + 18.0 * row);
        writeln!(
            s,
            r#"<rect x="{x:.1}" y="{y:.1}" width="14" height="12" fill="{colour}" stroke="black" stroke-width="0.3"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            x + 20.0,
            y + 10.0,
            escape(label)
        )?;
    }
    writeln!(s, "</svg>")
}

/// The legend's items: colour and meaning.
fn legend() -> Vec<(&'static str, String)> {
    let mut items: Vec<(&'static str, String)> =
        [WorkerKind::Watchdog, WorkerKind::Plain, WorkerKind::Cli]
            .into_iter()
            .map(|k| {
                (
                    worker_colour(k),
                    format!("hold ({} worker), labelled with its fence", worker_label(k)),
                )
            })
            .collect();
    items.extend([
        (
            OVERLAP_OUTSIDE,
            "overlap outside the assumptions (known limit)".to_owned(),
        ),
        (
            OVERLAP_INSIDE,
            "overlap inside the assumptions (violation)".to_owned(),
        ),
        (REJECTED_WRITE, "write refused by the resource".to_owned()),
        (REJECTED_READ, "read refused by the resource".to_owned()),
        (
            STALE_ACCEPTED,
            "stale access accepted (violation)".to_owned(),
        ),
    ]);
    items.extend(
        super::report::FAULT_KINDS
            .into_iter()
            .map(|k| (fault_colour(k), fault_label(k).to_owned())),
    );
    items.push((BREAKING, "a fault that breaks the assumptions".to_owned()));
    items
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::check;
    use crate::history::{Access, Attempt, AttemptOutcome, Fault, Profile, RunClock};

    const S: Micros = 1_000_000;

    /// Checks that tags balance, that no text holds a raw `<` or a bare
    /// `&`, and returns how many elements of each class there are.
    fn balanced(svg: &str) -> Result<Vec<String>, String> {
        let mut open: Vec<&str> = Vec::new();
        let mut classes = Vec::new();
        let mut rest = svg;
        while let Some(lt) = rest.find('<') {
            let text = &rest[..lt];
            check_entities(text)?;
            let gt = rest[lt..].find('>').ok_or("unclosed tag")? + lt;
            let tag = &rest[lt + 1..gt];
            if tag.contains('<') {
                return Err(format!("'<' inside a tag: {tag}"));
            }
            check_entities(tag)?;
            if let Some(name) = tag.strip_prefix('/') {
                let top = open.pop().ok_or(format!("</{name}> closes nothing"))?;
                if top != name.trim() {
                    return Err(format!("<{top}> closed by </{name}>"));
                }
            } else {
                let name = tag.split_whitespace().next().ok_or("empty tag")?;
                if let Some(i) = tag.find("class=\"") {
                    let c = &tag[i + 7..];
                    classes.push(c[..c.find('"').unwrap()].to_owned());
                }
                if !tag.ends_with('/') {
                    open.push(name);
                }
            }
            rest = &rest[gt + 1..];
        }
        check_entities(rest)?;
        if !rest.trim().is_empty() {
            return Err("text after the root".to_owned());
        }
        if !open.is_empty() {
            return Err(format!("unclosed: {open:?}"));
        }
        Ok(classes)
    }

    fn check_entities(text: &str) -> Result<(), String> {
        for (i, _) in text.match_indices('&') {
            let after = &text[i + 1..];
            if !["amp;", "lt;", "gt;", "quot;", "apos;"]
                .iter()
                .any(|e| after.starts_with(e))
            {
                return Err(format!("bare '&' in {text:?}"));
            }
        }
        Ok(())
    }

    fn hold(worker: u32, kind: WorkerKind, fence: u64, from: Micros, to: Micros) -> Hold {
        Hold {
            worker,
            kind,
            fence,
            acquired: from,
            valid_until: to,
            released: None,
            lost: None,
        }
    }

    fn history() -> History {
        History {
            profile: Profile::Unsafe,
            seed: 9,
            clock: RunClock {
                epoch_unix_micros: 0,
            },
            duration: 30 * S,
            max_ttl: 2 * S,
            attempts: vec![Attempt {
                worker: 1,
                kind: WorkerKind::Watchdog,
                start: S - 1000,
                end: S,
                outcome: AttemptOutcome::Acquired { fence: 1 },
            }],
            holds: vec![
                hold(1, WorkerKind::Watchdog, 1, S, 3 * S),
                hold(2, WorkerKind::Plain, 2, 4 * S, 6 * S),
                // Overlaps worker 2's hold after the unsafe restart.
                hold(3, WorkerKind::Cli, 3, 5 * S, 7 * S),
                // Too short for a label.
                hold(1, WorkerKind::Watchdog, 123_456, 8 * S, 8 * S + 1000),
            ],
            accesses: vec![
                Access {
                    worker: 2,
                    fence: 2,
                    op: AccessOp::Write {
                        value: 1,
                        read: 0,
                        past_validity: true,
                    },
                    at: 6 * S + 500_000,
                    accepted: false,
                    max_fence_before: 3,
                    value_before: 0,
                },
                Access {
                    worker: 4,
                    fence: 1,
                    op: AccessOp::Read,
                    at: 7 * S,
                    accepted: false,
                    max_fence_before: 3,
                    value_before: 0,
                },
            ],
            faults: vec![
                Fault {
                    kind: FaultKind::KillImmediateRestart,
                    target: "servers <6380> & \"6381\"".to_owned(),
                    start: 4 * S + 500_000,
                    end: Some(4 * S + 600_000),
                    breaks_assumptions: true,
                },
                Fault {
                    kind: FaultKind::ProxyBlackhole,
                    target: "proxy 2".to_owned(),
                    start: 10 * S,
                    end: None,
                    breaks_assumptions: false,
                },
            ],
            leftovers: vec![],
            repairs: vec![],
        }
    }

    #[test]
    fn the_timeline_is_balanced_and_has_one_bar_per_hold() {
        let h = history();
        let f = check(&h, 5 * S);
        assert_eq!(f.overlaps.len(), 1);
        let svg = timeline(&h, &f);
        let classes = balanced(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
        let count = |c: &str| classes.iter().filter(|x| *x == c).count();
        assert_eq!(count("hold"), h.holds.len());
        // One highlight on each of the two workers' rows.
        assert_eq!(count("overlap"), 2);
        assert_eq!(count("rejected"), 2);
        assert_eq!(count("fault"), 2);
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.contains("servers &lt;6380&gt; &amp; &quot;6381&quot;"));
        // Labels where there is room, none where there is not.
        assert!(svg.contains(">3</text>"));
        assert!(!svg.contains(">123456</text>"));
        // Rows for the four workers (worker 4 only accessed) and the axis.
        for needle in [
            "worker 1 (watchdog)",
            "worker 3 (cli)",
            "worker 4<",
            "proxy faults",
            "time (s)",
            ">30</text>",
            "known limit",
        ] {
            assert!(svg.contains(needle), "{needle:?}");
        }
    }

    #[test]
    fn a_stale_access_accepted_is_marked() {
        let mut h = history();
        h.accesses.push(Access {
            worker: 2,
            fence: 2,
            op: AccessOp::Read,
            at: 7 * S,
            accepted: true,
            max_fence_before: 3,
            value_before: 0,
        });
        // Make the record consistent with a resource that let fence 3 in.
        h.accesses.insert(
            0,
            Access {
                worker: 3,
                fence: 3,
                op: AccessOp::Read,
                at: 5 * S,
                accepted: true,
                max_fence_before: 0,
                value_before: 0,
            },
        );
        let f = check(&h, 5 * S);
        let svg = timeline(&h, &f);
        let classes = balanced(&svg).unwrap();
        assert_eq!(classes.iter().filter(|x| *x == "stale").count(), 1);
    }

    #[test]
    fn an_empty_history_still_draws() {
        let h = History {
            holds: vec![],
            attempts: vec![],
            accesses: vec![],
            faults: vec![],
            duration: 0,
            ..history()
        };
        let svg = timeline(&h, &check(&h, S));
        balanced(&svg).unwrap();
        assert!(!svg.contains("NaN"));
        assert!(!svg.contains("inf"));
    }

    #[test]
    fn tick_steps_stay_few() {
        for span in [
            1,
            999,
            S,
            30 * S,
            3600 * S,
            100_000 * S,
            MAX_SPAN,
            Micros::MAX,
        ] {
            let step = tick_step(span);
            assert!(step > 0 && span / step <= 12, "{span}: {step}");
        }
    }

    #[test]
    fn absurd_times_neither_overflow_nor_squash_the_picture() {
        // A hold whose validity reads near u64::MAX (a garbled record): the
        // axis must neither overflow nor loop, and the run's 30 s must stay
        // readable.
        let mut h = history();
        h.holds
            .push(hold(2, WorkerKind::Plain, 9, 20 * S, Micros::MAX - 3));
        let svg = timeline(&h, &check(&h, 5 * S));
        balanced(&svg).unwrap();
        assert!(svg.contains(">30</text>"), "{svg}");
        // Even a duration near u64::MAX draws.
        let h = History {
            duration: Micros::MAX - 1,
            ..history()
        };
        let svg = timeline(&h, &check(&h, 5 * S));
        balanced(&svg).unwrap();
    }

    #[test]
    fn every_stale_access_accepted_is_marked_not_only_the_examples() {
        let mut h = history();
        // Fence 3 is read first; then 25 stale reads with fence 2 accepted.
        h.accesses.insert(
            0,
            Access {
                worker: 3,
                fence: 3,
                op: AccessOp::Read,
                at: 5 * S,
                accepted: true,
                max_fence_before: 0,
                value_before: 0,
            },
        );
        for k in 0..25 {
            h.accesses.push(Access {
                worker: 2,
                fence: 2,
                op: AccessOp::Read,
                at: 7 * S + k,
                accepted: true,
                max_fence_before: 3,
                value_before: 0,
            });
        }
        let f = check(&h, 5 * S);
        assert_eq!(f.fences.stale_accepted, 25);
        let classes = balanced(&timeline(&h, &f)).unwrap();
        assert_eq!(classes.iter().filter(|x| *x == "stale").count(), 25);
    }

    #[test]
    fn a_write_refused_for_not_being_above_an_earlier_write_says_so() {
        let mut h = history();
        // Fence 3 read and wrote; a second write with fence 3 is refused,
        // though 3 is not below the largest fence (3).
        h.accesses = vec![
            Access {
                worker: 3,
                fence: 3,
                op: AccessOp::Write {
                    value: 1,
                    read: 0,
                    past_validity: false,
                },
                at: 5 * S,
                accepted: true,
                max_fence_before: 0,
                value_before: 0,
            },
            Access {
                worker: 3,
                fence: 3,
                op: AccessOp::Write {
                    value: 2,
                    read: 1,
                    past_validity: false,
                },
                at: 6 * S,
                accepted: false,
                max_fence_before: 3,
                value_before: 1,
            },
        ];
        let svg = timeline(&h, &check(&h, 5 * S));
        assert!(
            svg.contains("write refused, fence 3 not above an earlier accepted write"),
            "{svg}"
        );
        assert!(!svg.contains("fence 3 below 3"));
    }
}
