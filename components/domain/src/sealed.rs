//! Secrets at rest (music tokens, webhook signing secrets): sealed with AES-256-GCM under
//! the platform key before they reach the database.
//!
//! The key is the SHA-256 of a purpose label and the platform key variable (any string of
//! at least [`MIN_SECRET_LEN`] characters; `edgehost` generates a random one locally), so
//! each kind of secret has its own key. Every value gets a fresh 96-bit nonce, and the row
//! it belongs to is bound in as associated data, so a sealed value copied into another
//! row does not open. Stored form: `v1.<nonce hex>.<ciphertext and tag hex>`.

use crate::ApiError;
use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use sha2::{Digest, Sha256};

/// Shortest accepted platform key.
pub const MIN_SECRET_LEN: usize = 32;

const VERSION: &str = "v1";
const NONCE_LEN: usize = 12;

/// What a key seals; each purpose derives its own AES key from the platform key.
#[derive(Debug, Clone, Copy)]
pub enum Purpose {
    /// Music-platform tokens (the label predates this module: sealed tokens stay readable).
    MusicToken,
    /// Webhook endpoints' signing secrets.
    WebhookSecret,
    /// Restream targets' destinations (server URL and stream key).
    RestreamDestination,
}

impl Purpose {
    fn label(self) -> &'static [u8] {
        match self {
            Purpose::MusicToken => b"music-token-key/v1:",
            Purpose::WebhookSecret => b"webhook-secret-key/v1:",
            Purpose::RestreamDestination => b"restream-destination-key/v1:",
        }
    }
}

pub struct SealingKey {
    cipher: Aes256Gcm,
}

impl SealingKey {
    /// The key for `purpose` derived from the platform key `secret` (whose variable is
    /// named `variable` in the error); a short secret is refused.
    pub fn derive(secret: &str, purpose: Purpose, variable: &str) -> Result<Self, ApiError> {
        if secret.chars().count() < MIN_SECRET_LEN {
            return Err(ApiError::unavailable(
                "not_configured",
                format!(
                    "the server variable {variable} must be at least {MIN_SECRET_LEN} characters"
                ),
            ));
        }
        let mut hasher = Sha256::new();
        hasher.update(purpose.label());
        hasher.update(secret.as_bytes());
        let key = hasher.finalize();
        let cipher = Aes256Gcm::new_from_slice(&key)
            .map_err(|_| ApiError::internal("the sealing key has the wrong length"))?;
        Ok(Self { cipher })
    }

    /// Seals `value` for the row named by `context`.
    pub fn seal(&self, value: &str, context: &str) -> Result<String, ApiError> {
        let nonce = crate::ids::random_bytes(NONCE_LEN);
        let sealed = self
            .cipher
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: value.as_bytes(),
                    aad: context.as_bytes(),
                },
            )
            .map_err(|_| ApiError::internal("could not seal the secret"))?;
        Ok(format!(
            "{VERSION}.{}.{}",
            hex::encode(nonce),
            hex::encode(sealed)
        ))
    }

    /// Opens a sealed value; `None` when it was sealed under another key or row, or is not
    /// in the stored form.
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

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "0123456789abcdef0123456789abcdef";

    fn key(purpose: Purpose) -> SealingKey {
        SealingKey::derive(SECRET, purpose, "platform_key").unwrap()
    }

    #[test]
    fn seals_and_opens_for_the_same_row_only() {
        let key = key(Purpose::MusicToken);
        let sealed = key.seal("music-token-123", "row-a").unwrap();
        assert!(sealed.starts_with("v1."));
        assert!(!sealed.contains("music-token-123"));
        assert_eq!(
            key.open(&sealed, "row-a").as_deref(),
            Some("music-token-123")
        );
        // Another row, another key, or a tampered value: nothing.
        assert_eq!(key.open(&sealed, "row-b"), None);
        let other = SealingKey::derive(&format!("{SECRET}x"), Purpose::MusicToken, "k").unwrap();
        assert_eq!(other.open(&sealed, "row-a"), None);
        let mut tampered = sealed.clone();
        let last = tampered.pop().unwrap();
        tampered.push(if last == '0' { '1' } else { '0' });
        assert_eq!(key.open(&tampered, "row-a"), None);
        assert_eq!(key.open("music-token-123", "row-a"), None);
        assert_eq!(key.open("v1.zz.00", "row-a"), None);
    }

    #[test]
    fn each_purpose_has_its_own_key() {
        let sealed = key(Purpose::WebhookSecret).seal("whsec_x", "row").unwrap();
        assert_eq!(key(Purpose::MusicToken).open(&sealed, "row"), None);
        assert_eq!(
            key(Purpose::WebhookSecret).open(&sealed, "row").as_deref(),
            Some("whsec_x")
        );
    }

    #[test]
    fn music_tokens_sealed_before_the_move_still_open() {
        // Sealed by the music component's former module (same label, same key derivation).
        let mut hasher = Sha256::new();
        hasher.update(b"music-token-key/v1:");
        hasher.update(SECRET.as_bytes());
        let old = Aes256Gcm::new_from_slice(&hasher.finalize()).unwrap();
        let nonce = [7u8; NONCE_LEN];
        let data = old
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: b"old-token",
                    aad: b"music_links:t:u",
                },
            )
            .unwrap();
        let stored = format!("v1.{}.{}", hex::encode(nonce), hex::encode(data));
        assert_eq!(
            key(Purpose::MusicToken)
                .open(&stored, "music_links:t:u")
                .as_deref(),
            Some("old-token")
        );
    }

    #[test]
    fn every_seal_uses_a_fresh_nonce() {
        let key = key(Purpose::WebhookSecret);
        assert_ne!(
            key.seal("same", "r").unwrap(),
            key.seal("same", "r").unwrap()
        );
    }

    #[test]
    fn short_secrets_are_refused() {
        let err = SealingKey::derive("too short", Purpose::MusicToken, "music_token_key")
            .err()
            .unwrap();
        assert_eq!(err.status, 503);
        assert_eq!(err.code, "not_configured");
        assert!(err.detail.contains("music_token_key"));
    }
}
