//! Contacts: the users someone follows or is followed by, each with a contact id of its
//! own and display fields the owner may edit.

use crate::ApiRoute;
use crate::users;
use domain::pagination::{Page, Paged};
use domain::request_body;
use domain::validate;
use domain::validate::body::{EmailAddress, OptChecked, OptText, PhoneNumber};
use domain::{ApiError, ids};
use edge::endpoint;
use edge::spin::endpoint::{self, Json, NoBody};
use edge::spin::http::UserCtx;
use store::Db;
use store::contacts::{self as stored, Contact, Notes};

fn load(db: &Db, client_id: &str, owner: &str, contact_id: &str) -> Result<Contact, ApiError> {
    let id = ids::parse_uuid(contact_id)
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the contact id must be a UUID"))?;
    stored::load(db, client_id, owner, &id)?.ok_or_else(|| ApiError::not_found("contact"))
}

/// The contact routes: the user's own contacts.
pub const ROUTES: &[ApiRoute] = &[
    endpoint!(
        GET "/api/contacts",
        User(list),
        "List (contacts)",
        |op| op
            .link(
                "PUT /api/contacts/{id}",
                &[("id", "$response.body#/items/0/id")],
            )
            .errors(400, &["invalid_query"]),
    ),
    endpoint!(
        PUT "/api/contacts/{id}",
        User(update),
        "Update (contacts)",
        |op| op
            .errors(400, &["invalid_id"])
            .errors(404, &["not_found"]),
    ),
    endpoint!(
        DELETE "/api/contacts/{id}/follow",
        User(unfollow),
        "Unfollow (contacts)",
        |op| op
            .errors(400, &["invalid_id"])
            .errors(404, &["not_found"]),
    ),
];

/// The user's contacts.
fn list(ctx: &UserCtx, _: NoBody) -> Result<endpoint::Page<Contact>, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let page = Page::from_query(ctx.query())?;
    let db = ctx.db()?;
    let (contacts, total) = stored::page_of_owner(&db, &tenant.client_id, &user.id, page)?;
    Ok(endpoint::Page(Paged::new(contacts, total, page)))
}

request_body! {
    /// The owner's own notes on a contact: a field sent replaces the stored one; one left
    /// out, null or empty stays as it is.
    pub struct ContactNotesBody as "ContactNotes" {
        "phoneNumber" phone_number: OptChecked<PhoneNumber, 40>,
        "displayName" display_name: OptText<{ validate::MAX_NAME }>,
        "firstName" first_name: OptText<{ validate::MAX_NAME }>,
        "lastName" last_name: OptText<{ validate::MAX_NAME }>,
        "email" email: OptChecked<EmailAddress, 254>,
    }
}

/// The owner's display fields for this contact.
fn update(
    ctx: &UserCtx,
    ContactNotesBody {
        phone_number: phone,
        display_name,
        first_name,
        last_name,
        email,
    }: ContactNotesBody,
) -> Result<Json<Contact>, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let db = ctx.db()?;
    let existing = load(&db, &tenant.client_id, &user.id, ctx.param("id"))?;
    let notes = Notes {
        display_name,
        first_name,
        last_name,
        email,
        phone_number: phone,
    };
    stored::update(
        &db,
        &tenant.client_id,
        &user.id,
        &existing.id,
        &notes,
        ctx.now(),
    )?;
    let updated = load(&db, &tenant.client_id, &user.id, &existing.id)?;
    Ok(Json(updated))
}

/// Unfollows the contact's user.
fn unfollow(ctx: &UserCtx, _: NoBody) -> Result<Json<users::Unfollowed>, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let db = ctx.db()?;
    let existing = load(&db, &tenant.client_id, &user.id, ctx.param("id"))?;
    users::unfollow_user(&db, &tenant.client_id, &user.id, &existing.user_id)?;
    Ok(Json(users::Unfollowed::user(existing.user_id)))
}
