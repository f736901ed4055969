//! Attacks on the view beacon (`POST /api/views`): it is public and takes no credentials,
//! so anyone can send one. Each attack tries to inflate a broadcast's viewers, watch time
//! or quality figures, and is shown bounded or refused, with nothing changed.

use platform_tests::{Exchange, Method, Platform, User};
use serde_json::{Value, json};
use std::time::Duration;

async fn platform() -> Platform {
    Platform::start().await
}

async fn host(p: &Platform) -> User {
    let t = p.register_client("Victim").await;
    p.signup(&t, "ada").await
}

async fn live(p: &Platform, owner: &User) -> String {
    p.live_broadcast(owner, "public").await["id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn beacon(view: &str, broadcast: &str, event: &str, extra: Value) -> Value {
    let mut body = json!({"viewId": view, "broadcast": broadcast, "event": event});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

async fn viewer_count(p: &Platform, owner: &User, id: &str) -> i64 {
    let (_, b) = p
        .as_user(owner, Method::GET, &format!("/api/broadcasts/{id}"))
        .answer()
        .await;
    b["viewerCount"].as_i64().unwrap()
}

async fn playback(p: &Platform, owner: &User, id: &str) -> Value {
    let (status, a) = p
        .as_user(
            owner,
            Method::GET,
            &format!("/api/broadcasts/{id}/analytics"),
        )
        .answer()
        .await;
    assert_eq!(status, 200, "{a}");
    let mut playback = a["playback"].clone();
    playback["uniqueViewers"] = a["uniqueViewers"].clone();
    playback["viewerSessions"] = a["viewerSessions"].clone();
    playback
}

fn code(body: &Value) -> &str {
    body["code"].as_str().unwrap_or_default()
}

/// A view claiming hours of playback seconds after it began gets the wall clock since its
/// first beacon plus 15 s, no more; a figure lower than the last is refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_view_cannot_claim_more_time_than_has_passed() {
    let p = platform().await;
    let ada = host(&p).await;
    let id = live(&p, &ada).await;
    let view = "inflated-view-0123456789";
    assert_eq!(
        p.beacon(&beacon(view, &id, "start", json!({}))).await.0,
        204
    );
    p.advance_clock(Duration::from_secs(10));
    let huge = json!({"playedSeconds": 86_400, "rebufferCount": 99_999, "startupMs": 600_000});
    let (status, body) = p.beacon(&beacon(view, &id, "heartbeat", huge)).await;
    assert_eq!(status, 204, "clamped, not refused: {body}");
    let got = playback(&p, &ada, &id).await;
    let played = got["playedSeconds"].as_f64().unwrap();
    assert!(
        (10.0..=27.0).contains(&played),
        "played is at most the 10 s (and a second of real time) plus the 15 s slack: {got}"
    );
    assert!(got["rebufferCount"].as_i64().unwrap() <= 27, "{got}");
    assert!(
        got["startupTimeMeanMs"].as_i64().unwrap() <= 27_000,
        "{got}"
    );

    // Going back is refused and changes nothing.
    p.advance_clock(Duration::from_secs(10));
    let (status, body) = p
        .beacon(&beacon(view, &id, "heartbeat", json!({"playedSeconds": 1})))
        .await;
    assert_eq!(
        (status.as_u16(), code(&body)),
        (422, "validation_failed"),
        "{body}"
    );
    assert_eq!(body["errors"][0]["field"], "playedSeconds", "{body}");
    assert_eq!(playback(&p, &ada, &id).await, got);
}

/// More than one beacon per view in 5 s is refused (429) with everything it carried;
/// the `end` of a live view is the one exception, once.
#[tokio::test(flavor = "multi_thread")]
async fn a_view_beacons_at_most_once_every_five_seconds() {
    let p = platform().await;
    let ada = host(&p).await;
    let id = live(&p, &ada).await;
    let view = "flooding-view-0123456789";
    assert_eq!(
        p.beacon(&beacon(view, &id, "start", json!({}))).await.0,
        204
    );
    let before = playback(&p, &ada, &id).await;
    let flood =
        json!({"playedSeconds": 4, "error": "media", "rendition": "1080p", "startupMs": 100});
    for _ in 0..5 {
        let (status, body) = p
            .beacon(&beacon(view, &id, "heartbeat", flood.clone()))
            .await;
        assert_eq!((status.as_u16(), code(&body)), (429, "too_soon"), "{body}");
    }
    let (status, body) = p.beacon(&beacon(view, &id, "start", flood.clone())).await;
    assert_eq!((status.as_u16(), code(&body)), (429, "too_soon"), "{body}");
    assert_eq!(playback(&p, &ada, &id).await, before, "nothing changed");
    assert_eq!(viewer_count(&p, &ada, &id).await, 1);
    // An end comes through at once, once.
    assert_eq!(p.beacon(&beacon(view, &id, "end", json!({}))).await.0, 204);
    let (status, body) = p.beacon(&beacon(view, &id, "end", json!({}))).await;
    assert_eq!((status.as_u16(), code(&body)), (429, "too_soon"), "{body}");
    assert_eq!(viewer_count(&p, &ada, &id).await, 0);
    // An ended view takes only a new start.
    p.advance_clock(Duration::from_secs(6));
    let (status, body) = p.beacon(&beacon(view, &id, "heartbeat", json!({}))).await;
    assert_eq!(
        (status.as_u16(), code(&body)),
        (409, "view_ended"),
        "{body}"
    );
    assert_eq!(viewer_count(&p, &ada, &id).await, 0);
}

/// One address holds at most 20 live views of a broadcast, and opens at most 30 new views
/// a minute: a script inventing viewIds gets no further.
#[tokio::test(flavor = "multi_thread")]
async fn one_address_cannot_invent_an_audience() {
    let p = platform().await;
    let ada = host(&p).await;
    let first = live(&p, &ada).await;
    let second = live(&p, &ada).await;
    let third = live(&p, &ada).await;
    for n in 0..20 {
        let (status, body) = p
            .beacon(&beacon(
                &format!("sybil-{n:02}-0123456789"),
                &first,
                "start",
                json!({}),
            ))
            .await;
        assert_eq!(status, 204, "view {n}: {body}");
    }
    let (status, body) = p
        .beacon(&beacon("sybil-20-0123456789", &first, "start", json!({})))
        .await;
    assert_eq!(
        (status.as_u16(), code(&body)),
        (429, "too_many_views"),
        "{body}"
    );
    assert_eq!(viewer_count(&p, &ada, &first).await, 20);
    // Another broadcast takes the address's views up to 30 new ones in the minute.
    for n in 0..10 {
        let (status, body) = p
            .beacon(&beacon(
                &format!("sybil-b{n:02}-0123456789"),
                &second,
                "start",
                json!({}),
            ))
            .await;
        assert_eq!(status, 204, "view {n}: {body}");
    }
    let (status, body) = p
        .beacon(&beacon("sybil-c00-0123456789", &third, "start", json!({})))
        .await;
    assert_eq!(
        (status.as_u16(), code(&body)),
        (429, "rate_limited"),
        "{body}"
    );
    assert_eq!(viewer_count(&p, &ada, &third).await, 0);
    assert_eq!(playback(&p, &ada, &third).await["views"], 0);
}

/// Absurd beacons are refused with a 4xx and store nothing.
#[tokio::test(flavor = "multi_thread")]
async fn absurd_beacons_are_refused_and_change_nothing() {
    let p = platform().await;
    let ada = host(&p).await;
    let id = live(&p, &ada).await;
    let view = "absurd-view-0123456789";
    let cases: Vec<(&str, String, u16)> = vec![
        (
            "negative",
            beacon(view, &id, "start", json!({"playedSeconds": -1})).to_string(),
            422,
        ),
        (
            "huge",
            beacon(view, &id, "start", json!({"playedSeconds": 1e308})).to_string(),
            422,
        ),
        (
            "huge count",
            beacon(view, &id, "start", json!({"rebufferCount": 1_000_000_000})).to_string(),
            422,
        ),
        (
            "negative startup",
            beacon(view, &id, "start", json!({"startupMs": -5})).to_string(),
            422,
        ),
        (
            "startup of hours",
            beacon(view, &id, "start", json!({"startupMs": 36_000_000})).to_string(),
            422,
        ),
        (
            "text seconds",
            beacon(view, &id, "start", json!({"playedSeconds": "10"})).to_string(),
            422,
        ),
        (
            "NaN",
            format!(
                r#"{{"viewId":"{view}","broadcast":"{id}","event":"start","playedSeconds":NaN}}"#
            ),
            400,
        ),
        (
            "unknown event",
            beacon(view, &id, "pause", json!({})).to_string(),
            422,
        ),
        (
            "unknown error",
            beacon(view, &id, "start", json!({"error": "cosmic_ray"})).to_string(),
            422,
        ),
        (
            "unknown field",
            beacon(view, &id, "start", json!({"viewers": 1000})).to_string(),
            422,
        ),
        (
            "short viewId",
            beacon("short", &id, "start", json!({})).to_string(),
            422,
        ),
        (
            "viewId with a slash",
            beacon("a/b/c/d/e/f/g/h/i/j", &id, "start", json!({})).to_string(),
            422,
        ),
        (
            "long rendition",
            beacon(view, &id, "start", json!({"rendition": "x".repeat(33)})).to_string(),
            422,
        ),
        (
            "no broadcast",
            json!({"viewId": view, "event": "start"}).to_string(),
            422,
        ),
        (
            "oversized",
            beacon(
                view,
                &id,
                "start",
                json!({"rendition": "720p", "sig": "s".repeat(3000)}),
            )
            .to_string(),
            413,
        ),
        ("not an object", "[1,2,3]".to_string(), 400),
    ];
    for (what, body, want) in cases {
        let (status, answer) = p.beacon_raw(body).await;
        assert_eq!(status.as_u16(), want, "{what}: {answer}");
    }
    // Neither form data nor anything else but JSON and text.
    let status = p
        .request(Method::POST, "/api/views")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(beacon(view, &id, "start", json!({})).to_string())
        .status()
        .await;
    assert_eq!(status, 415);
    assert_eq!(viewer_count(&p, &ada, &id).await, 0);
    let got = playback(&p, &ada, &id).await;
    assert_eq!(
        (&got["views"], &got["uniqueViewers"]),
        (&json!(0), &json!(0)),
        "{got}"
    );
    // The same view, well formed, is then a first beacon like any other.
    assert_eq!(
        p.beacon(&beacon(view, &id, "start", json!({}))).await.0,
        204
    );
    assert_eq!(viewer_count(&p, &ada, &id).await, 1);
}

/// A viewId is bound to the broadcast of its first beacon: replaying it at another
/// broadcast (to carry its time, or to count it twice) is a 409 and changes nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_view_cannot_move_to_another_broadcast() {
    let p = platform().await;
    let ada = host(&p).await;
    let mine = live(&p, &ada).await;
    let theirs = live(&p, &ada).await;
    let view = "bound-view-0123456789";
    assert_eq!(
        p.beacon(&beacon(view, &mine, "start", json!({}))).await.0,
        204
    );
    p.advance_clock(Duration::from_secs(6));
    let (status, body) = p
        .beacon(&beacon(view, &theirs, "start", json!({"playedSeconds": 5})))
        .await;
    assert_eq!(
        (status.as_u16(), code(&body)),
        (409, "view_of_another_broadcast"),
        "{body}"
    );
    assert_eq!(viewer_count(&p, &ada, &theirs).await, 0);
    assert_eq!(viewer_count(&p, &ada, &mine).await, 1);
    assert_eq!(playback(&p, &ada, &theirs).await["views"], 0);
}
