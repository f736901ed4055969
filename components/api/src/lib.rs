//! The REST API component: every `/api/` route that no other component serves.

mod broadcasts;
mod chat;
mod clients;
mod cohosts;
mod contact_form;
mod contacts;
mod events;
mod files;
mod incoming;
mod links;
mod media;
mod passwords;
mod playlists;
mod realtime;
mod sessions;
mod sfu;
mod users;
mod webhooks;

use common::ApiError;
use common::routing::{Auth, Route, route};
use common::spin::http::{Ctx, prepare, problem, serve};
use spin_sdk::http::{IncomingRequest, Request, Response, ResponseOutparam};
use spin_sdk::http_component;

/// Every endpoint this component serves.
#[derive(Debug, Clone, Copy)]
enum Endpoint {
    RegisterClient,
    SfuHealth,
    Providers,
    ContactForm,
    Signup,
    Login,
    Refresh,
    FullProfile,
    UpdateProfile,
    DeleteProfile,
    ChangePassword,
    Follow,
    Unfollow,
    Followers,
    Following,
    Contacts,
    UpdateContact,
    UnfollowContact,
    ClientUsers,
    ClientSessionCreate,
    ClientSessionList,
    ClientSessionPatch,
    ClientSessionReact,
    BroadcastCreate,
    BroadcastList,
    BroadcastLive,
    BroadcastGet,
    BroadcastStatus,
    BroadcastHeartbeat,
    BroadcastViewers,
    BroadcastKeyReset,
    BroadcastAnalytics,
    IceConfig,
    SessionCreate,
    SessionGet,
    EventCreate,
    EventList,
    EventGet,
    EventDelete,
    MultiHost,
    LayoutUpdate,
    JoinCoHost,
    Invite,
    CoHostUpdate,
    CoHostRemove,
    ParticipantEvent,
    SessionMetrics,
    StreamChat,
    StreamChatPost,
    StreamChatDelete,
    BroadcastChat,
    BroadcastChatPost,
    FileUpload,
    FileList,
    FileGet,
    FileDelete,
    FilePublic,
    FilePublicPreflight,
    FileDownload,
    PlaylistList,
    PlaylistCreate,
    PlaylistGet,
    PlaylistUpdate,
    PlaylistDelete,
    PlaylistAddTracks,
    PlaylistRemoveTrack,
    PlaylistReorder,
    PlaylistPoster,
}

use Auth::{Admin, ApiKey, OptionalUser, Public, User};
use Endpoint::*;

/// The route table: method, path, the authentication it needs, endpoint. `ApiKey` is the
/// tenant's `X-API-Key` (plus a valid signature when one is sent or required); `User` adds
/// a Bearer JWT of that tenant; `Admin` is the admin token unless registration is open.
const ROUTES: &[Route<Endpoint>] = &[
    route("POST", "/api/admin/sdk-clients", Admin, RegisterClient),
    route("GET", "/api/sfu/health", Public, SfuHealth),
    route("POST", "/api/contact", Public, ContactForm),
    // SFU provider and streaming sessions (the token is minted by the sfu-token component)
    route("GET", "/api/streaming/providers", ApiKey, Providers),
    route("GET", "/api/streaming/ice-config", ApiKey, IceConfig),
    route("POST", "/api/streaming/sessions", User, SessionCreate),
    route("GET", "/api/streaming/sessions/{id}", User, SessionGet),
    // Co-hosting (the participant events come from the SFU, signed with its API secret)
    route(
        "GET",
        "/api/streaming/sessions/{id}/multihost",
        User,
        MultiHost,
    ),
    route(
        "PUT",
        "/api/streaming/sessions/{id}/layout",
        User,
        LayoutUpdate,
    ),
    route(
        "POST",
        "/api/streaming/sessions/{id}/join-cohost",
        User,
        JoinCoHost,
    ),
    route("POST", "/api/streaming/sessions/{id}/invites", User, Invite),
    route(
        "PUT",
        "/api/streaming/sessions/{id}/cohosts/{coHostId}",
        User,
        CoHostUpdate,
    ),
    route(
        "DELETE",
        "/api/streaming/sessions/{id}/cohosts/{coHostId}",
        User,
        CoHostRemove,
    ),
    route(
        "POST",
        "/api/streaming/sessions/{id}/participants/events",
        Public,
        ParticipantEvent,
    ),
    route(
        "GET",
        "/api/streaming/sessions/{id}/metrics",
        User,
        SessionMetrics,
    ),
    // Persisted chat (the relay stores WebSocket messages through the POSTs)
    route("GET", "/api/streams/{id}/chat", OptionalUser, StreamChat),
    route("POST", "/api/streams/{id}/chat", User, StreamChatPost),
    route(
        "DELETE",
        "/api/streams/{id}/chat/{messageId}",
        User,
        StreamChatDelete,
    ),
    route("GET", "/api/broadcasts/{id}/chat", User, BroadcastChat),
    route("POST", "/api/broadcasts/{id}/chat", User, BroadcastChatPost),
    // Scheduled events
    route("POST", "/api/events", User, EventCreate),
    route("GET", "/api/events", User, EventList),
    route("GET", "/api/events/{id}", User, EventGet),
    route("DELETE", "/api/events/{id}", User, EventDelete),
    // Files (uploads are streamed: see `handle`)
    route("POST", "/api/files", User, FileUpload),
    route("GET", "/api/files", User, FileList),
    route("GET", "/api/files/{id}", User, FileGet),
    route("DELETE", "/api/files/{id}", User, FileDelete),
    route("GET", "/api/files/{id}/public", Public, FilePublic),
    route(
        "OPTIONS",
        "/api/files/{id}/public",
        Public,
        FilePublicPreflight,
    ),
    route("GET", "/api/files/{id}/download", User, FileDownload),
    // Playlists
    route("GET", "/api/playlists", User, PlaylistList),
    route("POST", "/api/playlists", User, PlaylistCreate),
    route("GET", "/api/playlists/{id}", User, PlaylistGet),
    route("PUT", "/api/playlists/{id}", User, PlaylistUpdate),
    route("DELETE", "/api/playlists/{id}", User, PlaylistDelete),
    route(
        "POST",
        "/api/playlists/{id}/tracks",
        User,
        PlaylistAddTracks,
    ),
    route(
        "DELETE",
        "/api/playlists/{id}/tracks/{trackId}",
        User,
        PlaylistRemoveTrack,
    ),
    route(
        "PUT",
        "/api/playlists/{id}/tracks/reorder",
        User,
        PlaylistReorder,
    ),
    route("POST", "/api/playlists/{id}/poster", User, PlaylistPoster),
    // Users
    route("POST", "/api/users/signup", ApiKey, Signup),
    route("POST", "/api/users/login", ApiKey, Login),
    route("POST", "/api/users/refresh", ApiKey, Refresh),
    route("GET", "/api/users/profile/full", User, FullProfile),
    route("PUT", "/api/users/profile", User, UpdateProfile),
    route("DELETE", "/api/users/profile", User, DeleteProfile),
    route("POST", "/api/users/change-password", User, ChangePassword),
    route("POST", "/api/users/follow/{id}", User, Follow),
    route("DELETE", "/api/users/follow/{id}", User, Unfollow),
    route("GET", "/api/users/{id}/followers", User, Followers),
    route("GET", "/api/users/{id}/following", User, Following),
    // Contacts
    route("GET", "/api/contacts", User, Contacts),
    route("PUT", "/api/contacts/{id}", User, UpdateContact),
    route("DELETE", "/api/contacts/{id}/follow", User, UnfollowContact),
    // The SDK client's own API
    route("GET", "/api/v1/users", ApiKey, ClientUsers),
    route("POST", "/api/v1/sessions", ApiKey, ClientSessionCreate),
    route("GET", "/api/v1/sessions", ApiKey, ClientSessionList),
    route("PATCH", "/api/v1/sessions/{id}", ApiKey, ClientSessionPatch),
    route(
        "POST",
        "/api/v1/sessions/{id}/reactions",
        ApiKey,
        ClientSessionReact,
    ),
    // Broadcasts
    route("POST", "/api/broadcasts", User, BroadcastCreate),
    route("GET", "/api/broadcasts", User, BroadcastList),
    route("GET", "/api/broadcasts/live", ApiKey, BroadcastLive),
    route("GET", "/api/broadcasts/{id}", User, BroadcastGet),
    route("POST", "/api/broadcasts/{id}/status", User, BroadcastStatus),
    route(
        "POST",
        "/api/sessions/{id}/heartbeat",
        User,
        BroadcastHeartbeat,
    ),
    route(
        "POST",
        "/api/broadcasts/{id}/viewer-count",
        User,
        BroadcastViewers,
    ),
    route(
        "POST",
        "/api/broadcasts/{id}/stream-key/reset",
        User,
        BroadcastKeyReset,
    ),
    route(
        "GET",
        "/api/broadcasts/{id}/analytics",
        User,
        BroadcastAnalytics,
    ),
];

fn dispatch(endpoint: Endpoint, ctx: &Ctx) -> Result<Response, ApiError> {
    match endpoint {
        RegisterClient => clients::register(ctx),
        SfuHealth => sfu::health(ctx),
        Providers => sfu::providers(ctx),
        ContactForm => contact_form::submit(ctx),
        Signup => users::signup(ctx),
        Login => users::login(ctx),
        Refresh => users::refresh(ctx),
        FullProfile => users::full_profile(ctx),
        UpdateProfile => users::update_profile(ctx),
        DeleteProfile => users::delete_profile(ctx),
        ChangePassword => users::change_password(ctx),
        Follow => users::follow(ctx),
        Unfollow => users::unfollow(ctx),
        Followers => users::follow_list(ctx, true),
        Following => users::follow_list(ctx, false),
        Contacts => contacts::list(ctx),
        UpdateContact => contacts::update(ctx),
        UnfollowContact => contacts::unfollow(ctx),
        ClientUsers => users::list_for_client(ctx),
        ClientSessionCreate => broadcasts::v1_create(ctx),
        ClientSessionList => broadcasts::v1_list(ctx),
        ClientSessionPatch => broadcasts::v1_patch(ctx),
        ClientSessionReact => broadcasts::v1_react(ctx),
        BroadcastCreate => broadcasts::create(ctx),
        BroadcastList => broadcasts::list_own(ctx),
        BroadcastLive => broadcasts::list_live(ctx),
        BroadcastGet => broadcasts::get(ctx),
        BroadcastStatus => broadcasts::update_status(ctx),
        BroadcastHeartbeat => broadcasts::heartbeat(ctx),
        BroadcastViewers => broadcasts::viewer_count(ctx),
        BroadcastKeyReset => broadcasts::reset_stream_key(ctx),
        BroadcastAnalytics => broadcasts::analytics(ctx),
        IceConfig => sfu::ice_config(ctx),
        SessionCreate => sessions::create(ctx),
        SessionGet => sessions::get(ctx),
        EventCreate => events::create(ctx),
        EventList => events::list(ctx),
        EventGet => events::get(ctx),
        EventDelete => events::delete(ctx),
        MultiHost => cohosts::multihost(ctx),
        LayoutUpdate => cohosts::update_layout(ctx),
        JoinCoHost => cohosts::join(ctx),
        Invite => cohosts::invite(ctx),
        CoHostUpdate => cohosts::update_cohost(ctx),
        CoHostRemove => cohosts::remove_cohost(ctx),
        ParticipantEvent => cohosts::participant_event(ctx),
        SessionMetrics => cohosts::metrics(ctx),
        StreamChat => chat::stream_history(ctx),
        StreamChatPost => chat::stream_post(ctx),
        StreamChatDelete => chat::stream_delete(ctx),
        BroadcastChat => chat::broadcast_history(ctx),
        BroadcastChatPost => chat::broadcast_post(ctx),
        FileList => files::list(ctx),
        FileGet => files::get(ctx),
        FileDelete => files::delete(ctx),
        FilePublic => files::public(ctx),
        FilePublicPreflight => files::preflight(ctx),
        FileDownload => files::download(ctx),
        PlaylistList => playlists::list(ctx),
        PlaylistCreate => playlists::create(ctx),
        PlaylistGet => playlists::get(ctx),
        PlaylistUpdate => playlists::update(ctx),
        PlaylistDelete => playlists::delete(ctx),
        PlaylistAddTracks => playlists::add_tracks(ctx),
        PlaylistRemoveTrack => playlists::remove_track(ctx),
        PlaylistReorder => playlists::reorder(ctx),
        // Uploads never reach here: `handle` runs them with the body stream.
        FileUpload | PlaylistPoster => Err(ApiError::internal("upload routed as JSON")),
    }
}

/// Whether an endpoint reads its body itself, as a stream, after authentication.
fn is_upload(endpoint: Endpoint) -> bool {
    matches!(endpoint, FileUpload | PlaylistPoster)
}

/// Runs an upload endpoint. A signed upload is read whole first, since its signature
/// covers the body; an unsigned one is authenticated from its head and then streamed.
async fn upload(head: Request, body: incoming::BodyStream) -> Result<Response, ApiError> {
    let signed = head.header("x-signature").is_some();
    let (endpoint, ctx, source) = if signed {
        let max = files::max_upload().max(playlists::MAX_POSTER) + 64 * 1024;
        let bytes = incoming::collect(&head, body, max).await?;
        let mut req = head;
        *req.body_mut() = bytes;
        let (endpoint, mut ctx) = prepare(req, ROUTES, usize::try_from(max).unwrap_or(usize::MAX))?;
        let bytes = std::mem::take(ctx.req.body_mut());
        let len = bytes.len();
        (endpoint, ctx, files::Source::Bytes(bytes, 0..len))
    } else {
        let (endpoint, ctx) = prepare(head, ROUTES, 0)?;
        (endpoint, ctx, files::Source::Stream(body))
    };
    match endpoint {
        FileUpload => files::upload(&ctx, source).await,
        PlaylistPoster => playlists::poster(&ctx, source).await,
        _ => Err(ApiError::internal("not an upload endpoint")),
    }
}

#[http_component]
async fn handle(req: IncomingRequest, out: ResponseOutparam) {
    let head = incoming::head_of(&req);
    let body = incoming::body_stream(req);
    let method = head.method().to_string();
    let streamed = common::routing::find(ROUTES, &method, head.path())
        .is_ok_and(|m| is_upload(m.route.endpoint));
    let response = if streamed {
        upload(head, body).await.unwrap_or_else(|e| problem(&e))
    } else {
        match incoming::buffered(head, body).await {
            Ok(req) => serve(req, ROUTES, dispatch),
            Err(e) => problem(&e),
        }
    };
    incoming::send(out, response).await;
}
