//! Tenant isolation: two tenants, each with users; everything across tenants is 404 (or
//! 401 for credentials) and changes nothing.

use platform_tests::{Exchange, Method, Platform};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn tenants_cannot_see_or_touch_each_other() {
    let p = Platform::start().await;
    let acme = p.register_client("Acme").await;
    let zeta = p.register_client("Zeta").await;
    let ada = p.signup(&acme, "ada").await;
    let zed = p.signup(&zeta, "zed").await;
    // The same username in another tenant is fine.
    let ada_z = p.signup(&zeta, "ada").await;

    let (_, broadcast) = p
        .as_user(&ada, Method::POST, "/api/broadcasts")
        .json(&json!({"title": "Acme only"}))
        .answer()
        .await;
    let b = broadcast["id"].as_str().unwrap();
    let (_, session) = p
        .as_server(
            &acme,
            Method::POST,
            "/api/v1/sessions",
            Some(&json!({"title": "Acme session"})),
        )
        .answer()
        .await;
    let s = session["id"].as_str().unwrap();

    // Reads across tenants.
    for path in [
        format!("/api/broadcasts/{b}"),
        format!("/api/users/{}/followers", ada.id),
        format!("/api/broadcasts/{b}/analytics"),
    ] {
        let status = p.as_user(&zed, Method::GET, &path).status().await;
        assert_eq!(status, 404, "{path}");
    }
    // Writes across tenants.
    let writes = [
        (
            Method::POST,
            format!("/api/users/follow/{}", ada.id),
            json!({}),
        ),
        (
            Method::POST,
            format!("/api/broadcasts/{b}/status"),
            json!({"status": "active"}),
        ),
        (
            Method::POST,
            format!("/api/sessions/{b}/heartbeat"),
            json!({}),
        ),
        (
            Method::POST,
            format!("/api/broadcasts/{b}/viewer-count"),
            json!({"viewerCount": 5}),
        ),
        (
            Method::POST,
            format!("/api/broadcasts/{b}/stream-key/reset"),
            json!({}),
        ),
    ];
    for (method, path, body) in writes {
        let status = p.as_user(&zed, method, &path).json(&body).status().await;
        assert_eq!(status, 404, "{path}");
    }
    for (method, path, body) in [
        (
            Method::PATCH,
            format!("/api/v1/sessions/{s}"),
            json!({"status": "active"}),
        ),
        (
            Method::POST,
            format!("/api/v1/sessions/{s}/reactions"),
            json!({"reaction": "heart"}),
        ),
    ] {
        let status = p
            .as_server(&zeta, method, &path, Some(&body))
            .status()
            .await;
        assert_eq!(status, 404, "{path}");
    }
    // Lists never show the other tenant's rows.
    let (_, list) = p
        .as_server(&zeta, Method::GET, "/api/v1/sessions", None)
        .answer()
        .await;
    assert_eq!(list["total"], 0);
    let (_, users) = p
        .as_server(&zeta, Method::GET, "/api/v1/users", None)
        .answer()
        .await;
    assert_eq!(users["total"], 2);
    assert!(
        users["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|u| u["id"] != ada.id.as_str())
    );
    // A Zeta user cannot log in through Acme's key with Zeta's credentials of the same name.
    let status = p
        .as_client(&acme, Method::POST, "/api/users/login")
        .json(&json!({"username": "zed", "password": "correct horse battery"}))
        .status()
        .await;
    assert_eq!(status, 401);
    // Tokens only work with their own tenant's key.
    let status = p
        .as_client(&acme, Method::GET, "/api/users/profile/full")
        .bearer_auth(&ada_z.token)
        .status()
        .await;
    assert_eq!(status, 401);

    // Nothing changed on Acme's side.
    let (_, seen) = p
        .as_user(&ada, Method::GET, &format!("/api/broadcasts/{b}"))
        .answer()
        .await;
    assert_eq!(
        (
            seen["status"].as_str(),
            seen["viewerCount"].as_i64(),
            seen["streamKey"].as_str()
        ),
        (Some("pending"), Some(0), broadcast["streamKey"].as_str())
    );
    let (_, profile) = p
        .as_user(&ada, Method::GET, "/api/users/profile/full")
        .answer()
        .await;
    assert_eq!(profile["followerCount"], 0);
    let (_, s_seen) = p
        .as_server(&acme, Method::GET, "/api/v1/sessions", None)
        .answer()
        .await;
    let stored = s_seen["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == s)
        .unwrap()
        .clone();
    assert_eq!(
        (stored["status"].as_str(), &stored["reactions"]["heart"]),
        (Some("pending"), &json!(0))
    );
}
