//! The std side of the handshake the core plans and judges: writing its
//! steps on a new connection, and what is said of a refused server.

use super::*;

impl Conn {
    /// The transport is up: the handshake the core's session plans (C1:
    /// `AUTH`, `SELECT`, `SCRIPT LOAD` of every script, `INFO server`) is
    /// written first. Requests the session holds wait until every reply was
    /// judged good.
    pub(super) fn start_handshake(&mut self, now: Instant, policy: &Policy) {
        self.session.connected(now, policy);
        self.out.clear();
        self.filled = 0;
        self.write_steps();
    }

    /// Writes the handshake steps the session has for now: all of them,
    /// or (`Commands::Auto`) those up to `INFO`, then, once its reply was
    /// judged, the `SCRIPT LOAD`s the server needs.
    pub(super) fn write_steps(&mut self) {
        let creds = credentials(&self.url);
        while let Some((step, script)) = self.session.poll_step() {
            encode_growing(&mut self.out, |b| encode_step(b, step, script, &creds));
            self.session.step_written();
        }
    }
}

/// C4: what a report says of a refused handshake: the core's reason, and the
/// server's own error text (printable ASCII, cut to [`MAX_ERROR_TEXT`]).
/// Never the password: a server may quote the arguments of a command it
/// refuses (`ERR unknown command 'AUTH', with args beginning with: ...`),
/// so the text stops at its first quote, and the password's bytes are
/// blanked wherever they appear.
pub(super) fn refusal_text(why: SetupError, reply: &Reply<'_>, password: Option<&[u8]>) -> String {
    let Some(e) = reply.as_error() else {
        return why.to_string();
    };
    let mut message = e.message().to_vec();
    if let Some(quote) = message.iter().position(|&b| b == b'\'' || b == b'"') {
        message.truncate(quote);
    }
    if let Some(pw) = password.filter(|p| !p.is_empty()) {
        let mut k = 0;
        while k + pw.len() <= message.len() {
            if message[k..].starts_with(pw) {
                message.splice(k..k + pw.len(), *b"***");
                k += 3;
            } else {
                k += 1;
            }
        }
    }
    let text: String = message
        .iter()
        .take(MAX_ERROR_TEXT)
        .map(|&b| {
            if (0x20..0x7f).contains(&b) {
                b as char
            } else {
                '?'
            }
        })
        .collect();
    format!("{why}: {}", text.trim_end())
}
