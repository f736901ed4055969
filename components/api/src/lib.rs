//! The REST API component: every `/api/` route that no other component serves.

mod access;
mod analytics;
mod broadcasts;
mod chat;
mod chat_target;
mod clients;
mod cohosts;
mod contact_form;
mod contacts;
mod egress;
mod events;
mod files;
mod ingest;
mod jobs;
mod links;
mod media;
mod moderation;
mod passwords;
mod playlists;
mod realtime;
mod recordings;
mod reference;
mod restreams;
mod sessions;
mod sfu;
mod sfu_ack;
mod sfu_feed;
mod sfu_webhook;
mod uploads;
mod users;
mod webhook_events;
mod webhooks;

use edge::routing::{Route, route};
use edge::spin::http::{self, Entry, Handler};
use spin_sdk::http::{IncomingRequest, ResponseOutparam};
#[cfg(target_arch = "wasm32")]
use spin_sdk::http_component;
use std::sync::LazyLock;

/// What the routes take and answer: the API document's operations, declared beside their
/// handlers (`openapi-doc` builds the document from them and the route table).
pub mod contract {
    /// What every route takes and answers.
    pub fn operations() -> Vec<edge::contract::Operation> {
        [
            crate::clients::operations(),
            crate::reference::operations(),
            crate::sfu::operations(),
            crate::sfu_webhook::operations(),
            crate::contact_form::operations(),
            crate::sessions::operations(),
            crate::chat::operations(),
            crate::moderation::operations(),
            crate::events::operations(),
            crate::contacts::operations(),
            super::ROUTES
                .iter()
                .filter_map(|r| r.operation)
                .map(|op| op())
                .collect(),
        ]
        .concat()
    }
}

/// The routes whose body is streamed into storage after authentication.
#[derive(Debug, Clone, Copy)]
pub enum Upload {
    File,
    /// A part of a resumable upload.
    Part,
    PlaylistPoster,
}

use Handler::{
    Admin, App, Caller, Public, RelayCaller, RelayUser, Server, Sfu, User, UserOrServer,
};

/// The route table: method, path, and the handler, whose variant is the route's tier (see
/// the trust model in the README): `Public`, `Admin` (the operator), `App` (the public API
/// key alone), `User` (plus a user's JWT), `Server` (plus the tenant's HMAC signature),
/// `UserOrServer`, `Relay*` (the chat relay may call for a user), `Sfu` (LiveKit's signed
/// webhooks), `Media` (the media server, with `media_secret`).
pub static ROUTES: LazyLock<Vec<ApiRoute>> = LazyLock::new(|| {
    [
        TABLE,
        restreams::ROUTES,
        broadcasts::ROUTES,
        broadcasts::TENANT_ROUTES,
        users::ROUTES,
        analytics::ROUTES,
        jobs::ROUTES,
        ingest::ROUTES,
        webhooks::ROUTES,
        playlists::ROUTES,
        recordings::ROUTES,
        files::ROUTES,
        uploads::ROUTES,
        cohosts::ROUTES,
    ]
    .concat()
});

/// A route of this component.
pub type ApiRoute = Route<Handler<Upload>>;

/// The routes not yet declared beside their handlers.
const TABLE: &[ApiRoute] = &[
    route("POST", "/api/admin/sdk-clients", Admin(clients::register)),
    route(
        "POST",
        "/api/admin/sdk-clients/{id}/suspend",
        Admin(clients::suspend),
    ),
    route(
        "POST",
        "/api/admin/sdk-clients/{id}/reinstate",
        Admin(clients::reinstate),
    ),
    route("GET", "/api/openapi.json", Public(reference::openapi)),
    route("GET", "/api/sfu/health", Public(sfu::health)),
    // Every webhook of the SFU (participants, egress), signed with its API secret
    route("POST", "/api/sfu/webhook", Sfu(sfu_webhook::receive)),
    route("POST", "/api/contact", Public(contact_form::submit)),
    // SFU provider and streaming sessions (the token is minted by the sfu-token component)
    route("GET", "/api/streaming/providers", App(sfu::providers)),
    route("GET", "/api/streaming/ice-config", App(sfu::ice_config)),
    route("POST", "/api/streaming/sessions", User(sessions::create)),
    route("GET", "/api/streaming/sessions/{id}", User(sessions::get)),
    // Persisted chat (the relay stores WebSocket messages through the stream routes)
    route(
        "GET",
        "/api/streams/{id}/chat",
        RelayCaller(chat::stream_history),
    ),
    route(
        "POST",
        "/api/streams/{id}/chat",
        RelayUser(chat::stream_post),
    ),
    route(
        "DELETE",
        "/api/streams/{id}/chat/{messageId}",
        RelayUser(chat::stream_delete),
    ),
    route(
        "POST",
        "/api/streams/{id}/chat/ticket",
        Caller(chat::socket_ticket),
    ),
    // Chat moderation (creator, co-hosts with canModerateChat, the tenant's server)
    route(
        "POST",
        "/api/streams/{id}/chat/timeouts",
        UserOrServer(moderation::timeout),
    ),
    route(
        "POST",
        "/api/streams/{id}/chat/bans",
        UserOrServer(moderation::ban),
    ),
    route(
        "DELETE",
        "/api/streams/{id}/chat/bans/{userId}",
        UserOrServer(moderation::unban),
    ),
    route(
        "GET",
        "/api/streams/{id}/chat/settings",
        UserOrServer(moderation::get_settings),
    ),
    route(
        "PUT",
        "/api/streams/{id}/chat/settings",
        UserOrServer(moderation::put_settings),
    ),
    route(
        "POST",
        "/api/streams/{id}/chat/clear",
        UserOrServer(moderation::clear),
    ),
    route(
        "PUT",
        "/api/streams/{id}/chat/pin",
        UserOrServer(moderation::pin),
    ),
    route(
        "DELETE",
        "/api/streams/{id}/chat/pin",
        UserOrServer(moderation::unpin),
    ),
    route(
        "POST",
        "/api/streams/{id}/chat/{messageId}/report",
        User(moderation::report),
    ),
    route(
        "GET",
        "/api/streams/{id}/chat/reports",
        UserOrServer(moderation::reports),
    ),
    route(
        "POST",
        "/api/streams/{id}/chat/reports/{reportId}/resolve",
        UserOrServer(moderation::resolve),
    ),
    route(
        "GET",
        "/api/streams/{id}/chat/moderation-log",
        UserOrServer(moderation::moderation_log),
    ),
    route(
        "POST",
        "/api/users/me/chat/bans",
        User(moderation::channel_ban),
    ),
    route(
        "DELETE",
        "/api/users/me/chat/bans/{userId}",
        User(moderation::channel_unban),
    ),
    route(
        "GET",
        "/api/users/me/chat/blocked-words",
        User(moderation::get_blocked_words),
    ),
    route(
        "PUT",
        "/api/users/me/chat/blocked-words",
        User(moderation::put_blocked_words),
    ),
    route(
        "GET",
        "/api/v1/chat/blocked-words",
        Server(moderation::get_tenant_blocked_words),
    ),
    route(
        "PUT",
        "/api/v1/chat/blocked-words",
        Server(moderation::put_tenant_blocked_words),
    ),
    route(
        "GET",
        "/api/broadcasts/{id}/chat",
        User(chat::broadcast_history),
    ),
    route(
        "POST",
        "/api/broadcasts/{id}/chat",
        User(chat::broadcast_post),
    ),
    // Scheduled events
    route("POST", "/api/events", User(events::create)),
    route("GET", "/api/events", User(events::list)),
    route("GET", "/api/events/{id}", User(events::get)),
    route("DELETE", "/api/events/{id}", User(events::delete)),
    // Contacts
    route("GET", "/api/contacts", User(contacts::list)),
    route("PUT", "/api/contacts/{id}", User(contacts::update)),
    route(
        "DELETE",
        "/api/contacts/{id}/follow",
        User(contacts::unfollow),
    ),
];

/// The largest signed upload (read whole, since its signature covers the body).
fn max_signed_upload() -> u64 {
    files::max_upload().max(playlists::MAX_POSTER) + 64 * 1024
}

/// The component's entry point. Natively the crate is also a library of its route table
/// (the OpenAPI generator links every component into one binary), so the export is wasm's.
#[cfg_attr(target_arch = "wasm32", http_component)]
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
async fn handle(req: IncomingRequest, out: ResponseOutparam) {
    let request_id = domain::ids::random_hex(8);
    let response = match http::prepare_upload(req, &ROUTES, max_signed_upload(), &request_id).await
    {
        Entry::Answered(response) => response,
        Entry::Upload(kind, ctx, source) => {
            let answer = match kind {
                Upload::File => files::upload(&ctx, source).await,
                Upload::Part => uploads::put_part(&ctx, source).await,
                Upload::PlaylistPoster => playlists::poster(&ctx, source).await,
            };
            answer.unwrap_or_else(|e| http::problem(&e, &request_id))
        }
    };
    edge::spin::incoming::send(out, response).await;
}

#[cfg(test)]
mod route_table {
    #[test]
    fn the_readme_lists_every_route_with_its_tier() {
        let readme = include_str!("../../../README.md");
        let problems = edge::routing::undocumented(readme, "api", &super::ROUTES);
        assert!(
            problems.is_empty(),
            "README, Who may call what: {problems:#?}"
        );
    }
}
