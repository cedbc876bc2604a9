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

/// F1, first step: `SET key token NX PX ttl`, and the resource's fence
/// counter whether or not the key was set: an array of 1 (set) or 0 (held by
/// another token) and the counter as a bulk string, or nil when the server
/// has no counter (a new resource, or a server that lost its data).
/// `KEYS[1]` = resource, `KEYS[2]` = counter key, `ARGV[1]` = token,
/// `ARGV[2]` = ttl in milliseconds.
pub const FENCED_ACQUIRE: Script = Script {
    source: "local c = redis.call(\"get\",KEYS[2]) if redis.call(\"set\",KEYS[1],ARGV[1],\"NX\",\"PX\",ARGV[2]) then return {1, c} else return {0, c} end",
    sha1: "b907b7078e9cd886e91e22647f037f38b632ab32",
};

/// F1, second step: raise the fence counter to `ARGV[2]` **only if the lock
/// key still holds our token** (an unconditional write would let an expired
/// holder hand out a duplicate). Returns 1 if the key is ours (the counter is
/// then at least `ARGV[2]`), else 0. `KEYS[1]` = resource, `KEYS[2]` =
/// counter key, `ARGV[1]` = token, `ARGV[2]` = the new fence token.
pub const FENCE_WRITE: Script = Script {
    source: "if redis.call(\"get\",KEYS[1]) == ARGV[1] then if tonumber(redis.call(\"get\",KEYS[2]) or \"0\") < tonumber(ARGV[2]) then redis.call(\"set\",KEYS[2],ARGV[2]) end return 1 else return 0 end",
    sha1: "329131dd742514c223b8d826d264e8fde090a5fd",
};

/// F3: the lock key's value and remaining time, read atomically: an array of
/// the value (nil when absent) and `PTTL` (-2 when absent, -1 without expiry).
/// `KEYS[1]` = resource.
pub const INSPECT: Script = Script {
    source: "return {redis.call(\"get\",KEYS[1]), redis.call(\"pttl\",KEYS[1])}",
    sha1: "50501c20c10031c8b157e09cce48874a16b54501",
};

/// Every script the lock operations use: a connection's handshake loads
/// each of them (`SCRIPT LOAD`), so that `EVALSHA` finds them.
pub const ALL: [Script; 5] = [RELEASE, EXTEND, FENCED_ACQUIRE, FENCE_WRITE, INSPECT];

/// F1 repair, an operator's action: raise the fence counter to at least
/// `ARGV[1]`, never lowering it, whoever holds the lock; returns the counter
/// afterwards. After servers restarted without persistence and lost their
/// counters, the operator gives the highest fence the protected resource has
/// accepted, so that every later token is larger. Rare, so not in [`ALL`]:
/// it is sent with `EVAL`. `KEYS[1]` = counter key, `ARGV[1]` = the floor.
pub const FENCE_RAISE: Script = Script {
    source: "local c = tonumber(redis.call(\"get\",KEYS[1]) or \"0\") if c == nil then return redis.error_reply(\"ERR the fence counter is not a number\") end if c < tonumber(ARGV[1]) then redis.call(\"set\",KEYS[1],ARGV[1]) end return redis.call(\"get\",KEYS[1])",
    sha1: "02f7deee4e6c94c3b34b8fc055130cf23c6a60e5",
};
