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

use common::routing::{Route, route};
use common::spin::http::{self, Entry, Handler};
use spin_sdk::http::{IncomingRequest, ResponseOutparam};
use std::sync::LazyLock;
#[cfg(target_arch = "wasm32")]
use spin_sdk::http_component;

/// What the routes take and answer: the API document's operations, declared beside their
/// handlers (`openapi-doc` builds the document from them and the route table).
pub mod contract {
    /// What every route takes and answers.
    pub fn operations() -> Vec<common::contract::Operation> {
        [
            crate::ingest::operations(),
            crate::cohosts::operations(),
            crate::files::operations(),
            crate::uploads::operations(),
            crate::playlists::operations(),
            crate::users::operations(),
            crate::broadcasts::operations(),
            crate::webhooks::operations(),
            crate::analytics::operations(),
            crate::recordings::operations(),
            crate::jobs::operations(),
            super::ROUTES.iter().filter_map(|r| r.operation).map(|op| op()).collect(),
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

use Handler::{App, Media, Public, Server, Sfu, User, UserOrServer};

/// The route table: method, path, and the handler, whose variant is the route's tier (see
/// the trust model in the README): `Public`, `Admin` (the operator), `App` (the public API
/// key alone), `User` (plus a user's JWT), `Server` (plus the tenant's HMAC signature),
/// `UserOrServer`, `Relay*` (the chat relay may call for a user), `Sfu` (LiveKit's signed
/// webhooks), `Media` (the media server, with `media_secret`).
pub static ROUTES: LazyLock<Vec<ApiRoute>> = LazyLock::new(|| {
    [
        TABLE,
        restreams::ROUTES,
        chat::ROUTES,
        events::ROUTES,
        clients::ROUTES,
        reference::ROUTES,
        sfu::ROUTES,
        sfu_webhook::ROUTES,
        contact_form::ROUTES,
        sessions::ROUTES,
        contacts::ROUTES,
        moderation::ROUTES.as_slice(),
    ]
    .concat()
});

/// A route of this component.
pub type ApiRoute = Route<Handler<Upload>>;

/// The routes not yet declared beside their handlers.
const TABLE: &[ApiRoute] = &[
    // The media server (RTMP ingest): who may publish, and how a publish goes
    route("POST", "/api/media/publish", Media(ingest::publish)),
    route("POST", "/api/media/update", Media(ingest::update)),
    route(
        "POST",
        "/api/media/publish-done",
        Media(ingest::publish_done),
    ),
    route("POST", "/api/media/server", Media(ingest::server)),
    // Co-hosting (the participant events come from the SFU, signed with its API secret)
    route(
        "GET",
        "/api/streaming/sessions/{id}/multihost",
        User(cohosts::multihost),
    ),
    route(
        "PUT",
        "/api/streaming/sessions/{id}/layout",
        User(cohosts::update_layout),
    ),
    route(
        "POST",
        "/api/streaming/sessions/{id}/join-cohost",
        User(cohosts::join),
    ),
    route(
        "POST",
        "/api/streaming/sessions/{id}/invites",
        User(cohosts::invite),
    ),
    route(
        "PUT",
        "/api/streaming/sessions/{id}/cohosts/{coHostId}",
        User(cohosts::update_cohost),
    ),
    route(
        "DELETE",
        "/api/streaming/sessions/{id}/cohosts/{coHostId}",
        User(cohosts::remove_cohost),
    ),
    route(
        "POST",
        "/api/streaming/sessions/{id}/cohosts/{coHostId}/approve",
        User(cohosts::approve),
    ),
    route(
        "POST",
        "/api/streaming/sessions/{id}/cohosts/{coHostId}/decline",
        User(cohosts::decline),
    ),
    route(
        "POST",
        "/api/streaming/sessions/{id}/participants/events",
        Sfu(cohosts::participant_event),
    ),
    route(
        "GET",
        "/api/streaming/sessions/{id}/metrics",
        UserOrServer(cohosts::metrics),
    ),
    // Files (uploads are streamed: see `handle`)
    route("POST", "/api/files", Handler::Upload(Upload::File)),
    // Resumable uploads (parts of at most 8 MiB; the file is ready once completed)
    route("POST", "/api/files/uploads", User(uploads::create)),
    route("GET", "/api/files/uploads/{id}", User(uploads::get)),
    route("DELETE", "/api/files/uploads/{id}", User(uploads::abort)),
    route(
        "PUT",
        "/api/files/uploads/{id}/parts/{n}",
        Handler::Upload(Upload::Part),
    ),
    route(
        "POST",
        "/api/files/uploads/{id}/complete",
        User(uploads::complete),
    ),
    route("GET", "/api/files", User(files::list)),
    route("GET", "/api/files/{id}", User(files::get)),
    route("DELETE", "/api/files/{id}", User(files::delete)),
    route("GET", "/api/files/{id}/public", Public(files::public)),
    route(
        "OPTIONS",
        "/api/files/{id}/public",
        Public(files::preflight),
    ),
    route("GET", "/api/files/{id}/download", User(files::download)),
    // Playlists
    route("GET", "/api/playlists", User(playlists::list)),
    route("POST", "/api/playlists", User(playlists::create)),
    route("GET", "/api/playlists/{id}", User(playlists::get)),
    route("PUT", "/api/playlists/{id}", User(playlists::update)),
    route("DELETE", "/api/playlists/{id}", User(playlists::delete)),
    route(
        "POST",
        "/api/playlists/{id}/tracks",
        User(playlists::add_tracks),
    ),
    route(
        "DELETE",
        "/api/playlists/{id}/tracks/{trackId}",
        User(playlists::remove_track),
    ),
    route(
        "PUT",
        "/api/playlists/{id}/tracks/reorder",
        User(playlists::reorder),
    ),
    route(
        "POST",
        "/api/playlists/{id}/poster",
        Handler::Upload(Upload::PlaylistPoster),
    ),
    // Users
    route("POST", "/api/users/signup", App(users::signup)),
    route("POST", "/api/users/login", App(users::login)),
    route("POST", "/api/users/refresh", App(users::refresh)),
    route("GET", "/api/users/profile/full", User(users::full_profile)),
    route("PUT", "/api/users/profile", User(users::update_profile)),
    route("DELETE", "/api/users/profile", User(users::delete_profile)),
    route(
        "POST",
        "/api/users/change-password",
        User(users::change_password),
    ),
    route("POST", "/api/users/follow/{id}", User(users::follow)),
    route("DELETE", "/api/users/follow/{id}", User(users::unfollow)),
    route("GET", "/api/users/{id}/followers", User(users::followers)),
    route("GET", "/api/users/{id}/following", User(users::following)),
    // The tenant's backend (signed requests)
    route("GET", "/api/v1/users", Server(users::list_for_client)),
    route("POST", "/api/v1/sessions", Server(broadcasts::v1_create)),
    route("GET", "/api/v1/sessions", Server(broadcasts::v1_list)),
    route(
        "PATCH",
        "/api/v1/sessions/{id}",
        Server(broadcasts::v1_patch),
    ),
    route(
        "POST",
        "/api/v1/sessions/{id}/reactions",
        UserOrServer(broadcasts::react),
    ),
    // Outbound webhooks (the tenant's server; delivery is the webhooks component's job)
    route("POST", "/api/v1/webhooks", Server(webhooks::create)),
    route("GET", "/api/v1/webhooks", Server(webhooks::list)),
    route("GET", "/api/v1/webhooks/{id}", Server(webhooks::get)),
    route("PATCH", "/api/v1/webhooks/{id}", Server(webhooks::update)),
    route("DELETE", "/api/v1/webhooks/{id}", Server(webhooks::delete)),
    route(
        "POST",
        "/api/v1/webhooks/{id}/rotate-secret",
        Server(webhooks::rotate_secret),
    ),
    route(
        "POST",
        "/api/v1/webhooks/{id}/test",
        Server(webhooks::send_test),
    ),
    route(
        "GET",
        "/api/v1/webhooks/{id}/deliveries",
        Server(webhooks::deliveries),
    ),
    route(
        "POST",
        "/api/v1/webhooks/{id}/deliveries/{deliveryId}/retry",
        Server(webhooks::retry),
    ),
    route(
        "POST",
        "/api/v1/webhooks/{id}/recover",
        Server(webhooks::recover),
    ),
    // Broadcasts
    route("POST", "/api/broadcasts", User(broadcasts::create)),
    route("GET", "/api/broadcasts", User(broadcasts::list_own)),
    route("GET", "/api/broadcasts/live", App(broadcasts::list_live)),
    route("GET", "/api/broadcasts/{id}", User(broadcasts::get)),
    route("PATCH", "/api/broadcasts/{id}", User(broadcasts::update)),
    route(
        "POST",
        "/api/broadcasts/{id}/status",
        User(broadcasts::update_status),
    ),
    route(
        "POST",
        "/api/sessions/{id}/heartbeat",
        User(broadcasts::heartbeat),
    ),
    route(
        "POST",
        "/api/broadcasts/{id}/viewer-count",
        User(broadcasts::viewer_count),
    ),
    route(
        "POST",
        "/api/broadcasts/{id}/stream-key/reset",
        User(broadcasts::reset_stream_key),
    ),
    route(
        "GET",
        "/api/broadcasts/{id}/analytics",
        UserOrServer(analytics::broadcast),
    ),
    route(
        "POST",
        "/api/broadcasts/{id}/analytics/share",
        User(analytics::share),
    ),
    // Recordings (LiveKit egress on the record page; the SFU's webhook moves them)
    route(
        "GET",
        "/api/broadcasts/{id}/recordings",
        Handler::Caller(recordings::list),
    ),
    route(
        "POST",
        "/api/broadcasts/{id}/recordings/start",
        User(recordings::start),
    ),
    route(
        "POST",
        "/api/broadcasts/{id}/recordings/stop",
        User(recordings::stop),
    ),
    route(
        "DELETE",
        "/api/broadcasts/{id}/recordings/{recordingId}",
        UserOrServer(recordings::delete),
    ),
    route(
        "GET",
        "/api/v1/recording-defaults",
        Server(recordings::get_defaults),
    ),
    route(
        "PUT",
        "/api/v1/recording-defaults",
        Server(recordings::put_defaults),
    ),
    // Scheduled jobs
    route("POST", "/api/jobs/migrate", Handler::Jobs(jobs::migrate)),
    route("POST", "/api/jobs/prune", Handler::Jobs(jobs::prune)),
    route(
        "POST",
        "/api/jobs/settle-ingests",
        Handler::Jobs(ingest::settle),
    ),
    route(
        "POST",
        "/api/jobs/rollup-analytics",
        Handler::Jobs(analytics::rollup),
    ),
    // Analytics (the broadcast's own is with the broadcasts)
    route("GET", "/api/users/me/analytics", User(analytics::mine)),
    route("GET", "/api/v1/analytics", Server(analytics::tenant)),
    // The tenant's media settings (the adaptive ladder of its broadcasts)
    route("GET", "/api/v1/media-settings", Server(ingest::settings)),
    route(
        "PATCH",
        "/api/v1/media-settings",
        Server(ingest::update_settings),
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
    let request_id = common::ids::random_hex(8);
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
    common::spin::incoming::send(out, response).await;
}

#[cfg(test)]
mod route_table {
    #[test]
    fn the_readme_lists_every_route_with_its_tier() {
        let readme = include_str!("../../../README.md");
        let problems = common::routing::undocumented(readme, "api", &super::ROUTES);
        assert!(
            problems.is_empty(),
            "README, Who may call what: {problems:#?}"
        );
    }
}
