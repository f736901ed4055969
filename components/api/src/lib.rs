//! The REST API component: every `/api/` route that no other component serves.

mod access;
mod analytics;
mod broadcasts;
mod chat;
mod chat_target;
mod clients;
mod clips;
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
mod player;
mod playlists;
mod realtime;
mod recordings;
mod reference;
mod replays;
mod restreams;
mod sessions;
mod sfu;
mod sfu_ack;
mod sfu_feed;
mod sfu_webhook;
mod uploads;
mod users;
mod views;
mod webhook_events;
mod webhooks;

use edge::routing::Route;
use edge::spin::http::{self, Entry, Handler};
use spin_sdk::http::{IncomingRequest, ResponseOutparam};
#[cfg(target_arch = "wasm32")]
use spin_sdk::http_component;
use std::sync::LazyLock;

/// The routes whose body is streamed into storage after authentication.
#[derive(Debug, Clone, Copy)]
pub enum Upload {
    File,
    /// A part of a resumable upload.
    Part,
    PlaylistPoster,
}

/// A route of this component.
pub type ApiRoute = Route<Handler<Upload>>;

/// Every route, joined from the tables each resource module declares beside its handlers
/// (`endpoint!`: method, path, tier, typed handler; see the trust model in the README for
/// the tiers).
pub static ROUTES: LazyLock<Vec<ApiRoute>> = LazyLock::new(|| {
    [
        clients::ROUTES,
        reference::ROUTES,
        contact_form::ROUTES,
        ingest::ROUTES,
        player::ROUTES,
        views::ROUTES,
        jobs::ROUTES,
        sfu::ROUTES,
        sfu_webhook::ROUTES,
        sessions::ROUTES,
        cohosts::ROUTES,
        broadcasts::ROUTES,
        broadcasts::TENANT_ROUTES,
        analytics::ROUTES,
        restreams::ROUTES,
        recordings::ROUTES,
        replays::ROUTES,
        clips::ROUTES,
        chat::ROUTES,
        moderation::ROUTES.as_slice(),
        events::ROUTES,
        users::ROUTES,
        contacts::ROUTES,
        files::ROUTES,
        uploads::ROUTES,
        playlists::ROUTES,
        webhooks::ROUTES,
    ]
    .concat()
});

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
    let response = match http::prepare_upload(req, &ROUTES, max_signed_upload, &request_id).await {
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
