//! The four pages: parameters checked, cache validators computed, template rendered.

use crate::params::{self, RecordParams};
use crate::web::{self, PageHeaders};
use crate::{assets, render};
use domain::ApiError;
use domain::broadcast::{self as rules, REACTIONS, Status, StreamBases};
use domain::player::{self as player_rules, EmbedTokenClaims};
use domain::sfu as sfu_rules;
use edge::spin::config;
use edge::spin::http::PublicCtx;
use edge::spin::sfu::SfuConfig;
use minijinja::context;
use spin_sdk::http::Response;
use store::app;
use store::app::rooms;
use store::{Db, events};

/// The recording page connects to whatever SFU the egress names in `url`.
const RECORD_CSP: &[&str] = &[
    "connect-src 'self' ws: wss: http: https:",
    "media-src 'self' blob: mediastream:",
];

/// `GET /streams/{id}/record`: the recording page of a broadcast's or a scheduled event's
/// SFU room. An unknown room is 404. A private or subscribers-only room's page renders
/// only with a valid SFU token for its room in `token` (what LiveKit egress sends), and is
/// never cached by shared caches; other pages depend only on the stream id and the layout
/// parameters, so edges may cache them.
pub fn record(ctx: &PublicCtx) -> Result<Response, ApiError> {
    let stream_id = ctx.param("id");
    if !params::valid_stream_id(stream_id) {
        return Ok(web::text(400, "the stream id is not valid"));
    }
    let Some(stream) = stream_of_room(&ctx.db()?, stream_id, ctx.now())? else {
        return Ok(web::text(404, "no such stream"));
    };
    if stream.gated && !token_opens_room(ctx, stream_id) {
        return Ok(web::text(404, "no such stream"));
    }
    let system_resolution = config::var("default_resolution");
    let p = match params::record_params(ctx.query(), system_resolution.as_deref()) {
        Ok(p) => p,
        Err(message) => return Ok(web::text(400, &message)),
    };
    let tag = web::etag(&[assets::BUILD_ID, "record", stream_id, &p.cache_key()]);
    let csp = web::csp(RECORD_CSP);
    let headers = PageHeaders {
        etag: &tag,
        cache_control: if stream.gated {
            web::CACHE_NONE
        } else {
            web::CACHE_PAGE
        },
        csp: &csp,
    };
    // The tenant follows from the stream id, so the ETag (from the inputs) still holds.
    Ok(web::conditional_html(
        ctx.header("if-none-match"),
        &headers,
        || render_record(stream_id, &stream.client_id, &p),
    ))
}

/// What the recording page needs to know of the room it records.
struct RecordedStream {
    /// The tenant, which the relay needs for read-only sockets.
    client_id: String,
    /// Private or subscribers-only: its page renders only with a token for the room.
    gated: bool,
}

/// The broadcast (by streamId) or scheduled event (by streamId or room name) whose SFU
/// room is `room`.
fn stream_of_room(db: &Db, room: &str, now: i64) -> Result<Option<RecordedStream>, ApiError> {
    Ok(
        rooms::by_room_name(db, room, now)?.map(|found| match found {
            rooms::Room::Broadcast(b) => RecordedStream {
                client_id: b.client_id,
                gated: b.visibility.is_gated(),
            },
            rooms::Room::Event(e) => RecordedStream {
                client_id: e.client_id,
                gated: e.visibility.is_gated(),
            },
        }),
    )
}

/// Whether the request's `token` is an SFU access token for `room`, signed with the SFU's
/// API secret.
fn token_opens_room(ctx: &PublicCtx, room: &str) -> bool {
    let Some(token) = ctx.query_value("token") else {
        return false;
    };
    let Ok(sfu) = SfuConfig::load().credentials() else {
        return false;
    };
    sfu_rules::is_token_for_room(&sfu.api_key, &sfu.api_secret, &token, room, ctx.now())
}

fn render_record(stream_id: &str, client_id: &str, p: &RecordParams) -> Result<String, String> {
    render::render(
        "record.html",
        context! {
            stream_id,
            client_id,
            width => p.width,
            height => p.height,
            resolution => p.resolution.as_str(),
            orientation => p.orientation.as_str(),
            layout => p.layout.as_str(),
            reactions => REACTIONS,
            asset => context! {
                css => assets::url_value("pages.css"),
                livekit => assets::url_value("vendor/livekit-client.umd.js"),
                layout => assets::url_value("layout.js"),
                relay => assets::url_value("relay.js"),
                gifts => assets::url_value("gifts.js"),
                record => assets::url_value("record.js"),
            },
        },
    )
}

/// `GET /egress-player?file&type`: plays a public media file in a loop.
pub fn egress_player(ctx: &PublicCtx) -> Response {
    let p = match params::egress_params(ctx.query()) {
        Ok(p) => p,
        Err(message) => return web::text(400, &message),
    };
    let tag = web::etag(&[assets::BUILD_ID, "player", &p.file, p.media.as_str()]);
    let media_src = format!("media-src {}", p.origin);
    let csp = web::csp(&[&media_src]);
    let headers = PageHeaders {
        etag: &tag,
        cache_control: web::CACHE_PAGE,
        csp: &csp,
    };
    web::conditional_html(ctx.header("if-none-match"), &headers, || {
        render::render(
            "egress_player.html",
            context! {
                file => p.file,
                media_type => p.media.as_str(),
                asset => context! {
                    css => assets::url_value("pages.css"),
                    player => assets::url_value("egress-player.js"),
                },
            },
        )
    })
}

/// What the watch page shows of a broadcast.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchState {
    Upcoming,
    Live,
    Ended,
}

impl WatchState {
    /// A broadcast is live while active and not stale; completed, error and stale ones
    /// have ended.
    pub fn of(
        status: Status,
        last_heartbeat: Option<i64>,
        reconnect_deadline: Option<i64>,
        now: i64,
    ) -> WatchState {
        match status {
            Status::Pending => WatchState::Upcoming,
            Status::Active
                if rules::is_stale(
                    status,
                    last_heartbeat.unwrap_or(0),
                    reconnect_deadline,
                    now,
                ) =>
            {
                WatchState::Ended
            }
            Status::Active => WatchState::Live,
            Status::Completed | Status::Error => WatchState::Ended,
        }
    }

    fn key(self) -> &'static str {
        match self {
            WatchState::Upcoming => "upcoming",
            WatchState::Live => "live",
            WatchState::Ended => "ended",
        }
    }

    fn label(self) -> &'static str {
        match self {
            WatchState::Upcoming => "Starting soon",
            WatchState::Live => "Live",
            WatchState::Ended => "Ended",
        }
    }

    fn message(self) -> &'static str {
        match self {
            WatchState::Upcoming => "The broadcast has not started yet.",
            WatchState::Live => "",
            WatchState::Ended => "This broadcast has ended.",
        }
    }
}

/// What a watch page shows: a broadcast, or a scheduled event.
struct Watched {
    client_id: String,
    stream_id: String,
    title: String,
    state: WatchState,
    message: String,
    /// The broadcast (its recordings replay after the show); none for an event.
    broadcast: Option<store::broadcasts::Broadcast>,
}

/// The public or unlisted broadcast or scheduled event whose short id is `short_id`
/// (broadcasts first); private, subscribers-only and unknown ones are none. An event is
/// upcoming until its time, then live (its stream plays when it is published).
fn watched(db: &store::Db, short_id: &str, now: i64) -> Result<Option<Watched>, ApiError> {
    watched_with(db, short_id, now, None)
}

/// [`watched`], or with an embed token's `pass`: exactly the broadcast it names, whatever
/// its visibility (an event, or any other broadcast, is none).
fn watched_with(
    db: &store::Db,
    short_id: &str,
    now: i64,
    pass: Option<&EmbedTokenClaims>,
) -> Result<Option<Watched>, ApiError> {
    if let Some(b) = app::broadcasts::load_by_short_id(db, short_id, now)? {
        let admitted = match pass {
            Some(pass) => pass.tid == b.client_id && pass.bid == b.id,
            None => !b.visibility.is_gated(),
        };
        if !admitted {
            return Ok(None);
        }
        let state = WatchState::of(b.status, b.last_heartbeat, b.ingest_deadline, now);
        return Ok(Some(Watched {
            client_id: b.client_id.clone(),
            stream_id: b.identity.stream_id.clone(),
            title: b.title.clone(),
            state,
            message: state.message().to_string(),
            broadcast: Some(b),
        }));
    }
    if pass.is_some() {
        return Ok(None);
    }
    let Some(event) = events::load_by_any_short_id(db, short_id)? else {
        return Ok(None);
    };
    if event.visibility.is_gated() {
        return Ok(None);
    }
    let (state, message) = if now < event.scheduled_for {
        (
            WatchState::Upcoming,
            format!(
                "This event starts at {}.",
                domain::time::format_rfc3339(event.scheduled_for)
            ),
        )
    } else {
        (WatchState::Live, WatchState::Live.message().to_string())
    };
    Ok(Some(Watched {
        client_id: event.client_id,
        stream_id: event.identity.stream_id,
        title: event.title,
        state,
        message,
        broadcast: None,
    }))
}

/// What the player of a watched broadcast or event plays, and the policy that lets it.
struct PlayerSource {
    hls_url: String,
    latency_mode: &'static str,
    poster: String,
    replay_url: String,
    replay_type: &'static str,
    /// While live, when the tenant keeps replays: the DVR playlist (signed, as replays
    /// are), its window in seconds and when the show started (epoch seconds), for the
    /// player's rewind (docs/replays.md); empty otherwise.
    dvr_url: String,
    dvr_window: String,
    dvr_since: String,
    /// Seconds the player says reconnecting before it says ended, as the ingest waits
    /// (the relay's status frame usually says so first).
    reconnect_window: String,
    /// The page's `connect-src`, `media-src` and `img-src`.
    directives: [String; 3],
}

impl PlayerSource {
    /// The player of `watched`: its live stream (hls.js holds nearer the live edge for a
    /// low-latency broadcast), its poster while live, and after the show its latest ready
    /// recording (the page is only for broadcasts anyone may watch, so the recording's URL
    /// is no secret to this audience).
    ///
    /// A gated broadcast opened by an embed token plays with addresses signed with
    /// `signing` (the playback key, and the token's expiry).
    fn of(
        db: &Db,
        watched: &Watched,
        signing: Option<(&str, i64)>,
        now: i64,
    ) -> Result<PlayerSource, ApiError> {
        let latency_mode = watched
            .broadcast
            .as_ref()
            .map_or("standard", |b| b.latency_mode.as_str());
        let hls_base = config::var_or("playback_hls_base", "http://127.0.0.1:8080/hls");
        let hls_origin = params::http_origin(&hls_base);
        let bases = StreamBases {
            base_url: "",
            rtmp_ingest_base: "",
            playback_hls_base: &hls_base,
        };
        let hls_url = match &hls_origin {
            Some(_) => rules::hls_url(&bases, &watched.stream_id),
            None => String::new(),
        };
        // The media server's replay of the RTMP ingest when it is ready (docs/replays.md),
        // else the newest ready recording.
        let kept = match (watched.state, &watched.broadcast, &hls_origin) {
            (WatchState::Ended, Some(b), Some(_)) => store::replays::of_many(db, &[b.id.as_str()])?
                .remove(&b.id)
                .filter(|r| r.state == "ready"),
            _ => None,
        };
        let recording = match (watched.state, &watched.broadcast, &kept) {
            (WatchState::Ended, Some(b), None) => store::recordings::latest_ready(db, b)?
                .and_then(|r| Some((params::http_origin(r.url.as_deref()?)?, r))),
            _ => None,
        };
        let (replay_origin, replay_url, replay_type) = match (&kept, &recording) {
            (Some(_), _) => ("", signed_replay(&bases, &watched.stream_id, now), "hls"),
            (None, Some((origin, r))) => (
                origin.as_str(),
                r.url.clone().unwrap_or_default(),
                r.output.as_str(),
            ),
            (None, None) => ("", String::new(), ""),
        };
        // Rewinding a live broadcast whose replay is kept: from its start, within the
        // tenant's window.
        let (dvr_url, dvr_window, dvr_since) =
            match (watched.state, &watched.broadcast, &hls_origin) {
                (WatchState::Live, Some(b), Some(_))
                    if b.status == domain::broadcast::Status::Active
                        && store::replays::settings(db, &b.client_id)?.0 =>
                {
                    let since = b
                        .started_at
                        .as_deref()
                        .and_then(domain::time::parse_rfc3339)
                        .unwrap_or(now);
                    (
                        signed_replay_file(&bases, &watched.stream_id, "dvr.m3u8", now),
                        (store::replays::dvr_window_hours(db, &b.client_id)?.max(1) * 3600)
                            .to_string(),
                        since.to_string(),
                    )
                }
                _ => Default::default(),
            };
        // The media server refreshes a live stream's thumbnail: the player's poster.
        let poster = match (hls_origin.is_some(), watched.state) {
            (true, WatchState::Live) => rules::thumbnail_url(&bases, &watched.stream_id),
            _ => String::new(),
        };
        let gated = watched
            .broadcast
            .as_ref()
            .is_some_and(|b| b.visibility.is_gated());
        let (hls_url, poster) = match signing {
            Some((key, expires)) if gated => {
                let query = domain::media::signed_query(key, &watched.stream_id, expires);
                let sign = |url: String| match url.is_empty() {
                    true => url,
                    false => format!("{url}?{query}"),
                };
                (sign(hls_url), sign(poster))
            }
            _ => (hls_url, poster),
        };
        let origin = hls_origin.unwrap_or_default();
        let directives = [
            format!("connect-src 'self' {origin} {replay_origin}"),
            format!("media-src 'self' blob: {origin} {replay_origin}"),
            format!("img-src 'self' data: {origin}"),
        ]
        .map(|d| d.trim_end().to_string());
        let reconnect_window = config::var("ingest_reconnect_window")
            .and_then(|v| v.trim().parse::<i64>().ok())
            .filter(|secs| *secs >= 0)
            .unwrap_or(domain::media::DEFAULT_RECONNECT_WINDOW_SECS)
            .to_string();
        Ok(PlayerSource {
            hls_url,
            latency_mode,
            poster,
            replay_url,
            replay_type,
            dvr_url,
            dvr_window,
            dvr_since,
            reconnect_window,
            directives,
        })
    }

    /// The embed's own poster in place of the stream's thumbnail; the policy lets its
    /// origin.
    fn show_poster(&mut self, poster: &str, origin: &str) {
        self.poster = poster.to_string();
        self.directives[2] = format!("{} {origin}", self.directives[2]);
    }

    /// What the page's ETag depends on of the player.
    fn cache_parts(&self) -> [&str; 8] {
        [
            &self.hls_url,
            &self.replay_url,
            &self.dvr_url,
            &self.dvr_window,
            &self.dvr_since,
            &self.poster,
            self.latency_mode,
            &self.reconnect_window,
        ]
    }
}

/// The replay's master playlist, signed (replays always are: docs/replays.md). The expiry
/// moves in steps of ten minutes, so that the page (and its entity tag) stays the same
/// meanwhile; it is valid for at least `hls_url_ttl`.
fn signed_replay(bases: &StreamBases, stream_id: &str, now: i64) -> String {
    signed_replay_file(bases, stream_id, "index.m3u8", now)
}

/// `file` of the stream's replay directory (the replay's, or while live the DVR's), signed
/// as [`signed_replay`] signs.
fn signed_replay_file(bases: &StreamBases, stream_id: &str, file: &str, now: i64) -> String {
    let url = rules::hls_url(bases, stream_id).replace("/index.m3u8", &format!("/replay/{file}"));
    page_signed(url, stream_id, now)
}

/// `url` with a playback signature by `by` (a stream's id, or a clip's for its own
/// media), valid for at least `hls_url_ttl`. Its expiry moves in steps of ten minutes, so
/// that a page (and its entity tag) stays the same meanwhile. Unsigned without
/// `media_secret`.
fn page_signed(url: String, by: &str, now: i64) -> String {
    let Some(secret) = config::var("media_secret") else {
        return url;
    };
    let ttl = config::var("hls_url_ttl")
        .and_then(|v| v.trim().parse().ok())
        .filter(|ttl: &i64| *ttl > 0)
        .unwrap_or(domain::media::DEFAULT_SIGNED_TTL_SECS);
    let expires = (now / 600 + 1) * 600 + ttl;
    let key = domain::media::playback_key(&secret);
    format!("{url}?{}", domain::media::signed_query(&key, by, expires))
}

/// `GET /watch/{shortId}`: a public or unlisted broadcast or scheduled event; private,
/// subscribers-only and unknown ones are 404.
pub fn watch(ctx: &PublicCtx) -> Result<Response, ApiError> {
    let short_id = ctx.param("id");
    if !params::valid_stream_id(short_id) {
        return Ok(web::text(404, "no such broadcast"));
    }
    let db = ctx.db()?;
    let Some(watched) = watched(&db, short_id, ctx.now())? else {
        return Ok(web::text(404, "no such broadcast"));
    };
    let player = PlayerSource::of(&db, &watched, None, ctx.now())?;
    let [connect, media, images] = &player.directives;
    let csp = web::csp(&[connect, media, images]);
    let mut parts = vec![
        assets::BUILD_ID,
        "watch",
        short_id,
        &watched.stream_id,
        &watched.title,
        watched.state.key(),
        &watched.message,
    ];
    parts.extend(player.cache_parts());
    let tag = web::etag(&parts);
    let headers = PageHeaders {
        etag: &tag,
        cache_control: web::CACHE_REVALIDATE,
        csp: &csp,
    };
    // The view beacon names a broadcast by its short id (a scheduled event has no views).
    let beacon = if watched.broadcast.is_some() {
        short_id
    } else {
        ""
    };
    let Watched {
        client_id,
        stream_id,
        title,
        state,
        message,
        ..
    } = watched;
    Ok(web::conditional_html(
        ctx.header("if-none-match"),
        &headers,
        || {
            render::render(
                "watch.html",
                context! {
                    client_id,
                    stream_id,
                    beacon,
                    title,
                    status => state.key(),
                    status_label => state.label(),
                    message,
                    hls_url => player.hls_url,
                    latency_mode => player.latency_mode,
                    poster => player.poster,
                    replay_url => player.replay_url,
                    replay_type => player.replay_type,
                    dvr_url => player.dvr_url,
                    dvr_window => player.dvr_window,
                    dvr_since => player.dvr_since,
                    reconnect_window => player.reconnect_window,
                    asset => context! {
                        css => assets::url_value("pages.css"),
                        hls => assets::url_value("vendor/hls.light.min.js"),
                        relay => assets::url_value("relay.js"),
                        gifts => assets::url_value("gifts.js"),
                        watch => assets::url_value("watch.js"),
                        player => assets::url_value("live-player.js"),
                    },
                },
            )
        },
    ))
}

/// `GET /clips/{id}`: a clip of a public or unlisted broadcast (docs/replays.md#clips),
/// its player (the MP4 once ready, else the clip's HLS) and title; the tags link previews
/// read (Open Graph, Twitter) only for a public broadcast's. A private or
/// subscribers-only broadcast's clip, an unknown, deleted or failed one is 404: such
/// clips play through the API's signed addresses alone.
pub fn clip(ctx: &PublicCtx) -> Result<Response, ApiError> {
    let not_found = || Ok(web::text(404, "no such clip"));
    let Some(id) = domain::ids::parse_uuid(ctx.param("id")) else {
        return not_found();
    };
    let db = ctx.db()?;
    let now = ctx.now();
    let Some(clip) = store::clips::by_id(&db, &id)? else {
        return not_found();
    };
    if !matches!(clip.state.as_str(), "processing" | "ready") {
        return not_found();
    }
    let Some(b) = app::broadcasts::load_by_id_or_short(&db, &clip.broadcast_id, now)?
        .filter(|b| b.client_id == clip.client_id && !b.visibility.is_gated())
    else {
        return not_found();
    };
    let hls_base = config::var_or("playback_hls_base", "http://127.0.0.1:8080/hls");
    let hls_base = hls_base.trim_end_matches('/');
    let origin = params::http_origin(hls_base).unwrap_or_default();
    // Always signed, as the replay (docs/replays.md).
    let signed = |url: String, by: &str| page_signed(url, by, now);
    let ready = clip.state == "ready";
    // Empty: none (the template leaves its tag out).
    let when = |yes: bool, url: String, by: &str| if yes { signed(url, by) } else { String::new() };
    let own = |file: &str| format!("{hls_base}/clips/{}/{file}", clip.id);
    let mp4_url = when(ready, own("clip.mp4"), &clip.id);
    let thumbnail_url = when(ready && clip.thumbnail, own("thumbnail.jpg"), &clip.id);
    let replay = store::replays::of_many(&db, &[b.id.as_str()])?.remove(&b.id);
    let hls_url = when(
        domain::clip::hls_plays(
            clip.hls_ready_at.is_some(),
            false,
            replay.as_ref().map(|r| r.state.as_str()),
        ),
        format!(
            "{hls_base}/{}/replay/clips/{}/index.m3u8",
            clip.stream_id, clip.id
        ),
        &clip.stream_id,
    );
    let play_url = if ready { mp4_url.clone() } else { hls_url };
    let title = clip
        .title
        .clone()
        .filter(|t| !t.trim().is_empty())
        .unwrap_or_else(|| b.title.clone());
    let base_url = config::var_or("base_url", "http://127.0.0.1:3000");
    let base_url = base_url.trim_end_matches('/');
    let page_url = format!("{base_url}/clips/{}", clip.id);
    let watch_url = format!("{base_url}/watch/{}", b.identity.short_id);
    let og = b.visibility == domain::broadcast::Visibility::Public;
    let csp = web::csp(&[
        &format!("connect-src 'self' {origin}"),
        &format!("media-src 'self' blob: {origin}"),
        &format!("img-src 'self' data: {origin}"),
    ]);
    let tag = web::etag(&[
        assets::BUILD_ID,
        "clip",
        &clip.id,
        &title,
        &b.title,
        &clip.state,
        &play_url,
        &thumbnail_url,
        if og { "og" } else { "" },
    ]);
    let headers = PageHeaders {
        etag: &tag,
        cache_control: web::CACHE_REVALIDATE,
        csp: &csp,
    };
    let message = "The clip is being made: it plays in a few seconds.";
    Ok(web::conditional_html(
        ctx.header("if-none-match"),
        &headers,
        || {
            render::render(
                "clip.html",
                context! {
                    clip_id => clip.id,
                    state => clip.state,
                    title,
                    broadcast_title => b.title,
                    seconds => clip.duration_s,
                    og,
                    page_url,
                    watch_url,
                    play_url,
                    mp4_url,
                    thumbnail_url,
                    message,
                    asset => context! {
                        css => assets::url_value("pages.css"),
                        hls => assets::url_value("vendor/hls.light.min.js"),
                        player => assets::url_value("live-player.js"),
                    },
                },
            )
        },
    ))
}

/// What an embed token opens: one broadcast (its claims), played with addresses signed
/// with the playback key until the token expires.
struct EmbedPass {
    claims: EmbedTokenClaims,
    playback_key: String,
    expires: i64,
}

impl EmbedPass {
    /// The pass of `token`, none without one; `Err` when it opens nothing: not genuine,
    /// expired, of another audience, or no `media_secret` to check it with.
    fn of(token: Option<&str>, now: i64) -> Result<Option<EmbedPass>, ()> {
        let Some(token) = token else {
            return Ok(None);
        };
        let secret = config::var("media_secret").ok_or(())?;
        let key = player_rules::embed_token_key(&secret);
        let (claims, expires) =
            player_rules::verify_embed_token(&key, token, now).map_err(|_| ())?;
        Ok(Some(EmbedPass {
            claims,
            playback_key: domain::media::playback_key(&secret),
            expires,
        }))
    }
}

/// `GET /embed/{shortId}?autoplay&muted&controls`: the watch page's player alone, sized
/// to its frame, for a tenant's site. It is served for exactly the broadcasts and events
/// the watch page serves (private, subscribers-only and unknown ones are 404), and only
/// the tenant's embed origins may frame it: its `frame-ancestors` lists them, or is
/// `'none'` when the tenant has none.
pub fn embed(ctx: &PublicCtx) -> Result<Response, ApiError> {
    let short_id = ctx.param("id");
    if !params::valid_stream_id(short_id) {
        return Ok(web::text(404, "no such broadcast"));
    }
    let options = match params::embed_params(ctx.query()) {
        Ok(options) => options,
        Err(message) => return Ok(web::text(400, &message)),
    };
    let now = ctx.now();
    // A token that is not genuine, has expired or names another broadcast opens nothing:
    // 404, as for an unknown broadcast, so a page tells nothing of what it guards.
    let Ok(pass) = EmbedPass::of(options.token.as_deref(), now) else {
        return Ok(web::text(404, "no such broadcast"));
    };
    let db = ctx.db()?;
    let Some(watched) = watched_with(&db, short_id, now, pass.as_ref().map(|p| &p.claims))? else {
        return Ok(web::text(404, "no such broadcast"));
    };
    let origins = store::player::embed_origins(&db, &watched.client_id)?;
    let ancestors = domain::player::frame_ancestors(&origins);
    let signing = pass.as_ref().map(|p| (p.playback_key.as_str(), p.expires));
    let mut player = PlayerSource::of(&db, &watched, signing, now)?;
    if let Some((poster, origin)) = &options.poster {
        player.show_poster(poster, origin);
    }
    let [connect, media, images] = &player.directives;
    let csp = web::csp(&[connect, media, images, &ancestors]);
    let options_key = options.cache_key();
    // The policy is part of the answer: a change of origins is a new page.
    let mut parts = vec![
        assets::BUILD_ID,
        "embed",
        short_id,
        &watched.stream_id,
        &watched.title,
        watched.state.key(),
        &watched.message,
        &options_key,
        &ancestors,
    ];
    parts.extend(player.cache_parts());
    // A page a token opened carries signed addresses for its holder alone: never stored.
    let (tag, cache_control) = match pass {
        Some(_) => (String::new(), web::CACHE_NONE),
        None => (web::etag(&parts), web::CACHE_REVALIDATE),
    };
    let headers = PageHeaders {
        etag: &tag,
        cache_control,
        csp: &csp,
    };
    // The view beacon names a broadcast by its short id (a scheduled event has no views).
    let beacon = if watched.broadcast.is_some() {
        short_id
    } else {
        ""
    };
    let Watched {
        client_id,
        stream_id,
        title,
        state,
        message,
        ..
    } = watched;
    Ok(web::conditional_html(
        ctx.header("if-none-match"),
        &headers,
        || {
            render::render(
                "embed.html",
                context! {
                    client_id,
                    stream_id,
                    beacon,
                    title,
                    status => state.key(),
                    message,
                    hls_url => player.hls_url,
                    latency_mode => player.latency_mode,
                    poster => player.poster,
                    replay_url => player.replay_url,
                    replay_type => player.replay_type,
                    dvr_url => player.dvr_url,
                    dvr_window => player.dvr_window,
                    dvr_since => player.dvr_since,
                    reconnect_window => player.reconnect_window,
                    autoplay => options.autoplay,
                    muted => options.muted,
                    controls => options.controls,
                    start => options.start,
                    asset => context! {
                        css => assets::url_value("pages.css"),
                        hls => assets::url_value("vendor/hls.light.min.js"),
                        relay => assets::url_value("relay.js"),
                        watch => assets::url_value("watch.js"),
                        player => assets::url_value("live-player.js"),
                    },
                },
            )
        },
    ))
}

/// `GET /sfu-test`: a development page, served only when `enable_dev_pages` is true.
pub fn sfu_test(_ctx: &PublicCtx) -> Response {
    if !config::flag("enable_dev_pages") {
        return web::text(404, "not found");
    }
    let sfu_server_url = domain::sfu::client_url(&config::var_or("sfu_server_url", ""));
    let csp = web::csp(&[
        "connect-src 'self' ws: wss: http: https:",
        "media-src 'self' blob: mediastream:",
    ]);
    let headers = PageHeaders {
        etag: "",
        cache_control: web::CACHE_NONE,
        csp: &csp,
    };
    match render::render(
        "sfu_test.html",
        context! {
            sfu_server_url,
            asset => context! {
                css => assets::url_value("pages.css"),
                livekit => assets::url_value("vendor/livekit-client.umd.js"),
                sfu_test => assets::url_value("sfu-test.js"),
            },
        },
    ) {
        Ok(html) => web::html_response(200, &headers, html),
        Err(e) => web::server_error(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_states() {
        let now = 10_000;
        assert_eq!(
            WatchState::of(Status::Pending, None, None, now),
            WatchState::Upcoming
        );
        assert_eq!(
            WatchState::of(Status::Active, Some(now - 30), None, now),
            WatchState::Live
        );
        assert_eq!(
            WatchState::of(Status::Active, Some(now - 91), None, now),
            WatchState::Ended
        );
        assert_eq!(
            WatchState::of(Status::Active, None, None, now),
            WatchState::Ended
        );
        assert_eq!(
            WatchState::of(Status::Completed, None, None, now),
            WatchState::Ended
        );
        assert_eq!(
            WatchState::of(Status::Error, None, None, now),
            WatchState::Ended
        );
    }
}
