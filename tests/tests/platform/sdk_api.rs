//! The tenant's own API under /api/v1/ (server tier: signed requests): users and sessions.

use platform_tests::{Exchange, Method, Platform};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn sessions_through_the_tenants_server() {
    let p = Platform::start().await;
    let t = p.register_client("Acme").await;
    let ada = p.signup(&t, "ada").await;

    let (status, created) = p
        .as_server(
            &t,
            Method::POST,
            "/api/v1/sessions",
            Some(&json!({"title": "Launch", "metadata": {"sku": "42"}, "tags": ["news"]})),
        )
        .answer()
        .await;
    assert_eq!(status, 200, "{created}");
    assert_eq!(created["status"], "pending");
    let id = created["id"].as_str().unwrap().to_string();

    // A broadcast created by a user is one of the client's sessions too.
    let (_, broadcast) = p
        .as_user(&ada, Method::POST, "/api/broadcasts")
        .json(&json!({"title": "Ada live"}))
        .answer()
        .await;
    let (status, list) = p
        .as_server(&t, Method::GET, "/api/v1/sessions", None)
        .answer()
        .await;
    assert_eq!(status, 200);
    assert_eq!(list["total"], 2);
    let ids: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&id.as_str()) && ids.contains(&broadcast["id"].as_str().unwrap()));

    // PATCH: merge metadata, move status; a refused move changes nothing.
    let path = format!("/api/v1/sessions/{id}");
    let (status, patched) = p
        .as_server(
            &t,
            Method::PATCH,
            &path,
            Some(&json!({"status": "active", "metadata": {"sku": null, "camera": "front"}})),
        )
        .answer()
        .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["status"], "active");
    assert_eq!(patched["metadata"], json!({"camera": "front"}));
    let (status, refused) = p
        .as_server(
            &t,
            Method::PATCH,
            &path,
            Some(&json!({"status": "pending", "metadata": {"x": "y"}})),
        )
        .answer()
        .await;
    assert_eq!(status, 422, "pending cannot be requested: {refused}");
    let (status, refused) = p
        .as_server(&t, Method::PATCH, &path, Some(&json!({})))
        .answer()
        .await;
    assert_eq!(status, 422, "a patch changes something: {refused}");
    assert_eq!(refused["errors"][0]["field"], "status", "{refused}");
    let (status, _) = p
        .as_server(
            &t,
            Method::PATCH,
            &path,
            Some(&json!({"status": "completed"})),
        )
        .answer()
        .await;
    assert_eq!(status, 200);
    let (status, refused) = p
        .as_server(
            &t,
            Method::PATCH,
            &path,
            Some(&json!({"status": "active", "metadata": {"x": "y"}})),
        )
        .answer()
        .await;
    assert_eq!(
        (status.as_u16(), refused["code"].as_str()),
        (409, Some("invalid_transition"))
    );
    let (_, list) = p
        .as_server(&t, Method::GET, "/api/v1/sessions", None)
        .answer()
        .await;
    let stored = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id.as_str())
        .unwrap()
        .clone();
    assert_eq!(
        stored["metadata"],
        json!({"camera": "front"}),
        "the refused patch wrote nothing"
    );

    // Reactions are counted per session.
    let react = format!(
        "/api/v1/sessions/{}/reactions",
        broadcast["id"].as_str().unwrap()
    );
    for kind in ["heart", "heart", "sparkle"] {
        let status = p
            .as_server(&t, Method::POST, &react, Some(&json!({"reaction": kind})))
            .status()
            .await;
        assert_eq!(status, 200);
    }
    let (status, body) = p
        .as_server(&t, Method::POST, &react, Some(&json!({"reaction": "poop"})))
        .answer()
        .await;
    assert_eq!(status, 422, "{body}");
    let (_, seen) = p
        .as_user(
            &ada,
            Method::GET,
            &format!("/api/broadcasts/{}", broadcast["id"].as_str().unwrap()),
        )
        .answer()
        .await;
    assert_eq!(
        seen["reactions"],
        json!({"heart": 2, "sparkle": 1, "thumbs_up": 0, "surprised": 0})
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn users_of_the_client_are_paginated() {
    let p = Platform::start().await;
    let t = p.register_client("Acme").await;
    for name in ["ada", "bob", "cyd"] {
        p.signup(&t, name).await;
    }
    let (status, body) = p
        .as_server(&t, Method::GET, "/api/v1/users?limit=2&offset=1", None)
        .answer()
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        (
            body["total"].as_i64(),
            body["limit"].as_i64(),
            body["offset"].as_i64()
        ),
        (Some(3), Some(2), Some(1))
    );
    assert_eq!(body["items"].as_array().unwrap().len(), 2);
    assert!(
        body["items"][0].get("email").is_none(),
        "no private fields in the list"
    );
    assert_eq!(
        p.as_server(&t, Method::GET, "/api/v1/users?limit=500", None)
            .status()
            .await,
        400
    );
}
