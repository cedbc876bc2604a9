//! The streaming reply parser.
//!
//! [`Parser::parse`] looks at the bytes received so far and returns one of:
//! a complete [`Reply`] with the number of bytes it used, [`Status::Incomplete`]
//! (wait for more bytes; never an error), or a [`ParseError`]. Nothing is
//! copied: a reply borrows from the input. Nothing is buffered: call it again
//! with the grown input after the next read.
//!
//! Every length read from the wire is checked against [`Limits`] before it is
//! used, with checked arithmetic, and nested aggregates are walked with an
//! explicit, bounded stack (no recursion).
//!
//! Which types are accepted depends on the `resp3` feature (on by default):
//! with it, all of RESP2 and RESP3; without it, only RESP2 (`+ - : $ *`), and
//! any other type byte is [`ParseError::UnknownType`] (see [`Parser::parse`]).

use crate::ServerError;

/// The deepest nesting of aggregates any [`Limits`] can allow; the size of the
/// parser's explicit stack.
pub const MAX_DEPTH_CAP: usize = 32;

/// Bounds on what the parser accepts from the wire.
///
/// A reply that exceeds a bound is a [`ParseError`], found as soon as the
/// offending header is read: nothing is ever allocated or waited for on the
/// word of a length header. The defaults are sized for a lock client, whose
/// largest expected reply is the text of `INFO server` (about 1 KiB).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Limits {
    /// Largest payload of a bulk string, bulk error or verbatim string, in bytes.
    pub max_bulk_len: usize,
    /// Largest element count of an array, set or push, and largest number of
    /// pairs of a map or attribute.
    pub max_aggregate_len: usize,
    /// Deepest nesting of aggregates (a flat array is depth 1). Values above
    /// [`MAX_DEPTH_CAP`] act as [`MAX_DEPTH_CAP`].
    pub max_depth: usize,
    /// Longest line (simple string, error, integer, double, big number, and
    /// every header), without the type byte and the CRLF.
    pub max_line_len: usize,
    /// Largest complete frame, in bytes. Bounds what a client has to buffer
    /// for one reply: at most `max_frame_len` plus one bulk or line.
    pub max_frame_len: usize,
}

impl Limits {
    /// The defaults: 32 KiB bulks, 1024 elements, depth 8, 4 KiB lines,
    /// 64 KiB frames: a lock client's replies are tiny, `INFO` (all
    /// sections) is about 6 KiB.
    pub const DEFAULT: Limits = Limits {
        max_bulk_len: 32 * 1024,
        max_aggregate_len: 1024,
        max_depth: 8,
        max_line_len: 4 * 1024,
        max_frame_len: 64 * 1024,
    };

    /// Used to re-walk bytes that were already validated under some limits.
    const TRUSTED: Limits = Limits {
        max_bulk_len: usize::MAX,
        max_aggregate_len: usize::MAX,
        max_depth: MAX_DEPTH_CAP,
        max_line_len: usize::MAX,
        max_frame_len: usize::MAX,
    };

    fn depth(&self) -> usize {
        if self.max_depth > MAX_DEPTH_CAP {
            MAX_DEPTH_CAP
        } else {
            self.max_depth
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// The outcome of a parse that did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Status<T> {
    /// A whole value was found.
    Complete(T),
    /// The input is a valid beginning of a value; more bytes are needed.
    Incomplete,
}

/// Why the input cannot be the beginning of a valid reply.
///
/// The stream is unusable after any of these: the connection should be closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ParseError {
    /// The first byte of a value is not a type byte the parser accepts:
    /// RESP2's `+ - : $ *`, and with the `resp3` feature RESP3's
    /// `_ # , ( ! = % ~ > |`. Without that feature a RESP3 reply is this
    /// error, found at its first byte.
    UnknownType(u8),
    /// A length header is not `-1` (where null is allowed) or a plain decimal
    /// number: a sign, a leading zero, a space, `-2`, an empty length.
    InvalidLength,
    /// An integer reply is not a plain decimal `i64`.
    InvalidInteger,
    /// A line holds a bare CR or LF.
    InvalidLine,
    /// A bulk payload is not followed by CRLF.
    MissingCrlf,
    /// A RESP3 null (`_`) has content.
    InvalidNull,
    /// A RESP3 boolean is not `#t` or `#f`.
    InvalidBoolean,
    /// A RESP3 double is not a decimal number, `inf`, `-inf` or `nan`.
    InvalidDouble,
    /// A RESP3 big number is not a plain decimal.
    InvalidBigNumber,
    /// A RESP3 verbatim string lacks its `xxx:` format prefix.
    InvalidVerbatim,
    /// A RESP3 streamed string or aggregate (`$?`, `*?`), which Redis does not send.
    Streamed,
    /// A bulk length exceeds [`Limits::max_bulk_len`] (or any integer type).
    BulkTooLong,
    /// An aggregate length exceeds [`Limits::max_aggregate_len`] (or any integer type).
    AggregateTooLong,
    /// Aggregates nest deeper than [`Limits::max_depth`].
    TooDeep,
    /// A line exceeds [`Limits::max_line_len`] without a CRLF.
    LineTooLong,
    /// The frame exceeds [`Limits::max_frame_len`].
    FrameTooLarge,
}

impl core::fmt::Display for ParseError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let text = match self {
            ParseError::UnknownType(b) => {
                return write!(f, "unknown RESP type byte 0x{b:02x}");
            }
            ParseError::InvalidLength => "invalid length header",
            ParseError::InvalidInteger => "invalid integer reply",
            ParseError::InvalidLine => "bare CR or LF inside a line",
            ParseError::MissingCrlf => "bulk payload not followed by CRLF",
            ParseError::InvalidNull => "RESP3 null with content",
            ParseError::InvalidBoolean => "invalid RESP3 boolean",
            ParseError::InvalidDouble => "invalid RESP3 double",
            ParseError::InvalidBigNumber => "invalid RESP3 big number",
            ParseError::InvalidVerbatim => "invalid RESP3 verbatim string",
            ParseError::Streamed => "RESP3 streamed types are not supported",
            ParseError::BulkTooLong => "bulk length over the limit",
            ParseError::AggregateTooLong => "aggregate length over the limit",
            ParseError::TooDeep => "aggregates nested deeper than the limit",
            ParseError::LineTooLong => "line longer than the limit",
            ParseError::FrameTooLarge => "reply larger than the frame limit",
        };
        f.write_str(text)
    }
}

impl core::error::Error for ParseError {}

/// The kind of an aggregate reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AggregateKind {
    /// RESP2/RESP3 array (`*`).
    Array,
    /// RESP3 map (`%`): its elements alternate key, value.
    Map,
    /// RESP3 set (`~`).
    Set,
    /// RESP3 push (`>`): out-of-band data, not the reply to a request.
    Push,
}

/// A validated aggregate that borrows its encoded elements from the input.
///
/// Elements are decoded lazily by [`Aggregate::iter`], so an aggregate costs no
/// storage however long or deep it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Aggregate<'a> {
    kind: AggregateKind,
    count: usize,
    body: &'a [u8],
}

impl<'a> Aggregate<'a> {
    /// What kind of aggregate this is.
    pub fn kind(&self) -> AggregateKind {
        self.kind
    }

    /// The number of elements [`Aggregate::iter`] yields (for a map, twice the
    /// number of pairs).
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The encoded elements, exactly as received.
    pub fn raw(&self) -> &'a [u8] {
        self.body
    }

    /// The elements in order (for a map: key, value, key, value, ...).
    pub fn iter(&self) -> Elements<'a> {
        Elements {
            rest: self.body,
            remaining: self.count,
        }
    }
}

impl<'a> IntoIterator for Aggregate<'a> {
    type Item = Reply<'a>;
    type IntoIter = Elements<'a>;
    fn into_iter(self) -> Elements<'a> {
        self.iter()
    }
}

/// Iterator over the elements of an [`Aggregate`].
#[derive(Debug, Clone)]
pub struct Elements<'a> {
    rest: &'a [u8],
    remaining: usize,
}

impl<'a> Iterator for Elements<'a> {
    type Item = Reply<'a>;

    fn next(&mut self) -> Option<Reply<'a>> {
        if self.remaining == 0 {
            return None;
        }
        // The body was validated when the aggregate was parsed, so this cannot
        // fail or be incomplete; if it ever did, the iteration just ends.
        // Scalars (the common case) take the short way on hosted targets;
        // on bare metal (`target_os = "none"`) `parse_with` does the same
        // in less code.
        #[cfg(not(target_os = "none"))]
        if let Ok(Status::Complete((Element::Scalar(reply), used))) =
            element(self.rest, 0, &Limits::TRUSTED)
        {
            self.rest = self.rest.get(used..).unwrap_or_default();
            self.remaining = self.remaining.saturating_sub(1);
            return Some(reply);
        }
        match parse_with(self.rest, &Limits::TRUSTED) {
            Ok(Status::Complete((reply, used))) => {
                self.rest = self.rest.get(used..).unwrap_or_default();
                self.remaining = self.remaining.saturating_sub(1);
                Some(reply)
            }
            _ => {
                self.remaining = 0;
                None
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.remaining))
    }
}

/// One reply from a Redis server, borrowing from the parser's input.
///
/// The variants are the same with or without the `resp3` feature; without
/// it the parser never produces the RESP3-only ones ([`Reply::Boolean`],
/// [`Reply::Double`], [`Reply::BigNumber`], [`Reply::Verbatim`]), nor a bulk
/// error, a `_` null, or a map, set or push aggregate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Reply<'a> {
    /// `+OK`: a simple string.
    Simple(&'a [u8]),
    /// `-ERR ...` or a RESP3 bulk error `!`.
    Error(ServerError<'a>),
    /// `:1`
    Integer(i64),
    /// `$3\r\nabc`: a bulk string (binary-safe).
    Bulk(&'a [u8]),
    /// `$-1`, `*-1` (RESP2) or `_` (RESP3).
    Nil,
    /// `*`, `%`, `~` or `>`.
    Aggregate(Aggregate<'a>),
    /// RESP3 `#t` / `#f`.
    Boolean(bool),
    /// RESP3 double, as its decimal text (`1.5`, `inf`, `-inf`, `nan`).
    Double(&'a [u8]),
    /// RESP3 big number, as its decimal text.
    BigNumber(&'a [u8]),
    /// RESP3 verbatim string: a 3-byte format (`txt`, `mkd`) and the text.
    Verbatim {
        /// The 3-byte format name.
        format: &'a [u8],
        /// The text after the `xxx:` prefix.
        text: &'a [u8],
    },
}

impl<'a> Reply<'a> {
    /// True for the simple string `OK`.
    pub fn is_ok(&self) -> bool {
        matches!(self, Reply::Simple(b"OK"))
    }

    /// The bytes of a simple string, bulk string or verbatim text.
    pub fn as_bytes(&self) -> Option<&'a [u8]> {
        match *self {
            Reply::Simple(b) | Reply::Bulk(b) => Some(b),
            Reply::Verbatim { text, .. } => Some(text),
            _ => None,
        }
    }

    /// The value of an integer reply.
    pub fn as_integer(&self) -> Option<i64> {
        match *self {
            Reply::Integer(i) => Some(i),
            _ => None,
        }
    }

    /// The server error, for `-` and `!` replies.
    pub fn as_error(&self) -> Option<ServerError<'a>> {
        match *self {
            Reply::Error(e) => Some(e),
            _ => None,
        }
    }

    /// The aggregate, for `*`, `%`, `~` and `>` replies.
    pub fn as_aggregate(&self) -> Option<Aggregate<'a>> {
        match *self {
            Reply::Aggregate(a) => Some(a),
            _ => None,
        }
    }

    /// True for a RESP3 push (out-of-band data that answers no request).
    pub fn is_push(&self) -> bool {
        matches!(self, Reply::Aggregate(a) if a.kind == AggregateKind::Push)
    }
}

/// A reply parser with its [`Limits`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Parser {
    limits: Limits,
}

impl Parser {
    /// A parser that enforces `limits`.
    pub const fn new(limits: Limits) -> Self {
        Parser { limits }
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Parses the first reply in `input`.
    ///
    /// Returns the reply and the number of bytes it took; bytes after it are
    /// left alone.
    ///
    /// What is accepted depends on the `resp3` feature of this crate:
    ///
    /// - Always, RESP2: simple string `+`, error `-`, integer `:`, bulk
    ///   string `$` (and the null bulk `$-1`), array `*` (and the null array
    ///   `*-1`), nested within the [`Limits`].
    /// - With `resp3` (on by default), also RESP3: null `_`, boolean `#`,
    ///   double `,`, big number `(`, bulk error `!`, verbatim string `=`,
    ///   map `%`, set `~`, push `>` and attribute `|`. An attribute before a
    ///   reply is consumed with it and dropped. A push is returned like any
    ///   reply: see [`Reply::is_push`].
    /// - Without `resp3`, each of those type bytes, wherever it appears (as
    ///   the reply, inside an aggregate, or as an attribute before a reply),
    ///   is [`ParseError::UnknownType`], like any unknown byte: a client
    ///   that never sends `HELLO 3` closes the connection of a server that
    ///   answers in RESP3 anyway, and does not link the code that parses it.
    pub fn parse<'a>(&self, input: &'a [u8]) -> Result<Status<(Reply<'a>, usize)>, ParseError> {
        parse_with(input, &self.limits)
    }
}

/// Parses the first reply in `input` with [`Limits::DEFAULT`]; see [`Parser::parse`].
///
/// ```
/// use redlock_resp::{parse_reply, Reply, Status};
/// assert_eq!(parse_reply(b"+OK\r\n:1"), Ok(Status::Complete((Reply::Simple(b"OK"), 5))));
/// assert_eq!(parse_reply(b"$5\r\nhel"), Ok(Status::Incomplete));
/// ```
pub fn parse_reply(input: &[u8]) -> Result<Status<(Reply<'_>, usize)>, ParseError> {
    parse_with(input, &Limits::DEFAULT)
}

/// Propagates `Incomplete` like `?` propagates errors.
macro_rules! ready {
    ($e:expr) => {
        match $e? {
            Status::Complete(v) => v,
            Status::Incomplete => return Ok(Status::Incomplete),
        }
    };
}

/// The start of one value: a whole scalar, an aggregate header, or (RESP3)
/// an attribute header.
enum Element<'a> {
    Scalar(Reply<'a>),
    Open {
        kind: AggregateKind,
        count: usize, // elements (pairs already doubled)
    },
    /// An attribute: `count` elements (pairs doubled) that annotate the value
    /// after them, and are dropped.
    #[cfg(feature = "resp3")]
    Attribute {
        count: usize,
    },
}

fn parse_with<'a>(
    input: &'a [u8],
    limits: &Limits,
) -> Result<Status<(Reply<'a>, usize)>, ParseError> {
    // Hosted targets: a scalar reply (the common case) is returned before
    // the stack is set up; an aggregate's header is read again below. Bare
    // metal (`target_os = "none"`) skips this for size.
    #[cfg(not(target_os = "none"))]
    if let (Element::Scalar(reply), used) = ready!(element(input, 0, limits)) {
        return Ok(Status::Complete((reply, used)));
    }
    let max_depth = limits.depth();
    // remaining[level]: elements still to read at that level. Level 0 is the
    // reply itself (a RESP3 attribute before it does not count: the value
    // after it does); level `d` is inside an aggregate at depth `d`.
    let mut remaining = [0usize; MAX_DEPTH_CAP + 1];
    remaining[0] = 1;
    let mut level = 0usize;
    // The reply, once it is known to be an aggregate: its kind, its element
    // count and where its body starts.
    let mut reply = (AggregateKind::Array, 0usize, 0usize);
    // One loop reads every element of the frame (nested or not): on bare
    // metal `element` has this single call site.
    let mut pos = 0usize;
    loop {
        let rest = input.get(pos..).unwrap_or_default();
        let (element, used) = ready!(element(rest, pos, limits));
        pos = pos.saturating_add(used); // element() checked it against the frame limit
        // What the element opens: the elements of an aggregate (or of an
        // attribute) that follow it.
        let count = match element {
            Element::Scalar(scalar) => {
                if level == 0 {
                    return Ok(Status::Complete((scalar, pos)));
                }
                decrement(&mut remaining, level);
                0
            }
            Element::Open { kind, count } => {
                if level == 0 {
                    reply = (kind, count, pos);
                }
                decrement(&mut remaining, level);
                count
            }
            // An attribute does not count as an element of its parent (or
            // as the reply): the value after it does.
            #[cfg(feature = "resp3")]
            Element::Attribute { count } => count,
        };
        open(&mut remaining, &mut level, count, max_depth)?;
        while remaining.get(level).is_some_and(|&r| r == 0) {
            if level == 0 {
                // Level 0 only reaches zero once the reply is an aggregate.
                let (kind, count, start) = reply;
                let body = input.get(start..pos).unwrap_or_default();
                let agg = Aggregate { kind, count, body };
                return Ok(Status::Complete((Reply::Aggregate(agg), pos)));
            }
            level = level.saturating_sub(1);
        }
    }
}

/// Enters an aggregate (or attribute) of `count` elements whose header was
/// read at `level`, so at depth `level + 1`. The reply, or an attribute
/// before it, is at depth 1 even when empty; an empty one nested deeper, like
/// a scalar (`count` 0), opens nothing and is not checked.
#[cfg_attr(not(target_os = "none"), inline(always))]
fn open(
    remaining: &mut [usize; MAX_DEPTH_CAP + 1],
    level: &mut usize,
    count: usize,
    max_depth: usize,
) -> Result<(), ParseError> {
    if *level == 0 && max_depth == 0 {
        return Err(ParseError::TooDeep);
    }
    if count > 0 {
        if *level >= max_depth {
            return Err(ParseError::TooDeep);
        }
        *level = level.saturating_add(1);
        if let Some(slot) = remaining.get_mut(*level) {
            *slot = count;
        }
    }
    Ok(())
}

/// One element fewer to read at `level`.
#[cfg_attr(not(target_os = "none"), inline(always))]
fn decrement(remaining: &mut [usize; MAX_DEPTH_CAP + 1], level: usize) {
    if let Some(r) = remaining.get_mut(level) {
        *r = r.saturating_sub(1);
    }
}

/// Reads one scalar, or the header of one aggregate, at the start of `input`,
/// which is at offset `base` in its frame. The end of what it returns is
/// within [`Limits::max_frame_len`] of the frame start: a bulk that would
/// cross it is refused before its payload is awaited.
// Speed on hosted targets; size on bare metal (`target_os = "none"`).
#[cfg_attr(not(target_os = "none"), inline(always))]
#[cfg_attr(target_os = "none", inline(never))]
fn element<'a>(
    input: &'a [u8],
    base: usize,
    limits: &Limits,
) -> Result<Status<(Element<'a>, usize)>, ParseError> {
    let Some((&ty, rest)) = input.split_first() else {
        return Ok(Status::Incomplete);
    };
    // Refused at its first byte, before its line is awaited.
    if !is_type(ty) {
        return Err(ParseError::UnknownType(ty));
    }
    let (line, line_used) = ready!(line(rest, limits.max_line_len));
    let head = line_used.saturating_add(1);
    let fits = |used: usize| match base.checked_add(used) {
        Some(end) if end <= limits.max_frame_len => Ok(()),
        _ => Err(ParseError::FrameTooLarge),
    };
    fits(head)?;
    let scalar = |reply| Ok(Status::Complete((Element::Scalar(reply), head)));
    match ty {
        b'+' => scalar(Reply::Simple(line)),
        b'-' => scalar(Reply::Error(ServerError::new(line))),
        b':' => scalar(Reply::Integer(integer(line)?)),
        #[cfg(feature = "resp3")]
        b'_' => {
            if !line.is_empty() {
                return Err(ParseError::InvalidNull);
            }
            scalar(Reply::Nil)
        }
        #[cfg(feature = "resp3")]
        b'#' => match line {
            b"t" => scalar(Reply::Boolean(true)),
            b"f" => scalar(Reply::Boolean(false)),
            _ => Err(ParseError::InvalidBoolean),
        },
        #[cfg(feature = "resp3")]
        b',' => {
            if !is_double(line) {
                return Err(ParseError::InvalidDouble);
            }
            scalar(Reply::Double(line))
        }
        #[cfg(feature = "resp3")]
        b'(' => {
            let digits = line.strip_prefix(b"-").unwrap_or(line);
            if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                return Err(ParseError::InvalidBigNumber);
            }
            scalar(Reply::BigNumber(line))
        }
        // Types with a length: `$ *`, and with RESP3 `! = % ~ > |`.
        _ => {
            if line == b"-1" && (ty == b'$' || ty == b'*') {
                return scalar(Reply::Nil);
            }
            let bulk = is_bulk(ty);
            let (max, too_long) = if bulk {
                (limits.max_bulk_len, ParseError::BulkTooLong)
            } else {
                (limits.max_aggregate_len, ParseError::AggregateTooLong)
            };
            let n = length(line, max, too_long)?;
            if bulk {
                let used = n
                    .checked_add(head.saturating_add(2))
                    .ok_or(ParseError::BulkTooLong)?;
                fits(used)?;
                // `n` bytes followed by CRLF.
                let data_end = head.saturating_add(n);
                let (Some(data), Some(after)) = (input.get(head..data_end), input.get(data_end..))
                else {
                    return Ok(Status::Incomplete);
                };
                match after {
                    [b'\r', b'\n', ..] => {}
                    [] | [b'\r'] => return Ok(Status::Incomplete),
                    _ => return Err(ParseError::MissingCrlf),
                }
                let reply = match ty {
                    #[cfg(feature = "resp3")]
                    b'!' => Reply::Error(ServerError::new(data)),
                    #[cfg(feature = "resp3")]
                    b'=' => match (data.get(..3), data.get(3), data.get(4..)) {
                        (Some(format), Some(b':'), Some(text)) => Reply::Verbatim { format, text },
                        _ => return Err(ParseError::InvalidVerbatim),
                    },
                    _ => Reply::Bulk(data),
                };
                return Ok(Status::Complete((Element::Scalar(reply), used)));
            }
            let element = match ty {
                #[cfg(feature = "resp3")]
                b'~' => Element::Open {
                    kind: AggregateKind::Set,
                    count: n,
                },
                #[cfg(feature = "resp3")]
                b'>' => Element::Open {
                    kind: AggregateKind::Push,
                    count: n,
                },
                #[cfg(feature = "resp3")]
                b'%' => Element::Open {
                    kind: AggregateKind::Map,
                    count: n.checked_mul(2).ok_or(ParseError::AggregateTooLong)?,
                },
                #[cfg(feature = "resp3")]
                b'|' => Element::Attribute {
                    count: n.checked_mul(2).ok_or(ParseError::AggregateTooLong)?,
                },
                _ => Element::Open {
                    kind: AggregateKind::Array,
                    count: n,
                },
            };
            Ok(Status::Complete((element, head)))
        }
    }
}

/// The type bytes the parser accepts: RESP2's, and RESP3's with the `resp3`
/// feature.
#[cfg_attr(not(target_os = "none"), inline(always))]
fn is_type(ty: u8) -> bool {
    match ty {
        b'+' | b'-' | b':' | b'$' | b'*' => true,
        #[cfg(feature = "resp3")]
        b'_' | b'#' | b',' | b'(' | b'!' | b'=' | b'%' | b'~' | b'>' | b'|' => true,
        _ => false,
    }
}

/// The type bytes of a length-prefixed string: `$`, and RESP3's bulk error
/// `!` and verbatim string `=` with the `resp3` feature.
#[cfg_attr(not(target_os = "none"), inline(always))]
fn is_bulk(ty: u8) -> bool {
    match ty {
        b'$' => true,
        #[cfg(feature = "resp3")]
        b'!' | b'=' => true,
        _ => false,
    }
}

/// A line ending in CRLF, at most `max` bytes before the CRLF. Returns the
/// line and the bytes used including the CRLF. One pass: the first CR or LF
/// must be the start of the CRLF.
// Speed on hosted targets; size on bare metal (`target_os = "none"`).
#[cfg_attr(not(target_os = "none"), inline(always))]
fn line(input: &[u8], max: usize) -> Result<Status<(&[u8], usize)>, ParseError> {
    for (i, &b) in input.iter().enumerate() {
        if b == b'\r' || b == b'\n' {
            let content = input.get(..i).unwrap_or_default();
            return match (b, input.get(i.saturating_add(1))) {
                (b'\r', Some(b'\n')) => Ok(Status::Complete((content, i.saturating_add(2)))),
                // A CR that ends the input may be waiting for its LF.
                (b'\r', None) => Ok(Status::Incomplete),
                _ => Err(ParseError::InvalidLine),
            };
        }
        // More than `max` bytes before any CR or LF.
        if i >= max {
            return Err(ParseError::LineTooLong);
        }
    }
    Ok(Status::Incomplete)
}

/// A length header: a plain decimal with no sign and no leading zero, at most `max`.
fn length(line: &[u8], max: usize, too_long: ParseError) -> Result<usize, ParseError> {
    match line {
        [] => return Err(ParseError::InvalidLength),
        [b'?'] => return Err(ParseError::Streamed),
        [b'0', _, ..] => return Err(ParseError::InvalidLength),
        _ => {}
    }
    let mut n: usize = 0;
    for &b in line {
        if !b.is_ascii_digit() {
            return Err(ParseError::InvalidLength);
        }
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(usize::from(b.wrapping_sub(b'0'))))
            .ok_or(too_long)?;
    }
    if n > max {
        return Err(too_long);
    }
    Ok(n)
}

/// An `i64` in plain decimal: optional `-`, no `+`, no leading zero, no `-0`.
fn integer(line: &[u8]) -> Result<i64, ParseError> {
    let (negative, digits) = match line.split_first() {
        Some((b'-', d)) => (true, d),
        _ => (false, line),
    };
    match digits {
        [] => return Err(ParseError::InvalidInteger),
        [b'0'] if negative => return Err(ParseError::InvalidInteger),
        [b'0', _, ..] => return Err(ParseError::InvalidInteger),
        _ => {}
    }
    let mut n: i64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return Err(ParseError::InvalidInteger);
        }
        let d = i64::from(b.wrapping_sub(b'0'));
        // Accumulate negatively so that i64::MIN parses.
        n = n
            .checked_mul(10)
            .and_then(|n| {
                if negative {
                    n.checked_sub(d)
                } else {
                    n.checked_add(d)
                }
            })
            .ok_or(ParseError::InvalidInteger)?;
    }
    Ok(n)
}

/// A RESP3 double: a decimal number, `inf`, `-inf` or `nan`.
#[cfg(feature = "resp3")]
fn is_double(line: &[u8]) -> bool {
    match line {
        b"inf" | b"-inf" | b"nan" => true,
        [] => false,
        _ => {
            line.iter().any(u8::is_ascii_digit)
                && line
                    .iter()
                    .all(|&b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'))
        }
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)] // tests may index
mod tests {
    use super::*;

    #[test]
    fn integer_edges() {
        assert_eq!(integer(b"0"), Ok(0));
        assert_eq!(integer(b"-1"), Ok(-1));
        assert_eq!(integer(b"9223372036854775807"), Ok(i64::MAX));
        assert_eq!(integer(b"-9223372036854775808"), Ok(i64::MIN));
        for bad in [
            &b"9223372036854775808"[..],
            b"-0",
            b"01",
            b"+1",
            b"",
            b"-",
            b"1 ",
            b"12a",
        ] {
            assert_eq!(integer(bad), Err(ParseError::InvalidInteger), "{bad:?}");
        }
    }

    #[test]
    fn length_edges() {
        let e = ParseError::BulkTooLong;
        assert_eq!(length(b"0", 10, e), Ok(0));
        assert_eq!(length(b"10", 10, e), Ok(10));
        assert_eq!(length(b"11", 10, e), Err(e));
        assert_eq!(length(b"99999999999999999999999", usize::MAX, e), Err(e));
        for bad in [&b"-1"[..], b"-2", b"+1", b"01", b" 1", b"", b"1a"] {
            assert_eq!(
                length(bad, 10, e),
                Err(ParseError::InvalidLength),
                "{bad:?}"
            );
        }
        assert_eq!(length(b"?", 10, e), Err(ParseError::Streamed));
    }
}
