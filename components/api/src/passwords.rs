//! Password hashing with argon2id (the crate's default parameters: 19 MiB, 2 passes).

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use domain::validate::JsonBody;
use domain::validate::body::{FieldKind, Secret};
use domain::{ApiError, ids};
use serde_json::{Value, json};

pub const MIN_LENGTH: usize = 8;
pub const MAX_LENGTH: usize = 128;

/// A new password: taken as sent, of `MIN_LENGTH` to `MAX_LENGTH` characters.
pub struct NewPassword;

impl FieldKind for NewPassword {
    type Value = String;
    const REQUIRED: bool = true;

    fn read(body: &mut JsonBody, name: &'static str) -> String {
        let password = Secret::<MAX_LENGTH>::read(body, name);
        if !body.has_errors_for(&[name])
            && let Some(problem) = weakness(&password)
        {
            body.error(name, problem);
        }
        password
    }

    fn schema() -> Value {
        json!({ "type": "string", "minLength": MIN_LENGTH, "maxLength": MAX_LENGTH })
    }
}

/// What is wrong with a new password, if anything.
pub fn weakness(password: &str) -> Option<String> {
    let len = password.chars().count();
    if len < MIN_LENGTH {
        Some(format!("must be at least {MIN_LENGTH} characters"))
    } else if len > MAX_LENGTH {
        Some(format!("must be at most {MAX_LENGTH} characters"))
    } else {
        None
    }
}

pub fn hash(password: &str) -> Result<String, ApiError> {
    let salt = SaltString::encode_b64(&ids::random_bytes(16))
        .map_err(|e| ApiError::internal(format!("salt: {e}")))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| ApiError::internal(format!("password hashing failed: {e}")))
}

pub fn verify(password: &str, stored: &str) -> bool {
    PasswordHash::new(stored).is_ok_and(|h| {
        Argon2::default()
            .verify_password(password.as_bytes(), &h)
            .is_ok()
    })
}

/// A hash of a random password: verifying against it costs what a real check costs, so
/// a login for an unknown account takes as long as one with a wrong password.
pub fn decoy_hash() -> &'static str {
    "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$0VSEZx3qhE3mCx8kiqtUdXKDmVSHqM3O4/lX3yP9a3E"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_verify_and_are_argon2id() {
        let h = hash("correct horse").unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(verify("correct horse", &h));
        assert!(!verify("wrong horse", &h));
        assert!(!verify("anything", "not a hash"));
        assert!(PasswordHash::new(decoy_hash()).is_ok());
    }

    #[test]
    fn length_rules() {
        assert!(weakness("short").is_some());
        assert!(weakness("long enough").is_none());
        assert!(weakness(&"x".repeat(129)).is_some());
    }
}
