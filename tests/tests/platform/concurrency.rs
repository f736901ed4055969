//! Races the back ends could decide differently, decided the same on each: concurrent
//! status changes, concurrent co-host approvals for the last slot, concurrent uses of one
//! refresh token, and 64 requests racing for the last places under a cap (webhook
//! endpoints, open uploads, restream targets, playlist tracks, open co-host seats). The
//! suite runs on SQLite, and on PostgreSQL when the test command selects it.

use futures_util::future::join_all;
use platform_tests::{Exchange, Method, Platform, User};
use serde_json::{Value, json};

fn code(body: &Value) -> &str {
    body["code"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_status_changes_move_a_broadcast_once() {
    let p = Platform::start().await;
    let t = p.register_client("Race").await;
    let ada = p.signup(&t, "ada").await;
    for round in 0..3 {
        let (_, b) = p
            .as_user(&ada, Method::POST, "/api/broadcasts")
            .send_json(&json!({"title": format!("Round {round}")}))
            .await;
        let path = format!("/api/broadcasts/{}/status", b["id"].as_str().unwrap());
        // Half ask to go live, half to complete: the first move decides, and every other
        // answer is either the same state (no-op) or a refusal; never a second move.
        let moves = (0..16).map(|i| {
            let status = if i % 2 == 0 { "active" } else { "completed" };
            p.as_user(&ada, Method::POST, &path)
                .json(&json!({"status": status}))
                .answer()
        });
        let answers = join_all(moves).await;
        for (status, body) in &answers {
            assert!(
                *status == 200
                    || (*status == 409
                        && ["invalid_transition", "concurrent_update"].contains(&code(body))),
                "{status}: {body}"
            );
        }
        let (_, after) = p
            .as_user(
                &ada,
                Method::GET,
                &format!("/api/broadcasts/{}", b["id"].as_str().unwrap()),
            )
            .answer()
            .await;
        let final_status = after["status"].as_str().unwrap();
        // Every 200 answer reports a state the broadcast really went through.
        for (status, body) in &answers {
            if *status == 200 {
                let s = body["status"].as_str().unwrap();
                assert!(
                    s == final_status || (s == "active" && final_status == "completed"),
                    "{s} then {final_status}"
                );
            }
        }
        assert!(["active", "completed"].contains(&final_status));
    }
}

async fn session_with_requests(
    p: &Platform,
    host: &User,
    guests: &[User],
    max_hosts: i64,
) -> (String, Vec<String>) {
    let (_, s) = p
        .as_user(host, Method::POST, "/api/streaming/sessions")
        .send_json(&json!({"title": "Panel"}))
        .await;
    let id = s["id"].as_str().unwrap().to_string();
    let (status, _) = p
        .as_user(host, Method::POST, &format!("/api/broadcasts/{id}/status"))
        .send_json(&json!({"status": "active"}))
        .await;
    assert_eq!(status, 200);
    let columns = max_hosts.min(2);
    let rows = (max_hosts + columns - 1) / columns;
    let (status, layout) = p
        .as_user(
            host,
            Method::PUT,
            &format!("/api/streaming/sessions/{id}/layout"),
        )
        .send_json(&json!({"maxHosts": max_hosts, "gridColumns": columns, "gridRows": rows}))
        .await;
    assert_eq!(status, 200, "{layout}");
    let mut requests = Vec::new();
    for guest in guests {
        let (status, asked) = p
            .as_user(
                guest,
                Method::POST,
                &format!("/api/streaming/sessions/{id}/join-cohost"),
            )
            .send_json(&json!({"userName": "Guest"}))
            .await;
        assert_eq!(
            (status.as_u16(), asked["coHost"]["status"].as_str()),
            (200, Some("requested"))
        );
        requests.push(asked["coHost"]["id"].as_str().unwrap().to_string());
    }
    (id, requests)
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_approvals_for_the_last_slot_give_it_once() {
    let p = Platform::start().await;
    let t = p.register_client("Slots").await;
    let ada = p.signup(&t, "ada").await;
    let mut guests = Vec::new();
    for i in 0..8 {
        guests.push(p.signup(&t, &format!("guest{i}")).await);
    }
    // Two hosts fit: the owner and one co-host. Eight requests are approved at once.
    let (id, requests) = session_with_requests(&p, &ada, &guests, 2).await;
    let approvals = requests.iter().map(|request| {
        p.as_user(
            &ada,
            Method::POST,
            &format!("/api/streaming/sessions/{id}/cohosts/{request}/approve"),
        )
        .json(&json!({}))
        .answer()
    });
    let answers = join_all(approvals).await;
    let approved = answers.iter().filter(|(s, _)| *s == 200).count();
    let full = answers
        .iter()
        .filter(|(s, b)| *s == 409 && code(b) == "session_full")
        .count();
    assert_eq!((approved, full), (1, 7), "{answers:?}");
    let (_, multi) = p
        .as_user(
            &ada,
            Method::GET,
            &format!("/api/streaming/sessions/{id}/multihost"),
        )
        .answer()
        .await;
    assert_eq!(multi["activeCoHosts"], 1, "{multi}");
    assert_eq!(multi["freeSlots"], 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_uses_of_one_refresh_token_revoke_its_family() {
    let p = Platform::start().await;
    let t = p.register_client("Tokens").await;
    let ada = p.signup(&t, "ada").await;
    let uses = (0..16).map(|_| {
        p.as_client(&t, Method::POST, "/api/users/refresh")
            .json(&json!({"refreshToken": ada.refresh_token}))
            .answer()
    });
    let answers = join_all(uses).await;
    let won: Vec<&Value> = answers
        .iter()
        .filter(|(s, _)| *s == 200)
        .map(|(_, b)| b)
        .collect();
    assert_eq!(
        won.len(),
        1,
        "exactly one use rotates the token: {answers:?}"
    );
    for (status, body) in answers.iter().filter(|(s, _)| *s != 200) {
        assert_eq!(
            (status.as_u16(), code(body)),
            (401, "refresh_token_reused"),
            "{body}"
        );
    }
    // The reuse revoked the family, the winner's new refresh token included.
    let fresh = won[0]["refreshToken"].as_str().unwrap();
    let (status, body) = p
        .as_client(&t, Method::POST, "/api/users/refresh")
        .send_json(&json!({"refreshToken": fresh}))
        .await;
    assert_eq!(status, 401, "{body}");
    // Logging in again starts a new family that works.
    let (status, login) = p
        .as_client(&t, Method::POST, "/api/users/login")
        .send_json(&json!({"username": "ada", "password": "correct horse battery"}))
        .await;
    assert_eq!(status, 200);
    let (status, _) = p
        .as_client(&t, Method::POST, "/api/users/refresh")
        .send_json(&json!({"refreshToken": login["refreshToken"]}))
        .await;
    assert_eq!(status, 200);
}

/// Counts each 64-way race's answers: (created, refused with `code`).
fn tally(answers: &[(reqwest::StatusCode, Value)], code_refused: &str) -> (usize, usize) {
    tally_as(answers, 201, code_refused)
}

/// Counts a race's answers: (answered `ok`, refused 409 with `code_refused`); any other
/// answer fails the test.
fn tally_as(
    answers: &[(reqwest::StatusCode, Value)],
    ok: u16,
    code_refused: &str,
) -> (usize, usize) {
    let created = answers.iter().filter(|(s, _)| *s == ok).count();
    let refused = answers
        .iter()
        .filter(|(s, b)| *s == 409 && code(b) == code_refused)
        .count();
    let others: Vec<String> = answers
        .iter()
        .filter(|(s, b)| *s != ok && code(b) != code_refused)
        .map(|(s, b)| format!("{s} {}", code(b)))
        .collect();
    assert!(others.is_empty(), "{others:?}");
    (created, refused)
}

#[tokio::test(flavor = "multi_thread")]
async fn caps_hold_when_64_requests_race_for_them() {
    let p = Platform::start_with(&[("webhook_allow_http", "true")]).await;
    let t = p.register_client("Caps").await;
    let ada = p.signup(&t, "ada").await;

    // Webhook endpoints: at most 20 per tenant.
    let adds = (0..64).map(|n| {
        let body = json!({"url": format!("http://127.0.0.1:9/hook/{n}"), "events": ["*"]});
        p.as_server(&t, Method::POST, "/api/v1/webhooks", Some(&body))
            .answer()
    });
    let answers = join_all(adds).await;
    assert_eq!(tally(&answers, "too_many_endpoints"), (20, 44));
    let (_, list) = p
        .as_server(&t, Method::GET, "/api/v1/webhooks?limit=200", None)
        .answer()
        .await;
    assert_eq!(list["total"], 20);

    // Resumable uploads: at most 20 open per user.
    let declares = (0..64).map(|n| {
        p.as_user(&ada, Method::POST, "/api/files/uploads")
            .json(&json!({"filename": format!("f{n}.bin"), "size": 1024, "sha256": "0".repeat(64), "contentType": "application/octet-stream"}))
            .answer()
    });
    let answers = join_all(declares).await;
    assert_eq!(tally(&answers, "too_many_uploads"), (20, 44));

    // Restream targets: at most 5 per broadcast.
    let (_, b) = p
        .as_user(&ada, Method::POST, "/api/broadcasts")
        .send_json(&json!({"title": "Simulcast"}))
        .await;
    let path = format!("/api/broadcasts/{}/restreams", b["id"].as_str().unwrap());
    let targets = (0..64).map(|n| {
        p.as_user(&ada, Method::POST, &path)
            .json(
                &json!({"url": "rtmp://a.rtmp.youtube.com/live2", "streamKey": format!("key-{n}")}),
            )
            .answer()
    });
    let answers = join_all(targets).await;
    assert_eq!(tally(&answers, "too_many_restreams"), (5, 59));

    // Playlist tracks: at most 1000; 64 appends of 20 tracks race for them (50 fit).
    let (status, playlist) = p
        .as_user(&ada, Method::POST, "/api/playlists")
        .send_json(&json!({"name": "Race"}))
        .await;
    assert_eq!(status, 201, "{playlist}");
    let path = format!("/api/playlists/{}/tracks", playlist["id"].as_str().unwrap());
    let appends = (0..64).map(|n| {
        let tracks: Vec<Value> = (0..20)
            .map(|i| json!({"title": format!("t{n}-{i}"), "url": "https://cdn.example.com/t.mp3"}))
            .collect();
        p.as_user(&ada, Method::POST, &path)
            .json(&json!({ "tracks": tracks }))
            .answer()
    });
    let answers = join_all(appends).await;
    assert_eq!(tally_as(&answers, 200, "playlist_full"), (50, 14));

    // Co-host seats: an open session of 4 hosts seats 3 co-hosts; 64 users join at once.
    let names: Vec<String> = (0..64).map(|n| format!("guest{n}")).collect();
    let guests = join_all(names.iter().map(|name| p.signup(&t, name))).await;
    let (_, session) = p
        .as_user(&ada, Method::POST, "/api/streaming/sessions")
        .send_json(&json!({"title": "Open panel", "cohostPolicy": "open"}))
        .await;
    let id = session["id"].as_str().unwrap().to_string();
    let (status, _) = p
        .as_user(&ada, Method::POST, &format!("/api/broadcasts/{id}/status"))
        .send_json(&json!({"status": "active"}))
        .await;
    assert_eq!(status, 200);
    let joins = guests.iter().map(|g| {
        p.as_user(
            g,
            Method::POST,
            &format!("/api/streaming/sessions/{id}/join-cohost"),
        )
        .json(&json!({"userName": "Guest"}))
        .answer()
    });
    let answers = join_all(joins).await;
    assert_eq!(tally_as(&answers, 200, "session_full"), (3, 61));
    let (_, multihost) = p
        .as_user(
            &ada,
            Method::GET,
            &format!("/api/streaming/sessions/{id}/multihost"),
        )
        .answer()
        .await;
    assert_eq!(
        (&multihost["activeCoHosts"], &multihost["freeSlots"]),
        (&json!(3), &json!(0)),
        "{multihost}"
    );
}

/// What a create answered is there for the next request: 64 creators at once, each reading
/// its broadcast (and acting on it) the moment its create is answered.
#[tokio::test(flavor = "multi_thread")]
async fn a_broadcast_is_there_as_soon_as_its_create_is_answered() {
    let p = Platform::start().await;
    let t = p.register_client("Read your writes").await;
    let mut users = Vec::new();
    for i in 0..8 {
        users.push(p.signup(&t, &format!("writer{i}")).await);
    }
    let rounds = (0..64).map(|i| {
        let (p, user) = (&p, &users[i % users.len()]);
        async move {
            let mut missing = Vec::new();
            for round in 0..4 {
                let (status, b) = p
                    .as_user(user, Method::POST, "/api/broadcasts")
                    .send_json(
                        &json!({"title": format!("T{i}-{round}"), "visibility": "subscribers"}),
                    )
                    .await;
                assert_eq!(status, 200, "{b}");
                let id = b["id"].as_str().unwrap().to_string();
                let (status, body) = p
                    .as_user(user, Method::GET, &format!("/api/broadcasts/{id}"))
                    .answer()
                    .await;
                if status != 200 {
                    missing.push(format!("GET {id}: {status} {body}"));
                }
                let (status, body) = p
                    .as_user(
                        user,
                        Method::POST,
                        &format!("/api/broadcasts/{id}/analytics/share"),
                    )
                    .answer()
                    .await;
                if status == 404 {
                    missing.push(format!("share {id}: {status} {body}"));
                }
            }
            missing
        }
    });
    let missing: Vec<String> = join_all(rounds).await.into_iter().flatten().collect();
    assert!(
        missing.is_empty(),
        "{} reads missed a created broadcast: {missing:#?}",
        missing.len()
    );
}
