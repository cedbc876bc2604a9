//! The std side of the handshake the core plans and judges: writing its
//! steps on a new connection, and what is said of a refused server.

use super::*;

impl Conn {
    /// Resets the connection's buffers for a new connection and queues the
    /// handshake the core plans (C1): `AUTH`, `SELECT`, `SCRIPT LOAD` of
    /// every script, `INFO server`. Requests queued after it are held until
    /// every reply was judged good.
    pub(super) fn start_handshake(&mut self, info_required: bool) {
        self.out.clear();
        self.held.clear();
        self.releases_held = false;
        self.filled = 0;
        self.expect.clear();
        // A new connection may be a new incarnation: known again once its
        // INFO is read.
        self.incarnation = None;
        let url = &self.url;
        let plan = Plan {
            auth: url.password.is_some(),
            select: url.db != 0,
            info_required,
        };
        for k in 0..handshake::step_count(plan) {
            let Some((step, script)) = handshake::step_and_script(plan, k) else {
                break;
            };
            let source = script.map_or("", |s| s.source);
            encode_growing(&mut self.out, |b| match step {
                Step::Auth => {
                    let pw = url.password.as_ref().map_or(&[][..], |p| p.expose());
                    match &url.user {
                        Some(user) => encode::auth_user(b, user.as_bytes(), pw),
                        None => encode::auth(b, pw),
                    }
                }
                Step::Select => encode::select(b, u64::from(url.db)),
                Step::ScriptLoad => encode::script_load(b, source.as_bytes()),
                _ => encode::info(b, Some(b"server")),
            });
            self.expect.push_back(Expect::Handshake(step));
        }
        self.handshake_left = self.expect.len();
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
