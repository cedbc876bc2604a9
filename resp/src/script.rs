//! The Lua scripts a lock client sends, with their SHA1 digests for `EVALSHA`.

/// A Lua script and the lowercase hex SHA1 of its source, as `SCRIPT LOAD`
/// returns it and `EVALSHA` expects it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Script {
    /// The Lua source.
    pub source: &'static str,
    /// The SHA1 of `source`, 40 lowercase hex characters.
    pub sha1: &'static str,
}

/// R3: delete the key only if it still holds our token.
/// `KEYS[1]` = resource, `ARGV[1]` = token. Returns 1 if deleted, else 0.
pub const RELEASE: Script = Script {
    source: "if redis.call(\"get\",KEYS[1]) == ARGV[1] then return redis.call(\"del\",KEYS[1]) else return 0 end",
    sha1: "b70c2384248f88e6b75b9f89241a180f856ad852",
};

/// R4: set a new expiry only if the key still holds our token (never
/// re-creates a missing key). `KEYS[1]` = resource, `ARGV[1]` = token,
/// `ARGV[2]` = new ttl in milliseconds. Returns 1 if extended, else 0.
pub const EXTEND: Script = Script {
    source: "if redis.call(\"get\",KEYS[1]) == ARGV[1] then return redis.call(\"pexpire\",KEYS[1],ARGV[2]) else return 0 end",
    sha1: "36e94d1c6e02fcefaa7ee5d79eee614dbac55f10",
};
