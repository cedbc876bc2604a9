//! The sockets as the driving loop sees them: started connects, their
//! state, and reads and writes that never wait. The blocking client's
//! [`Network`] is one; the async client's streams, polled once per turn,
//! are the other. One loop drives both.

use embedded_io::{Read, ReadReady, Write};

use crate::net::{Link, Network};

/// One socket per server, moved without waiting.
pub(crate) trait Io {
    /// Starts connecting server `server`, closing what it had. `Err` when
    /// it cannot even start.
    fn connect(&mut self, server: usize) -> Result<(), ()>;
    /// The state of `server`'s connection.
    fn link(&mut self, server: usize) -> Link;
    /// Reads what `server` sent into `buf` (not empty): `Ok(None)` when
    /// nothing is there now, `Ok(Some(0))` at the end of the stream.
    fn read(&mut self, server: usize, buf: &mut [u8]) -> Result<Option<usize>, ()>;
    /// Writes what `server`'s socket takes of `buf` now: `Ok(None)` when it
    /// takes nothing now.
    fn write(&mut self, server: usize, buf: &[u8]) -> Result<Option<usize>, ()>;
    /// Closes `server`'s connection.
    fn close(&mut self, server: usize);
}

impl<N: Network> Io for N {
    fn connect(&mut self, server: usize) -> Result<(), ()> {
        Network::connect(self, server).map_err(|_| ())
    }

    fn link(&mut self, server: usize) -> Link {
        Network::link(self, server)
    }

    fn read(&mut self, server: usize, buf: &mut [u8]) -> Result<Option<usize>, ()> {
        let Some(mut socket) = self.socket(server) else {
            return Err(());
        };
        match socket.read_ready() {
            Ok(false) => Ok(None),
            Ok(true) => socket.read(buf).map(Some).map_err(|_| ()),
            Err(_) => Err(()),
        }
    }

    fn write(&mut self, server: usize, buf: &[u8]) -> Result<Option<usize>, ()> {
        if !self.write_ready(server) {
            return Ok(None);
        }
        match self.socket(server) {
            Some(mut socket) => socket.write(buf).map(Some).map_err(|_| ()),
            None => Err(()),
        }
    }

    fn close(&mut self, server: usize) {
        Network::close(self, server);
    }
}
