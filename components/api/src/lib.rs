//! The REST API component: every `/api/` route that no other component serves.

mod broadcasts;
mod clients;
mod cohosts;
mod contact_form;
mod contacts;
mod events;
mod links;
mod passwords;
mod sessions;
mod sfu;
mod users;
mod webhooks;

use common::ApiError;
use common::routing::{Auth, Route, route};
use common::spin::http::{Ctx, serve};
use spin_sdk::http::{Request, Response};
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
}

use Auth::{Admin, ApiKey, Public, User};
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
    // Scheduled events
    route("POST", "/api/events", User, EventCreate),
    route("GET", "/api/events", User, EventList),
    route("GET", "/api/events/{id}", User, EventGet),
    route("DELETE", "/api/events/{id}", User, EventDelete),
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
    }
}

#[http_component]
fn handle(req: Request) -> Response {
    serve(req, ROUTES, dispatch)
}
