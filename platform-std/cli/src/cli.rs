//! The command line, as clap definitions: the subcommands (each one's
//! options are defined next to its code, those several share in `args.rs`),
//! the help built from them (usage lines and option tables included), usage
//! errors in one line that never shows a password, and the shell
//! completions and the man page made from the same definitions.

use clap::builder::StyledStr;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Arg, Args, Command, CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

use std::ffi::{OsStr, OsString};

use crate::args::{
    ACQUIRE_OPTIONS, ESCAPE_HINT, SERVER_OPTIONS, Verbosity, WAITING, masked, shown,
};
use crate::{EX_USAGE, bench, demo, guard, run};

/// `redlock [-v]... SUBCOMMAND ...`.
#[derive(Debug, Parser)]
#[command(
    name = "redlock",
    version,
    about = "A distributed lock over N independent Redis masters (Redlock): flock(1) across \
             machines",
    before_help = ABOUT,
    help_template = TEMPLATE,
    // An option given twice: the last one counts.
    args_override_self = true,
    arg_required_else_help = true
)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) verbosity: Verbosity,
    #[command(subcommand)]
    pub(crate) command: Sub,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Sub {
    #[command(
        about = "Run a command with a lock held, kept alive while it runs",
        before_help = run::ABOUT,
        after_help = run::AFTER,
        help_template = TEMPLATE
    )]
    Lock(run::LockArgs),
    #[command(
        about = "Acquire a lock and print its token, for shell scripts",
        before_help = crate::ACQUIRE_ABOUT,
        after_help = crate::ACQUIRE_AFTER,
        help_template = TEMPLATE
    )]
    Acquire(crate::AcquireArgs),
    #[command(
        about = "Release a lock acquired with `redlock acquire`",
        before_help = crate::UNLOCK_ABOUT,
        after_help = crate::UNLOCK_AFTER,
        help_template = TEMPLATE
    )]
    Unlock(crate::UnlockArgs),
    #[command(
        about = "Show who holds a lock on each server",
        before_help = crate::INSPECT_ABOUT,
        after_help = crate::INSPECT_AFTER,
        help_template = TEMPLATE
    )]
    Inspect(crate::InspectArgs),
    #[command(
        name = "fence-repair",
        about = "Repair a fencing-token counter that servers lost",
        before_help = crate::FENCE_REPAIR_ABOUT,
        after_help = crate::FENCE_REPAIR_AFTER,
        help_template = TEMPLATE
    )]
    FenceRepair(crate::FenceRepairArgs),
    #[command(
        about = "Measure lock and unlock latencies and throughput",
        before_help = bench::ABOUT,
        after_help = bench::AFTER,
        help_template = TEMPLATE
    )]
    Bench(bench::BenchArgs),
    #[command(
        about = "Show Redlock at work on five local redis-servers (or the servers given)",
        before_help = demo::about(),
        after_help = demo::AFTER,
        help_template = TEMPLATE
    )]
    Demo(demo::DemoArgs),
    #[command(
        about = "Print a shell's completions for redlock",
        before_help = COMPLETIONS_ABOUT,
        help_template = TEMPLATE
    )]
    Completions(CompletionsArgs),
    /// Prints the man page (roff), as checked in at `platform-std/cli/redlock.1`.
    #[command(hide = true)]
    Man,
    /// `redlock version`, as `redlock --version`.
    #[command(hide = true)]
    Version,
    /// Not a subcommand for people: the process that kills a `lock`
    /// command's process group if redlock dies (see guard.rs).
    #[command(name = guard::SUBCOMMAND, hide = true)]
    GroupGuard,
}

impl Sub {
    /// The subcommand's name, as given.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Sub::Lock(_) => "lock",
            Sub::Acquire(_) => "acquire",
            Sub::Unlock(_) => "unlock",
            Sub::Inspect(_) => "inspect",
            Sub::FenceRepair(_) => "fence-repair",
            Sub::Bench(_) => "bench",
            Sub::Demo(_) => "demo",
            Sub::Completions(_) => "completions",
            Sub::Man => "man",
            Sub::Version => "version",
            Sub::GroupGuard => guard::SUBCOMMAND,
        }
    }

    /// The `-v`s given after the subcommand.
    pub(crate) fn verbose(&self) -> u8 {
        match self {
            Sub::Lock(a) => a.target.verbosity.verbose,
            Sub::Acquire(a) => a.target.verbosity.verbose,
            Sub::Unlock(a) => a.target.verbosity.verbose,
            Sub::Inspect(a) => a.target.verbosity.verbose,
            Sub::FenceRepair(a) => a.target.verbosity.verbose,
            Sub::Bench(a) => a.verbosity.verbose,
            Sub::Demo(a) => a.verbosity.verbose,
            Sub::Completions(_) | Sub::Man | Sub::Version | Sub::GroupGuard => 0,
        }
    }
}

/// `redlock completions SHELL`.
#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    #[arg(value_name = "SHELL", help = "the shell to complete for")]
    pub(crate) shell: clap_complete::Shell,
}

/// The help's layout: the one-line summary, the usage, then the
/// description (`before_help`), the options, and the rest (`after_help`).
const TEMPLATE: &str =
    "{about-with-newline}\n{usage-heading} {usage}\n\n{before-help}{all-args}{after-help}";

/// `redlock --help`: what it does.
const ABOUT: &str = "\
Runs a command under a Redlock lock (lock), acquires and releases locks for
shell scripts (acquire, unlock), inspects them, repairs fencing-token
counters, benchmarks a set of servers, and demonstrates the algorithm on
five local redis-server processes. Every subcommand also takes -h/--help and
-v/--verbose (also before the subcommand: redlock -vv lock ...).";

/// `redlock completions --help`: where the scripts go.
const COMPLETIONS_ABOUT: &str = "\
Prints the completion script of SHELL for redlock on stdout:

  redlock completions bash > ~/.local/share/bash-completion/completions/redlock
  redlock completions zsh > ~/.zfunc/_redlock    # a directory in $fpath
  redlock completions fish > ~/.config/fish/completions/redlock.fish";

/// The prose at the end of the top-level help (and of the man page).
const NOTES: &str = "\
Logging (to stderr): -v says what each operation did, every server by
address (held, held by another, not asked, refused and why) and the time it
took, with the library's warnings and what it decides (retries, servers
given up on); -vv also its debug records (connections); RUST_LOG
(env_logger's syntax, e.g. RUST_LOG=redlock=debug) works too. Without
either, nothing is logged.

A password's `@`, `:`, `/`, `%` and bytes that are not UTF-8 are written as
%-escapes in a URL (%40 for @, %FF for the byte 0xFF). Passwords are never
printed.

Durations: a bare number is seconds (10, 0.5), as for sleep(1) and flock -w;
or with a unit: 250ms, 10s, 2m, 1h (1.5s works too).

Exit statuses: the command's own (lock); 64 bad usage; 65 fence counters
lost (see fence-repair); 69 too few servers answered; 70 lock lost or
internal error; 75 (or -E N) held by someone else.

Run `redlock SUBCOMMAND --help` for more; `redlock completions SHELL` prints
a shell's completions.";

/// The width the help is wrapped at: fixed, not the terminal's, so that it
/// reads the same everywhere (and tests see what people see).
const WIDTH: usize = 80;

/// The command line's definitions, each subcommand with its usage line,
/// without the top-level help's option tables (see [`command`]).
fn definitions() -> Command {
    let mut cmd = Cli::command().term_width(WIDTH);
    let lines: Vec<(String, String)> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| (s.get_name().to_string(), usage_line(s)))
        .collect();
    for (name, line) in &lines {
        cmd = cmd.mut_subcommand(name, |s| s.override_usage(line));
    }
    let all: Vec<&str> = lines.iter().map(|(_, line)| line.as_str()).collect();
    cmd.override_usage(all.join("\n       "))
}

/// The command line: what parses the arguments, and prints the help.
pub(crate) fn command() -> Command {
    let cmd = definitions();
    let tables = option_tables(&cmd);
    cmd.after_help(format!("{tables}{NOTES}"))
}

/// The usage line of subcommand `sub`, from its definitions: `redlock lock
/// [--ttl D] ... [-w D] [-n] [-E N] [SERVER OPTIONS] [ACQUIRE OPTIONS] RESOURCE
/// [--] CMD [ARGS..]`. The server options, and the acquire options when
/// there are more than one, are named by their heading; `-h` and `-v`
/// (every subcommand's) are left out.
fn usage_line(sub: &Command) -> String {
    let mut line = format!("redlock {}", sub.get_name());
    let options: Vec<&Arg> = sub
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !a.is_positional() && a.get_id() != "verbose")
        .collect();
    let mut named = Vec::new();
    for arg in &options {
        match arg.get_help_heading() {
            Some(heading @ (SERVER_OPTIONS | ACQUIRE_OPTIONS))
                if options
                    .iter()
                    .filter(|a| a.get_help_heading() == Some(heading))
                    .count()
                    > 1 =>
            {
                if !named.contains(&heading) {
                    named.push(heading);
                    line.push_str(&format!(" [{}]", heading.to_uppercase()));
                }
            }
            _ => {
                let name = match (arg.get_short(), arg.get_long()) {
                    (Some(short), _) => format!("-{short}"),
                    (None, Some(long)) => format!("--{long}"),
                    (None, None) => continue,
                };
                let value = arg
                    .get_value_names()
                    .and_then(|names| names.first())
                    .filter(|_| arg.get_action().takes_values())
                    .map_or_else(String::new, |v| format!(" {v}"));
                if arg.is_required_set() {
                    line.push_str(&format!(" {name}{value}"));
                } else {
                    line.push_str(&format!(" [{name}{value}]"));
                }
            }
        }
    }
    for arg in sub.get_positionals() {
        let name = arg
            .get_value_names()
            .and_then(|names| names.first())
            .map_or_else(|| arg.get_id().to_string(), ToString::to_string);
        if arg.is_trailing_var_arg_set() {
            line.push_str(&format!(" [--] {name} [ARGS..]"));
        } else if arg.is_required_set() {
            line.push_str(&format!(" {name}"));
        } else {
            line.push_str(&format!(" [{name}]"));
        }
    }
    line
}

/// Which arguments of a subcommand a table shows.
type Picks<'a> = &'a dyn Fn(&Arg) -> bool;

/// The top-level help's tables of the options that several subcommands
/// share, and of `lock`'s own, as each subcommand's help shows them.
fn option_tables(cmd: &Command) -> String {
    let Some(lock) = cmd.find_subcommand("lock") else {
        return String::new();
    };
    let own = |a: &Arg| {
        a.get_help_heading().is_none() && !matches!(a.get_id().as_str(), "verbose" | "help")
    };
    let tables: [(&str, Picks<'_>); 4] = [
        ("Server options (every subcommand):", &|a: &Arg| {
            a.get_help_heading() == Some(SERVER_OPTIONS)
        }),
        (
            "Acquire options (lock and acquire; bench and demo take --restart-guard only):",
            &|a: &Arg| a.get_help_heading() == Some(ACQUIRE_OPTIONS),
        ),
        (
            "Waiting (lock and acquire; unlock takes -E), as flock(1) has them:",
            &|a: &Arg| a.get_help_heading() == Some(WAITING),
        ),
        (
            "Lock options (lock; acquire takes --ttl and --fence; bench --ttl, default 10s):",
            &own,
        ),
    ];
    let mut out = String::new();
    for (title, shown) in tables {
        out.push_str(title);
        out.push('\n');
        out.push_str(&options_table(lock, shown));
        out.push('\n');
    }
    out
}

/// The options of `sub` that `shown` picks, laid out as clap lays out a
/// subcommand's help.
fn options_table(sub: &Command, shown: &dyn Fn(&Arg) -> bool) -> String {
    // The others stay, hidden: options refer to each other (`-n` excludes
    // `-w`).
    let args: Vec<Arg> = sub
        .get_arguments()
        .filter(|a| !a.is_positional())
        .map(|a| {
            let hidden = !shown(a);
            a.clone().help_heading(None).hide(hidden)
        })
        .collect();
    let mut table = Command::new("redlock")
        .disable_help_flag(true)
        .disable_version_flag(true)
        .term_width(WIDTH)
        .help_template("{options}")
        .args(args);
    table.render_help().to_string()
}

/// What [`parse`] found.
#[derive(Debug)]
pub(crate) enum Parsed {
    /// A subcommand to run.
    Run(Box<Cli>),
    /// Nothing to run: exit with this status (help, version, usage error,
    /// all printed already).
    Exit(u8),
}

/// Parses `args` (the arguments after the program's name). Help and the
/// version go to stdout (status 0); no arguments at all print the help on
/// stderr (64); a usage error is one line on stderr (64).
pub(crate) fn parse(args: Vec<OsString>) -> Parsed {
    let mut cmd = command();
    let all = core::iter::once(OsString::from("redlock")).chain(args.iter().cloned());
    let parsed = cmd
        .try_get_matches_from_mut(all)
        .and_then(|matches| Cli::from_arg_matches(&matches));
    match parsed {
        Ok(cli) => Parsed::Run(Box::new(cli)),
        Err(e) => match e.kind() {
            ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                let _ = e.print();
                Parsed::Exit(0)
            }
            ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand
                if args.iter().all(|a| a.to_str().is_some_and(is_verbosity)) =>
            {
                warn_user!("{}", cmd.render_help());
                Parsed::Exit(EX_USAGE)
            }
            ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand => {
                // Anything else without a subcommand (`redlock --`): one
                // line, as every usage error.
                warn_user!("redlock: missing subcommand (try redlock --help)");
                Parsed::Exit(EX_USAGE)
            }
            kind if utf8_at_fault(kind, &cmd, &args) => {
                // One of redlock's own arguments (the command's come after
                // them all, and may be anything): the first that is not
                // UTF-8. Not shown: it may be a server URL with its password.
                let at = args
                    .iter()
                    .position(|a| a.to_str().is_none())
                    .map_or(0, |i| i + 1);
                warn_user!(
                    "redlock: argument {at} is not valid UTF-8 (not shown: it may hold a \
                     password); {}",
                    ESCAPE_HINT
                );
                Parsed::Exit(EX_USAGE)
            }
            _ => {
                warn_user!("{}", usage_error(&e, subcommand(&cmd, &args)));
                Parsed::Exit(EX_USAGE)
            }
        },
    }
}

/// Whether a usage error comes of an argument that is not UTF-8: clap
/// says so of a value, and of anything else (an extra argument, an unknown
/// option) the first such argument is the one at fault, unless `lock`'s
/// command may hold it.
fn utf8_at_fault(kind: ErrorKind, cmd: &Command, args: &[OsString]) -> bool {
    kind == ErrorKind::InvalidUtf8
        || (args.iter().any(|a| a.to_str().is_none()) && subcommand(cmd, args) != Some("lock"))
}

/// `-v`, `-vv`, ... or `--verbose`: what may come alone, as no arguments
/// at all (the help, on stderr).
fn is_verbosity(arg: &str) -> bool {
    arg == "--verbose"
        || arg
            .strip_prefix('-')
            .is_some_and(|v| !v.is_empty() && v.chars().all(|c| c == 'v'))
}

/// The subcommand `args` name, if they name one: the first argument that
/// is not an option (those before the subcommand take no value).
fn subcommand<'a, S: AsRef<OsStr>>(cmd: &Command, args: &'a [S]) -> Option<&'a str> {
    // The first argument that is not an option, UTF-8 or not (one that is
    // not names no subcommand); none after `--`.
    let first = args
        .iter()
        .map(AsRef::as_ref)
        .take_while(|a| *a != "--")
        .find(|a| !a.as_encoded_bytes().starts_with(b"-"))?
        .to_str()?;
    cmd.find_subcommand(first).map(|_| first)
}

/// A usage error in one line, naming the option (or subcommand) and what
/// was wrong with it, with clap's suggestion ("did you mean"), and every
/// value shown masked (it may be a misplaced server URL with a password).
pub(crate) fn usage_error(e: &clap::Error, sub: Option<&str>) -> String {
    let string = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s.as_str()),
        _ => None,
    };
    let strings = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => vec![s.clone()],
        Some(ContextValue::Strings(s)) => s.clone(),
        _ => Vec::new(),
    };
    let arg = string(ContextKind::InvalidArg).map_or_else(String::new, arg_name);
    let value = string(ContextKind::InvalidValue).unwrap_or("");
    let mut message = match e.kind() {
        ErrorKind::UnknownArgument => {
            let given = string(ContextKind::InvalidArg).unwrap_or("");
            if given.starts_with('-') {
                format!("unknown option {}", shown(given))
            } else {
                format!("unexpected argument {}", shown(given))
            }
        }
        ErrorKind::InvalidSubcommand => format!(
            "unknown subcommand {}",
            shown(string(ContextKind::InvalidSubcommand).unwrap_or(""))
        ),
        ErrorKind::InvalidValue if value.is_empty() => format!("{arg} needs a value"),
        ErrorKind::InvalidValue => format!(
            "{arg}: {} is not one of {}",
            shown(value),
            strings(ContextKind::ValidValue).join(", ")
        ),
        ErrorKind::ValueValidation => match core::error::Error::source(e) {
            Some(why) => format!("{arg}: {why}"),
            None => format!("{arg}: {} is not valid", shown(value)),
        },
        ErrorKind::NoEquals => format!("{arg} takes its value after `=`"),
        ErrorKind::TooManyValues => format!("{arg}: unexpected value {}", shown(value)),
        ErrorKind::TooFewValues | ErrorKind::WrongNumberOfValues => {
            format!("{arg}: wrong number of values")
        }
        ErrorKind::ArgumentConflict => {
            let others: Vec<String> = strings(ContextKind::PriorArg)
                .iter()
                .map(|a| arg_name(a))
                .collect();
            format!("{arg} and {} exclude each other", others.join(", "))
        }
        ErrorKind::MissingRequiredArgument => {
            let missing: Vec<String> = strings(ContextKind::InvalidArg)
                .iter()
                .map(|a| arg_name(a))
                .collect();
            format!("missing {}", missing.join(" and "))
        }
        ErrorKind::InvalidUtf8 => "an argument is not valid UTF-8".to_string(),
        other => other.as_str().unwrap_or("bad usage").to_string(),
    };
    let mut suggestions: Vec<String> = Vec::new();
    if let Some(s) = string(ContextKind::SuggestedArg) {
        suggestions.push(s.to_string());
    }
    if let Some(s) = string(ContextKind::SuggestedValue) {
        suggestions.push(s.to_string());
    }
    // Not the hidden subcommands that are not for people (`__group-guard`).
    suggestions.extend(
        strings(ContextKind::SuggestedSubcommand)
            .into_iter()
            .filter(|s| !s.starts_with("__")),
    );
    if !suggestions.is_empty() {
        message.push_str(&format!("; did you mean {}?", suggestions.join(" or ")));
    }
    if let Some(ContextValue::StyledStrs(tips)) = e.get(ContextKind::Suggested) {
        // Such as "'acquire --wait' exists"; not "to pass '--bogus' as a
        // value, use '-- --bogus'", which misleads more than it helps
        // (`unlock --retries`).
        for tip in tips
            .iter()
            .map(plain)
            .filter(|t| !t.starts_with("to pass "))
        {
            // A tip may repeat the argument: masked as a whole.
            message.push_str(&format!("; {}", masked(&tip)));
        }
    }
    // One line, whatever a value held.
    let message = message.replace(['\n', '\r'], " ");
    match sub {
        Some(sub) => format!("redlock {sub}: {message} (see redlock {sub} --help)"),
        None => format!("redlock: {message} (try redlock --help)"),
    }
}

/// An argument as clap names it in an error (`--ttl <D>`, `<RESOURCE>`,
/// `<CMD>...`), as the help names it: `--ttl`, `RESOURCE`, `CMD`.
fn arg_name(arg: &str) -> String {
    let name = arg.split(' ').next().unwrap_or(arg);
    name.trim_end_matches("...")
        .trim_start_matches('<')
        .trim_end_matches('>')
        .to_string()
}

/// `s` without its styles.
fn plain(s: &StyledStr) -> String {
    s.to_string()
}

/// The completion script of `shell`, for `redlock completions SHELL`.
pub(crate) fn completions(shell: clap_complete::Shell) -> Vec<u8> {
    // Without the hidden subcommands, which clap_complete would offer.
    let cmd = command();
    let mut shown = Command::new("redlock")
        .version(env!("CARGO_PKG_VERSION"))
        .args(cmd.get_arguments().cloned())
        .subcommands(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut shown, "redlock", &mut out);
    out
}

/// The man page (roff), one page for every subcommand: the command's
/// synopsis (every subcommand's usage line), description and options, then
/// a section per subcommand with its synopsis, description, options (under
/// their headings) and exit statuses, then the notes of the top-level help.
/// The same definitions as the help, without its option tables (each
/// subcommand's section has its options). Nothing in it changes from one
/// build to the next but the crate's version.
pub(crate) fn man_page() -> Vec<u8> {
    let mut cmd = definitions().after_help(NOTES);
    cmd.build();
    let man = clap_mangen::Man::new(for_man(&cmd));
    // clap_mangen starts each part it renders with the same preamble (a
    // string for the apostrophe): once is enough, at the top.
    let title = roff(&|w| man.render_title(w));
    let preamble = title.find(".TH").map_or("", |at| &title[..at]);
    let part = |render: &dyn Fn(&mut Vec<u8>) -> std::io::Result<()>| {
        let text = roff(render);
        text.strip_prefix(preamble).unwrap_or(&text).to_string()
    };
    // Without its `.SH` line.
    let body = |render: &dyn Fn(&mut Vec<u8>) -> std::io::Result<()>| {
        let text = part(render);
        match text.split_once('\n') {
            Some((heading, rest)) if heading.starts_with(".SH ") => rest.to_string(),
            _ => text,
        }
    };
    let mut page = title.clone();
    page.push_str(&part(&|w| man.render_name_section(w)));
    page.push_str(&part(&|w| man.render_synopsis_section(w)));
    page.push_str(&part(&|w| man.render_description_section(w)));
    page.push_str(&part(&|w| man.render_options_section(w)));
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        let man = clap_mangen::Man::new(for_man(sub));
        page.push_str(&format!(
            ".SH \"REDLOCK {}\"\n",
            sub.get_name().to_uppercase()
        ));
        page.push_str(&body(&|w| man.render_synopsis_section(w)));
        if sub.get_before_help().is_some() {
            page.push_str(".PP\n");
            page.push_str(&preformatted(&body(&|w| man.render_description_section(w))));
        }
        // Each heading of options (OPTIONS, SERVER OPTIONS, ...) a
        // subsection.
        for line in part(&|w| man.render_options_section(w)).lines() {
            match line.strip_prefix(".SH ") {
                Some(heading) => {
                    let heading = heading.trim_matches('"').to_lowercase();
                    let mut letters = heading.chars();
                    let heading: String = letters
                        .next()
                        .map(|first| first.to_uppercase().chain(letters).collect())
                        .unwrap_or_default();
                    page.push_str(&format!(".SS \"{heading}\"\n"));
                }
                None => {
                    page.push_str(line);
                    page.push('\n');
                }
            }
        }
        if sub.get_after_help().is_some() {
            page.push_str(".PP\n");
            page.push_str(&preformatted(&body(&|w| man.render_extra_section(w))));
        }
    }
    page.push_str(".SH NOTES\n");
    page.push_str(&preformatted(&body(&|w| man.render_extra_section(w))));
    page.push_str(&part(&|w| man.render_version_section(w)));
    page.into_bytes()
}

/// `text` (roff) with its runs of indented lines (examples, tables) set
/// as they are, not filled into paragraphs.
fn preformatted(text: &str) -> String {
    let mut out = String::new();
    let mut verbatim = false;
    for line in text.lines() {
        let indented = line.starts_with(' ');
        if indented != verbatim {
            out.push_str(if indented { ".nf\n" } else { ".fi\n" });
            verbatim = indented;
        }
        out.push_str(line);
        out.push('\n');
    }
    if verbatim {
        out.push_str(".fi\n");
    }
    out
}

/// `cmd` as the man page shows it: its description (the help's
/// `before_help`) as the page's description.
fn for_man(cmd: &Command) -> Command {
    match cmd.get_before_help() {
        Some(description) => cmd.clone().long_about(description.clone()),
        None => cmd.clone(),
    }
}

/// What `render` writes, as text.
fn roff(render: &dyn Fn(&mut Vec<u8>) -> std::io::Result<()>) -> String {
    let mut out = Vec::new();
    let _ = render(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use core::time::Duration;

    use super::*;
    use crate::args::Wait;

    /// `args` parsed, or the one-line usage error.
    fn parse(args: &[&str]) -> Result<Cli, String> {
        let all = core::iter::once("redlock").chain(args.iter().copied());
        let mut cmd = command();
        cmd.try_get_matches_from_mut(all)
            .and_then(|m| Cli::from_arg_matches(&m))
            .map_err(|e| usage_error(&e, subcommand(&cmd, args)))
    }

    fn lock(args: &[&str]) -> Result<run::LockArgs, String> {
        let mut all = vec!["lock"];
        all.extend_from_slice(args);
        match parse(&all)?.command {
            Sub::Lock(a) => Ok(a),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_definitions_hold_together() {
        command().debug_assert();
    }

    #[test]
    fn flock_habits_w_n_e_and_short_options_together() {
        let a = lock(&["-w", "5", "-E", "1", "res", "cmd"]).unwrap();
        let how = a.wait.acquiring();
        assert_eq!(how.wait, Wait::For(Duration::from_secs(5)));
        assert_eq!(how.conflict_code, 1);
        let a = lock(&["-w5", "-E0", "res", "cmd"]).unwrap();
        let how = a.wait.acquiring();
        assert_eq!(how.wait, Wait::For(Duration::from_secs(5)));
        assert_eq!(how.conflict_code, 0);
        // Flags together, and the command's own -n left to it.
        let a = lock(&["-nvv", "res", "cmd", "-n"]).unwrap();
        assert_eq!(a.wait.acquiring().wait, Wait::Nonblock);
        assert_eq!(a.target.verbosity.verbose, 2);
        assert_eq!(a.command, ["cmd", "-n"]);
        let a = lock(&["-nE", "9", "res", "cmd"]).unwrap();
        assert_eq!(
            (a.wait.acquiring().wait, a.wait.acquiring().conflict_code),
            (Wait::Nonblock, 9)
        );
        let a = lock(&["--nonblock", "--conflict-exit-code=0", "res", "cmd"]).unwrap();
        assert_eq!(
            (a.wait.acquiring().wait, a.wait.acquiring().conflict_code),
            (Wait::Nonblock, 0)
        );
        // Neither: one call with the retries, 75.
        let a = lock(&["res", "cmd"]).unwrap();
        let how = a.wait.acquiring();
        assert_eq!((how.wait, how.conflict_code), (Wait::Retries, 75));
        // A wait without bound.
        for forever in ["forever", "inf", "infinity", "Forever"] {
            let a = lock(&["--wait", forever, "res", "cmd"]).unwrap();
            assert_eq!(
                a.wait.acquiring().wait,
                Wait::For(Duration::MAX),
                "{forever}"
            );
        }
        for (bad, named) in [
            (&["-n", "-w", "5", "res", "cmd"][..], "--wait"),
            (&["-n", "--retries", "2", "res", "cmd"], "--retries"),
            (&["-E", "256", "res", "cmd"], "--conflict-exit-code"),
            (&["-E", "x", "res", "cmd"], "--conflict-exit-code"),
            (&["-w", "soon", "res", "cmd"], "--wait"),
            (&["-w"], "--wait"),
            (&["-x", "res", "cmd"], "-x"),
            (&["-nq", "res", "cmd"], "-q"),
        ] {
            let err = lock(bad).unwrap_err();
            assert!(err.contains(named), "{bad:?}: {err}");
        }
        // Unlock takes -E, and none of the waiting.
        match parse(&["unlock", "-E", "3", "res", "tok"]).unwrap().command {
            Sub::Unlock(a) => assert_eq!(a.conflict.conflict_exit_code, 3),
            other => panic!("{other:?}"),
        }
        for bad in ["-n", "-w5"] {
            assert!(parse(&["unlock", bad, "res", "tok"]).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_bare_numbers_are_seconds() {
        for (given, expected) in [
            ("10", Duration::from_secs(10)),
            ("0.5", Duration::from_millis(500)),
            ("1.5s", Duration::from_millis(1500)),
            ("250ms", Duration::from_millis(250)),
            ("2m", Duration::from_secs(120)),
        ] {
            let a = lock(&["--ttl", given, "--grace", given, "res", "cmd"]).unwrap();
            assert_eq!((a.ttl, a.grace), (expected, expected), "{given}");
        }
        // The defaults.
        let a = lock(&["res", "cmd"]).unwrap();
        assert_eq!(
            (a.ttl, a.grace),
            (Duration::from_secs(30), Duration::from_secs(5))
        );
        match parse(&["bench"]).unwrap().command {
            Sub::Bench(b) => {
                assert_eq!(
                    (b.ttl, b.duration, b.clients),
                    (Duration::from_secs(10), Duration::from_secs(5), 1)
                );
            }
            other => panic!("{other:?}"),
        }
        match parse(&["demo"]).unwrap().command {
            Sub::Demo(d) => assert_eq!((d.duration, d.workers), (Duration::from_secs(4), 4)),
            other => panic!("{other:?}"),
        }
        let err = lock(&["--ttl", "1,5", "res", "cmd"]).unwrap_err();
        assert!(err.contains("--ttl") && err.contains("seconds"), "{err}");
    }

    #[test]
    fn the_command_and_its_own_options() {
        let a = lock(&["--ttl=5s", "--fence", "res", "--", "echo", "--ttl", "x"]).unwrap();
        assert_eq!(a.ttl, Duration::from_secs(5));
        assert!(a.fence);
        assert_eq!(a.target.resource, "res");
        assert_eq!(a.command, ["echo", "--ttl", "x"]);
        // Without `--`: from the first argument after RESOURCE that is not
        // an option, everything is the command's.
        let a = lock(&["r", "ls", "-la"]).unwrap();
        assert_eq!(a.command, ["ls", "-la"]);
        let a = lock(&["r", "sh", "-c", "x", "--fence", "-n", "--", "y"]).unwrap();
        assert!(!a.fence);
        assert_eq!(a.command, ["sh", "-c", "x", "--fence", "-n", "--", "y"]);
        // Options after the resource, before `--` or the command.
        let a = lock(&["res", "--ttl", "5s", "--", "echo", "hi"]).unwrap();
        assert_eq!(a.ttl, Duration::from_secs(5));
        assert_eq!(a.command, ["echo", "hi"]);
        let a = lock(&["res", "--fence", "echo", "hi"]).unwrap();
        assert!(a.fence);
        assert_eq!(a.command, ["echo", "hi"]);
        // A command whose own arguments include `--`.
        let a = lock(&["res", "--", "cmd", "--", "x"]).unwrap();
        assert_eq!(a.command, ["cmd", "--", "x"]);
        for bad in [&["res"][..], &["res", "--"], &[], &["--nope", "res", "cmd"]] {
            assert!(lock(bad).is_err(), "{bad:?}");
        }
        assert!(lock(&["res", "--bogus", "--", "true"]).is_err());
    }

    #[test]
    fn verbose_before_and_after_the_subcommand_adds_up() {
        for (args, expected) in [
            (&["-v", "lock", "--verbose", "r", "c"][..], 2),
            (&["-vv", "lock", "r", "c"], 2),
            (&["lock", "-vv", "r", "c"], 2),
            // After RESOURCE, before CMD: still redlock's.
            (&["--verbose", "lock", "-v", "r", "-v", "c"], 3),
            (&["lock", "r", "c", "-v"], 0),
            (&["lock", "r", "c"], 0),
        ] {
            let cli = parse(args).unwrap();
            let total = cli.verbosity.verbose + cli.command.verbose();
            assert_eq!(total, expected, "{args:?}");
        }
        for sub in [
            &["acquire", "r"][..],
            &["unlock", "r", "t"],
            &["inspect", "r"],
            &["fence-repair", "--at-least", "1", "r"],
            &["bench"],
            &["demo"],
        ] {
            let mut args = vec!["-v"];
            args.extend_from_slice(sub);
            args.push("-v");
            let cli = parse(&args).unwrap();
            assert_eq!(cli.verbosity.verbose + cli.command.verbose(), 2, "{sub:?}");
        }
    }

    #[test]
    fn each_subcommand_takes_its_options_and_no_others() {
        let retrying = ["--retries=1", "--retry-delay=1s", "--restart-guard=1h"];
        let server = [
            "--servers=h:1",
            "--request-timeout=1s",
            "--connect-timeout=1s",
            "--tls-ca=ca.pem",
            "--tls-server-name=db",
            "--commands=native",
        ];
        for sub in [&["lock", "r", "c"][..], &["acquire", "r"]] {
            for option in retrying.iter().chain(&server) {
                let mut args = vec![sub[0], option];
                args.extend_from_slice(&sub[1..]);
                assert!(parse(&args).is_ok(), "{args:?}");
            }
        }
        for sub in [&["bench"][..], &["demo"]] {
            for option in server.iter().chain(&["--restart-guard=1h"]) {
                let mut args = vec![sub[0], option];
                args.extend_from_slice(&sub[1..]);
                assert!(parse(&args).is_ok(), "{args:?}");
            }
            for option in ["--retries=1", "--retry-delay=1s", "-w5", "-n", "--fence"] {
                let err = parse(&[sub[0], option]).unwrap_err();
                let name = option.split('=').next().unwrap();
                assert!(err.contains(&name[..2]), "{option}: {err}");
            }
        }
        for sub in [
            &["unlock", "r", "t"][..],
            &["inspect", "r"],
            &["fence-repair", "--at-least", "1", "r"],
        ] {
            for option in &server {
                let mut args = vec![sub[0], option];
                args.extend_from_slice(&sub[1..]);
                assert!(parse(&args).is_ok(), "{args:?}");
            }
            for option in retrying {
                let mut args = vec![sub[0], option];
                args.extend_from_slice(&sub[1..]);
                let err = parse(&args).unwrap_err();
                let name = option.split('=').next().unwrap();
                assert!(err.contains(name), "{args:?}: {err}");
            }
        }
        // Only lock and acquire take -w, -n, --ttl and --fence; only lock
        // --grace; only inspect and bench --json.
        assert!(parse(&["acquire", "--grace=1s", "r"]).is_err());
        assert!(parse(&["inspect", "--json", "r"]).is_ok());
        assert!(parse(&["unlock", "--json", "r", "t"]).is_err());
    }

    #[test]
    fn client_options_from_the_command_line() {
        let acquire = |args: &[&str]| -> Result<crate::args::ClientOptions, String> {
            let mut all = vec!["acquire"];
            all.extend_from_slice(args);
            all.push("r");
            match parse(&all)?.command {
                Sub::Acquire(a) => a.client.options().map_err(|u| u.0),
                other => panic!("{other:?}"),
            }
        };
        let o = acquire(&[
            "--request-timeout",
            "300ms",
            "--connect-timeout=2s",
            "--retries",
            "0",
            "--retry-delay",
            "0",
            "--restart-guard",
            "1h",
            "--commands",
            "scripts",
            "--tls-cert",
            "c.pem",
            "--tls-key",
            "k.pem",
            "--tls-server-name",
            " db ",
        ])
        .unwrap();
        assert_eq!(o.request_timeout, Some(Duration::from_millis(300)));
        assert_eq!(o.connect_timeout, Some(Duration::from_secs(2)));
        assert_eq!(o.retries, Some(0));
        assert_eq!(o.retry_delay, Some(Duration::ZERO));
        assert_eq!(o.restart_guard, Some(Duration::from_secs(3600)));
        assert_eq!(o.commands, Some(redlock_std::Commands::Scripts));
        assert!(o.tls_client.is_some());
        assert_eq!(o.tls_server_name.as_deref(), Some("db"));
        let none = acquire(&[]).unwrap();
        assert!(none.request_timeout.is_none() && none.retries.is_none());
        assert!(none.commands.is_none() && none.restart_guard.is_none());
        for (bad, named) in [
            (&["--request-timeout", "0"][..], "--request-timeout"),
            (&["--request-timeout", "soon"], "--request-timeout"),
            (&["--connect-timeout", "0ms"], "--connect-timeout"),
            (&["--retries", "-1"], "--retries"),
            (&["--retries", "many"], "--retries"),
            (&["--retries", "4294967296"], "--retries"),
            (&["--retry-delay", "1,5s"], "--retry-delay"),
            (&["--restart-guard", "0"], "--restart-guard"),
            (&["--commands", "lua"], "--commands"),
            (&["--commands="], "--commands"),
            (&["--tls-ca="], "--tls-ca"),
            (&["--tls-server-name", " "], "--tls-server-name"),
            (&["--tls-cert", "c.pem"], "--tls-key"),
            (&["--tls-key", "k.pem"], "--tls-cert"),
        ] {
            let err = acquire(bad).unwrap_err();
            assert!(err.contains(named), "{bad:?}: {err}");
        }
        // The last value given counts, as before.
        let o = acquire(&["--retries", "1", "--retries", "2"]).unwrap();
        assert_eq!(o.retries, Some(2));
        assert!(acquire(&["--commands", "native", "--commands", "auto"]).is_ok());
        assert!(parse(&["acquire", "--fence", "--fence", "r"]).is_ok());
    }

    #[test]
    fn usage_errors_are_one_line_name_the_option_and_suggest() {
        for (args, expected) in [
            (&["acquire", "--wiat", "1", "r"][..], "did you mean --wait?"),
            (&["ackquire", "r"], "did you mean acquire?"),
            (
                &["acquire", "--commands", "nativ", "r"],
                "did you mean native?",
            ),
            (
                &["acquire", "--commands", "lua", "r"],
                "auto, scripts, native",
            ),
            (&["--wait", "5", "acquire", "r"], "'acquire --wait' exists"),
            (&["fence-repair", "r"], "missing --at-least"),
            (&["lock", "r"], "missing CMD"),
            (&["unlock", "r"], "missing TOKEN"),
            (&["inspect", "r", "extra"], "unexpected argument \"extra\""),
            (&["acquire", "--fence=1", "r"], "--fence"),
            (&["completions", "tcsh"], "bash"),
        ] {
            let err = parse(args).unwrap_err();
            assert!(err.contains(expected), "{args:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
            assert!(err.starts_with("redlock"), "{err}");
        }
        // Named by subcommand when there is one.
        let err = parse(&["acquire", "--bogus", "r"]).unwrap_err();
        assert!(
            err.starts_with("redlock acquire: ") && err.ends_with("(see redlock acquire --help)"),
            "{err}"
        );
        let err = parse(&["frobnicate"]).unwrap_err();
        assert!(err.starts_with("redlock: unknown subcommand"), "{err}");
    }

    #[test]
    fn usage_errors_never_show_a_password() {
        let url = "redis://:Sekr1t@h:1";
        let list = "u:Sekr1t@h1,redis://:Sekr1t@h2";
        for args in [
            vec![url, "r"],
            vec![list, "r"],
            vec!["acquire", url, "r"],
            vec!["inspect", "r", url],
            vec!["acquire", "--ttl", url, "r"],
            vec!["acquire", "--retries", list, "r"],
            vec!["acquire", "-E", url, "r"],
            vec!["acquire", "--commands", url, "r"],
            vec!["acquire", &format!("--{url}"), "r"],
            vec!["acquire", &format!("-{url}"), "r"],
            vec!["lock", &format!("--{list}"), "r", "c"],
            vec!["bench", "--clients", url],
            vec!["demo", "--workers", url],
            vec!["fence-repair", "--at-least", url, "r"],
            vec!["completions", url],
            vec!["acquire", "--fence", url, "r", url],
            vec!["acquire", &format!("--fence={url}"), "r"],
            vec!["acquire", "-w", url, "r"],
            vec!["lock", &format!("-nw{url}"), "r", "c"],
            vec!["unlock", "r", "t", list],
        ] {
            let err = parse(&args).unwrap_err();
            assert!(!err.contains("Sekr1t"), "{args:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        }
    }

    #[test]
    fn the_help_shows_the_library_defaults() {
        let mut cmd = command();
        cmd.build();
        let retry = redlock_core::Config::DEFAULT.retry;
        let help = cmd
            .find_subcommand_mut("acquire")
            .unwrap()
            .render_help()
            .to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        for shown in [
            format!("[default: {}]", retry.retries),
            "[default: 1% of the ttl, from".to_string(),
            "[default: 30s]".to_string(),
            "[default: 75]".to_string(),
            "[default: $REDLOCK_SERVERS]".to_string(),
            "a bare number is seconds".to_string(),
        ] {
            assert!(help.contains(&shown), "{shown} not in {help}");
        }
    }

    #[test]
    fn the_top_level_help_and_usage_name_every_option() {
        let mut cmd = command();
        cmd.build();
        let top = cmd.render_help().to_string();
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            for arg in sub.get_arguments().filter(|a| !a.is_hide_set()) {
                if let Some(long) = arg.get_long() {
                    assert!(
                        top.contains(&format!("--{long}")),
                        "{}: --{long}",
                        sub.get_name()
                    );
                }
                if let Some(short) = arg.get_short() {
                    assert!(
                        top.contains(&format!("-{short}")),
                        "{}: -{short}",
                        sub.get_name()
                    );
                }
            }
        }
        // Every option of a subcommand is on its usage line, or in a group
        // it names.
        let usage = |name: &str| {
            top.lines()
                .find(|l| {
                    l.trim_start()
                        .trim_start_matches("Usage: ")
                        .starts_with(&format!("redlock {name} "))
                })
                .unwrap_or_else(|| panic!("no usage line for {name}: {top}"))
                .to_string()
        };
        assert!(usage("bench").contains("--ttl D"));
        assert!(usage("demo").contains("--workers N"));
        assert!(usage("lock").contains("[-w D] [-n] [-E N]"));
        assert!(usage("lock").ends_with("RESOURCE [--] CMD [ARGS..]"));
        assert!(usage("fence-repair").contains(" --at-least N "));
        assert!(usage("unlock").ends_with("RESOURCE TOKEN"));
    }

    #[test]
    fn the_completions_name_the_subcommands_and_options() {
        for shell in [
            clap_complete::Shell::Bash,
            clap_complete::Shell::Zsh,
            clap_complete::Shell::Fish,
        ] {
            let script = String::from_utf8(completions(shell)).unwrap();
            for word in ["redlock", "acquire", "fence-repair", "scripts"] {
                assert!(script.contains(word), "{shell}: {word}");
            }
            // fish names a long option `-l wait`.
            for option in ["wait", "servers", "conflict-exit-code"] {
                assert!(
                    script.contains(&format!("--{option}"))
                        || script.contains(&format!("-l {option}")),
                    "{shell}: --{option}"
                );
            }
            // Not the hidden subcommands.
            assert!(!script.contains(guard::SUBCOMMAND), "{shell}");
        }
    }

    /// The checked-in man page is the one the definitions make; with
    /// `REDLOCK_BLESS=1`, this writes it.
    #[test]
    fn the_checked_in_man_page_is_up_to_date() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("redlock.1");
        let page = man_page();
        if std::env::var_os("REDLOCK_BLESS").is_some_and(|v| v == "1") {
            std::fs::write(&path, &page).unwrap();
        }
        let checked_in = std::fs::read(&path).unwrap_or_default();
        assert!(
            checked_in == page,
            "{} differs from what the definitions make: run `REDLOCK_BLESS=1 cargo test -p \
             redlock-cli --bin redlock man_page` (or `redlock man > platform-std/cli/redlock.1`) \
             and check it in",
            path.display()
        );
        let text = String::from_utf8(page).unwrap();
        assert!(
            text.starts_with(".ie ") || text.starts_with(".TH "),
            "{text}"
        );
        for section in ["REDLOCK LOCK", "REDLOCK ACQUIRE", "REDLOCK DEMO", "NOTES"] {
            assert!(
                text.contains(&format!(".SH \"{section}\""))
                    || text.contains(&format!(".SH {section}")),
                "{section}"
            );
        }
        assert!(text.contains(env!("CARGO_PKG_VERSION")));
        assert_eq!(man_page(), text.into_bytes(), "not the same twice");
    }
}
