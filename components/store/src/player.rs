//! A tenant's player settings: the origins that may frame its embed page. The origins
//! come checked and normalised (`domain::player`); they are stored space-separated, in
//! order, on the tenant's row.

use crate::Db;
use domain::ApiError;

/// The origins that may frame `client_id`'s embed page (none when it has not set any).
pub fn embed_origins(db: &Db, client_id: &str) -> Result<Vec<String>, ApiError> {
    Ok(db
        .query_one(
            "SELECT player_embed_origins FROM sdk_clients WHERE client_id = ?",
            &[client_id.into()],
        )?
        .map(|row| {
            row.text("player_embed_origins")
                .split_whitespace()
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default())
}

/// Replaces `client_id`'s embed origins with `origins` (checked by
/// `domain::player::embed_origins`, so none holds a space).
pub fn set_embed_origins(db: &Db, client_id: &str, origins: &[String]) -> Result<(), ApiError> {
    debug_assert!(origins.iter().all(|o| !o.contains(char::is_whitespace)));
    db.execute(
        "UPDATE sdk_clients SET player_embed_origins = ? WHERE client_id = ?",
        &[origins.join(" ").into(), client_id.into()],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tenants::{self, Registration, StoredCredentials};
    use crate::testing;

    fn register(db: &Db, name: &str) -> String {
        let reg = Registration {
            name: name.into(),
            contact_email: "dev@acme.io".into(),
            agree_terms: true,
            agree_data_processing: true,
            ..Registration::default()
        };
        let credentials = StoredCredentials {
            api_key_hash: domain::ids::sha256_hex(name.as_bytes()),
            api_key_prefix: "pk_test".into(),
            secret_key: format!("sk_{name}"),
        };
        tenants::insert(db, &reg, &credentials, 1_800_000_000).unwrap()
    }

    #[test]
    fn each_tenant_has_its_own_origins() {
        let db = testing::db();
        let acme = register(&db, "Acme");
        let zed = register(&db, "Zed");
        assert!(embed_origins(&db, &acme).unwrap().is_empty());
        let set = vec![
            "https://shop.example".to_string(),
            "http://127.0.0.1:9".to_string(),
        ];
        set_embed_origins(&db, &acme, &set).unwrap();
        assert_eq!(embed_origins(&db, &acme).unwrap(), set);
        assert!(embed_origins(&db, &zed).unwrap().is_empty());
        set_embed_origins(&db, &acme, &[]).unwrap();
        assert!(embed_origins(&db, &acme).unwrap().is_empty());
    }
}
