//! Music tokens at rest: sealed with AES-256-GCM before they reach the database.
//!
//! The key is the SHA-256 of the `music_token_key` variable (any string of at least
//! [`MIN_SECRET_LEN`] characters; `edgehost` generates a random one locally). Every token
//! gets a fresh 96-bit nonce, and the row it belongs to (tenant and user) is bound in as
//! associated data, so a sealed token copied into another user's row does not open.
//! Stored form: `v1.<nonce hex>.<ciphertext and tag hex>`.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use common::ApiError;
use sha2::{Digest, Sha256};

/// Shortest accepted `music_token_key`.
pub const MIN_SECRET_LEN: usize = 32;

const VERSION: &str = "v1";
const NONCE_LEN: usize = 12;

pub struct TokenKey {
    cipher: Aes256Gcm,
}

impl TokenKey {
    /// The key derived from a secret; a short secret is refused.
    pub fn from_secret(secret: &str) -> Result<Self, ApiError> {
        if secret.chars().count() < MIN_SECRET_LEN {
            return Err(ApiError::unavailable(
                "not_configured",
                format!(
                    "the server variable music_token_key must be at least {MIN_SECRET_LEN} characters"
                ),
            ));
        }
        let mut hasher = Sha256::new();
        hasher.update(b"music-token-key/v1:");
        hasher.update(secret.as_bytes());
        let key = hasher.finalize();
        let cipher = Aes256Gcm::new_from_slice(&key)
            .map_err(|_| ApiError::internal("the music token key has the wrong length"))?;
        Ok(Self { cipher })
    }

    /// Seals `token` for the row named by `context`.
    pub fn seal(&self, token: &str, context: &str) -> Result<String, ApiError> {
        let nonce = common::ids::random_bytes(NONCE_LEN);
        let sealed = self
            .cipher
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: token.as_bytes(),
                    aad: context.as_bytes(),
                },
            )
            .map_err(|_| ApiError::internal("could not seal the music token"))?;
        Ok(format!(
            "{VERSION}.{}.{}",
            hex::encode(nonce),
            hex::encode(sealed)
        ))
    }

    /// Opens a sealed token; `None` when it was sealed under another key or row, or is
    /// not in the stored form.
    pub fn open(&self, sealed: &str, context: &str) -> Option<String> {
        let mut parts = sealed.split('.');
        let (Some(VERSION), Some(nonce), Some(data), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        let nonce = hex::decode(nonce).ok().filter(|n| n.len() == NONCE_LEN)?;
        let data = hex::decode(data).ok()?;
        let plain = self
            .cipher
            .decrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: &data,
                    aad: context.as_bytes(),
                },
            )
            .ok()?;
        String::from_utf8(plain).ok()
    }
}

/// The associated data that ties a sealed token to its row.
pub fn row_context(client_id: &str, user_id: &str) -> String {
    format!("music_links:{client_id}:{user_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn seals_and_opens_for_the_same_row_only() {
        let key = TokenKey::from_secret(SECRET).unwrap();
        let row = row_context("tenant-a", "user-1");
        let sealed = key.seal("music-token-123", &row).unwrap();
        assert!(sealed.starts_with("v1."));
        assert!(!sealed.contains("music-token-123"));
        assert_eq!(key.open(&sealed, &row).as_deref(), Some("music-token-123"));
        // Another row, another key, or a tampered value: nothing.
        assert_eq!(key.open(&sealed, &row_context("tenant-b", "user-1")), None);
        let other = TokenKey::from_secret(&format!("{SECRET}x")).unwrap();
        assert_eq!(other.open(&sealed, &row), None);
        let mut tampered = sealed.clone();
        let last = tampered.pop().unwrap();
        tampered.push(if last == '0' { '1' } else { '0' });
        assert_eq!(key.open(&tampered, &row), None);
        assert_eq!(key.open("music-token-123", &row), None);
        assert_eq!(key.open("v1.zz.00", &row), None);
    }

    #[test]
    fn every_seal_uses_a_fresh_nonce() {
        let key = TokenKey::from_secret(SECRET).unwrap();
        let row = row_context("t", "u");
        assert_ne!(
            key.seal("same", &row).unwrap(),
            key.seal("same", &row).unwrap()
        );
    }

    #[test]
    fn short_secrets_are_refused() {
        let err = TokenKey::from_secret("too short").err().unwrap();
        assert_eq!(err.status, 503);
        assert_eq!(err.code, "not_configured");
    }
}
