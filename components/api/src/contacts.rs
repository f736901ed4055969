//! Contacts: the users someone follows or is followed by, each with a contact id of its
//! own and display fields the owner may edit.

use crate::users;
use domain::pagination::{Page, Paged};
use domain::request_body;
use domain::validate;
use domain::validate::body::{EmailAddress, OptChecked, OptText, PhoneNumber, RequestBody};
use domain::{ApiError, ids};
use edge::spin::http::{UserCtx, json};
use spin_sdk::http::Response;
use store::Db;
use store::contacts::{self as stored, Contact, Notes};

fn load(db: &Db, client_id: &str, owner: &str, contact_id: &str) -> Result<Contact, ApiError> {
    let id = ids::parse_uuid(contact_id)
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the contact id must be a UUID"))?;
    stored::load(db, client_id, owner, &id)?.ok_or_else(|| ApiError::not_found("contact"))
}

/// `GET /api/contacts`
pub fn list(ctx: &UserCtx) -> Result<Response, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let page = Page::from_query(ctx.query())?;
    let db = ctx.db()?;
    let (contacts, total) = stored::page_of_owner(&db, &tenant.client_id, &user.id, page)?;
    Ok(json(200, &Paged::new(contacts, total, page)))
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

/// `PUT /api/contacts/{id}`: the owner's display fields for this contact.
pub fn update(ctx: &UserCtx) -> Result<Response, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let mut body = ctx.json()?;
    let ContactNotesBody {
        phone_number: phone,
        display_name,
        first_name,
        last_name,
        email,
    } = ContactNotesBody::read(&mut body);
    body.finish()?;
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
    Ok(json(200, &updated))
}

/// `DELETE /api/contacts/{id}/follow`: unfollows the contact's user.
pub fn unfollow(ctx: &UserCtx) -> Result<Response, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let db = ctx.db()?;
    let existing = load(&db, &tenant.client_id, &user.id, ctx.param("id"))?;
    users::unfollow_user(&db, &tenant.client_id, &user.id, &existing.user_id)?;
    Ok(json(200, &users::Unfollowed::user(existing.user_id)))
}

/// What these routes take and answer, for the API document.
pub(crate) fn operations() -> Vec<edge::contract::Operation> {
    use edge::contract::{Operation, Schema};
    vec![
        Operation::new("GET /api/contacts", "List (contacts)")
            .paged()
            .answers(200, "OK", Schema::page_of::<Contact>())
            .link(
                "PUT /api/contacts/{id}",
                &[("id", "$response.body#/items/0/id")],
            )
            .errors(400, &["invalid_query"]),
        Operation::new("PUT /api/contacts/{id}", "Update (contacts)")
            .takes(Schema::body::<ContactNotesBody>())
            .answers(200, "OK", Schema::view::<Contact>())
            .errors(400, &["invalid_id"])
            .errors(404, &["not_found"]),
        Operation::new("DELETE /api/contacts/{id}/follow", "Unfollow (contacts)")
            .answers(200, "OK", Schema::view::<users::Unfollowed>())
            .errors(400, &["invalid_id"])
            .errors(404, &["not_found"]),
    ]
}
