//! Attacks on embed tokens: the one way a private broadcast's embed page plays.

use super::{cast, code, live_broadcast, platform, short_id};
use domain::player::{embed_token_key, issue_embed_token};
use platform_tests::{Exchange, Method, Platform};
use serde_json::{Value, json};

/// The embed page at `path_and_query`: its status, `cache-control`, whether it has an
/// ETag, and its body.
async fn page(p: &Platform, path_and_query: &str) -> (u16, String, bool, String) {
    let r = p.request(Method::GET, path_and_query).send().await.unwrap();
    let status = r.status().as_u16();
    let cache = r
        .headers()
        .get("cache-control")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let etag = r.headers().contains_key("etag");
    (status, cache, etag, r.text().await.unwrap())
}

/// The path and query of an absolute `embedUrl`.
fn local(embed_url: &str) -> &str {
    let after_scheme = embed_url
        .split_once("://")
        .map_or(embed_url, |(_, rest)| rest);
    &after_scheme[after_scheme.find('/').expect("a path")..]
}

/// Only the tenant's server mints an embed token, for its own broadcasts, with a lifetime
/// in bounds; the token opens that one broadcast's embed page (never another's, never the
/// watch page), with playback signed until the token's expiry, in a page no cache keeps.
/// A token that is forged, tampered with, expired, of another audience or naming another
/// tenant opens nothing, and shows nothing of the stream.
#[tokio::test(flavor = "multi_thread")]
async fn an_embed_token_opens_one_broadcast_of_its_tenant_alone() {
    let p = platform().await;
    let (t, ada, eve) = cast(&p).await;
    let other = p.register_client("Other").await;
    let private = live_broadcast(&p, &ada, "private").await;
    let sibling = live_broadcast(&p, &ada, "subscribers").await;
    let id = private["id"].as_str().unwrap();
    let stream = private["streamId"].as_str().unwrap();
    let mint = format!("/api/v1/sessions/{id}/embed-tokens");

    // Who may mint: the API key alone, a user (even the owner) and another tenant's
    // server may not; bad lifetimes are refused.
    let (status, answer) = p
        .request(Method::POST, &mint)
        .header("x-api-key", &t.api_key)
        .send_json(&json!({}))
        .await;
    assert_eq!(status, 401, "{answer}");
    for user in [&ada, &eve] {
        let (status, answer) = p
            .as_user(user, Method::POST, &mint)
            .send_json(&json!({}))
            .await;
        assert_eq!(status, 401, "{answer}");
    }
    let (status, answer) = p
        .as_server(&other, Method::POST, &mint, Some(&json!({})))
        .answer()
        .await;
    assert_eq!((status.as_u16(), code(&answer)), (404, "not_found"));
    for ttl in [
        json!(59),
        json!(86_401),
        json!(-1),
        json!("3600"),
        json!(1e12),
    ] {
        let body = json!({ "ttlSeconds": ttl });
        let (status, answer) = p
            .as_server(&t, Method::POST, &mint, Some(&body))
            .answer()
            .await;
        assert_eq!(status, 422, "{ttl}: {answer}");
        assert_eq!(code(&answer), "validation_failed", "{answer}");
    }

    let body = json!({"ttlSeconds": 600});
    let (status, minted) = p
        .as_server(&t, Method::POST, &mint, Some(&body))
        .answer()
        .await;
    assert_eq!(status, 201, "{minted}");
    let token = minted["token"].as_str().unwrap();
    let embed_url = minted["embedUrl"].as_str().unwrap();
    let short = short_id(&private);
    assert_eq!(local(embed_url), format!("/embed/{short}?token={token}"));
    let expires = domain::time::parse_rfc3339(minted["expiresAt"].as_str().unwrap()).unwrap();

    // The page plays, signed until the token's expiry, exactly as the media server checks.
    let (status, cache, etag, body) = page(&p, local(embed_url)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!((cache.as_str(), etag), ("no-store", false));
    let key = domain::media::playback_key(&p.variable("media_secret").unwrap());
    // (The page's attribute is HTML-escaped: `&` is `&amp;`.)
    let signed = domain::media::signed_query(&key, stream, expires).replace('&', "&amp;");
    assert!(
        body.contains(&format!("{stream}&#x2f;index.m3u8?{signed}\"")),
        "{body}"
    );

    // The token opens its own broadcast alone.
    for path in [
        format!("/embed/{}?token={token}", short_id(&sibling)),
        format!("/watch/{short}?token={token}"),
        format!("/embed/{short}"),
    ] {
        let (status, _, _, body) = page(&p, &path).await;
        assert!(status == 404 || status == 400, "{path}: {status}");
        assert!(!body.contains(stream), "{path}: {body}");
    }

    // Forged, tampered, expired, another audience, another tenant: nothing.
    let embed_key = embed_token_key(&p.variable("media_secret").unwrap());
    let client_id = t.client_id.clone();
    let now = p.now();
    let mut tampered = token.to_string();
    let last = tampered.pop().unwrap();
    tampered.push(if last == 'A' { 'B' } else { 'A' });
    let forged: Vec<(&str, String)> = vec![
        ("a user's access token", ada.token.clone()),
        ("tampered", tampered),
        (
            "signed with another key",
            issue_embed_token(b"guessed", &client_id, id, now, 600),
        ),
        (
            "expired",
            issue_embed_token(&embed_key, &client_id, id, now - 3_600, 600),
        ),
        (
            "for another tenant",
            issue_embed_token(&embed_key, &other.client_id, id, now, 600),
        ),
        (
            "a socket ticket",
            domain::jwt::issue_socket_ticket(&embed_key, &client_id, id, None, now),
        ),
    ];
    for (what, forged) in forged {
        let (status, cache, _, body) = page(&p, &format!("/embed/{short}?token={forged}")).await;
        assert_eq!(status, 404, "{what}: {body}");
        assert_eq!(cache, "no-store", "{what}");
        assert!(!body.contains(stream), "{what}: {body}");
    }
    // The same key's token for the right tenant and broadcast does open it: the refusals
    // above are the token's faults, not the page's.
    let genuine = issue_embed_token(&embed_key, &client_id, id, now, 600);
    let (status, _, _, _) = page(&p, &format!("/embed/{short}?token={genuine}")).await;
    assert_eq!(status, 200);
}

/// A public broadcast's embed page stays cacheable without a token; with one, the token
/// must be its own.
#[tokio::test(flavor = "multi_thread")]
async fn a_token_on_a_public_embed_must_be_its_own() {
    let p = platform().await;
    let (t, ada, _) = cast(&p).await;
    let public = live_broadcast(&p, &ada, "public").await;
    let private = live_broadcast(&p, &ada, "private").await;
    let short = short_id(&public);
    let (status, cache, etag, _) = page(&p, &format!("/embed/{short}")).await;
    assert_eq!((status, cache.as_str(), etag), (200, "no-cache", true));
    let mint = |b: &Value| {
        format!(
            "/api/v1/sessions/{}/embed-tokens",
            b["id"].as_str().unwrap()
        )
    };
    let (_, theirs) = p
        .as_server(&t, Method::POST, &mint(&private), None)
        .answer()
        .await;
    let (status, _, _, _) = page(
        &p,
        &format!("/embed/{short}?token={}", theirs["token"].as_str().unwrap()),
    )
    .await;
    assert_eq!(status, 404, "another broadcast's token");
    let (status, own) = p
        .as_server(&t, Method::POST, &mint(&public), None)
        .answer()
        .await;
    assert_eq!(status, 201, "{own}");
    let (status, cache, etag, _) = page(&p, local(own["embedUrl"].as_str().unwrap())).await;
    assert_eq!((status, cache.as_str(), etag), (200, "no-store", false));
}
