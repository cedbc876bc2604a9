//! Moving bytes: connects, the handshake, writes, reads, and the replies
//! handed to the operations or to the core's judge of the handshake.

use super::*;

impl<J: Job> State<J> {
    /// Tells `op` that server `i` is down: refused (its handshake failed,
    /// or it is a duplicate), or its connection failed.
    pub(super) fn tell_down(&self, op: &mut J, i: usize, now: Instant) {
        let server = ServerId(i as u8);
        match self.conns.get(i).and_then(|c| c.refused.as_ref()) {
            Some((why, _)) => op.handle_setup_error(now, server, *why),
            None => op.handle_connection_error(now, server),
        }
    }

    /// Makes sure server `i` is connected or connecting (starting a connect,
    /// with its handshake queued, if allowed; `urgent` ignores the reconnect
    /// backoff). False if it is down and may not be retried yet, or the
    /// connect failed at once.
    pub(super) fn ensure_connecting(&mut self, i: usize, urgent: bool) -> bool {
        let now = StdInstant::now();
        match self.conns[i].state {
            ConnState::Up | ConnState::Connecting { .. } => return true,
            // A refused server waits for its backoff whatever the request
            // (no AUTH storm), and so does one whose last connect failed.
            ConnState::Down { retry_at }
                if now < retry_at
                    && !(urgent && self.conns[i].urgent_ok && self.conns[i].refused.is_none()) =>
            {
                return false;
            }
            ConnState::Down { .. } => {}
        }
        match self.connect(i) {
            Ok(()) => {
                // A leader in `poll` is woken (a request is queued behind
                // the handshake) and learns the connect deadline.
                log::debug!("redlock: connecting to {}", self.conns[i].url);
                true
            }
            Err(ConnectError::Io(e)) => {
                log::warn!("redlock: cannot connect to {}: {e}", self.conns[i].url);
                self.fail(i);
                false
            }
            Err(ConnectError::Refused(why, text)) => {
                log::warn!("redlock: not using {}: {text}", self.conns[i].url);
                self.fail_because(i, Some((why, text)));
                false
            }
        }
    }

    pub(super) fn connect(&mut self, i: usize) -> Result<(), ConnectError> {
        let conn = &mut self.conns[i];
        conn.failure_note = None;
        if conn.addr_next >= conn.addrs.len() {
            conn.addr_next = 0;
            // Every address was tried. A lookup done since (by a call, before
            // it took the lock) is adopted here, and only here, so that the
            // duplicate check below sees it before any address is used.
            if let Some(addrs) = conn.looked_up.take() {
                conn.addrs = addrs;
            }
            // The name is looked up again when there is no address, or at
            // most every RESOLVE_AGAIN; never here, under the state lock (a
            // lookup would block every caller), but by the next call before
            // it takes the lock. An address literal needs no lookup.
            let stale = conn
                .resolved_at
                .is_none_or(|t| t.elapsed() >= RESOLVE_AGAIN);
            if conn.addrs.is_empty() || stale {
                match conn.url.host.parse::<core::net::IpAddr>() {
                    Ok(ip) => {
                        conn.addrs = vec![SocketAddr::new(ip, conn.url.port)];
                        conn.resolved_at = Some(StdInstant::now());
                    }
                    Err(_) => {
                        // Asked for now, so asked again only after
                        // RESOLVE_AGAIN (or at the next wrap with no address).
                        conn.resolved_at = Some(StdInstant::now());
                        let bit = 1u16.checked_shl(i as u32).unwrap_or(0);
                        self.resolve_wanted.fetch_or(bit, Ordering::Relaxed);
                    }
                }
            }
        }
        if self.conns[i].addrs.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no address yet: the name is looked up again by the next call",
            )
            .into());
        }
        // A name that now resolves to another entry's server must not give
        // that server a second vote (checked on every connect: a refused
        // entry keeps its addresses until it resolves again).
        if let Some(other) = twin_of(&self.conns, i) {
            let text = format!(
                "{} resolves to the same server as {}",
                self.conns[i].url.address(),
                self.conns[other].url.address()
            );
            return Err(ConnectError::Refused(
                SetupError::SameServer(ServerId(other as u8)),
                text,
            ));
        }
        let conn = &mut self.conns[i];
        if conn.addrs.is_empty() {
            return Err(io::Error::new(io::ErrorKind::NotFound, "no address").into());
        }
        if !open_stream(conn, &self.registry, Token(i)) {
            return Err(io::Error::other("no address took a connection").into());
        }
        let conn = &mut self.conns[i];
        conn.state = ConnState::Connecting {
            since: StdInstant::now(),
        };
        // The handshake goes first on the new connection, as the core plans it.
        conn.start_handshake(self.config.info_required);
        Ok(())
    }

    /// A connect that failed moves on to the host's next address at once,
    /// with the handshake and the requests queued behind it (nothing was
    /// written yet); with no address left, the connection fails.
    pub(super) fn fail_connect(&mut self, i: usize) {
        let conn = &mut self.conns[i];
        if let Some(mut s) = conn.stream.take() {
            let _ = self.registry.deregister(s.tcp_mut());
        }
        conn.addr_next = conn.addr_next.saturating_add(1);
        if open_stream(conn, &self.registry, Token(i)) {
            log::debug!("redlock: connecting to the next address of {}", conn.url);
            conn.state = ConnState::Connecting {
                since: StdInstant::now(),
            };
        } else {
            self.fail(i);
        }
    }

    /// Closes server `i`'s connection after an error; it may reconnect after
    /// an exponential backoff. Every operation with requests on it is told
    /// (at its next pump).
    pub(super) fn fail(&mut self, i: usize) {
        self.fail_because(i, None);
    }

    /// [`fail`](State::fail), with why the server is refused (its handshake
    /// failed, with the server's text), if it is. The connection reports
    /// the requests it dropped; their operations are told here.
    pub(super) fn fail_because(&mut self, i: usize, refused: Option<(SetupError, String)>) {
        let State {
            conns,
            slots,
            registry,
            config,
            ..
        } = self;
        let Some(conn) = conns.get_mut(i) else {
            return;
        };
        for (slot, serial) in conn.fail(registry, config, refused) {
            if let Some(s) = slots.get_mut(usize::from(slot)) {
                if s.serial == serial {
                    s.conn_errors |= 1u16.checked_shl(i as u32).unwrap_or(0);
                }
            }
        }
    }

    /// What the last thread out must still write: bytes on a connection
    /// that is up (its socket would have blocked), a release held behind a
    /// connect or a handshake, or other requests held there (given a short
    /// grace: a working server passes its handshake within a round trip;
    /// what a stalled one holds goes out with a later call, in order, so a
    /// release still follows its `SET`).
    pub(super) fn unwritten(&self) -> Unwritten {
        if self
            .conns
            .iter()
            .any(|c| c.state == ConnState::Up && c.has_unwritten())
        {
            Unwritten::Blocked
        } else if self.conns.iter().any(|c| c.releases_held) {
            Unwritten::Release
        } else if self.conns.iter().any(|c| !c.held.is_empty()) {
            Unwritten::Held
        } else {
            Unwritten::Nothing
        }
    }

    /// True when some running operation has a connection error to learn.
    pub(super) fn errors_untold(&self) -> bool {
        bits(self.lead.active).any(|i| self.slots.get(i).is_some_and(|s| s.conn_errors != 0))
    }

    /// Writes what connection `i` has queued.
    pub(super) fn flush(&mut self, i: usize) -> io::Result<()> {
        match self.conns.get_mut(i) {
            Some(conn) => conn.flush(&self.registry, Token(i)),
            None => Ok(()),
        }
    }

    pub(super) fn flush_all(&mut self) {
        for i in 0..self.conns.len() {
            if self.conns[i].state == ConnState::Up
                && self.conns[i].has_unwritten()
                && self.flush(i).is_err()
            {
                self.fail(i);
            }
        }
    }

    /// The earliest connect timeout of a connect in progress.
    pub(super) fn connect_deadline(&self) -> Option<StdInstant> {
        self.conns
            .iter()
            .filter_map(|c| match c.state {
                ConnState::Connecting { since } => Some(since + self.config.connect_timeout),
                ConnState::Up if c.handshake_left > 0 => {
                    Some(c.handshake_since + self.config.connect_timeout)
                }
                _ => None,
            })
            .min()
    }

    /// Finishes non-blocking connects (`take_error`, `peer_addr`), and
    /// fails those past the connect timeout, and handshakes that did not
    /// pass within a connect timeout (a server that takes connections but
    /// does not answer).
    pub(super) fn progress_connects(&mut self) {
        for i in 0..self.conns.len() {
            let conn = &self.conns[i];
            if conn.state == ConnState::Up
                && conn.handshake_left > 0
                && StdInstant::now() >= conn.handshake_since + self.config.connect_timeout
            {
                log::warn!("redlock: {} did not answer its handshake in time", conn.url);
                self.fail(i);
                continue;
            }
            let ConnState::Connecting { since } = self.conns[i].state else {
                continue;
            };
            let stream = self.conns[i].stream.as_ref();
            let done = match stream.map(|s| (s.connected(), s.tcp())) {
                // Connected, in its TLS handshake: the socket's errors are
                // read after what arrived before them (an alert), not taken
                // here first.
                Some((true, _)) => Some(true),
                Some((false, s)) => match (s.take_error(), s.peer_addr()) {
                    (Ok(None), Ok(_)) => Some(true),
                    (Ok(Some(_)) | Err(_), _) => Some(false),
                    (Ok(None), Err(e)) if e.kind() == io::ErrorKind::NotConnected => None,
                    _ => Some(false),
                },
                None => Some(false),
            };
            // Connected: a TLS connection's handshake runs next, within the
            // same connect timeout (C9).
            let ready = match done {
                Some(true) => match self.conns[i].stream.as_mut().map(Stream::handshake) {
                    Some(Ok(true)) => Some(true),
                    Some(Ok(false)) => None,
                    Some(Err(e)) => {
                        let tls_failed =
                            self.conns[i].stream.as_mut().and_then(Stream::take_failure);
                        match tls_failed {
                            // The server is refused (an untrusted certificate,
                            // an alert, not TLS): no other address is tried now.
                            Some(f) => {
                                let text = format!("{}: {}", SetupError::Tls, f.text);
                                log::warn!("redlock: not using {}: {text}", self.conns[i].url);
                                self.fail_because(i, Some((SetupError::Tls, text)));
                                continue;
                            }
                            // Closed or reset mid-handshake: a connection
                            // error (the next address is tried), said.
                            None => {
                                let conn = &mut self.conns[i];
                                log::warn!("redlock: TLS handshake with {} failed: {e}", conn.url);
                                conn.failure_note = Some(format!("TLS handshake: {e}"));
                                Some(false)
                            }
                        }
                    }
                    None => Some(false),
                },
                other => other,
            };
            match ready {
                Some(true) => {
                    let conn = &mut self.conns[i];
                    log::debug!("redlock: connected to {}", conn.url);
                    conn.state = ConnState::Up;
                    // (What an earlier address or attempt failed with is
                    // no longer why.)
                    conn.failure_note = None;
                    conn.handshake_since = StdInstant::now();
                    if self.flush(i).is_err() {
                        self.fail(i);
                    }
                }
                Some(false) => self.fail_connect(i),
                None if StdInstant::now() >= since + self.config.connect_timeout => {
                    let conn = &mut self.conns[i];
                    if conn.stream.as_ref().is_some_and(Stream::connected) {
                        // (A connection error, not a refusal: a server that
                        // only stalls is tried again, and a release held
                        // here is sent once it is back.)
                        let text = "no answer to the TLS handshake within the connect timeout \
                                    (a stalled server, or not a TLS port?)";
                        log::warn!("redlock: {}: {text}", conn.url);
                        conn.failure_note = Some(text.to_string());
                    } else {
                        log::debug!("redlock: connect to {} timed out", conn.url);
                    }
                    self.fail_connect(i)
                }
                None => {}
            }
        }
    }

    /// Reads the sockets the poll reported ready and hands their replies to
    /// the operations they answer.
    pub(super) fn read_ready(&mut self, ready: u64, now: Instant) {
        for i in 0..self.conns.len() {
            // Only sockets the poll reported: each is read until WouldBlock
            // (mio is edge-triggered), the others would read nothing.
            if self.conns[i].state != ConnState::Up || ready & bit(i) == 0 {
                continue;
            }
            loop {
                let read = self.conns[i].read(self.config.limits);
                // Parse what arrived, even before an error, then close on error.
                let before = self.conns[i].filled;
                let routed = self.dispatch(i, now);
                if let Err(refused) = routed {
                    self.fail_because(i, refused);
                    break;
                }
                if read.is_err() {
                    self.fail(i);
                    break;
                }
                if matches!(read, Ok(true)) {
                    break;
                }
                // The read stopped at the frame limit, before `WouldBlock`:
                // more may wait (and no new edge would announce it). If no
                // reply completed, a frame is larger than the limit.
                if self.conns[i].filled == before {
                    log::warn!(
                        "redlock: {} sent a reply over the size limit",
                        self.conns[i].url
                    );
                    self.fail(i);
                    break;
                }
            }
        }
    }

    /// Parses every complete reply on connection `i` and hands each to the
    /// operation it answers, or to the core's judge of the handshake. `Err`
    /// when the connection must be closed: the stream is out of step or
    /// does not parse (`None`), or the handshake failed (why, with the
    /// server's text).
    pub(super) fn dispatch(
        &mut self,
        i: usize,
        now: Instant,
    ) -> Result<(), Option<(SetupError, String)>> {
        let State {
            conns,
            parser,
            slots,
            config,
            ..
        } = self;
        let plan = Plan {
            auth: false,
            select: false,
            info_required: config.info_required,
        };
        let (before, rest) = conns.split_at_mut(i);
        let Some((conn, after)) = rest.split_first_mut() else {
            return Ok(());
        };
        let server = ServerId(i as u8);
        let mut used_total = 0;
        let result = loop {
            let input = conn.inbuf.get(used_total..conn.filled).unwrap_or(&[]);
            let (reply, used) = match parser.parse(input) {
                Ok(Status::Complete(x)) => x,
                Ok(Status::Incomplete) => break Ok(()),
                Err(e) => {
                    log::warn!("redlock: bad reply from {}: {e}", conn.url);
                    break Err(None);
                }
            };
            used_total += used;
            if reply.is_push() {
                continue;
            }
            let Some(expect) = conn.expect.pop_front() else {
                // A reply for no request: the stream is out of step.
                log::warn!("redlock: {} sent a reply for no request", conn.url);
                break Err(None);
            };
            let step = match expect {
                Expect::Op { slot, serial } => {
                    // Else: a reply to an operation that is done already.
                    let Some(s) = slots.get_mut(usize::from(slot)) else {
                        continue;
                    };
                    if s.serial != serial {
                        continue;
                    }
                    if let Some(Err(_)) = s.call(|op| op.handle_reply(now, server, reply)) {
                        // The operation had asked this server nothing.
                        log::warn!("redlock: {} answered a request it was not sent", conn.url);
                        break Err(None);
                    }
                    continue;
                }
                Expect::Handshake(step) => {
                    conn.handshake_left = conn.handshake_left.saturating_sub(1);
                    step
                }
            };
            // Fail closed: any error to the handshake, and the server is
            // not used until a later handshake passes.
            let info = match handshake::judge(step, &reply, plan) {
                Ok(Verdict::Ok) => None,
                Ok(Verdict::Info(info)) => Some(info),
                Err(why) => {
                    let password = conn.url.password.as_ref().map(|p| p.expose());
                    let text = refusal_text(why, &reply, password);
                    log::warn!("redlock: not using {}: {text}", conn.url);
                    break Err(Some((why, text)));
                }
            };
            if let Some(info) = info {
                if let Some(id) = info.run_id {
                    // One process behind two entries (another name, a proxy)
                    // must not vote twice.
                    // Against every entry's last known run_id, whatever the
                    // state of its connection (a restart changes it).
                    let ids: Vec<&[u8]> = before
                        .iter()
                        .map(|c| c.run_id.as_deref().unwrap_or_default())
                        .chain(core::iter::once(id))
                        .chain(
                            after
                                .iter()
                                .map(|c| c.run_id.as_deref().unwrap_or_default()),
                        )
                        .collect();
                    let lists: Vec<&[&[u8]]> = ids
                        .iter()
                        .map(|id| {
                            if id.is_empty() {
                                &[][..]
                            } else {
                                core::slice::from_ref(id)
                            }
                        })
                        .collect();
                    let twin = handshake::twin_of(&lists, i).map(ServerId::index);
                    if let Some(k) = twin {
                        let twin = if k < i { &before[k] } else { &after[k - i - 1] };
                        let text = format!("the same server (run_id) as {}", twin.url.address());
                        break Err(Some((SetupError::SameServer(ServerId(k as u8)), text)));
                    }
                    conn.run_id = Some(id.to_vec());
                }
                if let Some(started) = info.started(now) {
                    conn.incarnation = Some(started);
                    // The operations with requests behind it learn it first.
                    for e in &conn.expect {
                        let Expect::Op { slot, serial } = *e else {
                            continue;
                        };
                        if let Some(s) = slots.get_mut(usize::from(slot)) {
                            if s.serial == serial {
                                s.call(|op| op.set_incarnation(server, started));
                            }
                        }
                    }
                }
            }
            if conn.handshake_left == 0 {
                // Every step passed: the requests held behind it go out.
                conn.failures = 0;
                conn.refused = None;
                conn.failure_note = None;
                conn.urgent_ok = true;
                conn.releases_held = false;
                let held = core::mem::take(&mut conn.held);
                conn.out.extend_from_slice(&held);
                conn.held = held;
                conn.held.clear();
            }
        };
        let used = used_total.min(conn.filled);
        conn.inbuf.copy_within(used..conn.filled, 0);
        conn.filled -= used;
        if result.is_ok() {
            // (On an error the connection is failed next, which resets it.)
            conn.check_invariants();
        }
        result
    }
}
