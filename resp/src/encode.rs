//! The command encoder: RESP arrays of bulk strings, written into a
//! caller-owned buffer.
//!
//! Every function returns the number of bytes written, or
//! [`EncodeError::BufferTooSmall`] with the exact size the command needs (the
//! buffer's content is then unspecified). Arguments are length-prefixed, so
//! any bytes are legal in a key, a token or a value.

use crate::script::Script;

/// Why a command could not be encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum EncodeError {
    /// The buffer is shorter than the command; `needed` bytes would fit it.
    BufferTooSmall {
        /// The encoded size of the whole command.
        needed: usize,
    },
    /// A [`Command`] got a different number of arguments than it declared.
    ArgCount {
        /// The count given to [`Command::new`].
        declared: usize,
        /// The number of arguments actually added.
        written: usize,
    },
}

impl core::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            EncodeError::BufferTooSmall { needed } => {
                write!(f, "buffer too small: the command needs {needed} bytes")
            }
            EncodeError::ArgCount { declared, written } => {
                write!(f, "command declared {declared} arguments but got {written}")
            }
        }
    }
}

impl core::error::Error for EncodeError {}

/// One command argument: bytes, or an integer sent as its decimal text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Arg<'a> {
    /// Sent as is.
    Bytes(&'a [u8]),
    /// Sent as decimal digits.
    Uint(u64),
    /// Sent as decimal digits with a leading `-` when negative.
    Int(i64),
}

impl<'a> From<&'a [u8]> for Arg<'a> {
    fn from(b: &'a [u8]) -> Self {
        Arg::Bytes(b)
    }
}

impl<'a, const N: usize> From<&'a [u8; N]> for Arg<'a> {
    fn from(b: &'a [u8; N]) -> Self {
        Arg::Bytes(b)
    }
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(s: &'a str) -> Self {
        Arg::Bytes(s.as_bytes())
    }
}

impl From<u64> for Arg<'_> {
    fn from(n: u64) -> Self {
        Arg::Uint(n)
    }
}

impl From<i64> for Arg<'_> {
    fn from(n: i64) -> Self {
        Arg::Int(n)
    }
}

/// `n / 10` and `n % 10` with 32-bit divisions only: a 64-bit division is a
/// library call of almost 1 KiB on 32-bit MCUs. Long division in base 2^16
/// after the top 32 bits: each partial dividend is `r * 2^16 + d` with
/// `r < 10`, so it fits in `u32`, and so does each partial quotient in 16
/// bits (a `u32` division by 10 is a multiplication).
fn div10(n: u64) -> (u64, u8) {
    let (hi, lo) = ((n >> 32) as u32, n as u32);
    let mid = ((hi % 10) << 16) | (lo >> 16);
    let low = ((mid % 10) << 16) | (lo & 0xffff);
    let q = (u64::from(hi / 10) << 32) | u64::from(((mid / 10) << 16) | (low / 10));
    (q, (low % 10) as u8)
}

/// Length of the longest decimal `u64`.
const DIGITS: usize = 20;

/// The decimal digits of `n`, formatted without `core::fmt` at the end of
/// `buf`.
fn decimal(mut n: u64, buf: &mut [u8; DIGITS]) -> &[u8] {
    let mut start = DIGITS;
    // From the last digit; `DIGITS` are enough for any `u64`.
    for d in buf.iter_mut().rev() {
        let (q, digit) = div10(n);
        *d = b'0'.wrapping_add(digit);
        start = start.wrapping_sub(1);
        n = q;
        if n == 0 {
            break;
        }
    }
    buf.get(start..).unwrap_or_default()
}

/// A command being written: declare the argument count, add the arguments,
/// then [`finish`](Command::finish).
///
/// ```
/// use redlock_resp::Command;
/// let mut buf = [0u8; 64];
/// let mut cmd = Command::new(&mut buf, 2);
/// cmd.arg(b"GET").arg(b"k");
/// let n = cmd.finish().unwrap();
/// assert_eq!(&buf[..n], b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
/// ```
#[derive(Debug)]
pub struct Command<'b> {
    buf: &'b mut [u8],
    /// Bytes the command needs so far; also where the next byte goes.
    len: usize,
    declared: usize,
    written: usize,
}

impl<'b> Command<'b> {
    /// Starts a command of `argc` arguments in `buf`.
    pub fn new(buf: &'b mut [u8], argc: usize) -> Self {
        let mut cmd = Command {
            buf,
            len: 0,
            declared: argc,
            written: 0,
        };
        cmd.header(b'*', argc);
        cmd
    }

    fn put(&mut self, bytes: &[u8]) {
        let end = self.len.saturating_add(bytes.len());
        if let Some(dst) = self.buf.get_mut(self.len..end) {
            dst.copy_from_slice(bytes);
        }
        self.len = end;
    }

    fn header(&mut self, ty: u8, n: usize) {
        self.put(&[ty]);
        self.put(decimal(n as u64, &mut [0; DIGITS]));
        self.put(b"\r\n");
    }

    /// Adds one argument, sent as is.
    pub fn arg(&mut self, bytes: &[u8]) -> &mut Self {
        // One copy of the argument code (a key with a suffix needs it).
        self.arg_parts(core::slice::from_ref(&bytes))
    }

    /// Adds one argument made of several pieces sent back to back (a key
    /// with a suffix, without building it in memory first).
    pub fn arg_parts(&mut self, parts: &[&[u8]]) -> &mut Self {
        let len = parts.iter().fold(0usize, |n, p| n.saturating_add(p.len()));
        self.header(b'$', len);
        for p in parts {
            self.put(p);
        }
        self.put(b"\r\n");
        self.written = self.written.saturating_add(1);
        self
    }

    /// Adds one unsigned integer argument, sent as decimal text.
    pub fn arg_uint(&mut self, n: u64) -> &mut Self {
        self.arg(decimal(n, &mut [0; DIGITS]))
    }

    /// Adds one signed integer argument, sent as decimal text.
    pub fn arg_int(&mut self, n: i64) -> &mut Self {
        if n >= 0 {
            return self.arg_uint(n.unsigned_abs());
        }
        let mut buf = [0; DIGITS];
        let digits = decimal(n.unsigned_abs(), &mut buf);
        self.header(b'$', digits.len().saturating_add(1));
        self.put(b"-");
        self.put(digits);
        self.put(b"\r\n");
        self.written = self.written.saturating_add(1);
        self
    }

    /// Adds one [`Arg`].
    pub fn push(&mut self, arg: Arg<'_>) -> &mut Self {
        match arg {
            Arg::Bytes(b) => self.arg(b),
            Arg::Uint(n) => self.arg_uint(n),
            Arg::Int(n) => self.arg_int(n),
        }
    }

    /// The number of bytes the command needs so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True before anything is written (never: the array header is written at once).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Checks the argument count and that everything fit; returns the bytes written.
    pub fn finish(self) -> Result<usize, EncodeError> {
        if self.written != self.declared {
            return Err(EncodeError::ArgCount {
                declared: self.declared,
                written: self.written,
            });
        }
        if self.len > self.buf.len() {
            return Err(EncodeError::BufferTooSmall { needed: self.len });
        }
        Ok(self.len)
    }
}

/// Any command, from its arguments (the first is the command name).
///
/// ```
/// let mut buf = [0u8; 32];
/// let n = redlock_resp::command(&mut buf, &[b"DEL", b"a\r\nb"]).unwrap();
/// assert_eq!(&buf[..n], b"*2\r\n$3\r\nDEL\r\n$4\r\na\r\nb\r\n");
/// ```
pub fn command(buf: &mut [u8], args: &[&[u8]]) -> Result<usize, EncodeError> {
    let mut cmd = Command::new(buf, args.len());
    for a in args {
        cmd.arg(a);
    }
    cmd.finish()
}

/// Any command, from [`Arg`]s that may mix bytes and integers.
pub fn command_args(buf: &mut [u8], args: &[Arg<'_>]) -> Result<usize, EncodeError> {
    let mut cmd = Command::new(buf, args.len());
    for &a in args {
        cmd.push(a);
    }
    cmd.finish()
}

/// R1: `SET key value NX PX ttl_ms`.
pub fn set_nx_px(
    buf: &mut [u8],
    key: &[u8],
    value: &[u8],
    ttl_ms: u64,
) -> Result<usize, EncodeError> {
    let mut cmd = Command::new(buf, 6);
    cmd.arg(b"SET")
        .arg(key)
        .arg(value)
        .arg(b"NX")
        .arg(b"PX")
        .arg_uint(ttl_ms);
    cmd.finish()
}

/// `GET key`.
pub fn get(buf: &mut [u8], key: &[u8]) -> Result<usize, EncodeError> {
    command(buf, &[b"GET", key])
}

/// `PTTL key`.
pub fn pttl(buf: &mut [u8], key: &[u8]) -> Result<usize, EncodeError> {
    command(buf, &[b"PTTL", key])
}

fn script_call(
    buf: &mut [u8],
    name: &[u8],
    body: &[u8],
    keys: &[&[u8]],
    args: &[Arg<'_>],
) -> Result<usize, EncodeError> {
    let mut cmd = Command::new(
        buf,
        3usize.saturating_add(keys.len()).saturating_add(args.len()),
    );
    cmd.arg(name).arg(body).arg_uint(keys.len() as u64);
    for k in keys {
        cmd.arg(k);
    }
    for &a in args {
        cmd.push(a);
    }
    cmd.finish()
}

/// `EVALSHA sha1 numkeys key... arg...`.
pub fn evalsha(
    buf: &mut [u8],
    sha1: &[u8],
    keys: &[&[u8]],
    args: &[Arg<'_>],
) -> Result<usize, EncodeError> {
    script_call(buf, b"EVALSHA", sha1, keys, args)
}

/// `EVAL source numkeys key... arg...`.
pub fn eval(
    buf: &mut [u8],
    source: &[u8],
    keys: &[&[u8]],
    args: &[Arg<'_>],
) -> Result<usize, EncodeError> {
    script_call(buf, b"EVAL", source, keys, args)
}

/// `EVALSHA` of a known [`Script`].
pub fn evalsha_script(
    buf: &mut [u8],
    script: &Script,
    keys: &[&[u8]],
    args: &[Arg<'_>],
) -> Result<usize, EncodeError> {
    evalsha(buf, script.sha1.as_bytes(), keys, args)
}

/// `EVAL` of a known [`Script`] (the fallback after `NOSCRIPT`).
pub fn eval_script(
    buf: &mut [u8],
    script: &Script,
    keys: &[&[u8]],
    args: &[Arg<'_>],
) -> Result<usize, EncodeError> {
    eval(buf, script.source.as_bytes(), keys, args)
}

/// `SCRIPT LOAD source`.
pub fn script_load(buf: &mut [u8], source: &[u8]) -> Result<usize, EncodeError> {
    command(buf, &[b"SCRIPT", b"LOAD", source])
}

/// `AUTH password` (the `default` user, or `requirepass`).
pub fn auth(buf: &mut [u8], password: &[u8]) -> Result<usize, EncodeError> {
    command(buf, &[b"AUTH", password])
}

/// `AUTH user password` (an ACL user, Redis 6 and later).
pub fn auth_user(buf: &mut [u8], user: &[u8], password: &[u8]) -> Result<usize, EncodeError> {
    command(buf, &[b"AUTH", user, password])
}

/// `SELECT db`.
pub fn select(buf: &mut [u8], db: u64) -> Result<usize, EncodeError> {
    let mut cmd = Command::new(buf, 2);
    cmd.arg(b"SELECT").arg_uint(db);
    cmd.finish()
}

/// `PING`.
pub fn ping(buf: &mut [u8]) -> Result<usize, EncodeError> {
    command(buf, &[b"PING"])
}

/// `HELLO protover [AUTH user password]`.
pub fn hello(
    buf: &mut [u8],
    protover: u8,
    auth: Option<(&[u8], &[u8])>,
) -> Result<usize, EncodeError> {
    let mut cmd = Command::new(buf, if auth.is_some() { 5 } else { 2 });
    cmd.arg(b"HELLO").arg_uint(u64::from(protover));
    if let Some((user, password)) = auth {
        cmd.arg(b"AUTH").arg(user).arg(password);
    }
    cmd.finish()
}

/// `INFO [section]`.
pub fn info(buf: &mut [u8], section: Option<&[u8]>) -> Result<usize, EncodeError> {
    match section {
        Some(s) => command(buf, &[b"INFO", s]),
        None => command(buf, &[b"INFO"]),
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)] // tests may index
mod tests {
    use super::*;

    #[test]
    fn decimal_digits() {
        for (n, s) in [
            (0u64, "0"),
            (7, "7"),
            (10, "10"),
            (4_294_967_295, "4294967295"),
            (4_294_967_296, "4294967296"),
            (u64::MAX, "18446744073709551615"),
        ] {
            assert_eq!(decimal(n, &mut [0; DIGITS]), s.as_bytes());
            assert_eq!(div10(n), (n / 10, (n % 10) as u8));
        }
    }

    #[test]
    fn negative_integers() {
        let mut buf = [0u8; 64];
        let n = command_args(&mut buf, &[Arg::Int(-12), Arg::Int(i64::MIN), Arg::Int(0)]).unwrap();
        assert_eq!(
            &buf[..n],
            b"*3\r\n$3\r\n-12\r\n$20\r\n-9223372036854775808\r\n$1\r\n0\r\n"
        );
    }
}
