//! Music tokens at rest: sealed with the platform key (`domain::sealed`, purpose
//! `MusicToken`) before they reach the database, bound to their row (tenant and user).

use domain::ApiError;
pub use domain::sealed::SealingKey as TokenKey;
use domain::sealed::{Purpose, SealingKey};

/// The key that seals music tokens, from the `music_token_key` variable.
pub fn token_key(secret: &str) -> Result<TokenKey, ApiError> {
    SealingKey::derive(secret, Purpose::MusicToken, "music_token_key")
}

/// The associated data that ties a sealed token to its row.
pub fn row_context(client_id: &str, user_id: &str) -> String {
    format!("music_links:{client_id}:{user_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_opens_only_for_its_own_row() {
        let key = token_key("0123456789abcdef0123456789abcdef").unwrap();
        let sealed = key.seal("t", &row_context("a", "u")).unwrap();
        assert_eq!(
            key.open(&sealed, &row_context("a", "u")).as_deref(),
            Some("t")
        );
        assert_eq!(key.open(&sealed, &row_context("b", "u")), None);
    }
}
