//! Contacts: the users someone follows or is followed by, each with a contact id of its
//! own and display fields the owner may edit.

use crate::users;
use common::pagination::{Page, Paged};
use common::spin::db::{self, Db, Row};
use common::spin::http::{UserCtx, json};
use common::validate;
use common::{ApiError, ids, time};
use serde::Serialize;
use serde_json::json;
use spin_sdk::http::Response;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Contact {
    id: String,
    user_id: String,
    username: String,
    display_name: Option<String>,
    first_name: Option<String>,
    last_name: Option<String>,
    email: Option<String>,
    phone_number: Option<String>,
    avatar_url: Option<String>,
    following: bool,
    followed_by: bool,
    created_at: String,
    updated_at: String,
}

const CONTACT_QUERY: &str = "SELECT c.id, c.contact_user_id, u.username, c.display_name, \
       COALESCE(c.first_name, u.first_name) AS first_name, COALESCE(c.last_name, u.last_name) AS last_name, \
       c.email, c.phone_number, u.avatar_url, c.created_at, c.updated_at, \
       EXISTS (SELECT 1 FROM follows f WHERE f.client_id = c.client_id AND f.follower_id = c.owner_id AND f.followee_id = c.contact_user_id) AS following, \
       EXISTS (SELECT 1 FROM follows f WHERE f.client_id = c.client_id AND f.follower_id = c.contact_user_id AND f.followee_id = c.owner_id) AS followed_by \
     FROM contacts c JOIN users u ON u.client_id = c.client_id AND u.id = c.contact_user_id \
     WHERE c.client_id = ? AND c.owner_id = ?";

fn contact(row: &Row<'_>) -> Contact {
    Contact {
        id: db::col_text(row, "id"),
        user_id: db::col_text(row, "contact_user_id"),
        username: db::col_text(row, "username"),
        display_name: db::col_opt_text(row, "display_name"),
        first_name: db::col_opt_text(row, "first_name"),
        last_name: db::col_opt_text(row, "last_name"),
        email: db::col_opt_text(row, "email"),
        phone_number: db::col_opt_text(row, "phone_number"),
        avatar_url: db::col_opt_text(row, "avatar_url"),
        following: db::col_bool(row, "following"),
        followed_by: db::col_bool(row, "followed_by"),
        created_at: db::col_text(row, "created_at"),
        updated_at: db::col_text(row, "updated_at"),
    }
}

/// Makes `a` and `b` contacts of each other (after one followed the other).
pub fn link(db: &Db, client_id: &str, a: &str, b: &str) -> Result<(), ApiError> {
    let now = time::now_rfc3339();
    for (owner, other) in [(a, b), (b, a)] {
        db.execute(
            "INSERT INTO contacts (id, client_id, owner_id, contact_user_id, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            &[db::text(ids::uuid()), db::text(client_id), db::text(owner), db::text(other), db::text(&now), db::text(&now)],
        )?;
    }
    Ok(())
}

/// Removes the two contact entries once neither user follows the other.
pub fn unlink_if_unrelated(db: &Db, client_id: &str, a: &str, b: &str) -> Result<(), ApiError> {
    let remaining = db.count(
        "SELECT COUNT(*) FROM follows WHERE client_id = ? AND ((follower_id = ? AND followee_id = ?) OR (follower_id = ? AND followee_id = ?))",
        &[db::text(client_id), db::text(a), db::text(b), db::text(b), db::text(a)],
    )?;
    if remaining == 0 {
        db.execute(
            "DELETE FROM contacts WHERE client_id = ? AND ((owner_id = ? AND contact_user_id = ?) OR (owner_id = ? AND contact_user_id = ?))",
            &[db::text(client_id), db::text(a), db::text(b), db::text(b), db::text(a)],
        )?;
    }
    Ok(())
}

fn load(db: &Db, client_id: &str, owner: &str, contact_id: &str) -> Result<Contact, ApiError> {
    let id = ids::parse_uuid(contact_id)
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the contact id must be a UUID"))?;
    db.query_one(
        &format!("{CONTACT_QUERY} AND c.id = ?"),
        &[db::text(client_id), db::text(owner), db::text(id)],
        contact,
    )?
    .ok_or_else(|| ApiError::not_found("contact"))
}

/// `GET /api/contacts`
pub fn list(ctx: &UserCtx) -> Result<Response, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let page = Page::from_query(ctx.query())?;
    let db = Db::open()?;
    let scope = [db::text(&tenant.client_id), db::text(&user.id)];
    let total = db.count(
        "SELECT COUNT(*) FROM contacts WHERE client_id = ? AND owner_id = ?",
        &scope,
    )?;
    let items = db.query(
        &format!("{CONTACT_QUERY} ORDER BY u.username_key LIMIT ? OFFSET ?"),
        &[
            scope[0].clone(),
            scope[1].clone(),
            db::int(page.limit.into()),
            db::int(page.offset.into()),
        ],
        contact,
    )?;
    Ok(json(200, &Paged::new(items, total, page)))
}

/// `PUT /api/contacts/{id}`: the owner's display fields for this contact.
pub fn update(ctx: &UserCtx) -> Result<Response, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let mut body = ctx.json()?;
    let phone = body.opt_string("phoneNumber", 40);
    let display_name = body.opt_string("displayName", validate::MAX_NAME);
    let first_name = body.opt_string("firstName", validate::MAX_NAME);
    let last_name = body.opt_string("lastName", validate::MAX_NAME);
    let email = body.opt_string("email", 254);
    if email.as_deref().is_some_and(|e| !validate::is_email(e)) {
        body.error("email", "must be an e-mail address");
    }
    if phone.as_deref().is_some_and(|p| !validate::is_phone(p)) {
        body.error(
            "phoneNumber",
            "may contain only digits, spaces and + - ( ) .",
        );
    }
    body.finish()?;
    let db = Db::open()?;
    let existing = load(&db, &tenant.client_id, &user.id, ctx.param("id"))?;
    db.execute(
        "UPDATE contacts SET phone_number = COALESCE(?, phone_number), display_name = COALESCE(?, display_name), \
           first_name = COALESCE(?, first_name), last_name = COALESCE(?, last_name), email = COALESCE(?, email), updated_at = ? \
         WHERE client_id = ? AND owner_id = ? AND id = ?",
        &[
            db::opt_text(phone.as_deref()),
            db::opt_text(display_name.as_deref()),
            db::opt_text(first_name.as_deref()),
            db::opt_text(last_name.as_deref()),
            db::opt_text(email.as_deref()),
            db::text(time::now_rfc3339()),
            db::text(&tenant.client_id),
            db::text(&user.id),
            db::text(&existing.id),
        ],
    )?;
    Ok(json(
        200,
        &load(&db, &tenant.client_id, &user.id, &existing.id)?,
    ))
}

/// `DELETE /api/contacts/{id}/follow`: unfollows the contact's user.
pub fn unfollow(ctx: &UserCtx) -> Result<Response, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let db = Db::open()?;
    let existing = load(&db, &tenant.client_id, &user.id, ctx.param("id"))?;
    users::unfollow_user(&db, &tenant.client_id, &user.id, &existing.user_id)?;
    Ok(json(
        200,
        &json!({ "success": true, "following": false, "userId": existing.user_id }),
    ))
}
