//! Moving bytes: connects, the handshake, writes, reads, and the replies
//! handed to the core's sessions and on to the operations they answer.

use super::*;

impl<J: Job> State<J> {
    /// The core's clock now.
    pub(super) fn now(&self) -> Instant {
        core_instant(self.epoch, StdInstant::now())
    }

    /// Tells `op` that server `i` is down: refused (its handshake failed,
    /// or it is a duplicate), or its connection failed.
    pub(super) fn tell_down(&self, op: &mut J, i: usize, now: Instant) {
        let server = ServerId(i as u8);
        match self.conns.get(i).and_then(|c| c.session.refused()) {
            Some(why) => op.handle_setup_error(now, server, why),
            None => op.handle_connection_error(now, server),
        }
    }

    /// Makes sure server `i` is connected or connecting (starting a connect,
    /// if its session allows; `urgent` is a release, which may skip the
    /// reconnect backoff). False if it is down and may not be retried yet,
    /// or the connect failed at once.
    pub(super) fn ensure_connecting(&mut self, i: usize, urgent: bool) -> bool {
        let now = self.now();
        let session = &self.conns[i].session;
        if session.state() != SessionState::Down {
            return true;
        }
        // A refused server waits for its backoff whatever the request
        // (no AUTH storm), and so does one whose last connect failed.
        if !session.may_connect(now, urgent) {
            return false;
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
                self.fail_because(i, Close::Refused(why), Some(text));
                false
            }
        }
    }

    pub(super) fn connect(&mut self, i: usize) -> Result<(), ConnectError> {
        let now = self.now();
        let policy = self.policy;
        let conn = &mut self.conns[i];
        conn.failure_note = None;
        // The session is connecting from here on (a failure below closes
        // it as a failed attempt).
        conn.session.connecting(now, &policy);
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
        if !open_stream(conn, &self.registry, Token(i)) {
            return Err(io::Error::other("no address took a connection").into());
        }
        conn.out.clear();
        conn.filled = 0;
        Ok(())
    }

    /// A connect that failed moves on to the host's next address at once,
    /// with the requests held behind the handshake (nothing was written
    /// yet); with no address left, the connection fails.
    pub(super) fn fail_connect(&mut self, i: usize) {
        let now = self.now();
        let policy = self.policy;
        let conn = &mut self.conns[i];
        if let Some(mut s) = conn.stream.take() {
            let _ = self.registry.deregister(s.tcp_mut());
        }
        conn.addr_next = conn.addr_next.saturating_add(1);
        if open_stream(conn, &self.registry, Token(i)) {
            log::debug!("redlock: connecting to the next address of {}", conn.url);
            conn.session.connecting(now, &policy);
        } else {
            self.fail(i);
        }
    }

    /// Closes server `i`'s connection after an error; the session decides
    /// when it may reconnect. Every operation with requests on it is told
    /// (at its next pump).
    pub(super) fn fail(&mut self, i: usize) {
        self.fail_because(i, Close::Io, None);
    }

    /// [`fail`](State::fail), because of `why` (with the server's text for
    /// a refusal). The session reports the requests it dropped; their
    /// operations are told here.
    pub(super) fn fail_because(&mut self, i: usize, why: Close, text: Option<String>) {
        let now = self.now();
        let State {
            conns,
            slots,
            registry,
            policy,
            ..
        } = self;
        let Some(conn) = conns.get_mut(i) else {
            return;
        };
        conn.fail(
            registry,
            policy,
            now,
            why,
            text,
            |Expect { slot, serial }| {
                if let Some(s) = slots.get_mut(usize::from(slot)) {
                    if s.serial == serial {
                        s.conn_errors |= 1u16.checked_shl(i as u32).unwrap_or(0);
                    }
                }
            },
        );
    }

    /// What the last thread out must still write: bytes on a connection
    /// that is up (its socket would have blocked), a release held behind a
    /// connect or a handshake, or other requests held there (given a short
    /// grace: a working server passes its handshake within a round trip;
    /// what a stalled one holds goes out with a later call, in order, so a
    /// release still follows its `SET`).
    pub(super) fn unwritten(&self) -> Unwritten {
        if self.conns.iter().any(|c| c.is_up() && c.has_unwritten()) {
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

    /// Writes what every connection that is up has queued, except where
    /// its session keeps the requests corked behind a batch on its way
    /// (one batch in flight: the leader that reads its answers writes
    /// them). Only while several operations run: a lone caller's request
    /// goes at once (nothing would join it), and with nothing running
    /// nobody may lead to read those answers.
    pub(super) fn flush_all(&mut self) {
        let idle = self.lead.active.count_ones() < 2;
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            let due = idle || c.writable_interest || !c.session.corked();
            if c.is_up() && c.has_unwritten() && due && self.flush(i).is_err() {
                self.fail(i);
            }
        }
    }

    /// The earliest time a session wants to be asked again: a connect or a
    /// handshake past its timeout, a request unanswered for half its time
    /// (to probe), a probe unanswered.
    pub(super) fn session_deadline(&self) -> Option<StdInstant> {
        self.conns
            .iter()
            .filter_map(|c| c.session.poll_timeout())
            .min()
            .map(|t| std_instant(self.epoch, t))
    }

    /// Checks every session at `now`: gives up the connections it says to
    /// (a handshake that did not pass in time, a probe unanswered), and
    /// writes the probes it wants (a request unanswered for half its time).
    /// Called after the replies that arrived were read (a reply on its way
    /// is not taken for a loss), and before the operations check their own
    /// deadlines at the same `now`: an operation learns first that its
    /// connection was given up, so that a release on it is sent again on
    /// the next connection.
    pub(super) fn expire_sessions(&mut self, now: Instant) {
        let policy = self.policy;
        for i in 0..self.conns.len() {
            let conn = &mut self.conns[i];
            if !conn.is_up() {
                continue;
            }
            if let Some(why) = conn.session.handle_timeout(now) {
                match why {
                    Close::ConnectTimeout => {
                        log::warn!("redlock: {} did not answer its handshake in time", conn.url)
                    }
                    why => log::warn!("redlock: {}: {why}", conn.url),
                }
                self.fail_because(i, why, None);
                continue;
            }
            // A request overdue: the session probes the stream's step
            // (written with the next flush, behind what is queued).
            if conn.session.poll_probe() {
                encode_growing(&mut conn.out, encode_probe);
                conn.session.probe_written(now, &policy);
            }
        }
    }

    /// Finishes non-blocking connects (`take_error`, `peer_addr`), moves
    /// those past the connect timeout to the next address, and starts the
    /// handshake of those that came up.
    pub(super) fn progress_connects(&mut self) {
        for i in 0..self.conns.len() {
            if self.conns[i].session.state() != SessionState::Connecting {
                continue;
            }
            let now = self.now();
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
                                self.fail_because(i, Close::Refused(SetupError::Tls), Some(text));
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
                    let policy = self.policy;
                    let conn = &mut self.conns[i];
                    log::debug!("redlock: connected to {}", conn.url);
                    // (What an earlier address or attempt failed with is
                    // no longer why.)
                    conn.failure_note = None;
                    // The handshake goes first on the new connection, as
                    // the core plans it.
                    conn.start_handshake(now, &policy);
                    if self.flush(i).is_err() {
                        self.fail(i);
                    }
                }
                Some(false) => self.fail_connect(i),
                None if self.conns[i].session.handle_timeout(now).is_some() => {
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

    /// Reads the sockets the poll reported ready (`ready`; `closed`: those
    /// whose event said the peer closed or the socket failed) and hands
    /// their replies to the operations they answer.
    pub(super) fn read_ready(&mut self, ready: u64, closed: u64, now: Instant) {
        for i in 0..self.conns.len() {
            // Only sockets the poll reported: each is read until drained,
            // or to its end when the event said it closed (mio is
            // edge-triggered), the others would read nothing.
            if !self.conns[i].is_up() || ready & bit(i) == 0 {
                continue;
            }
            loop {
                let read = self.conns[i].read(self.config.limits, closed & bit(i) != 0);
                // Parse what arrived, even before an error, then close on error.
                let before = self.conns[i].filled;
                let routed = self.dispatch(i, now);
                if let Err((why, text)) = routed {
                    self.fail_because(i, why, text);
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
                    self.fail_because(i, Close::BadReply, None);
                    break;
                }
            }
        }
    }

    /// Parses every complete reply on connection `i` and hands each to the
    /// connection's session, then to the operation it answers. `Err` when
    /// the connection must be closed, with why (and the server's text for a
    /// refused handshake).
    pub(super) fn dispatch(
        &mut self,
        i: usize,
        now: Instant,
    ) -> Result<(), (Close, Option<String>)> {
        let State {
            conns,
            parser,
            slots,
            ..
        } = self;
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
                    break Err((Close::BadReply, None));
                }
            };
            used_total += used;
            // C3: one process behind two entries (another name, a proxy)
            // must not vote twice: against every entry's last known run_id,
            // whatever the state of its connection (a restart changes it).
            let twin = |id: &[u8]| {
                let ids = before
                    .iter()
                    .map(|c| c.session.run_id())
                    .chain(core::iter::once(&[][..]))
                    .chain(after.iter().map(|c| c.session.run_id()));
                handshake::twin_by_id(ids, i, id)
            };
            match conn.session.handle_reply(now, &reply, twin) {
                Ok(Event::Reply(Expect { slot, serial })) => {
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
                        break Err((Close::Unsolicited, None));
                    }
                }
                Ok(Event::Ready) => {
                    // Every step passed: the requests held behind it go
                    // out, their operations told the incarnation first.
                    conn.refused = None;
                    conn.failure_note = None;
                    conn.releases_held = false;
                    if let Some(started) = conn.session.incarnation() {
                        conn.session.for_each_owed(|&Expect { slot, serial }| {
                            if let Some(s) = slots.get_mut(usize::from(slot)) {
                                if s.serial == serial {
                                    s.call(|op| op.set_incarnation(server, started));
                                }
                            }
                        });
                    }
                    let held = core::mem::take(&mut conn.held);
                    conn.out.extend_from_slice(&held);
                    conn.held = held;
                    conn.held.clear();
                }
                // `INFO` judged: the scripts the server needs, if any.
                Ok(Event::Step) => conn.write_steps(),
                Ok(_) => {}
                Err(Close::Refused(why)) => {
                    // Fail closed: any error to the handshake, and the
                    // server is not used until a later handshake passes.
                    let text = match why {
                        SetupError::SameServer(k) => {
                            let k = k.index();
                            let twin = if k < i {
                                before.get(k)
                            } else {
                                after.get(k - i - 1)
                            };
                            let other = twin.map(|c| c.url.address()).unwrap_or_default();
                            format!("the same server (run_id) as {other}")
                        }
                        why => {
                            let password = conn.url.password.as_ref().map(|p| p.expose());
                            refusal_text(why, &reply, password)
                        }
                    };
                    log::warn!("redlock: not using {}: {text}", conn.url);
                    break Err((Close::Refused(why), Some(text)));
                }
                Err(why) => {
                    log::warn!("redlock: {}: {why}", conn.url);
                    break Err((why, None));
                }
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
