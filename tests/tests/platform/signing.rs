//! Request signing: HMAC-SHA256 over method + path + body + timestamp, computed here
//! independently of the server's code.

use hmac::{Hmac, Mac};
use platform_tests::{Exchange, Method, Platform, json_of};
use serde_json::json;
use sha2::Sha256;

fn hmac_hex(secret: &str, message: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(message.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[test]
fn the_independent_hmac_matches_a_published_vector() {
    assert_eq!(
        hmac_hex("key", "The quick brown fox jumps over the lazy dog"),
        "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn signed_requests_verify_and_each_failure_says_why() {
    let p = Platform::start().await;
    let t = p.register_client("Signer").await;
    let body =
        json!({"username": "ada", "email": "ada@example.com", "password": "correct horse battery"})
            .to_string();
    let path = "/api/users/signup";
    let ts = now().to_string();
    let good = hmac_hex(&t.secret_key, &format!("POST{path}{body}{ts}"));

    let send = |sig: String, ts: String, body: String| {
        p.as_client(&t, Method::POST, path)
            .header("content-type", "application/json")
            .header("x-signature", sig)
            .header("x-timestamp", ts)
            .body(body)
            .send()
    };
    // Tampered body, wrong case, stale and malformed timestamps: each with its own code.
    let tampered = body.replace("ada@", "eve@");
    for (sig, ts_value, payload, code) in [
        (good.clone(), ts.clone(), tampered, "signature_mismatch"),
        (
            good.to_uppercase(),
            ts.clone(),
            body.clone(),
            "invalid_signature_format",
        ),
        (
            hmac_hex(&t.secret_key, &format!("POST{path}{body}{}", now() - 400)),
            (now() - 400).to_string(),
            body.clone(),
            "timestamp_out_of_window",
        ),
        (
            good.clone(),
            "yesterday".to_string(),
            body.clone(),
            "invalid_timestamp",
        ),
    ] {
        let (status, answer) = json_of(send(sig, ts_value, payload).await.unwrap()).await;
        assert_eq!(
            (status.as_u16(), answer["code"].as_str()),
            (401, Some(code)),
            "{answer}"
        );
    }
    let (status, answer) =
        json_of(send(good.clone(), ts.clone(), body.clone()).await.unwrap()).await;
    assert_eq!(status, 200, "{answer}");
    // The same signature again is a replay.
    let (status, answer) = json_of(send(good, ts, body).await.unwrap()).await;
    assert_eq!(
        (status.as_u16(), answer["code"].as_str()),
        (401, Some("signature_replayed"))
    );

    // One of the two headers alone is refused.
    let status = p
        .as_client(&t, Method::GET, "/api/v1/users")
        .header("x-timestamp", now().to_string())
        .status()
        .await;
    assert_eq!(status, 401);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_query_string_is_part_of_the_signed_path() {
    let p = Platform::start().await;
    let t = p.register_client("Signer").await;
    let ts = now().to_string();
    let target = "/api/v1/users?limit=5";
    let sig = hmac_hex(&t.secret_key, &format!("GET{target}{ts}"));
    let (status, body) = p
        .as_client(&t, Method::GET, target)
        .header("x-signature", &sig)
        .header("x-timestamp", &ts)
        .answer()
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["limit"], 5);
    let other = hmac_hex(&t.secret_key, &format!("GET{target}{ts}")).replace('a', "b");
    let status = p
        .as_client(&t, Method::GET, "/api/v1/users?limit=6")
        .header("x-signature", other)
        .header("x-timestamp", &ts)
        .status()
        .await;
    assert_eq!(status, 401);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_can_require_signatures() {
    let p = Platform::start().await;
    let answer = p
        .request(Method::POST, "/api/admin/sdk-clients")
        .json(&json!({"name": "Strict", "contactEmail": "s@example.com", "agreeTerms": true, "agreeDataProcessing": true, "requireSignature": true}))
        .send()
        .await
        .unwrap();
    let (_, reg) = json_of(answer).await;
    let (key, secret) = (
        reg["apiKey"].as_str().unwrap(),
        reg["secretKey"].as_str().unwrap(),
    );
    let (status, body) = p
        .request(Method::GET, "/api/v1/users")
        .header("x-api-key", key)
        .answer()
        .await;
    assert_eq!(
        (status.as_u16(), body["code"].as_str()),
        (401, Some("signature_required"))
    );
    let ts = now().to_string();
    let sig = hmac_hex(secret, &format!("GET/api/v1/users{ts}"));
    let status = p
        .request(Method::GET, "/api/v1/users")
        .header("x-api-key", key)
        .header("x-signature", sig)
        .header("x-timestamp", ts)
        .status()
        .await;
    assert_eq!(status, 200);
}
