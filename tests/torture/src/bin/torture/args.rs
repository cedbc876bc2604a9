//! The command line: `--name value` / `--name=value` options and flags,
//! parsed by hand (the few options do not justify a parser crate).

use alloc::collections::BTreeMap;
use core::time::Duration;

/// A usage error, in words.
#[derive(Debug)]
pub(crate) struct Usage(pub(crate) String);

/// Parsed options of one subcommand.
#[derive(Debug, Default)]
pub(crate) struct Options {
    values: BTreeMap<String, String>,
    flags: Vec<String>,
}

impl Options {
    /// Parses `raw` against the options that take a value (`with_value`)
    /// and the flags (`flags`); anything else is a usage error.
    pub(crate) fn parse(
        raw: &[String],
        with_value: &[&str],
        flags: &[&str],
    ) -> Result<Options, Usage> {
        let mut options = Options::default();
        let mut rest = raw.iter();
        while let Some(arg) = rest.next() {
            let Some(long) = arg.strip_prefix("--") else {
                return Err(Usage(format!("unexpected argument {arg:?}")));
            };
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_owned())),
                None => (long, None),
            };
            if flags.contains(&name) {
                if inline.is_some() {
                    return Err(Usage(format!("--{name} takes no value")));
                }
                options.flags.push(name.to_owned());
            } else if with_value.contains(&name) {
                let value = match inline {
                    Some(v) => v,
                    None => rest
                        .next()
                        .cloned()
                        .ok_or_else(|| Usage(format!("--{name} needs a value")))?,
                };
                options.values.insert(name.to_owned(), value);
            } else {
                return Err(Usage(format!("unknown option --{name}")));
            }
        }
        Ok(options)
    }

    /// Whether the flag was given.
    pub(crate) fn flag(&self, name: &str) -> bool {
        self.flags.iter().any(|f| f == name)
    }

    /// The option's value, if given.
    pub(crate) fn value(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// The option's value; a usage error without it.
    pub(crate) fn required(&self, name: &str) -> Result<&str, Usage> {
        self.value(name)
            .ok_or_else(|| Usage(format!("--{name} is required")))
    }

    /// A number option.
    pub(crate) fn number(&self, name: &str) -> Result<Option<u64>, Usage> {
        self.value(name)
            .map(|v| {
                v.parse()
                    .map_err(|_| Usage(format!("--{name}: {v:?} is not a number")))
            })
            .transpose()
    }

    /// A duration option.
    pub(crate) fn duration(&self, name: &str) -> Result<Option<Duration>, Usage> {
        self.value(name)
            .map(|v| parse_duration(v).map_err(|e| Usage(format!("--{name}: {e}"))))
            .transpose()
    }
}

/// `250ms`, `30s`, `2m`, `1h`, or a bare number of seconds.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (30s, 250ms, 2m)"))?;
    let millis = match unit {
        "" | "s" => n.checked_mul(1000),
        "ms" => Some(n),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (ms, s, m, h)")),
    };
    millis
        .map(Duration::from_millis)
        .ok_or_else(|| format!("{s:?} is too long"))
}

/// A duration as the `redlock` command and these options take it.
pub(crate) fn show_duration(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn options_values_and_flags() {
        let o = Options::parse(
            &strings(&["--seed", "7", "--json", "--duration=30s"]),
            &["seed", "duration"],
            &["json"],
        )
        .unwrap_or_default();
        assert_eq!(o.number("seed").ok().flatten(), Some(7));
        assert!(o.flag("json"));
        assert_eq!(
            o.duration("duration").ok().flatten(),
            Some(Duration::from_secs(30))
        );
        assert!(Options::parse(&strings(&["--nope"]), &[], &[]).is_err());
        assert!(Options::parse(&strings(&["--seed"]), &["seed"], &[]).is_err());
        assert!(Options::parse(&strings(&["--json=1"]), &[], &["json"]).is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("1d").is_err());
    }
}
