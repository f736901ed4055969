//! HLS viewers counted: the player's view beacons (`POST /api/views`, sent as browsers'
//! sendBeacon sends them: text/plain, no credentials) make the broadcast's viewerCount,
//! its analytics' sessions, watch time and unique viewers, and its quality of experience.
//! The clock is moved, never slept: a view stays live 30 s after its last beacon.

use platform_tests::{Exchange, Method, Platform, User};
use serde_json::{Value, json};
use std::time::Duration;

const JOBS_TOKEN: &str = "jobs-token-for-the-views-suite-0123456789";

async fn platform() -> Platform {
    let p = Platform::start_with(&[("jobs_token", JOBS_TOKEN)]).await;
    // 5 s into a minute, so that the steps below fall where the test says.
    let now = p.now();
    p.advance_clock(Duration::from_secs(((now / 60 + 1) * 60 + 5 - now) as u64));
    p
}

fn beacon(view: &str, viewer: &str, broadcast: &str, event: &str, extra: Value) -> Value {
    let mut body = json!({
        "viewId": view,
        "viewerId": viewer,
        "broadcast": broadcast,
        "event": event,
    });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

async fn viewer_count(p: &Platform, owner: &User, id: &str) -> i64 {
    let (status, b) = p
        .as_user(owner, Method::GET, &format!("/api/broadcasts/{id}"))
        .answer()
        .await;
    assert_eq!(status, 200, "{b}");
    b["viewerCount"].as_i64().unwrap()
}

async fn live_count(p: &Platform, owner: &User, id: &str) -> i64 {
    let (status, page) = p
        .request(Method::GET, "/api/broadcasts/live")
        .header("x-api-key", &owner.api_key)
        .answer()
        .await;
    assert_eq!(status, 200, "{page}");
    let items = page["items"].as_array().or(page["data"].as_array());
    items
        .unwrap_or_else(|| panic!("a page: {page}"))
        .iter()
        .find(|b| b["id"] == id)
        .unwrap_or_else(|| panic!("{id} is live: {page}"))["viewerCount"]
        .as_i64()
        .unwrap()
}

fn close_to(got: f64, want: f64, slack: f64, what: &str) {
    assert!(
        (got - want).abs() <= slack,
        "{what}: {got}, expected {want} ± {slack}"
    );
}

/// Two views count 2; one ends: 1; the other goes silent: 0 after 30 s. The analytics
/// count both as sessions and unique viewers with their exact watch time, and the quality
/// of experience they reported, in JSON, CSV and the tenant's figures.
#[tokio::test(flavor = "multi_thread")]
async fn every_hls_view_is_counted_and_reaches_analytics() {
    let p = platform().await;
    let t = p.register_client("Acme").await;
    let ada = p.signup(&t, "ada").await;
    let b = p.live_broadcast(&ada, "public").await;
    let id = b["id"].as_str().unwrap().to_string();
    let short = b["shortId"].as_str().unwrap().to_string();
    assert_eq!(viewer_count(&p, &ada, &id).await, 0);

    let (one, two) = ("view-one-0123456789", "view-two-0123456789");
    let start = p.now();
    // One names the broadcast by its id, the other by its short id.
    let (status, body) = p
        .beacon(&beacon(one, "viewer-aaaaaaaaaaaa", &id, "start", json!({})))
        .await;
    assert_eq!(status, 204, "{body}");
    assert_eq!(body, json!(""), "no body");
    let (status, body) = p
        .beacon(&beacon(
            two,
            "viewer-bbbbbbbbbbbb",
            &short,
            "start",
            json!({}),
        ))
        .await;
    assert_eq!(status, 204, "{body}");
    assert_eq!(viewer_count(&p, &ada, &id).await, 2);
    assert_eq!(live_count(&p, &ada, &id).await, 2);

    p.advance_clock(Duration::from_secs(10));
    let qoe_one = json!({"startupMs": 800, "playedSeconds": 9.0, "rebufferCount": 1,
                         "rebufferSeconds": 1.0, "rendition": "720p"});
    let qoe_two = json!({"startupMs": 2600, "playedSeconds": 10.0, "rebufferCount": 0,
                         "rebufferSeconds": 0, "rendition": "480p"});
    assert_eq!(
        p.beacon(&beacon(
            one,
            "viewer-aaaaaaaaaaaa",
            &id,
            "heartbeat",
            qoe_one.clone()
        ))
        .await
        .0,
        204
    );
    assert_eq!(
        p.beacon(&beacon(
            two,
            "viewer-bbbbbbbbbbbb",
            &id,
            "heartbeat",
            qoe_two
        ))
        .await
        .0,
        204
    );
    // The first page closes 10 s later: 1 viewer.
    p.advance_clock(Duration::from_secs(10));
    let ended = json!({"startupMs": 800, "playedSeconds": 18.0, "rebufferCount": 1,
                       "rebufferSeconds": 1.0, "rendition": "720p", "error": "network"});
    assert_eq!(
        p.beacon(&beacon(one, "viewer-aaaaaaaaaaaa", &id, "end", ended))
            .await
            .0,
        204
    );
    assert_eq!(viewer_count(&p, &ada, &id).await, 1);
    // The second goes silent after its beacon at +10 s: counted until +40 s, not after.
    p.advance_clock(Duration::from_secs(19));
    assert_eq!(
        viewer_count(&p, &ada, &id).await,
        1,
        "29 s after its beacon"
    );
    p.advance_clock(Duration::from_secs(2));
    assert_eq!(
        viewer_count(&p, &ada, &id).await,
        0,
        "31 s after its beacon"
    );

    // The analytics job closes it at its last beacon: watch time is exact.
    let job = p.run_job("rollup-analytics").await;
    assert_eq!(job["silentViewsClosed"], 1, "{job}");
    let (status, a) = p
        .as_user(
            &ada,
            Method::GET,
            &format!("/api/broadcasts/{id}/analytics"),
        )
        .answer()
        .await;
    assert_eq!(status, 200, "{a}");
    assert_eq!(a["uniqueViewers"], 2, "{a}");
    assert_eq!(a["viewerSessions"], 2, "{a}");
    // One from its start to its end (20 s), the other from its start to its last beacon
    // (10 s); each instant is read to the second.
    close_to(
        a["totalWatchSeconds"].as_f64().unwrap(),
        30.0,
        2.0,
        "watch time",
    );
    let playback = &a["playback"];
    assert_eq!(playback["views"], 2, "{playback}");
    assert_eq!(playback["playedSeconds"], 28.0, "{playback}");
    assert_eq!(playback["rebufferSeconds"], 1.0, "{playback}");
    assert_eq!(playback["rebufferCount"], 1, "{playback}");
    assert_eq!(playback["rebufferPercentage"], 3.45, "1 / 29: {playback}");
    // 800 ms is in (750, 1000], 2600 ms in (2000, 3000]: the median is the top of the first.
    assert_eq!(playback["startupTimeP50Ms"], 1000, "{playback}");
    assert_eq!(playback["startupTimeP95Ms"], 3000, "{playback}");
    assert_eq!(playback["startupTimeMeanMs"], 1700, "{playback}");
    assert_eq!(playback["playbackFailures"], 1, "{playback}");
    assert_eq!(playback["failuresByReason"]["network"], 1, "{playback}");
    assert_eq!(playback["failuresByReason"]["media"], 0, "{playback}");
    assert_eq!(
        playback["viewsByRendition"],
        json!({"720p": 1, "480p": 1}),
        "{playback}"
    );
    let series = a["timeseries"].as_array().unwrap();
    let views: i64 = series.iter().map(|p| p["views"].as_i64().unwrap()).sum();
    let played: f64 = series
        .iter()
        .map(|p| p["playedSeconds"].as_f64().unwrap())
        .sum();
    assert_eq!((views, played), (2, 28.0), "{series:?}");

    let csv = p
        .as_user(
            &ada,
            Method::GET,
            &format!("/api/broadcasts/{id}/analytics"),
        )
        .header("accept", "text/csv")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let column = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (views_at, played_at) = (column("views"), column("playedSeconds"));
    let mut csv_views = 0;
    let mut csv_played = 0.0;
    for line in lines {
        let fields: Vec<&str> = line.split(',').collect();
        csv_views += fields[views_at].parse::<i64>().unwrap();
        csv_played += fields[played_at].parse::<f64>().unwrap();
    }
    assert_eq!((csv_views, csv_played), (2, 28.0), "{csv}");

    // The tenant's hours carry the same figures.
    let from = domain::time::format_rfc3339(start - start % 3600);
    let path = format!(
        "/api/v1/analytics?from={from}&granularity=hour&metrics=views,uniqueViewers,startupTimeP50Ms,rebufferPercentage,playbackFailures"
    );
    let (status, tenant) = p.as_server(&t, Method::GET, &path, None).answer().await;
    assert_eq!(status, 200, "{tenant}");
    let totals = &tenant["totals"];
    assert_eq!(totals["views"], 2, "{tenant}");
    assert_eq!(totals["uniqueViewers"], 2, "{tenant}");
    assert_eq!(totals["startupTimeP50Ms"], 1000, "{tenant}");
    assert_eq!(totals["rebufferPercentage"], 3.45, "{tenant}");
    assert_eq!(totals["playbackFailures"], 1, "{tenant}");
    assert_eq!(
        tenant["playback"]["viewsByRendition"],
        json!({"720p": 1, "480p": 1}),
        "{tenant}"
    );

    // The dashboard page shows the main ones.
    let (status, link) = p
        .as_user(
            &ada,
            Method::POST,
            &format!("/api/broadcasts/{id}/analytics/share"),
        )
        .answer()
        .await;
    assert_eq!(status, 200, "{link}");
    let path = format!(
        "/analytics/broadcasts/{id}?token={}",
        link["token"].as_str().unwrap()
    );
    let page = p.request(Method::GET, &path).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    for (tile, value) in [
        ("views", "2"),
        ("startup", "1000 ms"),
        ("rebuffering", "3.45 %"),
        ("failures", "1"),
        ("unique", "2"),
    ] {
        assert!(
            html.contains(&format!(r#"data-tile="{tile}">{value}</span>"#)),
            "tile {tile} shows {value}: {html}"
        );
    }

    // Once the broadcast ends and is rolled up, its days carry them too.
    let (status, _) = p
        .as_user(&ada, Method::POST, &format!("/api/broadcasts/{id}/status"))
        .send_json(&json!({"status": "completed"}))
        .await;
    assert_eq!(status, 200);
    p.run_job("rollup-analytics").await;
    let day = domain::time::format_rfc3339(start - start % 86_400);
    let path = format!(
        "/api/v1/analytics?from={day}&granularity=day&metrics=views,watchMinutes,startupTimeP95Ms"
    );
    let (status, days) = p.as_server(&t, Method::GET, &path, None).answer().await;
    assert_eq!(status, 200, "{days}");
    assert_eq!(days["totals"]["views"], 2, "{days}");
    assert_eq!(days["totals"]["startupTimeP95Ms"], 3000, "{days}");
    close_to(
        days["totals"]["watchMinutes"].as_f64().unwrap(),
        0.5,
        0.04,
        "watch minutes",
    );
    // A finished broadcast takes no new view.
    let (status, body) = p
        .beacon(&beacon(
            "view-late-0123456789",
            "viewer-cccccccccccc",
            &id,
            "start",
            json!({}),
        ))
        .await;
    assert_eq!(
        (status.as_u16(), body["code"].as_str()),
        (409, Some("broadcast_ended"))
    );
}

/// viewerCount is the app's report or the views the platform sees, whichever is more; a
/// reload (the same viewId, a new `start`) is the same viewer.
#[tokio::test(flavor = "multi_thread")]
async fn the_count_takes_the_larger_of_the_report_and_the_views() {
    let p = platform().await;
    let t = p.register_client("Acme").await;
    let ada = p.signup(&t, "ada").await;
    let b = p.live_broadcast(&ada, "unlisted").await;
    let id = b["id"].as_str().unwrap().to_string();
    let report = |n: i64| {
        let request = p.as_user(
            &ada,
            Method::POST,
            &format!("/api/broadcasts/{id}/viewer-count"),
        );
        async move { request.send_json(&json!({ "viewerCount": n })).await.0 }
    };
    assert_eq!(report(5).await, 200);
    for n in 0..3 {
        let view = format!("view-{n}-0123456789abcdef");
        let (status, body) = p
            .beacon(&beacon(
                &view,
                &format!("viewer-{n}-0123456789"),
                &id,
                "start",
                json!({}),
            ))
            .await;
        assert_eq!(status, 204, "{body}");
    }
    assert_eq!(viewer_count(&p, &ada, &id).await, 5, "the report is more");
    assert_eq!(report(1).await, 200);
    assert_eq!(viewer_count(&p, &ada, &id).await, 3, "the views are more");
    // A reload: same view, start again.
    p.advance_clock(Duration::from_secs(6));
    let (status, _) = p
        .beacon(&beacon(
            "view-0-0123456789abcdef",
            "viewer-0-0123456789",
            &id,
            "start",
            json!({}),
        ))
        .await;
    assert_eq!(status, 204);
    assert_eq!(viewer_count(&p, &ada, &id).await, 3);
    let (_, a) = p
        .as_user(
            &ada,
            Method::GET,
            &format!("/api/broadcasts/{id}/analytics"),
        )
        .answer()
        .await;
    assert_eq!(
        (&a["playback"]["views"], &a["uniqueViewers"]),
        (&json!(3), &json!(3)),
        "{a}"
    );
}

/// A private broadcast's views need its signed hlsUrl's exp and sig: without them (or
/// with another's) it is 404 like an unknown broadcast, and nothing is counted.
#[tokio::test(flavor = "multi_thread")]
async fn a_private_broadcast_counts_only_views_that_may_play_it() {
    let p = platform().await;
    let t = p.register_client("Acme").await;
    let ada = p.signup(&t, "ada").await;
    let private = p.live_broadcast(&ada, "private").await;
    let id = private["id"].as_str().unwrap().to_string();
    let hls = private["hlsUrl"].as_str().unwrap().to_string();
    let query = hls.split_once('?').expect("a signed hlsUrl").1.to_string();
    let param = |k: &str| {
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
            .unwrap()
            .to_string()
    };
    let (exp, sig) = (param("exp"), param("sig"));
    let view = "view-private-0123456789";
    let viewer = "viewer-private-0123";
    for (what, extra) in [
        ("no signature", json!({})),
        (
            "a wrong signature",
            json!({"exp": exp, "sig": "AAAAAAAAAAAAAAAAAAAAAA"}),
        ),
        ("another expiry", json!({"exp": "9999999999", "sig": sig})),
    ] {
        let (status, body) = p.beacon(&beacon(view, viewer, &id, "start", extra)).await;
        assert_eq!(status, 404, "{what}: {body}");
    }
    let (status, body) = p
        .beacon(&beacon(
            view,
            viewer,
            "00000000-0000-4000-8000-000000000000",
            "start",
            json!({}),
        ))
        .await;
    assert_eq!(status, 404, "unknown: {body}");
    assert_eq!(viewer_count(&p, &ada, &id).await, 0);
    let (status, body) = p
        .beacon(&beacon(
            view,
            viewer,
            &id,
            "start",
            json!({"exp": exp, "sig": sig}),
        ))
        .await;
    assert_eq!(status, 204, "{body}");
    assert_eq!(viewer_count(&p, &ada, &id).await, 1);
    // The signature expires with the address: a view still needs a fresh one.
    let ttl = param("exp").parse::<i64>().unwrap() - p.now();
    p.advance_clock(Duration::from_secs((ttl + 1) as u64));
    let (status, _) = p
        .beacon(&beacon(
            view,
            viewer,
            &id,
            "heartbeat",
            json!({"exp": exp, "sig": sig}),
        ))
        .await;
    assert_eq!(status, 404, "expired");
}
