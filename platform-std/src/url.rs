//! Server addresses: `redis://[[user]:password@]host[:port][/db]`,
//! `rediss://...` (TLS, with the `tls` feature) or `host:port`.

use core::fmt;

/// The default Redis port.
pub const DEFAULT_PORT: u16 = 6379;

/// A password (any bytes) that never shows in `Debug` or `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl Secret {
    /// Wraps a password.
    pub fn new(s: impl Into<Vec<u8>>) -> Secret {
        Secret(s.into())
    }

    /// The password itself, for `AUTH` only.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Where a Redis master is and how to log in to it.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerUrl {
    /// Host name, IPv4 or IPv6 address (without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// ACL user name (`AUTH user password`); `None` for `AUTH password`.
    pub user: Option<String>,
    /// Password, if any.
    pub password: Option<Secret>,
    /// Database number for `SELECT` (0 by default).
    pub db: u32,
    /// TLS (`rediss://`): the connection is encrypted, and the server's
    /// certificate is checked against `host` (or the client's
    /// `tls_server_name`). Needs the `tls` feature.
    pub tls: bool,
}

impl ServerUrl {
    /// `host:port` (`[v6]:port`), and `/db` when not 0: how reports name
    /// the server. Never the user or password.
    pub fn address(&self) -> String {
        let mut s = if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        };
        if self.db != 0 {
            s.push_str(&format!("/{}", self.db));
        }
        s
    }
}

impl fmt::Debug for ServerUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for ServerUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.tls { "rediss://" } else { "redis://" })?;
        if let Some(user) = &self.user {
            f.write_str(user)?;
        }
        if self.password.is_some() {
            f.write_str(":***")?;
        }
        if self.user.is_some() || self.password.is_some() {
            f.write_str("@")?;
        }
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)?;
        } else {
            write!(f, "{}:{}", self.host, self.port)?;
        }
        if self.db != 0 {
            write!(f, "/{}", self.db)?;
        }
        Ok(())
    }
}

/// Why a server address could not be read. Never contains the password.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum UrlError {
    /// No host.
    MissingHost,
    /// The port is not a number from 1 to 65535.
    BadPort,
    /// The database is not a number.
    BadDb,
    /// A scheme other than `redis://` or `rediss://`.
    UnsupportedScheme,
    /// `rediss://` (TLS) in a build without the `tls` feature.
    TlsNotBuilt,
    /// An IPv6 address without its closing `]`.
    BadIpv6,
    /// A `%` escape that is not two hex digits (or, in a user name, that
    /// decodes to invalid UTF-8; a password may be any bytes).
    BadEscape,
}

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            UrlError::MissingHost => "no host in server address",
            UrlError::BadPort => "the port must be a number from 1 to 65535",
            UrlError::BadDb => "the database must be a number",
            UrlError::UnsupportedScheme => "only redis:// and rediss:// addresses are supported",
            UrlError::TlsNotBuilt => {
                "rediss:// (TLS) needs redlock-std built with its `tls` feature"
            }
            UrlError::BadIpv6 => "an IPv6 address needs its closing ']'",
            UrlError::BadEscape => "bad %-escape in the user or password",
        })
    }
}

impl core::error::Error for UrlError {}

fn percent_decode_bytes(s: &str) -> Result<Vec<u8>, UrlError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3).ok_or(UrlError::BadEscape)?;
            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(UrlError::BadEscape);
            }
            out.push(u8::from_str_radix(hex, 16).map_err(|_| UrlError::BadEscape)?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(out)
}

fn percent_decode(s: &str) -> Result<String, UrlError> {
    String::from_utf8(percent_decode_bytes(s)?).map_err(|_| UrlError::BadEscape)
}

impl core::str::FromStr for ServerUrl {
    type Err = UrlError;

    fn from_str(s: &str) -> Result<ServerUrl, UrlError> {
        let s = s.trim();
        let (rest, tls) = match s.split_once("://") {
            Some(("redis", rest)) => (rest, false),
            Some(("rediss", rest)) if cfg!(feature = "tls") => (rest, true),
            Some(("rediss", _)) => return Err(UrlError::TlsNotBuilt),
            Some(_) => return Err(UrlError::UnsupportedScheme),
            None => (s, false),
        };
        // The credentials end at the last '@' (a password may contain '@').
        let (creds, hostpart) = match rest.rfind('@') {
            Some(i) => (Some(&rest[..i]), &rest[i + 1..]),
            None => (None, rest),
        };
        let (user, password) = match creds {
            None => (None, None),
            Some(c) => match c.split_once(':') {
                Some((u, p)) => {
                    let u = percent_decode(u)?;
                    (
                        if u.is_empty() { None } else { Some(u) },
                        Some(Secret(percent_decode_bytes(p)?)),
                    )
                }
                // `redis://password@host` is not standard; treat it as a password, like redis-cli.
                None => (None, Some(Secret(percent_decode_bytes(c)?))),
            },
        };
        let (hostport, db) = match hostpart.split_once('/') {
            Some((hp, "")) => (hp, 0),
            Some((hp, db)) => (hp, db.parse().map_err(|_| UrlError::BadDb)?),
            None => (hostpart, 0),
        };
        let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
            let (host, after) = v6.split_once(']').ok_or(UrlError::BadIpv6)?;
            match after.strip_prefix(':') {
                Some(p) => (host, p),
                None if after.is_empty() => (host, ""),
                None => return Err(UrlError::BadIpv6),
            }
        } else {
            match hostport.rsplit_once(':') {
                // A bare IPv6 address without brackets has several colons.
                Some((h, _)) if h.contains(':') => (hostport, ""),
                Some((h, p)) => (h, p),
                None => (hostport, ""),
            }
        };
        if host.is_empty() {
            return Err(UrlError::MissingHost);
        }
        let port = match port {
            "" => DEFAULT_PORT,
            p => match p.parse::<u16>() {
                Ok(0) | Err(_) => return Err(UrlError::BadPort),
                Ok(p) => p,
            },
        };
        Ok(ServerUrl {
            host: host.to_string(),
            port,
            user,
            password,
            db,
            tls,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> ServerUrl {
        s.parse().unwrap()
    }

    #[test]
    fn forms() {
        let u = url("redis://127.0.0.1:7000");
        assert_eq!(
            (
                u.host.as_str(),
                u.port,
                u.user.as_deref(),
                u.password.is_none(),
                u.db
            ),
            ("127.0.0.1", 7000, None, true, 0)
        );
        let u = url("localhost:6380");
        assert_eq!((u.host.as_str(), u.port), ("localhost", 6380));
        let u = url("redis://example.com");
        assert_eq!((u.host.as_str(), u.port), ("example.com", 6379));
        let u = url("redis://:s3cret@h:1/2");
        assert_eq!(
            (u.user, u.password.as_ref().map(Secret::expose), u.db),
            (None, Some(&b"s3cret"[..]), 2)
        );
        let u = url("redis://locker:p%40ss:w@rd@h/15");
        assert_eq!(
            (
                u.user.as_deref(),
                u.password.as_ref().map(Secret::expose),
                u.db
            ),
            (Some("locker"), Some(&b"p@ss:w@rd"[..]), 15)
        );
        let u = url("redis://[::1]:7001/3");
        assert_eq!((u.host.as_str(), u.port, u.db), ("::1", 7001, 3));
        let u = url("[fe80::1]");
        assert_eq!((u.host.as_str(), u.port), ("fe80::1", 6379));
        let u = url("::1");
        assert_eq!((u.host.as_str(), u.port), ("::1", 6379));
        let u = url("redis://h:1/");
        assert_eq!((u.db, u.tls), (0, false));
    }

    #[cfg(feature = "tls")]
    #[test]
    fn tls_forms() {
        let u = url("rediss://user:pw@cache.example:6380/2");
        assert_eq!(
            (u.host.as_str(), u.port, u.db, u.tls, u.user.as_deref()),
            ("cache.example", 6380, 2, true, Some("user"))
        );
        assert_eq!(u.to_string(), "rediss://user:***@cache.example:6380/2");
        assert!(url("rediss://[::1]").tls);
        assert!(!url("h:1").tls);
    }

    #[test]
    fn errors() {
        for (s, e) in [
            ("redis://", UrlError::MissingHost),
            (":6379", UrlError::MissingHost),
            ("h:0", UrlError::BadPort),
            ("h:65536", UrlError::BadPort),
            ("h:x", UrlError::BadPort),
            ("redis://h/x", UrlError::BadDb),
            #[cfg(not(feature = "tls"))]
            ("rediss://h", UrlError::TlsNotBuilt),
            ("http://h", UrlError::UnsupportedScheme),
            ("[::1", UrlError::BadIpv6),
            ("[::1]x", UrlError::BadIpv6),
            ("redis://u:%zz@h", UrlError::BadEscape),
        ] {
            assert_eq!(s.parse::<ServerUrl>(), Err(e.clone()), "{s}");
            assert!(!e.to_string().is_empty());
        }
    }

    #[test]
    fn passwords_never_show() {
        let u = url("redis://user:hunter2@h:1/4");
        for shown in [
            format!("{u}"),
            format!("{u:?}"),
            format!("{:?}", u.password),
            format!("{:#?}", u),
        ] {
            assert!(!shown.contains("hunter2"), "{shown}");
        }
        assert_eq!(u.to_string(), "redis://user:***@h:1/4");
        assert_eq!(url("[::1]:5").to_string(), "redis://[::1]:5");
        // Errors about a URL never repeat it.
        let e = "redis://u:hunter2@h:0".parse::<ServerUrl>().unwrap_err();
        assert!(!format!("{e} {e:?}").contains("hunter2"));
    }
}
