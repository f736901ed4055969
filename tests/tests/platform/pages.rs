//! The pages component end to end: parameters, defaults, escaping, caching headers and
//! assets over HTTP, then the pages in headless Chromium (layouts with simulated
//! participants, reactions, the recording contract, the egress player playing and looping
//! a test file served from a local HTTP server, the watch page live and ended), and the API
//! reference's component serving its viewer apart from them. Screenshots
//! go to `target/page-screenshots/` (the API reference's and the analytics dashboard's too,
//! from the `api_contract` and `analytics` suites).

use crate::support::browser;

use browser::Browser;
use platform_tests::{Exchange, Method, Platform, workspace_root};
use serde_json::{Value, json};
use std::time::Duration;

const LAYOUTS: [&str; 6] = [
    "default", "grid3x3", "grid4x4", "battle", "onebig", "active",
];
/// A stream id no broadcast or event has.
const UNKNOWN_STREAM: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";

async fn get(p: &Platform, path: &str) -> platform_tests::Response {
    p.request(Method::GET, path).send().await.expect("request")
}

/// `GET path` with `If-None-Match: tag`.
async fn get_if_none_match(p: &Platform, path: &str, tag: &str) -> platform_tests::Response {
    p.request(Method::GET, path)
        .header("if-none-match", tag)
        .send()
        .await
        .expect("request")
}

fn header<'a>(r: &'a platform_tests::Response, name: &str) -> &'a str {
    r.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// The value of `data-{name}="..."` in `html`.
fn data_attr<'a>(html: &'a str, name: &str) -> &'a str {
    let key = format!("data-{name}=\"");
    let start = html.find(&key).unwrap_or_else(|| panic!("no data-{name}")) + key.len();
    let end = html[start..].find('"').expect("closing quote") + start;
    &html[start..end]
}

/// Every `/static/...` URL referenced by `src=` or `href=` in `html`.
fn asset_urls(html: &str) -> Vec<String> {
    let mut urls = Vec::new();
    for key in ["src=\"/static/", "href=\"/static/"] {
        for (at, _) in html.match_indices(key) {
            let start = at + key.len() - "/static/".len();
            let end = html[start..].find('"').expect("closing quote") + start;
            urls.push(html[start..end].to_string());
        }
    }
    urls
}

#[tokio::test(flavor = "multi_thread")]
async fn record_page_parameters_and_defaults() {
    let p = Platform::start().await;
    let stream = recorded_stream(&p).await;
    let path = format!("/streams/{stream}/record");

    let r = get(&p, &path).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "content-type"), "text/html; charset=utf-8");
    let html = r.text().await.unwrap();
    assert_eq!(data_attr(&html, "stream-id"), stream);
    // The four reaction glyphs ship with the page.
    for reaction in ["heart", "sparkle", "thumbs_up", "surprised"] {
        assert!(
            html.contains(&format!("data-reaction=\"{reaction}\"")),
            "{reaction}"
        );
    }

    // (query, width, height, resolution, orientation, layout)
    for expected in [
        ("", "1080", "1920", "1080p", "portrait", "default"),
        (
            "?orientation=landscape",
            "1920",
            "1080",
            "1080p",
            "landscape",
            "default",
        ),
        (
            "?width=3840&height=2160&resolution=720p&layout=battle",
            "3840",
            "2160",
            "720p",
            "portrait",
            "battle",
        ),
    ] {
        let query = expected.0;
        let r = get(&p, &format!("{path}{query}")).await;
        assert_eq!(r.status(), 200, "{query}");
        let html = r.text().await.unwrap();
        let attrs = ["width", "height", "resolution", "orientation", "layout"];
        let values = [expected.1, expected.2, expected.3, expected.4, expected.5];
        for (name, value) in attrs.iter().zip(values) {
            assert_eq!(data_attr(&html, name), value, "{query}: {name}");
        }
    }
    for layout in LAYOUTS {
        let r = get(&p, &format!("{path}?layout={layout}")).await;
        assert_eq!(r.status(), 200, "{layout}");
        assert_eq!(data_attr(&r.text().await.unwrap(), "layout"), layout);
    }

    // Out-of-range and unknown values: a short plain-text 400, never a page.
    for (query, expected) in [
        ("width=3841", "width must be between 64 and 3840"),
        ("height=0", "height must be between 64 and 3840"),
        ("width=wide", "width must be a whole number of pixels"),
        ("width=-1080", "width must be a whole number of pixels"),
        ("resolution=4k", "resolution must be 720p or 1080p"),
        (
            "orientation=diagonal",
            "orientation must be portrait or landscape",
        ),
        (
            "layout=%3Cscript%3E",
            "layout must be one of default, grid3x3, grid4x4, battle, onebig, active",
        ),
    ] {
        let r = get(&p, &format!("{path}?{query}")).await;
        assert_eq!(r.status(), 400, "{query}");
        assert_eq!(header(&r, "content-type"), "text/plain; charset=utf-8");
        assert_eq!(r.text().await.unwrap().trim(), expected, "{query}");
    }
    let r = get(&p, "/streams/bad%3Cid%3E/record").await;
    assert_eq!(r.status(), 400);
    assert_eq!(r.text().await.unwrap().trim(), "the stream id is not valid");

    let r = p
        .request(Method::POST, &path)
        .send()
        .await
        .expect("request");
    assert_eq!(r.status(), 405);
}

#[tokio::test(flavor = "multi_thread")]
async fn resolution_follows_the_system_setting() {
    let p = Platform::start_with(&[("default_resolution", "720p")]).await;
    let stream = recorded_stream(&p).await;
    let path = format!("/streams/{stream}/record");
    let html = get(&p, &path).await.text().await.unwrap();
    assert_eq!(data_attr(&html, "resolution"), "720p");
    // The page size keeps the spec's defaults; an explicit resolution wins.
    assert_eq!(data_attr(&html, "width"), "1080");
    let html = get(&p, &format!("{path}?resolution=1080p"))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(data_attr(&html, "resolution"), "1080p");
}

#[tokio::test(flavor = "multi_thread")]
async fn record_page_is_edge_cacheable() {
    let p = Platform::start().await;
    let stream = recorded_stream(&p).await;
    let path = format!("/streams/{stream}/record?layout=grid3x3&width=1280&height=720");

    let r = get(&p, &path).await;
    assert_eq!(
        header(&r, "cache-control"),
        "public, max-age=60, s-maxage=300"
    );
    let etag = header(&r, "etag").to_string();
    assert!(
        etag.starts_with('"') && etag.ends_with('"'),
        "strong ETag: {etag}"
    );
    let csp = header(&r, "content-security-policy").to_string();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    assert!(csp.contains("default-src 'none'"), "{csp}");
    let body = r.text().await.unwrap();

    // The egress adds url and token; the page (and its validator) do not change.
    let with_token = format!("{path}&url=wss%3A%2F%2Fsfu.example&token=eyJhbGciOi.secret.sig");
    let r = get(&p, &with_token).await;
    assert_eq!(header(&r, "etag"), etag);
    let other = r.text().await.unwrap();
    assert_eq!(other, body);
    assert!(!other.contains("secret") && !other.contains("sfu.example"));

    // Parameter order and spelled-out defaults do not change it either.
    let reordered = format!(
        "/streams/{stream}/record?height=720&width=1280&orientation=portrait&layout=grid3x3&resolution=1080p"
    );
    assert_eq!(header(&get(&p, &reordered).await, "etag"), etag);
    // Other parameters or another stream do.
    let r = get(
        &p,
        &format!("/streams/{stream}/record?layout=grid4x4&width=1280&height=720"),
    )
    .await;
    assert_ne!(header(&r, "etag"), etag);
    let another = recorded_stream(&p).await;
    let r = get(
        &p,
        &format!("/streams/{another}/record?layout=grid3x3&width=1280&height=720"),
    )
    .await;
    assert_ne!(header(&r, "etag"), etag);

    // Conditional requests.
    for if_none_match in [
        etag.clone(),
        format!("W/{etag}"),
        format!("\"x\", {etag}"),
        "*".into(),
    ] {
        let r = get_if_none_match(&p, &with_token, &if_none_match).await;
        assert_eq!(r.status(), 304, "{if_none_match}");
        assert_eq!(header(&r, "etag"), etag);
        assert_eq!(
            header(&r, "cache-control"),
            "public, max-age=60, s-maxage=300"
        );
        assert!(r.bytes().await.unwrap().is_empty());
    }
    let r = get_if_none_match(&p, &path, "\"stale\"").await;
    assert_eq!(r.status(), 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn assets_are_hashed_immutable_and_exact() {
    let p = Platform::start().await;
    let stream = recorded_stream(&p).await;
    let html = get(&p, &format!("/streams/{stream}/record"))
        .await
        .text()
        .await
        .unwrap();
    let urls = asset_urls(&html);
    assert_eq!(urls.len(), 6, "{urls:?}");
    let static_dir = workspace_root().join("static");
    for url in &urls {
        // /static/<dir/>name.<10 hex>.<ext>, mapping back to static/<dir/>name.<ext>
        let public = url.strip_prefix("/static/").unwrap();
        let (stem, ext) = public.rsplit_once('.').unwrap();
        let (name, hash) = stem.rsplit_once('.').unwrap();
        assert_eq!(hash.len(), 10, "{url}");
        assert!(hash.bytes().all(|b| b.is_ascii_hexdigit()), "{url}");
        let original = std::fs::read(static_dir.join(format!("{name}.{ext}"))).unwrap();

        let r = get(&p, url).await;
        assert_eq!(r.status(), 200, "{url}");
        assert_eq!(
            header(&r, "cache-control"),
            "public, max-age=31536000, immutable"
        );
        let expected_type = match ext {
            "js" => "text/javascript; charset=utf-8",
            "css" => "text/css; charset=utf-8",
            other => panic!("unexpected asset type {other}"),
        };
        assert_eq!(header(&r, "content-type"), expected_type);
        assert_eq!(header(&r, "content-encoding"), "");
        let etag = header(&r, "etag").to_string();
        assert_eq!(
            r.bytes().await.unwrap().as_ref(),
            original.as_slice(),
            "{url}"
        );

        // Compressed for clients that accept gzip.
        let r = p
            .request(Method::GET, url)
            .header("accept-encoding", "gzip, br")
            .send()
            .await
            .unwrap();
        assert_eq!(header(&r, "content-encoding"), "gzip");
        assert_eq!(header(&r, "vary"), "accept-encoding");
        let gz = r.bytes().await.unwrap();
        assert_eq!(&gz[..2], &[0x1f, 0x8b]);
        let size = u32::from_le_bytes(gz[gz.len() - 4..].try_into().unwrap());
        assert_eq!(size as usize, original.len());

        let r = get_if_none_match(&p, url, &etag).await;
        assert_eq!(r.status(), 304);

        // The plain name is not served: only content-hashed names exist.
        assert_eq!(
            get(&p, &format!("/static/{name}.{ext}")).await.status(),
            404
        );
    }
    assert!(
        urls.iter()
            .any(|u| u.starts_with("/static/vendor/livekit-client.umd."))
    );
    assert_eq!(get(&p, "/static/vendor/nothing.js").await.status(), 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn egress_player_validates_and_escapes() {
    let p = Platform::start().await;
    let file = "https://cdn.example/media/loop.mp4?sig=a&b='x'";
    let r = p
        .request(Method::GET, "/egress-player")
        .query(&[("file", file), ("type", "video")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let csp = header(&r, "content-security-policy").to_string();
    assert!(csp.contains("media-src https://cdn.example"), "{csp}");
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(
        header(&r, "cache-control"),
        "public, max-age=60, s-maxage=300"
    );
    assert!(!header(&r, "etag").is_empty());
    let html = r.text().await.unwrap();
    assert!(html.contains("<video id=\"media\""), "{html}");
    assert!(!html.contains("b='x'"), "quotes must be escaped");
    assert!(html.contains("sig=a&amp;b=&#x27;x&#x27;"), "{html}");
    assert!(html.contains("loop"));

    let r = p
        .request(Method::GET, "/egress-player")
        .query(&[("file", "http://127.0.0.1:9/a.wav"), ("type", "audio")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(header(&r, "content-security-policy").contains("media-src http://127.0.0.1:9"));
    assert!(r.text().await.unwrap().contains("<audio id=\"media\""));

    for (query, expected) in [
        (vec![("type", "audio")], "file is required"),
        (
            vec![("file", "javascript:alert(1)"), ("type", "audio")],
            "file must be an absolute http or https URL",
        ),
        (
            vec![
                ("file", "data:audio/wav;base64,UklGRg=="),
                ("type", "audio"),
            ],
            "file must be an absolute http or https URL",
        ),
        (
            vec![("file", "/api/files/1/public"), ("type", "audio")],
            "file must be an absolute http or https URL",
        ),
        (
            vec![
                ("file", "https://cdn.example/\"><script>alert(1)</script>"),
                ("type", "video"),
            ],
            "file must be an absolute http or https URL",
        ),
        (
            vec![("file", "https://cdn.example/a.mp3")],
            "type is required (audio or video)",
        ),
        (
            vec![("file", "https://cdn.example/a.mp3"), ("type", "image")],
            "type must be audio or video",
        ),
    ] {
        let r = p
            .request(Method::GET, "/egress-player")
            .query(&query)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{query:?}");
        assert_eq!(header(&r, "content-type"), "text/plain; charset=utf-8");
        assert_eq!(r.text().await.unwrap().trim(), expected);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sfu_test_page_only_when_enabled() {
    let p = Platform::start().await;
    assert_eq!(get(&p, "/sfu-test").await.status(), 404);
    drop(p);
    let p = Platform::start_with(&[("enable_dev_pages", "true")]).await;
    let r = get(&p, "/sfu-test").await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "cache-control"), "no-store");
    let html = r.text().await.unwrap();
    for step in [
        "connect",
        "publish-camera",
        "publish-microphone",
        "subscribe",
    ] {
        assert!(html.contains(&format!("data-step=\"{step}\"")), "{step}");
    }
    assert_eq!(
        data_attr(&html, "server-url"),
        "ws:&#x2f;&#x2f;127.0.0.1:7880"
    );
}

/// A tenant with one user, who owns the broadcasts the tests create.
async fn broadcaster(p: &Platform) -> platform_tests::User {
    let t = p.register_client("Acme").await;
    p.signup(&t, "ada").await
}

/// Creates a broadcast through the API; answers its JSON and its short id.
async fn create_broadcast(
    p: &Platform,
    user: &platform_tests::User,
    body: Value,
) -> (Value, String) {
    let (status, created) = p
        .as_user(user, Method::POST, "/api/broadcasts")
        .json(&body)
        .answer()
        .await;
    assert_eq!(status, 200, "{created}");
    let watch_url = created["watchUrl"].as_str().expect("watchUrl");
    let short = watch_url.rsplit('/').next().expect("short id").to_string();
    (created, short)
}

/// The streamId of a new public broadcast (a tenant and a user of their own each time):
/// what a recording page records.
async fn recorded_stream(p: &Platform) -> String {
    let t = p.register_client("Recorder").await;
    let user = p
        .signup(&t, &format!("rec{}", platform_tests::unix_now()))
        .await;
    let (created, _) = create_broadcast(p, &user, json!({"title": "Recorded"})).await;
    created["streamId"].as_str().expect("streamId").to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_page_by_short_id() {
    let p = Platform::start_with(&[("playback_hls_base", "https://cdn.example/hls")]).await;
    let ada = broadcaster(&p).await;
    let (b, short) =
        create_broadcast(&p, &ada, json!({"title": "Ada <b>live</b> & \"friends\""})).await;
    let stream_id = b["streamId"].as_str().unwrap();

    let r = get(&p, &format!("/watch/{short}")).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "cache-control"), "no-cache");
    let csp = header(&r, "content-security-policy").to_string();
    assert!(
        csp.contains("connect-src 'self' https://cdn.example"),
        "{csp}"
    );
    let etag = header(&r, "etag").to_string();
    let html = r.text().await.unwrap();
    assert!(
        html.contains("Ada &lt;b&gt;live&lt;&#x2f;b&gt; &amp; &quot;friends&quot;"),
        "{html}"
    );
    assert!(!html.contains("<b>live"));
    assert_eq!(data_attr(&html, "status"), "upcoming");
    assert_eq!(data_attr(&html, "stream-id"), stream_id);
    // The page names the stream's tenant, which the relay needs for a read-only socket;
    // so does the recording page of the same stream; an unknown stream has no page.
    let claims = ada.token.split('.').nth(1).unwrap();
    let claims: Value = serde_json::from_slice(
        &base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, claims).unwrap(),
    )
    .unwrap();
    let tenant = claims["tid"].as_str().unwrap();
    assert_eq!(data_attr(&html, "client-id"), tenant);
    let record = get(&p, &format!("/streams/{stream_id}/record"))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(data_attr(&record, "client-id"), tenant);
    let unknown = get(&p, &format!("/streams/{UNKNOWN_STREAM}/record")).await;
    assert_eq!(unknown.status(), 404);
    assert_eq!(
        data_attr(&html, "hls-url"),
        format!("https:&#x2f;&#x2f;cdn.example&#x2f;hls&#x2f;{stream_id}&#x2f;index.m3u8")
    );

    // Unchanged: 304. Going live changes the page.
    let r = get_if_none_match(&p, &format!("/watch/{short}"), &etag).await;
    assert_eq!(r.status(), 304);
    let path = format!("/api/broadcasts/{}/status", b["id"].as_str().unwrap());
    let r = p
        .as_user(&ada, Method::POST, &path)
        .json(&json!({"status": "active"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = get_if_none_match(&p, &format!("/watch/{short}"), &etag).await;
    assert_eq!(r.status(), 200);
    assert_eq!(data_attr(&r.text().await.unwrap(), "status"), "live");

    // Private and unknown broadcasts are not found.
    let (_, private_short) = create_broadcast(
        &p,
        &ada,
        json!({"title": "secret", "visibility": "private"}),
    )
    .await;
    assert_eq!(
        get(&p, &format!("/watch/{private_short}")).await.status(),
        404
    );
    assert_eq!(get(&p, "/watch/nothere1").await.status(), 404);
    assert_eq!(get(&p, "/watch/%3Cx%3E").await.status(), 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_scheduled_events_watch_url_is_its_watch_page() {
    let p = Platform::start_with(&[("playback_hls_base", "https://cdn.example/hls")]).await;
    let ada = broadcaster(&p).await;
    let when = platform_tests::unix_now() + 3600;
    let scheduled_for = domain::time::format_rfc3339(when);
    let create = |title: &str, visibility: &str| {
        p.as_user(&ada, Method::POST, "/api/events").json(&json!({
            "title": title, "scheduledFor": scheduled_for, "visibility": visibility,
        }))
    };
    let (status, event) = create("Launch <night>", "public").answer().await;
    assert_eq!(status, 200, "{event}");
    let watch_url = event["watchUrl"].as_str().expect("watchUrl");
    let path = watch_url
        .split_once("/watch/")
        .map(|(_, short)| format!("/watch/{short}"))
        .expect("a watch page address");

    // Before its time: the page announces it, on the event's stream.
    let r = get(&p, &path).await;
    assert_eq!(r.status(), 200);
    let html = r.text().await.unwrap();
    assert_eq!(data_attr(&html, "status"), "upcoming");
    assert_eq!(
        data_attr(&html, "stream-id"),
        event["streamId"].as_str().unwrap()
    );
    assert!(html.contains("Launch &lt;night&gt;"), "{html}");
    assert!(
        html.contains(&format!("This event starts at {scheduled_for}.")),
        "{html}"
    );
    // A private event has no public page.
    let (status, private) = create("Rehearsal", "private").answer().await;
    assert_eq!(status, 200, "{private}");
    let private_short = private["watchUrl"]
        .as_str()
        .and_then(|u| u.rsplit('/').next())
        .expect("the private event's short id");
    assert_eq!(
        get(&p, &format!("/watch/{private_short}")).await.status(),
        404
    );

    // From its time on it plays the event's stream.
    p.advance_clock(std::time::Duration::from_secs(3601));
    let html = get(&p, &path).await.text().await.unwrap();
    assert_eq!(data_attr(&html, "status"), "live");
    assert!(data_attr(&html, "hls-url").contains(event["streamId"].as_str().unwrap()));
}

// ---------------------------------------------------------------------------------------
// In the browser

/// A tile rectangle.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Rect {
    x: i64,
    y: i64,
    w: i64,
    h: i64,
}

impl Rect {
    fn of(v: &Value) -> Rect {
        let n = |k: &str| {
            v[k].as_f64()
                .unwrap_or_else(|| panic!("{k} in {v}"))
                .round() as i64
        };
        Rect {
            x: n("x"),
            y: n("y"),
            w: n("w"),
            h: n("h"),
        }
    }

    fn overlaps(&self, o: &Rect) -> bool {
        self.x < o.x + o.w && o.x < self.x + self.w && self.y < o.y + o.h && o.y < self.y + self.h
    }

    fn inside(&self, width: i64, height: i64) -> bool {
        self.x >= 0
            && self.y >= 0
            && self.w > 0
            && self.h > 0
            && self.x + self.w <= width
            && self.y + self.h <= height
    }
}

/// Checks one layout's report: the stage is exactly the requested size, every tile the
/// engine placed is measured where it was placed, and the arrangement is the layout's.
fn check_layout(layout: &str, n: usize, width: i64, height: i64, report: &Value) {
    let ctx = format!("{layout} with {n} at {width}x{height}");
    assert_eq!(
        Rect::of(&report["stage"]),
        Rect {
            x: 0,
            y: 0,
            w: width,
            h: height
        },
        "{ctx}: stage size"
    );
    let tiles = report["tiles"].as_array().expect("tiles");
    assert_eq!(tiles.len(), n, "{ctx}");
    let capacity = match layout {
        "grid3x3" => 9,
        "grid4x4" => 16,
        _ => usize::MAX,
    };
    let visible: Vec<(usize, Rect)> = tiles
        .iter()
        .enumerate()
        .filter(|(_, t)| t["visible"] == true)
        .map(|(i, t)| {
            let measured = Rect::of(&t["measured"]);
            assert_eq!(
                measured,
                Rect::of(&t["expected"]),
                "{ctx}: tile {i} measured"
            );
            assert!(
                measured.inside(width, height),
                "{ctx}: tile {i} {measured:?}"
            );
            (i, measured)
        })
        .collect();
    assert_eq!(visible.len(), n.min(capacity), "{ctx}: visible tiles");
    assert_eq!(
        report["overflowShown"],
        n > capacity,
        "{ctx}: overflow badge"
    );
    assert_eq!(tiles[0]["role"], "host", "{ctx}: host first");

    // No two tiles overlap, except the strip floating over the host in `default`.
    for (a, ra) in &visible {
        for (b, rb) in &visible {
            if a < b && !(layout == "default" && *a == 0) {
                assert!(
                    !ra.overlaps(rb),
                    "{ctx}: tiles {a} {ra:?} and {b} {rb:?} overlap"
                );
            }
        }
    }
    let full = Rect {
        x: 0,
        y: 0,
        w: width,
        h: height,
    };
    let area: i64 = visible.iter().map(|(_, r)| r.w * r.h).sum();
    let host = visible[0].1;
    match layout {
        "grid3x3" | "grid4x4" => {
            let size = if layout == "grid3x3" { 3 } else { 4 };
            for (i, r) in &visible {
                assert!(
                    (r.w - width / size).abs() <= 1,
                    "{ctx}: tile {i} width {r:?}"
                );
                assert!(
                    (r.h - height / size).abs() <= 1,
                    "{ctx}: tile {i} height {r:?}"
                );
                let column = ((*i as i64 % size) * width) as f64 / size as f64;
                assert_eq!(r.x, column.round() as i64, "{ctx}: column of {i}");
            }
            if n >= capacity {
                assert_eq!(area, width * height, "{ctx}: the grid covers the frame");
            }
        }
        _ if n == 1 => assert_eq!(host, full, "{ctx}: one participant fills the frame"),
        "default" => {
            assert_eq!(host, full, "{ctx}: host fills the frame");
            for (_, r) in &visible[1..] {
                assert!(r.y > height / 2, "{ctx}: strip at the bottom {r:?}");
            }
        }
        "onebig" | "active" => {
            let main = report["main"].as_u64().unwrap() as usize;
            let big = visible.iter().find(|(i, _)| *i == main).unwrap().1;
            assert_eq!((big.x, big.y, big.w), (0, 0, width), "{ctx}: big rectangle");
            let strip: Vec<&Rect> = visible
                .iter()
                .filter(|(i, _)| *i != main)
                .map(|(_, r)| r)
                .collect();
            assert_eq!(
                strip.iter().map(|r| r.w).sum::<i64>(),
                width,
                "{ctx}: strip width"
            );
            for r in strip {
                assert_eq!(r.y, big.h, "{ctx}: strip right below");
                assert_eq!(r.y + r.h, height, "{ctx}: strip to the bottom");
            }
            assert_eq!(area, width * height, "{ctx}: covers the frame");
        }
        "battle" => {
            let (a, b) = (visible[0].1, visible[1].1);
            assert_eq!(
                (a.h, b.h, a.y, b.y),
                (height, height, 0, 0),
                "{ctx}: full height"
            );
            assert_eq!(a.x + a.w, b.x, "{ctx}: side by side");
            assert!((a.w - b.w).abs() <= 1, "{ctx}: equal halves");
            for (i, r) in &visible[2..] {
                assert!(
                    r.x + r.w <= a.x || r.x >= b.x + b.w,
                    "{ctx}: {i} at the sides"
                );
            }
        }
        other => panic!("unknown layout {other}"),
    }
}

fn screenshot_dir() -> std::path::PathBuf {
    workspace_root().join("target/page-screenshots")
}

#[tokio::test(flavor = "multi_thread")]
async fn layouts_in_the_browser() {
    let p = Platform::start().await;
    let stream = recorded_stream(&p).await;
    let mut browser = Browser::launch(&[]).await;
    let sizes: [(i64, i64, &[usize]); 2] = [(1080, 1920, &[1, 4, 9, 16]), (1280, 720, &[2, 9])];
    let mut tab = None;
    for (width, height, counts) in sizes {
        for layout in LAYOUTS {
            for &n in counts {
                let url = p.url(&format!(
                    "/streams/{stream}/record?layout={layout}&width={width}&height={height}&simulate={n}"
                ));
                let t = match tab.take() {
                    None => browser.open(&url, width as u32, height as u32).await,
                    Some(t) => {
                        browser.resize(&t, width as u32, height as u32).await;
                        browser.navigate(&t, &url).await;
                        t
                    }
                };
                let report = browser
                    .wait_for(
                        &t,
                        "(function(){var r = window.recordPage && window.recordPage.report();\
                          return r && r.recording === 'started' ? r : null;})()",
                        Duration::from_secs(15),
                    )
                    .await;
                check_layout(layout, n, width, height, &report);
                if n == 9 || (width < height && n == 4 && layout == "battle") {
                    let file = format!("{layout}-{width}x{height}-{n}.png");
                    browser.screenshot(&t, &screenshot_dir().join(file)).await;
                }
                browser.assert_clean(&t).await;
                tab = Some(t);
            }
        }
    }
    // The SFU client library loaded (it is what a real recording connects with).
    let t = tab.expect("a tab");
    let loaded = browser
        .eval(
            &t,
            "typeof LivekitClient === 'object' && typeof LivekitClient.Room",
        )
        .await;
    assert_eq!(loaded, "function");
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn relayout_reactions_and_the_recording_contract() {
    let p = Platform::start().await;
    let stream = recorded_stream(&p).await;
    let mut browser = Browser::launch(&[]).await;
    let (w, h) = (720, 1280);
    let url = p.url(&format!(
        "/streams/{stream}/record?layout=active&width={w}&height={h}&simulate=3&react=1&end=4000"
    ));
    let t = browser.open(&url, w, h).await;
    let report = browser
        .wait_for(
            &t,
            "(function(){var r = recordPage.report(); return r.recording === 'started' ? r : null;})()",
            Duration::from_secs(15),
        )
        .await;

    // The four reactions float over the stage, each drawn with its glyph.
    let reactions = report["reactions"].as_array().unwrap();
    let kinds: Vec<&str> = reactions
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["heart", "sparkle", "thumbs_up", "surprised"]);
    for r in reactions {
        assert_eq!(r["glyph"], r["kind"]);
        let b = Rect::of(&r["box"]);
        assert!(b.w > 0 && b.h > 0 && b.inside(w as i64, h as i64), "{r}");
    }
    browser
        .screenshot(&t, &screenshot_dir().join("reactions-720x1280.png"))
        .await;
    // A reaction arriving from the relay later shows too; unknown kinds are ignored.
    let count = browser
        .eval(
            &t,
            "recordPage.relayFrame({type:'event',event:{kind:'reaction',reaction:'heart'}});\
             recordPage.relayFrame({type:'event',event:{kind:'reaction',reaction:'<img>'}});\
             recordPage.report().reactions.length",
        )
        .await;
    assert_eq!(count, 5);

    // Joining and leaving re-lay out.
    let joined = browser
        .eval(&t, "recordPage.simulateJoin(); recordPage.report()")
        .await;
    check_layout("active", 4, w as i64, h as i64, &joined);
    let left = browser
        .eval(&t, "recordPage.leave('sim-1'); recordPage.report()")
        .await;
    check_layout("active", 3, w as i64, h as i64, &left);
    assert!(
        left["tiles"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["id"] != "sim-1")
    );

    // The active speaker takes the big rectangle and is highlighted.
    let active = browser
        .eval(&t, "recordPage.setActive('sim-2'); recordPage.report()")
        .await;
    check_layout("active", 3, w as i64, h as i64, &active);
    let tiles = active["tiles"].as_array().unwrap();
    let speaker = tiles.iter().position(|t| t["id"] == "sim-2").unwrap();
    assert_eq!(active["main"], speaker);
    assert_eq!(Rect::of(&tiles[speaker]["measured"]).w, w as i64);
    assert_eq!(tiles[speaker]["active"], true);
    assert!(tiles.iter().filter(|t| t["active"] == true).count() == 1);

    // A layout event from the relay re-flows the page.
    let regrid = browser
        .eval(
            &t,
            "recordPage.relayFrame({type:'event',event:{kind:'layout',layout:'grid3x3'}}); recordPage.report()",
        )
        .await;
    check_layout("grid3x3", 3, w as i64, h as i64, &regrid);

    // START_RECORDING once media played, END_RECORDING when the room ended, once each.
    browser
        .wait_for(
            &t,
            "recordPage.report().recording === 'ended'",
            Duration::from_secs(10),
        )
        .await;
    let logs = browser.console_of(&t);
    let count_of = |what: &str| {
        logs.iter()
            .filter(|l| *l == &format!("log: {what}"))
            .count()
    };
    assert_eq!(count_of("START_RECORDING"), 1, "{logs:?}");
    assert_eq!(count_of("END_RECORDING"), 1, "{logs:?}");
    let start = logs
        .iter()
        .position(|l| l == "log: START_RECORDING")
        .unwrap();
    let end = logs.iter().position(|l| l == "log: END_RECORDING").unwrap();
    assert!(start < end);
    browser.assert_clean(&t).await;

    // Without url/token and without simulation the page waits, and does not start.
    browser
        .navigate(
            &t,
            &p.url(&format!("/streams/{stream}/record?width={w}&height={h}")),
        )
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle = browser.eval(&t, "recordPage.report()").await;
    assert_eq!(idle["recording"], "waiting");
    assert_eq!(idle["waitingShown"], true);
    assert_eq!(idle["tiles"], json!([]));

    // With url and token it connects through livekit-client; an unreachable SFU is
    // reported, and recording never starts (the room's disconnect ends the egress).
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let sfu = format!("ws://{}", closed.local_addr().unwrap());
    drop(closed);
    let with_sfu = format!(
        "/streams/{stream}/record?width={w}&height={h}&url={}&token=not-a-token",
        sfu.replace(':', "%3A").replace('/', "%2F")
    );
    browser.navigate(&t, &p.url(&with_sfu)).await;
    let failed = browser
        .wait_for(
            &t,
            "(function(){var r = recordPage.report(); return r.room === 'error' ? r : null;})()",
            Duration::from_secs(30),
        )
        .await;
    assert_ne!(failed["recording"], "started");
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .starts_with("could not connect to the room"),
        "{failed}"
    );
    browser.close().await;
}

/// A mono 16-bit PCM WAV of `millis` of a 440 Hz tone at 8 kHz.
fn tone_wav(millis: u32) -> Vec<u8> {
    let rate = 8000u32;
    let samples = rate * millis / 1000;
    let mut data = Vec::with_capacity(samples as usize * 2);
    for i in 0..samples {
        let t = i as f64 / rate as f64;
        let v = ((t * 440.0 * std::f64::consts::TAU).sin() * 8000.0) as i16;
        data.extend(v.to_le_bytes());
    }
    let mut wav = Vec::new();
    wav.extend(b"RIFF");
    wav.extend((36 + data.len() as u32).to_le_bytes());
    wav.extend(b"WAVEfmt ");
    wav.extend(16u32.to_le_bytes());
    wav.extend(1u16.to_le_bytes()); // PCM
    wav.extend(1u16.to_le_bytes()); // mono
    wav.extend(rate.to_le_bytes());
    wav.extend((rate * 2).to_le_bytes());
    wav.extend(2u16.to_le_bytes());
    wav.extend(16u16.to_le_bytes());
    wav.extend(b"data");
    wav.extend((data.len() as u32).to_le_bytes());
    wav.extend(data);
    wav
}

/// A tiny HTTP/1.1 file server on loopback: `/tone.wav` (with byte ranges), 404 otherwise.
async fn media_server(wav: Vec<u8>) -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let wav = std::sync::Arc::new(wav);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let wav = wav.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 2048];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&request).to_string();
                let path = text.split_whitespace().nth(1).unwrap_or("");
                let range = text.lines().find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    (k.eq_ignore_ascii_case("range")).then(|| v.trim().to_string())
                });
                let response = if path != "/tone.wav" {
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                        .to_vec()
                } else {
                    let len = wav.len();
                    let (start, end) = range
                        .and_then(|r| {
                            let r = r.strip_prefix("bytes=")?;
                            let (a, b) = r.split_once('-')?;
                            let a: usize = a.parse().ok()?;
                            let b: usize = if b.is_empty() {
                                len - 1
                            } else {
                                b.parse().ok()?
                            };
                            Some((a.min(len - 1), b.min(len - 1)))
                        })
                        .map_or((None, None), |(a, b)| (Some(a), Some(b)));
                    let (status, a, b) = match (start, end) {
                        (Some(a), Some(b)) => ("206 Partial Content", a, b),
                        _ => ("200 OK", 0, len - 1),
                    };
                    let mut head = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: audio/wav\r\naccept-ranges: bytes\r\n\
                         content-length: {}\r\nconnection: close\r\n",
                        b - a + 1
                    );
                    if status.starts_with("206") {
                        head.push_str(&format!("content-range: bytes {a}-{b}/{len}\r\n"));
                    }
                    head.push_str("\r\n");
                    let mut out = head.into_bytes();
                    out.extend_from_slice(&wav[a..=b]);
                    out
                };
                let _ = stream.write_all(&response).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread")]
async fn egress_player_plays_and_loops() {
    let p = Platform::start().await;
    let media = media_server(tone_wav(600)).await;
    let file = format!("http://{media}/tone.wav");
    let mut browser = Browser::launch(&["--autoplay-policy=no-user-gesture-required"]).await;
    let page = p.url(&format!(
        "/egress-player?type=audio&file={}",
        file.replace(':', "%3A").replace('/', "%2F")
    ));
    let t = browser.open(&page, 640, 360).await;
    // Plays, unmutes (the egress browser allows autoplay with sound) and loops.
    let state = browser
        .wait_for(
            &t,
            "(function(){var s = document.getElementById('state').dataset;\
              return s.state === 'playing' && Number(s.loops) >= 2 ? Object.assign({}, s) : null;})()",
            Duration::from_secs(20),
        )
        .await;
    assert_eq!(state["muted"], "false", "{state}");
    let media_state = browser
        .eval(&t, "(function(){var m = document.getElementById('media'); return {loop: m.loop, paused: m.paused, duration: m.duration};})()")
        .await;
    assert_eq!(media_state["loop"], true);
    assert_eq!(media_state["paused"], false);
    assert!(
        (media_state["duration"].as_f64().unwrap() - 0.6).abs() < 0.05,
        "{media_state}"
    );
    browser
        .screenshot(&t, &screenshot_dir().join("egress-player.png"))
        .await;
    browser.assert_clean(&t).await;

    // A file that is not there: the error is shown on the page.
    let missing = format!("http://{media}/missing.wav");
    browser
        .navigate(
            &t,
            &p.url(&format!(
                "/egress-player?type=audio&file={}",
                missing.replace(':', "%3A").replace('/', "%2F")
            )),
        )
        .await;
    let error = browser
        .wait_for(
            &t,
            "(function(){var e = document.getElementById('error'); return e.hidden ? null : e.textContent;})()",
            Duration::from_secs(10),
        )
        .await;
    assert!(error.as_str().unwrap().contains("missing.wav"), "{error}");
    assert_eq!(
        browser
            .eval(&t, "document.getElementById('state').dataset.state")
            .await,
        "error"
    );
    browser.close().await;

    // A browser that refuses autoplay: the page says so, and starts on the first gesture.
    let mut browser =
        Browser::launch(&["--autoplay-policy=document-user-activation-required"]).await;
    let t = browser.open(&page, 640, 360).await;
    let notice = browser
        .wait_for(
            &t,
            "(function(){var e = document.getElementById('error');\
              return document.getElementById('state').dataset.state === 'blocked' && !e.hidden ? e.textContent : null;})()",
            Duration::from_secs(10),
        )
        .await;
    assert!(notice.as_str().unwrap().contains("click"), "{notice}");
    browser.click(&t, 320, 180).await;
    browser
        .wait_for(
            &t,
            "(function(){var s = document.getElementById('state').dataset;\
              return s.state === 'playing' && Number(s.loops) >= 1 && document.getElementById('error').hidden;})()",
            Duration::from_secs(20),
        )
        .await;
    browser.assert_clean(&t).await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_page_in_the_browser() {
    let p = Platform::start().await;
    let ada = broadcaster(&p).await;
    let (_, short) =
        create_broadcast(&p, &ada, json!({"title": "<img src=x onerror=alert(1)>"})).await;
    let mut browser = Browser::launch(&[]).await;
    let tab = browser
        .open(&p.url(&format!("/watch/{short}")), 1280, 720)
        .await;
    let title = browser
        .eval(&tab, "document.getElementById('title').textContent")
        .await;
    assert_eq!(title, "<img src=x onerror=alert(1)>");
    assert_eq!(browser.eval(&tab, "document.images.length").await, 0);
    assert_eq!(
        browser.eval(&tab, "typeof Hls.isSupported").await,
        "function"
    );
    // Chat frames from the relay are shown as text; status events switch the state.
    let shown = browser
        .eval(
            &tab,
            "watchPage.relayFrame({type:'history',messages:[{senderName:'bo',message:'<b>hi</b>'}]});\
             watchPage.relayFrame({type:'message',message:{username:'cy',message:'second'}});\
             watchPage.relayFrame({type:'event',event:{kind:'status',status:'completed'}});\
             ({items: Array.from(document.querySelectorAll('#chat li')).map(li => li.textContent),\
               bold: document.querySelectorAll('#chat b').length,\
               status: document.getElementById('status').textContent})",
        )
        .await;
    assert_eq!(shown["items"], json!(["bo<b>hi</b>", "cysecond"]));
    assert_eq!(shown["bold"], 0);
    assert_eq!(shown["status"], "Ended");
    // The end closes the chat: the page says so, not that it is live and connected.
    let panel = chat_panel(&mut browser, &tab).await;
    assert_eq!(
        (&panel["heading"], &panel["state"], &panel["live"]),
        (&json!("Chat"), &json!(CHAT_CLOSED), &json!(false)),
        "{panel}"
    );
    browser
        .screenshot(&tab, &screenshot_dir().join("watch.png"))
        .await;
    browser.assert_clean(&tab).await;
    browser.close().await;
}

/// The watch page's chat panel: its heading, its state line, its messages.
async fn chat_panel(browser: &mut Browser, tab: &browser::Tab) -> Value {
    browser
        .eval(
            tab,
            "({heading: document.querySelector('.watch-chat h2').textContent,\
               state: document.getElementById('chat-state').textContent,\
               messages: Array.from(document.querySelectorAll('#chat li')).map(li => li.textContent),\
               live: /live chat|chat connected/i.test(document.body.innerText)})",
        )
        .await
}

/// What an ended broadcast's chat panel says under its heading "Chat".
const CHAT_CLOSED: &str = "Chat closed: the broadcast has ended";

/// An ended broadcast's watch page, opened after the end: its last messages (the relay's
/// history) under a closed chat, never "Live chat" or "Chat connected".
#[tokio::test(flavor = "multi_thread")]
async fn an_ended_broadcasts_watch_page_shows_its_chat_closed() {
    let p = Platform::start().await;
    let ada = broadcaster(&p).await;
    let (b, short) = create_broadcast(&p, &ada, json!({"title": "Over"})).await;
    let id = b["id"].as_str().unwrap();
    let status = |to: &'static str| {
        p.as_user(&ada, Method::POST, &format!("/api/broadcasts/{id}/status"))
            .json(&json!({ "status": to }))
            .answer()
    };
    assert_eq!(status("active").await.0, 200);
    let (code, posted) = p
        .as_user(&ada, Method::POST, &format!("/api/broadcasts/{id}/chat"))
        .json(&json!({"message": "thanks for watching"}))
        .answer()
        .await;
    assert_eq!(code, 200, "{posted}");
    assert_eq!(status("completed").await.0, 200);

    let mut browser = Browser::launch(&[]).await;
    let tab = browser
        .open(&p.url(&format!("/watch/{short}")), 1280, 720)
        .await;
    // Before the relay answers, and after it has sent the history.
    let first = chat_panel(&mut browser, &tab).await;
    assert_eq!(
        (&first["heading"], &first["state"], &first["live"]),
        (&json!("Chat"), &json!(CHAT_CLOSED), &json!(false)),
        "{first}"
    );
    browser
        .wait_for(
            &tab,
            "document.querySelectorAll('#chat li').length > 0",
            Duration::from_secs(10),
        )
        .await;
    // A moment for a late socket state to (not) change the panel.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let panel = chat_panel(&mut browser, &tab).await;
    assert_eq!(
        panel,
        json!({
            "heading": "Chat",
            "state": CHAT_CLOSED,
            "messages": [format!("{}thanks for watching", posted["senderName"].as_str().unwrap())],
            "live": false,
        })
    );
    browser
        .screenshot(&tab, &screenshot_dir().join("watch-ended.png"))
        .await;
    browser.assert_clean(&tab).await;
    browser.close().await;
}

/// A gift sent through the API is seen live: the relay's `gift` event becomes an animated
/// banner on the watch page and on the recording page, with the combo count, as text.
#[tokio::test(flavor = "multi_thread")]
async fn gifts_animate_live_on_the_watch_and_recording_pages() {
    let p = Platform::start().await;
    let t = p.register_client("Gifting").await;
    let host = p.signup(&t, "host").await;
    let fan = p.signup(&t, "fan").await;
    for (id, name, animation) in [
        ("rose", "<b>Rose</b>", "large"),
        ("comet", "Comet", "fullscreen"),
    ] {
        let body = json!({"name": name, "priceTokens": 5, "animation": animation});
        let (status, answer) = p
            .as_server(&t, Method::PUT, &format!("/api/v1/gifts/{id}"), Some(&body))
            .answer()
            .await;
        assert_eq!(status, 200, "{answer}");
    }
    let credit = json!({"tokens": 100, "reference": "receipt"});
    let (status, answer) = p
        .as_server(
            &t,
            Method::POST,
            &format!("/api/v1/wallets/{}/credits", fan.id),
            Some(&credit),
        )
        .header("idempotency-key", "credit-1")
        .answer()
        .await;
    assert_eq!(status, 201, "{answer}");
    let (created, short) = create_broadcast(&p, &host, json!({"title": "Gifts"})).await;
    let id = created["id"].as_str().unwrap();
    let stream = created["streamId"].as_str().unwrap();
    let (status, _) = p
        .as_user(&host, Method::POST, &format!("/api/broadcasts/{id}/status"))
        .send_json(&json!({"status": "active"}))
        .await;
    assert_eq!(status, 200);
    let gift = |key: &'static str, body: Value| {
        p.as_user(&fan, Method::POST, &format!("/api/broadcasts/{id}/gifts"))
            .header("idempotency-key", key)
            .json(&body)
            .answer()
    };

    let mut browser = Browser::launch(&[]).await;
    let watch = browser
        .open(&p.url(&format!("/watch/{short}")), 1280, 720)
        .await;
    browser
        .wait_for(
            &watch,
            "document.getElementById('chat-state').textContent === 'Chat connected' || null",
            Duration::from_secs(10),
        )
        .await;
    let (status, sent) = gift("g1", json!({"giftId": "rose", "quantity": 2})).await;
    assert_eq!(status, 201, "{sent}");
    let shown = browser
        .wait_for(
            &watch,
            "watchPage.gifts().length > 0 ? watchPage.gifts() : null",
            Duration::from_secs(10),
        )
        .await;
    assert_eq!(shown[0]["gift"], "rose");
    assert_eq!(shown[0]["size"], "large");
    assert_eq!(shown[0]["text"], "fan sent <b>Rose</b> \u{d7}2");
    assert!(shown[0]["box"]["w"].as_i64().unwrap() > 0);
    assert_eq!(
        browser
            .eval(&watch, "document.querySelectorAll('#gifts b').length")
            .await,
        0
    );
    let (status, _) = gift("g2", json!({"giftId": "rose"})).await;
    assert_eq!(status, 201);
    let combo = browser
        .wait_for(
            &watch,
            "(function(){var g = watchPage.gifts().filter(function(x){return x.combo === 2;}); return g.length ? g[0] : null;})()",
            Duration::from_secs(10),
        )
        .await;
    assert!(
        combo["text"].as_str().unwrap().ends_with("combo \u{d7}2"),
        "{combo}"
    );
    browser
        .screenshot(&watch, &screenshot_dir().join("watch-gift.png"))
        .await;

    // The recording page shows an anonymous fullscreen gift without a sender.
    let (w, h) = (1280, 720);
    let record = browser
        .open(
            &p.url(&format!("/streams/{stream}/record?width={w}&height={h}")),
            w,
            h,
        )
        .await;
    browser
        .wait_for(
            &record,
            "recordPage.report().relay === 'open' || null",
            Duration::from_secs(10),
        )
        .await;
    let (status, _) = gift("g3", json!({"giftId": "comet", "anonymous": true})).await;
    assert_eq!(status, 201);
    let shown = browser
        .wait_for(
            &record,
            "(function(){var g = recordPage.report().gifts; return g.length ? g : null;})()",
            Duration::from_secs(10),
        )
        .await;
    assert_eq!(shown[0]["text"], "Someone sent Comet");
    assert_eq!(shown[0]["size"], "fullscreen");
    // Fullscreen covers the stage.
    let b = &shown[0]["box"];
    let (bw, bh) = (b["w"].as_i64().unwrap(), b["h"].as_i64().unwrap());
    assert!(bw >= w as i64 - 2 && bh >= h as i64 - 2, "{shown}");
    browser
        .screenshot(&record, &screenshot_dir().join("record-gift.png"))
        .await;
    browser.assert_clean(&watch).await;
    browser.close().await;
}

/// Sets the tenant's embed origins through its server's API; answers the stored setting.
async fn set_embed_origins(
    p: &Platform,
    tenant: &platform_tests::Tenant,
    origins: &[&str],
) -> Value {
    let body = json!({ "embedOrigins": origins });
    let (status, answer) = p
        .as_server(tenant, Method::PUT, "/api/v1/player", Some(&body))
        .answer()
        .await;
    assert_eq!(status, 200, "{answer}");
    answer
}

/// The sources of the policy's `frame-ancestors` directive.
fn frame_ancestors(csp: &str) -> Vec<String> {
    let directives: Vec<&str> = csp
        .split(';')
        .map(str::trim)
        .filter(|d| d.starts_with("frame-ancestors "))
        .collect();
    assert_eq!(directives.len(), 1, "{csp}");
    directives[0]
        .split_whitespace()
        .skip(1)
        .map(str::to_string)
        .collect()
}

/// The embed's own poster replaces the thumbnail (its origin, and no other, joins the
/// page's `img-src`) and `t` is where a replay starts; both are part of the page's ETag.
#[tokio::test(flavor = "multi_thread")]
async fn the_embed_page_takes_a_poster_and_a_start_time() {
    let p = Platform::start_with(&[("playback_hls_base", "https://cdn.example/hls")]).await;
    let tenant = p.register_client("Embedder").await;
    let ada = p.signup(&tenant, "ada").await;
    let (_, short) = create_broadcast(&p, &ada, json!({"title": "Poster"})).await;
    let plain = get(&p, &format!("/embed/{short}")).await;
    let plain_tag = header(&plain, "etag").to_string();
    let plain_csp = header(&plain, "content-security-policy").to_string();
    assert!(!plain_csp.contains("img.shop.example"), "{plain_csp}");

    let poster = "https%3A%2F%2FImg.Shop.Example%2Fposters%2Fp.jpg%3Fv%3D2";
    let r = get(&p, &format!("/embed/{short}?poster={poster}&t=90")).await;
    assert_eq!(r.status(), 200);
    assert_ne!(
        header(&r, "etag"),
        plain_tag,
        "the options are another page"
    );
    let csp = header(&r, "content-security-policy").to_string();
    let images = csp
        .split(';')
        .map(str::trim)
        .find(|d| d.starts_with("img-src"))
        .unwrap_or_default()
        .to_string();
    assert_eq!(
        images, "img-src 'self' data: https://cdn.example https://img.shop.example",
        "{csp}"
    );
    let html = r.text().await.unwrap();
    assert_eq!(data_attr(&html, "start"), "90");
    let player = html[html.find("<live-player").unwrap()..]
        .split('>')
        .next()
        .unwrap()
        .to_string();
    assert!(
        player
            .contains("poster=\"https:&#x2f;&#x2f;Img.Shop.Example&#x2f;posters&#x2f;p.jpg?v=2\""),
        "{player}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_embed_page_is_framed_by_the_tenants_origins_alone() {
    let p = Platform::start_with(&[("playback_hls_base", "https://cdn.example/hls")]).await;
    let tenant = p.register_client("Embedder").await;
    let ada = p.signup(&tenant, "ada").await;
    let (b, short) = create_broadcast(&p, &ada, json!({"title": "Shop <live> & \"sale\""})).await;
    let stream_id = b["streamId"].as_str().unwrap();
    let embed = format!("/embed/{short}");

    // No origins yet: no site may frame it.
    let (status, setting) = p
        .as_server(&tenant, Method::GET, "/api/v1/player", None)
        .answer()
        .await;
    assert_eq!(
        (status.as_u16(), &setting),
        (200, &json!({"embedOrigins": []}))
    );
    let r = get(&p, &embed).await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        frame_ancestors(header(&r, "content-security-policy")),
        ["'none'"]
    );
    let before = header(&r, "etag").to_string();

    // The origins, normalised, are exactly the page's frame-ancestors; the ETag follows
    // them (a cached page would otherwise keep the old policy).
    let stored = set_embed_origins(
        &p,
        &tenant,
        &[
            "HTTPS://Shop.Example:443",
            "https://shop.example",
            "http://127.0.0.1:5173",
        ],
    )
    .await;
    assert_eq!(
        stored,
        json!({"embedOrigins": ["https://shop.example", "http://127.0.0.1:5173"]})
    );
    let r = get_if_none_match(&p, &embed, &before).await;
    assert_eq!(r.status(), 200, "a new policy is a new page");
    let csp = header(&r, "content-security-policy").to_string();
    assert_eq!(
        frame_ancestors(&csp),
        ["https://shop.example", "http://127.0.0.1:5173"]
    );
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    assert!(
        csp.contains("connect-src 'self' https://cdn.example"),
        "{csp}"
    );
    assert_eq!(header(&r, "cache-control"), "no-cache");
    let html = r.text().await.unwrap();
    assert!(
        html.contains("Shop &lt;live&gt; &amp; &quot;sale&quot;"),
        "{html}"
    );
    assert!(!html.contains("<live>"));
    assert_eq!(data_attr(&html, "stream-id"), stream_id);
    assert_eq!(data_attr(&html, "embed"), "true");
    // The player alone: no title heading, no chat.
    assert!(
        !html.contains("<h1") && !html.contains("id=\"chat\""),
        "{html}"
    );
    // Defaults: controls, no autoplay, not muted.
    let video = html[html.find("<live-player").unwrap()..]
        .split('>')
        .next()
        .unwrap()
        .to_string();
    assert!(
        video.contains(" controls") && !video.contains(" autoplay") && !video.contains(" muted"),
        "{video}"
    );
    let r = get(&p, &format!("{embed}?autoplay=1&muted=1&controls=0")).await;
    let html = r.text().await.unwrap();
    let video = html[html.find("<live-player").unwrap()..]
        .split('>')
        .next()
        .unwrap()
        .to_string();
    assert!(
        !video.contains(" controls") && video.contains(" autoplay") && video.contains(" muted"),
        "{video}"
    );
    for bad in [
        "?autoplay=yes",
        "?controls=2",
        "?poster=javascript%3Aalert(1)",
        "?poster=https%3A%2F%2Fa.example%2F%22%3E%3Cscript%3E",
        "?t=-1",
        "?t=86401",
        "?next=https%3A%2F%2Fevil.example",
    ] {
        let r = get(&p, &format!("{embed}{bad}")).await;
        assert_eq!(r.status(), 400, "{bad}");
        assert_eq!(header(&r, "location"), "", "{bad}");
    }
    assert_eq!(get(&p, "/embed/nothere1").await.status(), 404);
    assert_eq!(get(&p, "/embed/%3Cx%3E").await.status(), 404);
    // Every other page still refuses every frame.
    let watch = get(&p, &format!("/watch/{short}")).await;
    assert_eq!(
        frame_ancestors(header(&watch, "content-security-policy")),
        ["'none'"]
    );
    let docs = get(&p, "/docs").await;
    assert_eq!(
        frame_ancestors(header(&docs, "content-security-policy")),
        ["'none'"]
    );
    // Another tenant's origins are not this page's.
    let other = p.register_client("Other").await;
    set_embed_origins(&p, &other, &["https://other.example"]).await;
    let r = get(&p, &embed).await;
    assert_eq!(
        frame_ancestors(header(&r, "content-security-policy")),
        ["https://shop.example", "http://127.0.0.1:5173"]
    );
    // Cleared: none again.
    set_embed_origins(&p, &tenant, &[]).await;
    let r = get(&p, &embed).await;
    assert_eq!(
        frame_ancestors(header(&r, "content-security-policy")),
        ["'none'"]
    );
}

/// A loopback HTTP server answering `html` to every request: a tenant's site.
async fn site_server(html: String) -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let html = html.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 2048];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{html}",
                    html.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    addr
}

/// What the page's one iframe holds, read inside the frame (an isolated world of its
/// document): whether it is the embed page with its player, and the player's size.
async fn framed(browser: &mut Browser, tab: &browser::Tab) -> Value {
    let tree = browser
        .call(Some(&tab.session), "Page.getFrameTree", json!({}))
        .await;
    let children = tree["frameTree"]["childFrames"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(children.len(), 1, "{tree}");
    let frame = &children[0]["frame"];
    let world = browser
        .call(
            Some(&tab.session),
            "Page.createIsolatedWorld",
            json!({"frameId": frame["id"], "worldName": "probe"}),
        )
        .await;
    let answer = browser
        .call(
            Some(&tab.session),
            "Runtime.evaluate",
            json!({
                "contextId": world["executionContextId"],
                "returnByValue": true,
                "expression": "(function(){var v = document.getElementById('player');\
                    return {url: location.href, ready: document.readyState,\
                      video: !!v, width: v ? v.clientWidth : 0, height: v ? v.clientHeight : 0,\
                      embed: !!document.querySelector('main[data-embed=\"true\"]')};})()",
            }),
        )
        .await;
    let mut value = answer["result"]["value"].clone();
    value["frameUrl"] = frame["url"].clone();
    value
}

#[tokio::test(flavor = "multi_thread")]
async fn an_allowed_site_frames_the_player_and_another_is_refused() {
    let p = Platform::start().await;
    let tenant = p.register_client("Embedder").await;
    let ada = p.signup(&tenant, "ada").await;
    let (_, short) = create_broadcast(&p, &ada, json!({"title": "Framed"})).await;
    let page = |src: String| {
        format!(
            "<!doctype html><html><body style=\"margin:0\">\
             <iframe id=\"player\" src=\"{src}\" width=\"640\" height=\"360\" style=\"border:0\" \
             onload=\"window.frameLoaded = true\"></iframe></body></html>"
        )
    };
    let src = p.url(&format!("/embed/{short}?muted=1"));
    let allowed = site_server(page(src.clone())).await;
    let refused = site_server(page(src.clone())).await;
    set_embed_origins(&p, &tenant, &[&format!("http://{allowed}")]).await;

    let mut browser = Browser::launch(&[]).await;
    let tab = browser
        .open(&format!("http://{allowed}/shop"), 800, 500)
        .await;
    browser
        .wait_for(&tab, "window.frameLoaded === true", Duration::from_secs(20))
        .await;
    let shown = framed(&mut browser, &tab).await;
    assert_eq!(shown["frameUrl"], src, "{shown}");
    assert_eq!(shown["embed"], true, "{shown}");
    assert_eq!(shown["video"], true, "{shown}");
    assert_eq!(shown["ready"], "complete", "{shown}");
    // Sized to its frame.
    assert_eq!(
        (&shown["width"], &shown["height"]),
        (&json!(640), &json!(360)),
        "{shown}"
    );
    browser
        .screenshot(&tab, &screenshot_dir().join("embed-allowed.png"))
        .await;

    let tab = browser
        .open(&format!("http://{refused}/shop"), 800, 500)
        .await;
    browser
        .wait_for(&tab, "window.frameLoaded === true", Duration::from_secs(20))
        .await;
    let shown = framed(&mut browser, &tab).await;
    assert_eq!(
        shown["video"], false,
        "the refused frame has no player: {shown}"
    );
    assert_eq!(shown["embed"], false, "{shown}");
    assert_ne!(shown["url"], json!(src), "{shown}");
    browser.close().await;
}

/// The content of a gzip member, as `gzip -d` reads it.
fn gunzip_with_gzip(member: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut child = std::process::Command::new("gzip")
        .arg("-dc")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("gzip runs");
    child.stdin.take().unwrap().write_all(member).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "gzip -d reads the member");
    out.stdout
}

/// The API reference is a component of its own: `/docs` loads RapiDoc and the stylesheet
/// from below `/docs/static/` under content-hashed names, immutable, gzip-encoded or not as
/// the client accepts, 304 on their ETags; the pages component serves no RapiDoc under any
/// name, and the reference's component none of the viewers' libraries.
#[tokio::test(flavor = "multi_thread")]
async fn the_api_reference_serves_its_viewer_and_the_pages_do_not() {
    let p = Platform::start().await;
    let r = get(&p, "/docs").await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "content-type"), "text/html; charset=utf-8");
    let page_tag = header(&r, "etag").to_string();
    let html = r.text().await.unwrap();
    assert_eq!(
        get_if_none_match(&p, "/docs", &page_tag).await.status(),
        304
    );
    let mut urls = Vec::new();
    for key in ["src=\"", "href=\""] {
        for (at, _) in html.match_indices(key) {
            let start = at + key.len();
            let end = html[start..].find('"').unwrap() + start;
            urls.push(html[start..end].to_string());
        }
    }
    urls.sort();
    assert_eq!(urls.len(), 2, "{urls:?}");
    let static_dir = workspace_root().join("static");
    for (url, file, content_type) in [
        (&urls[0], "pages.css", "text/css; charset=utf-8"),
        (
            &urls[1],
            "vendor/rapidoc-min.js",
            "text/javascript; charset=utf-8",
        ),
    ] {
        let public = url
            .strip_prefix("/docs/static/")
            .expect("below /docs/static/");
        let (stem, ext) = file.rsplit_once('.').unwrap();
        let hash = public
            .strip_prefix(&format!("{stem}."))
            .and_then(|rest| rest.strip_suffix(&format!(".{ext}")))
            .unwrap_or_else(|| panic!("{url} is {file} under a hashed name"));
        assert!(
            hash.len() == 10 && hash.bytes().all(|b| b.is_ascii_hexdigit()),
            "{url}"
        );
        let original = std::fs::read(static_dir.join(file)).unwrap();

        let r = get(&p, url).await;
        assert_eq!(r.status(), 200, "{url}");
        assert_eq!(
            header(&r, "cache-control"),
            "public, max-age=31536000, immutable"
        );
        assert_eq!(header(&r, "content-type"), content_type);
        assert_eq!(header(&r, "content-encoding"), "");
        let etag = header(&r, "etag").to_string();
        assert!(
            r.bytes().await.unwrap().as_ref() == original.as_slice(),
            "{url}"
        );

        let r = p
            .request(Method::GET, url)
            .header("accept-encoding", "gzip")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(header(&r, "content-encoding"), "gzip");
        assert_eq!(header(&r, "vary"), "accept-encoding");
        assert_eq!(
            header(&r, "cache-control"),
            "public, max-age=31536000, immutable"
        );
        let gz = r.bytes().await.unwrap();
        assert!(gz.len() < original.len(), "{url} is compressed");
        assert!(
            gunzip_with_gzip(&gz) == original,
            "{url} inflates to {file}"
        );

        let r = get_if_none_match(&p, url, &etag).await;
        assert_eq!(r.status(), 304, "{url}");
        assert!(r.bytes().await.unwrap().is_empty());

        // Only the hashed name. The pages component has the stylesheet too (the same
        // name: the same content), but no RapiDoc.
        assert_eq!(get(&p, &format!("/docs/static/{file}")).await.status(), 404);
        let in_pages = if file == "pages.css" { 200 } else { 404 };
        let r = get(&p, &format!("/static/{public}")).await;
        assert_eq!(r.status(), in_pages, "/static/{public}");
    }
    assert_eq!(get(&p, "/static/vendor/rapidoc-min.js").await.status(), 404);

    // The viewers' pages name no RapiDoc, and their libraries are the pages component's.
    let stream = recorded_stream(&p).await;
    let record = get(&p, &format!("/streams/{stream}/record"))
        .await
        .text()
        .await
        .unwrap();
    assert!(!record.contains("rapidoc"));
    let livekit = asset_urls(&record)
        .into_iter()
        .find(|u| u.starts_with("/static/vendor/livekit-client.umd."))
        .expect("the recording page loads livekit-client");
    assert_eq!(get(&p, &livekit).await.status(), 200);
    assert_eq!(get(&p, &format!("/docs{livekit}")).await.status(), 404);
}
