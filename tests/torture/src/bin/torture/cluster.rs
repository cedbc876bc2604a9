//! The five `redis-server` processes of a run, each behind its own fault
//! proxy: the workers talk to the proxies, the nemesis and the operator to
//! the servers themselves.

use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use redlock_tests::proxy::{Fault, FaultProxy};
use redlock_tests::{Conn, RedisServer, Value};

use crate::procs::Tracked;

/// One server and its proxy.
#[derive(Debug)]
pub(crate) struct Node {
    port: u16,
    server: Mutex<RedisServer>,
    proxy: FaultProxy,
}

impl Node {
    fn server(&self) -> MutexGuard<'_, RedisServer> {
        self.server.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The servers, their proxies, and every server process the run started.
#[derive(Debug)]
pub(crate) struct Cluster {
    nodes: Vec<Node>,
    tracked: Mutex<Vec<Tracked>>,
    /// Where every server process is listed as it starts (see
    /// [`Cluster::list_pids_in`]).
    pids_file: Mutex<Option<PathBuf>>,
}

/// Appends `t` to the file of pids: `PID START WHAT`, one line each (START
/// is `-` if it was not read).
fn list_pid(path: &Path, t: &Tracked) {
    let line = format!(
        "{} {} {}\n",
        t.pid,
        t.start.map_or_else(|| "-".to_owned(), |s| s.to_string()),
        t.what
    );
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        eprintln!(
            "torture: cannot list pid {} in {}: {e}",
            t.pid,
            path.display()
        );
    }
}

impl Cluster {
    /// Starts `n` servers (without persistence) and a proxy for each.
    pub(crate) fn start(n: usize) -> io::Result<Cluster> {
        let mut nodes = Vec::with_capacity(n);
        let mut tracked = Vec::with_capacity(n);
        for _ in 0..n {
            let server = RedisServer::start()?;
            let proxy = FaultProxy::start(server.addr())?;
            tracked.push(Tracked::new(
                server.pid(),
                format!("redis-server on port {}", server.port()),
            ));
            nodes.push(Node {
                port: server.port(),
                server: Mutex::new(server),
                proxy,
            });
        }
        Ok(Cluster {
            nodes,
            tracked: Mutex::new(tracked),
            pids_file: Mutex::new(None),
        })
    }

    /// Lists every server process in `path` (`PID START WHAT` lines, as
    /// they start, restarts included), so that whoever runs this run can
    /// stop them even if the run itself dies by SIGKILL (the servers'
    /// command lines name only their port).
    pub(crate) fn list_pids_in(&self, path: PathBuf) {
        for t in self.tracked().iter() {
            list_pid(&path, t);
        }
        *self
            .pids_file
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(path);
    }

    /// How many servers.
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// The servers' ports.
    pub(crate) fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    /// The port of server `i`.
    pub(crate) fn port(&self, i: usize) -> u16 {
        self.nodes.get(i).map_or(0, |n| n.port)
    }

    /// The addresses the workers use: the proxies'.
    pub(crate) fn proxy_urls(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| n.proxy.addr().to_string())
            .collect()
    }

    /// The servers' own addresses.
    pub(crate) fn server_urls(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect()
    }

    /// Kills server `i` with SIGKILL.
    pub(crate) fn kill(&self, i: usize) {
        if let Some(node) = self.nodes.get(i) {
            if let Err(e) = node.server().kill() {
                eprintln!("torture: cannot kill the server on port {}: {e}", node.port);
            }
        }
    }

    /// Starts server `i` again, empty (no persistence), on its port.
    pub(crate) fn restart(&self, i: usize) -> io::Result<()> {
        let Some(node) = self.nodes.get(i) else {
            return Ok(());
        };
        let mut server = node.server();
        server.restart()?;
        let t = Tracked::new(server.pid(), format!("redis-server on port {}", node.port));
        if let Some(path) = &*self
            .pids_file
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
        {
            list_pid(path, &t);
        }
        self.tracked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(t);
        Ok(())
    }

    /// Sends server `i` a signal (`STOP`, `CONT`).
    pub(crate) fn signal(&self, i: usize, name: &str) {
        if let Some(node) = self.nodes.get(i) {
            let _ = node.server().signal(name);
        }
    }

    /// Sets the fault of server `i`'s proxy.
    pub(crate) fn set_fault(&self, i: usize, fault: Fault) {
        if let Some(node) = self.nodes.get(i) {
            node.proxy.set(fault);
        }
    }

    /// A connection to server `i` itself (not through its proxy).
    pub(crate) fn conn(&self, i: usize) -> io::Result<Conn> {
        let port = self
            .nodes
            .get(i)
            .map(|n| n.port)
            .ok_or_else(|| io::Error::other("no such server"))?;
        let conn = Conn::connect(core::net::SocketAddr::from((
            core::net::Ipv4Addr::LOCALHOST,
            port,
        )))?;
        Ok(conn)
    }

    /// Every server process started so far (restarts included).
    pub(crate) fn tracked(&self) -> Vec<Tracked> {
        self.tracked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// `GET key` on a direct connection: the bytes, `None` for no key (or an
/// error).
pub(crate) fn get(conn: &mut Conn, key: &[u8]) -> Option<Vec<u8>> {
    match conn.request(&[b"GET", key]) {
        Ok(Value::Bulk(b)) => Some(b),
        _ => None,
    }
}

/// `GET key` as a number (0 for none).
pub(crate) fn get_number(conn: &mut Conn, key: &[u8]) -> u64 {
    get(conn, key)
        .and_then(|b| String::from_utf8(b).ok()?.parse().ok())
        .unwrap_or(0)
}
