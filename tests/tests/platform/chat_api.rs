//! The persisted chat API: streams and broadcasts, limits, deletion rights, rate limit,
//! tenancy, and the relay's service credential.

use platform_tests::{Exchange, Method, Platform, Tenant, User};
use serde_json::{Value, json};

async fn broadcast(p: &Platform, owner: &User, visibility: &str) -> Value {
    let (status, b) = p
        .as_user(owner, Method::POST, "/api/broadcasts")
        .send_json(&json!({"title": "Chatty", "visibility": visibility}))
        .await;
    assert_eq!(status, 200, "{b}");
    b
}

async fn say(p: &Platform, u: &User, path: &str, text: &str) -> (u16, Value) {
    let (status, body) = p
        .as_user(u, Method::POST, path)
        .send_json(&json!({"message": text}))
        .await;
    (status.as_u16(), body)
}

fn texts(page: &Value) -> Vec<&str> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["message"].as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn stream_and_broadcast_chat() {
    let p = Platform::start().await;
    let t = p.register_client("Acme").await;
    let (ada, bob, eve) = (
        p.signup(&t, "ada").await,
        p.signup(&t, "bob").await,
        p.signup(&t, "eve").await,
    );
    let b = broadcast(&p, &ada, "public").await;
    let (id, stream) = (b["id"].as_str().unwrap(), b["streamId"].as_str().unwrap());
    let stream_chat = format!("/api/streams/{stream}/chat");
    let broadcast_chat = format!("/api/broadcasts/{id}/chat");

    let (status, stored) = say(&p, &bob, &stream_chat, "  hello from the stream  ").await;
    assert_eq!(status, 200, "{stored}");
    assert_eq!(stored["message"], "hello from the stream");
    assert_eq!(
        (stored["senderId"].as_str(), stored["senderName"].as_str()),
        (Some(bob.id.as_str()), Some("bob"))
    );
    assert_eq!(stored["streamId"], stream);
    assert_eq!(stored["broadcastId"], Value::Null);
    assert_eq!(stored["deleted"], false);
    let (status, via_broadcast) = say(&p, &ada, &broadcast_chat, "hello from the broadcast").await;
    assert_eq!(status, 200);
    assert_eq!(via_broadcast["broadcastId"], id);
    // The stream route addressed by the broadcast's own id posts to the broadcast's chat.
    let by_id = format!("/api/streams/{id}/chat");
    let (status, via_id) = say(&p, &eve, &by_id, "third").await;
    assert_eq!(status, 200, "{via_id}");
    assert_eq!(
        (&via_id["broadcastId"], &via_id["streamId"]),
        (&json!(id), &json!(stream))
    );

    // The broadcast's history includes what was stored under its streamId, once, in order.
    let (status, page) = p.as_user(&ada, Method::GET, &broadcast_chat).answer().await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(
        texts(&page),
        ["hello from the stream", "hello from the broadcast", "third"]
    );
    assert_eq!(page["total"], 3);
    // The newest two, oldest first; then the one before them.
    let (_, newest) = p
        .as_user(&ada, Method::GET, &format!("{stream_chat}?limit=2"))
        .answer()
        .await;
    assert_eq!(texts(&newest), ["hello from the broadcast", "third"]);
    let (_, older) = p
        .as_user(
            &ada,
            Method::GET,
            &format!("{stream_chat}?limit=2&offset=2"),
        )
        .answer()
        .await;
    assert_eq!(texts(&older), ["hello from the stream"]);
    // Readers with the API key alone see a public stream's chat.
    let (status, public) = p.as_client(&t, Method::GET, &stream_chat).answer().await;
    assert_eq!(status, 200);
    assert_eq!(public["total"], 3);

    // Bad messages are refused and nothing is stored.
    for bad in [
        json!({"message": "   "}),
        json!({"message": "x".repeat(2001)}),
        json!({}),
        json!({"message": 5}),
        json!({"message": "hi", "to": "all"}),
    ] {
        let (status, answer) = p
            .as_user(&bob, Method::POST, &stream_chat)
            .send_json(&bad)
            .await;
        assert_eq!(status, 422, "{bad} -> {answer}");
    }
    let (status, _) = p
        .as_user(&bob, Method::POST, "/api/streams/not-a-uuid/chat")
        .send_json(&json!({"message": "x"}))
        .await;
    assert_eq!(status, 400);
    let (status, _) = p
        .as_user(
            &bob,
            Method::POST,
            "/api/streams/00000000-0000-4000-8000-000000000000/chat",
        )
        .send_json(&json!({"message": "x"}))
        .await;
    assert_eq!(status, 404);
    let (_, page) = p.as_user(&ada, Method::GET, &broadcast_chat).answer().await;
    assert_eq!(page["total"], 3);

    // Deleting: the sender may, another viewer may not, the owner may.
    let eve_msg = page["items"][2]["id"].as_str().unwrap().to_string();
    let bob_msg = page["items"][0]["id"].as_str().unwrap().to_string();
    let (status, _) = p
        .as_user(&bob, Method::DELETE, &format!("{stream_chat}/{eve_msg}"))
        .answer()
        .await;
    assert_eq!(status, 403);
    let (status, _) = p
        .as_user(&eve, Method::DELETE, &format!("{stream_chat}/{eve_msg}"))
        .answer()
        .await;
    assert_eq!(status, 200);
    let (status, _) = p
        .as_user(&ada, Method::DELETE, &format!("{stream_chat}/{bob_msg}"))
        .answer()
        .await;
    assert_eq!(status, 200);
    let (_, page) = p.as_user(&ada, Method::GET, &broadcast_chat).answer().await;
    let deleted: Vec<bool> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["deleted"].as_bool().unwrap())
        .collect();
    assert_eq!(deleted, [true, false, true]);
    let (_, analytics) = p
        .as_user(
            &ada,
            Method::GET,
            &format!("/api/broadcasts/{id}/analytics"),
        )
        .answer()
        .await;
    assert_eq!(analytics["chatMessages"], 1, "{analytics}");

    // A completed broadcast's chat is closed.
    p.as_user(&ada, Method::POST, &format!("/api/broadcasts/{id}/status"))
        .send_json(&json!({"status": "completed"}))
        .await;
    let (status, closed) = say(&p, &bob, &stream_chat, "too late").await;
    assert_eq!(
        (status, closed["code"].as_str()),
        (409, Some("broadcast_ended"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn rate_limit_privacy_tenancy_and_the_relay_credential() {
    let p = Platform::start().await;
    let (t, other): (Tenant, Tenant) = (
        p.register_client("Acme").await,
        p.register_client("Other").await,
    );
    let (ada, bob) = (p.signup(&t, "ada").await, p.signup(&t, "bob").await);
    let stranger = p.signup(&other, "stranger").await;
    let b = broadcast(&p, &ada, "public").await;
    let stream_chat = format!("/api/streams/{}/chat", b["streamId"].as_str().unwrap());

    for n in 0..10 {
        let (status, body) = say(&p, &bob, &stream_chat, &format!("m{n}")).await;
        assert_eq!(status, 200, "{body}");
    }
    let answer = p
        .as_user(&bob, Method::POST, &stream_chat)
        .json(&json!({"message": "one too many"}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 429);
    assert!(answer.headers().get("retry-after").is_some());

    // Another tenant's users cannot read or write it.
    let (status, _) = p
        .as_user(&stranger, Method::GET, &stream_chat)
        .answer()
        .await;
    assert_eq!(status, 404);
    let (status, _) = say(&p, &stranger, &stream_chat, "hi").await;
    assert_eq!(status, 404);

    // A private broadcast's chat is its owner's alone.
    let private = broadcast(&p, &ada, "private").await;
    let private_chat = format!(
        "/api/streams/{}/chat",
        private["streamId"].as_str().unwrap()
    );
    assert_eq!(say(&p, &ada, &private_chat, "note to self").await.0, 200);
    assert_eq!(say(&p, &bob, &private_chat, "hi").await.0, 404);
    let (status, _) = p.as_client(&t, Method::GET, &private_chat).answer().await;
    assert_eq!(status, 404);

    // The relay's credential: the shared secret plus the user's JWT, no API key.
    let secret = std::fs::read_to_string(p.state_dir().join("generated-variables.toml")).unwrap();
    let relay_secret = secret
        .lines()
        .find_map(|l| l.strip_prefix("relay_secret = "))
        .map(|v| v.trim().trim_matches('"').to_string())
        .expect("a generated relay secret");
    let (status, stored) = p
        .request(Method::POST, &private_chat)
        .header("x-relay-secret", &relay_secret)
        .bearer_auth(&ada.token)
        .send_json(&json!({"message": "through the relay"}))
        .await;
    assert_eq!(status, 200, "{stored}");
    assert_eq!(stored["senderId"], ada.id.as_str());
    let (status, _) = p
        .request(Method::POST, &private_chat)
        .header("x-relay-secret", "wrong")
        .bearer_auth(&ada.token)
        .send_json(&json!({"message": "forged"}))
        .await;
    assert_eq!(status, 401);
    // Anonymous relay reads name the tenant; a private stream stays hidden.
    let (status, page) = p
        .request(Method::GET, &stream_chat)
        .header("x-relay-secret", &relay_secret)
        .header("x-tenant-id", &t.client_id)
        .answer()
        .await;
    assert_eq!((status.as_u16(), page["total"].as_i64()), (200, Some(10)));
    let (status, _) = p
        .request(Method::GET, &private_chat)
        .header("x-relay-secret", &relay_secret)
        .header("x-tenant-id", &t.client_id)
        .answer()
        .await;
    assert_eq!(status, 404);
}
