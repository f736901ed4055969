//! Tenants (SDK clients): registration and the look-ups that authenticate them; and the
//! messages of the public contact form, which the operator reads.
//!
//! The API key is stored only as its SHA-256 (and a short prefix to recognise it by); the
//! signing secret is kept because request signatures are verified with it.

use super::{Db, Row};
use domain::ApiError;
use domain::ids;
use domain::media::Ladder;
use domain::time;

/// The SDK client (tenant) a request proved itself as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant {
    pub client_id: String,
    pub name: String,
    pub secret_key: String,
    pub require_signature: bool,
    /// The operator suspended the client: its credentials stop working and its streams
    /// may not publish.
    pub suspended: bool,
}

pub(crate) fn tenant_of(row: &Row) -> Tenant {
    Tenant {
        client_id: row.text("client_id"),
        name: row.text("name"),
        secret_key: row.text("secret_key"),
        require_signature: row.bool("require_signature"),
        suspended: row.opt_int("suspended_at").is_some(),
    }
}

/// What a registering client tells about itself.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Registration {
    pub name: String,
    pub website: Option<String>,
    pub description: Option<String>,
    pub contact_name: Option<String>,
    pub contact_title: Option<String>,
    pub contact_email: String,
    pub contact_phone: Option<String>,
    pub expected_apps: Option<String>,
    pub use_case: Option<String>,
    pub expected_users: Option<String>,
    pub agree_terms: bool,
    pub agree_marketing: bool,
    pub agree_data_processing: bool,
    pub require_signature: bool,
}

/// A new client's credentials as stored: the API key's SHA-256 and prefix, and the secret.
#[derive(Debug, Clone)]
pub struct StoredCredentials {
    pub api_key_hash: String,
    pub api_key_prefix: String,
    pub secret_key: String,
}

/// Registers a client; answers its client id.
pub fn insert(
    db: &Db,
    reg: &Registration,
    credentials: &StoredCredentials,
    now: i64,
) -> Result<String, ApiError> {
    let client_id = ids::uuid();
    db.execute(
        "INSERT INTO sdk_clients (client_id, name, website, description, contact_name, \
         contact_title, contact_email, contact_phone, expected_apps, use_case, expected_users, \
         agree_terms, agree_marketing, agree_data_processing, require_signature, api_key_hash, \
         api_key_prefix, secret_key, created_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        &[
            client_id.clone().into(),
            reg.name.clone().into(),
            reg.website.clone().into(),
            reg.description.clone().into(),
            reg.contact_name.clone().into(),
            reg.contact_title.clone().into(),
            reg.contact_email.clone().into(),
            reg.contact_phone.clone().into(),
            reg.expected_apps.clone().into(),
            reg.use_case.clone().into(),
            reg.expected_users.clone().into(),
            reg.agree_terms.into(),
            reg.agree_marketing.into(),
            reg.agree_data_processing.into(),
            reg.require_signature.into(),
            credentials.api_key_hash.clone().into(),
            credentials.api_key_prefix.clone().into(),
            credentials.secret_key.clone().into(),
            time::format_rfc3339(now).into(),
        ],
    )?;
    Ok(client_id)
}

/// The client whose API key hashes (SHA-256, hex) to `api_key_hash`.
pub fn by_api_key_hash(db: &Db, api_key_hash: &str) -> Result<Option<Tenant>, ApiError> {
    Ok(db
        .query_one(
            "SELECT client_id, name, secret_key, require_signature, suspended_at FROM sdk_clients WHERE api_key_hash = ?",
            &[api_key_hash.into()],
        )?
        .as_ref()
        .map(tenant_of))
}

/// The client `client_id`.
pub fn by_id(db: &Db, client_id: &str) -> Result<Option<Tenant>, ApiError> {
    Ok(db
        .query_one(
            "SELECT client_id, name, secret_key, require_signature, suspended_at FROM sdk_clients WHERE client_id = ?",
            &[client_id.into()],
        )?
        .as_ref()
        .map(tenant_of))
}

/// Whether the client's broadcasts get an adaptive ladder unless one says otherwise.
pub fn media_ladder(db: &Db, client_id: &str) -> Result<Ladder, ApiError> {
    Ok(db
        .query_one(
            "SELECT media_ladder FROM sdk_clients WHERE client_id = ?",
            &[client_id.into()],
        )?
        .and_then(|row| Ladder::parse(&row.text("media_ladder")))
        .unwrap_or_default())
}

/// Sets the client's ladder for its broadcasts that do not choose one.
pub fn set_media_ladder(db: &Db, client_id: &str, ladder: Ladder) -> Result<(), ApiError> {
    db.execute(
        "UPDATE sdk_clients SET media_ladder = ? WHERE client_id = ?",
        &[ladder.as_str().into(), client_id.into()],
    )
}

/// Takes the client's row lock for the rest of the transaction (on SQLite the write lock
/// is already held), so that a per-tenant cap is counted and filled one request at a time.
pub fn lock(db: &Db, client_id: &str) -> Result<(), ApiError> {
    db.execute(
        "UPDATE sdk_clients SET client_id = client_id WHERE client_id = ?",
        &[client_id.into()],
    )
}

/// Suspends the client (`at` the time) or, with `None`, reinstates it: answers whether
/// such a client exists.
pub fn set_suspended(db: &Db, client_id: &str, at: Option<i64>) -> Result<bool, ApiError> {
    Ok(!db
        .query(
            "UPDATE sdk_clients SET suspended_at = ? WHERE client_id = ? RETURNING client_id",
            &[at.into(), client_id.into()],
        )?
        .is_empty())
}

/// A message from the public contact form.
#[derive(Debug, Clone)]
pub struct ContactMessage {
    pub name: String,
    pub email: String,
    pub message: String,
    /// The sender's IP address.
    pub client_addr: String,
}

/// Keeps a contact-form message; answers its id.
pub fn insert_contact_message(
    db: &Db,
    message: &ContactMessage,
    now: i64,
) -> Result<String, ApiError> {
    let id = ids::uuid();
    db.execute(
        "INSERT INTO contact_messages (id, name, email, message, client_addr, created_at) VALUES (?, ?, ?, ?, ?, ?)",
        &[
            id.clone().into(),
            message.name.clone().into(),
            message.email.clone().into(),
            message.message.clone().into(),
            message.client_addr.clone().into(),
            time::format_rfc3339(now).into(),
        ],
    )?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use domain::ids::sha256_hex;

    fn register(db: &Db, name: &str, key: &str, signed: bool) -> String {
        let reg = Registration {
            name: name.into(),
            contact_email: "dev@acme.io".into(),
            website: Some("https://acme.io".into()),
            agree_terms: true,
            agree_data_processing: true,
            require_signature: signed,
            ..Registration::default()
        };
        let credentials = StoredCredentials {
            api_key_hash: sha256_hex(key.as_bytes()),
            api_key_prefix: key[..7].to_string(),
            secret_key: format!("sk_{name}"),
        };
        insert(db, &reg, &credentials, 1_800_000_000).unwrap()
    }

    #[test]
    fn the_media_ladder_is_adaptive_until_the_client_sets_it() {
        let db = testing::db();
        let acme = register(&db, "Acme", "pk_acme_key", false);
        let zed = register(&db, "Zed", "pk_zed_key", false);
        assert_eq!(media_ladder(&db, &acme).unwrap(), Ladder::Adaptive);
        set_media_ladder(&db, &acme, Ladder::Passthrough).unwrap();
        assert_eq!(media_ladder(&db, &acme).unwrap(), Ladder::Passthrough);
        assert_eq!(media_ladder(&db, &zed).unwrap(), Ladder::Adaptive);
    }

    #[test]
    fn clients_are_found_by_key_hash_and_id() {
        let db = testing::db();
        let acme = register(&db, "Acme", "pk_acme_key", true);
        let zed = register(&db, "Zed", "pk_zed_key", false);
        assert_ne!(acme, zed);
        let found = by_api_key_hash(&db, &sha256_hex(b"pk_acme_key"))
            .unwrap()
            .unwrap();
        assert_eq!(
            found,
            Tenant {
                client_id: acme.clone(),
                name: "Acme".into(),
                secret_key: "sk_Acme".into(),
                require_signature: true,
                suspended: false,
            }
        );
        assert_eq!(by_id(&db, &zed).unwrap().unwrap().name, "Zed");
        assert!(!by_id(&db, &zed).unwrap().unwrap().require_signature);
        // The key itself (not its hash) finds nothing, nor does an unknown id.
        assert_eq!(by_api_key_hash(&db, "pk_acme_key").unwrap(), None);
        assert_eq!(by_id(&db, "nobody").unwrap(), None);
    }

    #[test]
    fn clients_are_suspended_and_reinstated() {
        let db = testing::db();
        let acme = register(&db, "Acme", "pk_acme_key", false);
        assert!(set_suspended(&db, &acme, Some(5)).unwrap());
        assert!(by_id(&db, &acme).unwrap().unwrap().suspended);
        let by_key = by_api_key_hash(&db, &sha256_hex(b"pk_acme_key"))
            .unwrap()
            .unwrap();
        assert!(by_key.suspended);
        assert!(set_suspended(&db, &acme, None).unwrap());
        assert!(!by_id(&db, &acme).unwrap().unwrap().suspended);
        assert!(!set_suspended(&db, "nobody", Some(5)).unwrap());
    }

    #[test]
    fn the_api_key_hash_is_unique() {
        let db = testing::db();
        register(&db, "Acme", "pk_same_key", false);
        let reg = Registration {
            name: "Copy".into(),
            contact_email: "x@y.io".into(),
            ..Registration::default()
        };
        let credentials = StoredCredentials {
            api_key_hash: sha256_hex(b"pk_same_key"),
            api_key_prefix: "pk_same".into(),
            secret_key: "sk".into(),
        };
        assert!(insert(&db, &reg, &credentials, 1).is_err());
    }

    #[test]
    fn contact_messages_are_kept() {
        let db = testing::db();
        let message = ContactMessage {
            name: "Ada".into(),
            email: "ada@x.io".into(),
            message: "Hello".into(),
            client_addr: "::1".into(),
        };
        let a = insert_contact_message(&db, &message, 10).unwrap();
        let b = insert_contact_message(&db, &message, 11).unwrap();
        assert_ne!(a, b);
        let stored = db
            .query(
                "SELECT name, client_addr, created_at FROM contact_messages WHERE id = ?",
                &[a.into()],
            )
            .unwrap();
        assert_eq!(stored[0].text("client_addr"), "::1");
        assert_eq!(stored[0].text("created_at"), time::format_rfc3339(10));
    }
}
