//! What a session has the platform write besides the requests: the
//! handshake's steps (with the server's credentials) and the probe.

use redlock_resp::{Command, EncodeError, Reply, Script};

use crate::handshake::{Commands, Plan, Step};

/// The probe: `PING` with a text that it sends back, encoded once and for
/// all (`*2`, `$4 PING`, `$13 redlock-probe`): no reply of a lock command
/// is this bulk string.
const PROBE: &[u8] = b"*2\r\n$4\r\nPING\r\n$13\r\nredlock-probe\r\n";

/// The bytes [`encode_probe`] writes.
pub const PROBE_LEN: usize = PROBE.len();

/// The probe's text: the 13 bytes after the 19 of `PROBE`'s headers.
const PROBE_TEXT: &[u8] = PROBE.split_at(19).1.split_at(13).0;

pub(super) fn is_probe_reply(reply: &Reply<'_>) -> bool {
    matches!(reply, Reply::Bulk(b) | Reply::Simple(b) if *b == PROBE_TEXT)
}

/// Encodes the probe ([`Session::poll_probe`](super::Session::poll_probe)): `PING` with the probe's
/// text, which the server sends back.
pub fn encode_probe(buf: &mut [u8]) -> Result<usize, EncodeError> {
    // A copy of the bytes `encode::command` makes of it (a test checks
    // them): no encoder code for one fixed command.
    let dst = buf
        .get_mut(..PROBE.len())
        .ok_or(EncodeError::BufferTooSmall {
            needed: PROBE.len(),
        })?;
    dst.copy_from_slice(PROBE);
    Ok(PROBE.len())
}

/// How to log in to one server: `AUTH [user] password` and `SELECT db`, sent
/// on every new connection before anything else and judged fail-closed.
///
/// `Debug` never shows the password.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Credentials<'a> {
    /// The ACL user (`AUTH user password`); `None` sends `AUTH password`.
    pub user: Option<&'a [u8]>,
    /// The password; `None` sends no `AUTH`.
    pub password: Option<&'a [u8]>,
    /// The database (`SELECT db` when not 0).
    pub db: u32,
}

impl core::fmt::Debug for Credentials<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Credentials")
            .field(
                "user",
                &self.user.map(|u| core::str::from_utf8(u).unwrap_or("?")),
            )
            .field("password", &self.password.map(|_| "***"))
            .field("db", &self.db)
            .finish()
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Credentials<'_> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "Credentials {{ user: {}, password: {}, db: {} }}",
            self.user,
            if self.password.is_some() {
                "***"
            } else {
                "none"
            },
            self.db
        )
    }
}

impl Credentials<'_> {
    /// No `AUTH`, database 0.
    pub const NONE: Credentials<'static> = Credentials {
        user: None,
        password: None,
        db: 0,
    };

    /// The handshake plan of a server with these credentials, sending
    /// `commands` ([`Commands`]).
    pub fn plan(&self, info_required: bool, commands: Commands) -> Plan {
        Plan {
            commands,
            auth: self.password.is_some(),
            select: self.db != 0,
            info_required,
        }
    }
}

/// Encodes handshake step `step` (loading `script`, for a `SCRIPT LOAD`) of
/// a server with `creds` into `buf`.
pub fn encode_step(
    buf: &mut [u8],
    step: Step,
    script: Option<&Script>,
    creds: &Credentials<'_>,
) -> Result<usize, EncodeError> {
    let password = creds.password.unwrap_or_default();
    // One `Command`, its arguments added per step (an array of them per
    // step, or `encode::select` besides, is more code).
    let argc = match (step, creds.user) {
        (Step::Auth, Some(_)) | (Step::ScriptLoad, _) => 3,
        _ => 2,
    };
    let mut cmd = Command::new(buf, argc);
    match step {
        Step::Auth => {
            cmd.arg(b"AUTH");
            if let Some(user) = creds.user {
                cmd.arg(user);
            }
            cmd.arg(password);
        }
        Step::Select => {
            cmd.arg(b"SELECT").arg_uint(u64::from(creds.db));
        }
        Step::ScriptLoad => {
            let source = script.map_or("", |s| s.source).as_bytes();
            cmd.arg(b"SCRIPT").arg(b"LOAD").arg(source);
        }
        _ => {
            cmd.arg(b"INFO").arg(b"server");
        }
    }
    cmd.finish()
}
