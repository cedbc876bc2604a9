//! R2: lock tokens: 20 bytes from a cryptographically secure RNG, sent as 40
//! lowercase hex characters.

use rand_core::TryCryptoRng;

/// Length of a token in bytes on the wire (hex text).
pub const TOKEN_LEN: usize = 40;

/// A lock token: 40 lowercase hex characters made from 20 random bytes.
///
/// Never a clock value, never a counter: unique across all clients and all
/// requests with overwhelming probability (160 random bits).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Token {
    hex: [u8; TOKEN_LEN],
}

impl Token {
    /// Draws a token from `rng`. An RNG failure is returned, never papered
    /// over with a weaker source.
    pub fn generate<R: TryCryptoRng + ?Sized>(rng: &mut R) -> Result<Token, R::Error> {
        let mut raw = [0u8; TOKEN_LEN / 2];
        rng.try_fill_bytes(&mut raw)?;
        Ok(Token::from_random_bytes(raw))
    }

    /// The token for 20 given random bytes.
    pub fn from_random_bytes(raw: [u8; TOKEN_LEN / 2]) -> Token {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut hex = [0u8; TOKEN_LEN];
        for (pair, byte) in hex.chunks_exact_mut(2).zip(raw) {
            let digit = |n: u8| DIGITS.get(usize::from(n)).copied().unwrap_or(b'0');
            if let [hi, lo] = pair {
                *hi = digit(byte >> 4);
                *lo = digit(byte & 0x0f);
            }
        }
        Token { hex }
    }

    /// The 40 hex characters, as sent to the servers.
    pub fn as_bytes(&self) -> &[u8] {
        &self.hex
    }

    /// The 40 hex characters as text.
    pub fn as_str(&self) -> &str {
        // Only ASCII hex digits are ever stored.
        core::str::from_utf8(&self.hex).unwrap_or_default()
    }
}

impl core::fmt::Debug for Token {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Token({})", self.as_str())
    }
}

impl core::fmt::Display for Token {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}
