//! Co-hosting end to end: joining and its refusals, invites, permission management and
//! escalation attempts, the layout, SFU publish rights, presence from signed LiveKit
//! webhooks, and the metrics.

use base64::Engine;
use livekit_api::access_token::{AccessToken, TokenVerifier};
use platform_tests::{Exchange, Method, Platform, User};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const SFU_KEY: &str = "APIcohostkey";
const SFU_SECRET: &str = "cohost-sfu-secret-long-enough-0123456789abcdef";

struct Session<'a> {
    p: &'a Platform,
    id: String,
    stream_id: String,
}

impl Session<'_> {
    async fn call(&self, u: &User, method: Method, tail: &str, body: Value) -> (u16, Value) {
        let path = format!("/api/streaming/sessions/{}{tail}", self.id);
        let builder = self.p.as_user(u, method, &path);
        let (status, body) = if body.is_null() {
            builder.answer().await
        } else {
            builder.send_json(&body).await
        };
        (status.as_u16(), body)
    }

    async fn invite(&self, by: &User, to: &User, permissions: &str) -> (u16, Value) {
        self.call(
            by,
            Method::POST,
            "/invites",
            json!({"userId": to.id, "permissions": permissions}),
        )
        .await
    }

    async fn join(&self, u: &User, name: &str, extra: Value) -> (u16, Value) {
        let mut body = json!({"userName": name});
        if let Value::Object(more) = extra {
            body.as_object_mut().unwrap().extend(more);
        }
        self.call(u, Method::POST, "/join-cohost", body).await
    }

    /// An SFU token for `u` itself, asked for with its own credentials.
    async fn token(&self, u: &User, role: &str) -> (u16, Value) {
        let (status, body) = self
            .p
            .as_user(
                u,
                Method::POST,
                &format!("/api/streaming/sessions/{}/token", self.id),
            )
            .send_json(&json!({"role": role}))
            .await;
        (status.as_u16(), body)
    }

    /// Sends a participant webhook signed as LiveKit signs them.
    async fn webhook(
        &self,
        id: &str,
        event: &str,
        identity: &str,
        role: &str,
        secret: &str,
    ) -> (u16, Value) {
        let body = json!({
            "id": id,
            "event": event,
            "room": {"name": self.stream_id, "sid": "RM_1"},
            "participant": {"identity": identity, "sid": format!("PA_{identity}"), "metadata": json!({"role": role}).to_string()},
            "createdAt": "1700000000",
        })
        .to_string();
        let digest =
            base64::engine::general_purpose::STANDARD.encode(Sha256::digest(body.as_bytes()));
        let jwt = AccessToken::with_api_key(SFU_KEY, secret)
            .with_sha256(&digest)
            .to_jwt()
            .unwrap();
        let (status, answer) = self
            .p
            .request(
                Method::POST,
                &format!("/api/streaming/sessions/{}/participants/events", self.id),
            )
            .header("authorization", jwt)
            .header("content-type", "application/webhook+json")
            .body(body)
            .answer()
            .await;
        (status.as_u16(), answer)
    }
}

fn cohost_id(answer: &Value) -> String {
    answer["coHost"]["id"]
        .as_str()
        .expect("a co-host id")
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_cohosted_session() {
    let p = Platform::start_with(&[("sfu_api_key", SFU_KEY), ("sfu_api_secret", SFU_SECRET)]).await;
    let t = p.register_client("Acme").await;
    let ada = p.signup(&t, "ada").await;
    let bob = p.signup(&t, "bob").await;
    let carol = p.signup(&t, "carol").await;
    let dave = p.signup(&t, "dave").await;
    let erin = p.signup(&t, "erin").await;

    let (status, created) = p
        .as_user(&ada, Method::POST, "/api/streaming/sessions")
        .send_json(&json!({"title": "Panel", "maxParticipants": 50}))
        .await;
    assert_eq!(status, 200, "{created}");
    let s = Session {
        p: &p,
        id: created["id"].as_str().unwrap().to_string(),
        stream_id: created["streamId"].as_str().unwrap().to_string(),
    };

    // Nobody joins a session that is not live.
    let (status, answer) = s.join(&dave, "Dave", Value::Null).await;
    assert_eq!(
        (status, answer["success"].clone(), answer["code"].as_str()),
        (409, json!(false), Some("not_live"))
    );
    let (status, _) = s.call(&ada, Method::POST, "", Value::Null).await;
    assert_eq!(status, 405);
    let (status, _) = p
        .as_user(
            &ada,
            Method::POST,
            &format!("/api/broadcasts/{}/status", s.id),
        )
        .send_json(&json!({"status": "active"}))
        .await;
    assert_eq!(status, 200);

    // The default layout: 4 hosts on a 2x2 grid, 16:9, names and controls shown.
    let (status, multi) = s.call(&erin, Method::GET, "/multihost", Value::Null).await;
    assert_eq!(status, 200, "{multi}");
    assert_eq!(
        multi["layout"],
        json!({"maxHosts": 4, "gridColumns": 2, "gridRows": 2, "aspectRatio": "16:9", "showNames": true, "showControls": true})
    );
    assert_eq!(multi["freeSlots"], 3);

    // The owner invites Bob and Carol; the invites are single use.
    let (status, bob_invite) = s.invite(&ada, &bob, "default").await;
    assert_eq!(status, 200, "{bob_invite}");
    let (_, carol_invite) = s.invite(&ada, &carol, "default").await;
    let (status, joined) = s
        .join(
            &bob,
            "Bob",
            json!({"inviteToken": bob_invite["inviteToken"], "permissions": "moderator"}),
        )
        .await;
    assert_eq!(status, 200, "{joined}");
    assert_eq!(joined["success"], true);
    assert!(
        joined["message"].as_str().unwrap().contains("reduced"),
        "asked for more than granted: {joined}"
    );
    assert_eq!(joined["coHost"]["permissions"]["canRemoveOthers"], false);
    let bob_id = cohost_id(&joined);
    let (status, again) = s
        .join(
            &bob,
            "Bob",
            json!({"inviteToken": bob_invite["inviteToken"]}),
        )
        .await;
    assert_eq!(
        (status, again["code"].as_str()),
        (409, Some("already_cohost"))
    );
    // Carol's invite is hers alone.
    let (status, stolen) = s
        .join(
            &dave,
            "Dave",
            json!({"inviteToken": carol_invite["inviteToken"]}),
        )
        .await;
    assert_eq!(
        (status, stolen["code"].as_str()),
        (403, Some("invalid_invite"))
    );
    let (status, joined) = s
        .join(
            &carol,
            "Carol",
            json!({"inviteToken": carol_invite["inviteToken"]}),
        )
        .await;
    assert_eq!(status, 200, "{joined}");
    let carol_id = cohost_id(&joined);
    let (status, reused) = s
        .join(
            &carol,
            "Carol",
            json!({"inviteToken": carol_invite["inviteToken"]}),
        )
        .await;
    assert_eq!(status, 409, "{reused}");

    // Dave asks without an invite: a request the host decides, with the default preset
    // whatever he asks for, and no publish rights until approved.
    let (status, joined) = s
        .join(
            &dave,
            "Dave",
            json!({"permissions": {"canTriggerAds": true}}),
        )
        .await;
    assert_eq!(status, 200, "{joined}");
    assert_eq!(joined["coHost"]["status"], "requested");
    assert_eq!(joined["coHost"]["permissions"]["canTriggerAds"], false);
    let dave_id = cohost_id(&joined);
    let (status, pending) = s.token(&dave, "publisher").await;
    assert_eq!(
        (status, pending["code"].as_str()),
        (403, Some("cohost_not_approved"))
    );
    let (status, _) = s
        .call(
            &carol,
            Method::POST,
            &format!("/cohosts/{dave_id}/approve"),
            json!({}),
        )
        .await;
    assert_eq!(status, 403, "a default co-host cannot approve");
    let (status, approved) = s
        .call(
            &ada,
            Method::POST,
            &format!("/cohosts/{dave_id}/approve"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{approved}");
    assert_eq!(approved["coHost"]["status"], "active");
    let (status, again) = s
        .call(
            &ada,
            Method::POST,
            &format!("/cohosts/{dave_id}/approve"),
            json!({}),
        )
        .await;
    assert_eq!(
        (status, again["code"].as_str()),
        (409, Some("not_requested"))
    );
    // The grid holds four hosts: Erin's request cannot be approved while it is full.
    let (status, asked) = s.join(&erin, "Erin", Value::Null).await;
    assert_eq!(
        (status, asked["coHost"]["status"].as_str()),
        (200, Some("requested")),
        "{asked}"
    );
    let erin_id = cohost_id(&asked);
    let (status, full) = s
        .call(
            &ada,
            Method::POST,
            &format!("/cohosts/{erin_id}/approve"),
            json!({}),
        )
        .await;
    assert_eq!((status, full["code"].as_str()), (409, Some("session_full")));
    let (status, bad) = s
        .join(&erin, "Erin", json!({"permissions": {"canFly": true}}))
        .await;
    assert_eq!(status, 422, "{bad}");

    // Escalation attempts change nothing.
    let (status, _) = s
        .call(
            &carol,
            Method::PUT,
            &format!("/cohosts/{dave_id}"),
            json!({"permissions": "moderator"}),
        )
        .await;
    assert_eq!(status, 403, "a default co-host cannot grant");
    let (status, _) = s
        .call(
            &carol,
            Method::PUT,
            &format!("/cohosts/{carol_id}"),
            json!({"permissions": "moderator"}),
        )
        .await;
    assert_eq!(status, 403, "nor promote herself");
    let (status, _) = s.invite(&carol, &erin, "default").await;
    assert_eq!(status, 403);
    let (status, _) = s
        .call(
            &dave,
            Method::DELETE,
            &format!("/cohosts/{dave_id}"),
            Value::Null,
        )
        .await;
    assert_eq!(status, 403, "self-removal through the owner's path");
    let (status, _) = s
        .call(&dave, Method::PUT, "/layout", json!({"showNames": false}))
        .await;
    assert_eq!(status, 403);
    let (status, bad) = s
        .call(
            &ada,
            Method::PUT,
            &format!("/cohosts/{dave_id}"),
            json!({"permissions": {"canModerateChat": "yes"}}),
        )
        .await;
    assert_eq!(status, 422, "{bad}");

    // The owner promotes Bob to moderator; Bob may not hand out what he does not hold.
    let (status, promoted) = s
        .call(
            &ada,
            Method::PUT,
            &format!("/cohosts/{bob_id}"),
            json!({"permissions": "moderator"}),
        )
        .await;
    assert_eq!(status, 200, "{promoted}");
    assert_eq!(promoted["coHost"]["permissions"]["canRemoveOthers"], true);
    let (status, _) = s
        .call(
            &bob,
            Method::PUT,
            &format!("/cohosts/{dave_id}"),
            json!({"permissions": {"canTriggerAds": true}}),
        )
        .await;
    assert_eq!(status, 403);
    let (status, _) = s.invite(&bob, &erin, "moderator").await;
    assert_eq!(status, 200, "a moderator invites with what he holds");

    // Bob removes Carol: she loses her SFU publish rights and cannot rejoin uninvited.
    let (status, token) = s.token(&carol, "publisher").await;
    assert_eq!(status, 200, "{token}");
    let (status, removed) = s
        .call(
            &bob,
            Method::DELETE,
            &format!("/cohosts/{carol_id}"),
            Value::Null,
        )
        .await;
    assert_eq!(status, 200, "{removed}");
    let (status, refused) = s.token(&carol, "publisher").await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (403, Some("cohost_removed"))
    );
    let (status, _) = s.token(&carol, "subscriber").await;
    assert_eq!(status, 200, "she may still watch");
    let (status, back) = s.join(&carol, "Carol", Value::Null).await;
    assert_eq!((status, back["code"].as_str()), (403, Some("removed")));
    let (status, _) = s.token(&erin, "publisher").await;
    assert_eq!(status, 403, "not a co-host");

    // Publisher tokens name the role the SFU reports back in webhooks.
    let verifier = TokenVerifier::with_api_key(SFU_KEY, SFU_SECRET);
    let (_, bob_token) = s.token(&bob, "publisher").await;
    let claims = verifier
        .verify(
            bob_token["token"]
                .as_str()
                .unwrap()
                .strip_prefix("sfu_")
                .unwrap(),
        )
        .unwrap();
    assert_eq!(claims.metadata, r#"{"role":"co_host"}"#);
    assert_eq!(claims.video.can_publish, Some(true));
    let (_, ada_token) = s.token(&ada, "publisher").await;
    let claims = verifier
        .verify(
            ada_token["token"]
                .as_str()
                .unwrap()
                .strip_prefix("sfu_")
                .unwrap(),
        )
        .unwrap();
    assert_eq!(claims.metadata, r#"{"role":"publisher"}"#);

    // The layout: a moderator may change it; it must fit and hold the current hosts.
    let (status, layout) = s
        .call(
            &bob,
            Method::PUT,
            "/layout",
            json!({"maxHosts": 9, "gridColumns": 3, "gridRows": 3}),
        )
        .await;
    assert_eq!(status, 200, "{layout}");
    let (status, bad) = s
        .call(&ada, Method::PUT, "/layout", json!({"maxHosts": 10}))
        .await;
    assert_eq!(status, 422, "{bad}");
    let (status, bad) = s
        .call(
            &ada,
            Method::PUT,
            "/layout",
            json!({"maxHosts": 2, "gridColumns": 1, "gridRows": 2}),
        )
        .await;
    assert_eq!(status, 422, "three hosts are on stage: {bad}");
    let (status, bad) = s
        .call(
            &ada,
            Method::PUT,
            "/layout",
            json!({"aspectRatio": "wide", "showNames": "no"}),
        )
        .await;
    assert_eq!(status, 422, "{bad}");
    let (_, multi) = s.call(&ada, Method::GET, "/multihost", Value::Null).await;
    assert_eq!(multi["layout"]["maxHosts"], 9);
    assert_eq!(multi["activeCoHosts"], 2);
    assert_eq!(multi["freeSlots"], 6);
    let statuses: Vec<(&str, &str)> = multi["coHosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["userName"].as_str().unwrap(),
                c["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            ("Bob", "active"),
            ("Carol", "removed"),
            ("Dave", "active"),
            ("Erin", "requested")
        ]
    );

    // Presence from the SFU's signed webhooks.
    assert_eq!(
        s.webhook("EV_1", "participant_joined", &bob.id, "co_host", SFU_SECRET)
            .await
            .0,
        200
    );
    assert_eq!(
        s.webhook(
            "EV_2",
            "participant_joined",
            &dave.id,
            "co_host",
            SFU_SECRET
        )
        .await
        .0,
        200
    );
    assert_eq!(
        s.webhook(
            "EV_3",
            "participant_joined",
            "viewer-1",
            "subscriber",
            SFU_SECRET
        )
        .await
        .0,
        200
    );
    assert_eq!(
        s.webhook("EV_4", "participant_left", &dave.id, "co_host", SFU_SECRET)
            .await
            .0,
        200
    );
    let (status, dup) = s
        .webhook("EV_4", "participant_left", &dave.id, "co_host", SFU_SECRET)
        .await;
    assert_eq!(
        (status, dup["duplicate"].clone()),
        (200, json!(true)),
        "a retried delivery counts once"
    );
    let (status, forged) = s
        .webhook(
            "EV_5",
            "participant_joined",
            "mallory",
            "co_host",
            "not-the-secret-not-the-secret-xx",
        )
        .await;
    assert_eq!(status, 401, "{forged}");

    let (status, metrics) = s.call(&ada, Method::GET, "/metrics", Value::Null).await;
    assert_eq!(status, 200, "{metrics}");
    assert_eq!(metrics["currentCoHosts"], 1);
    assert_eq!(metrics["peakCoHosts"], 2);
    assert_eq!(metrics["joins"], 2);
    assert_eq!(metrics["leaves"], 1);
    assert_eq!(metrics["currentParticipants"], 2);
    assert!(
        metrics["totalCoHostMinutes"]
            .as_f64()
            .is_some_and(|m| m >= 0.0)
    );
    let (status, _) = s.call(&dave, Method::GET, "/metrics", Value::Null).await;
    assert_eq!(status, 403, "default co-hosts see no analytics");
    let (status, _) = s.call(&bob, Method::GET, "/metrics", Value::Null).await;
    assert_eq!(status, 200, "a moderator does");
    let (_, multi) = s.call(&ada, Method::GET, "/multihost", Value::Null).await;
    let bob_view = multi["coHosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["userName"] == "Bob")
        .unwrap();
    assert_eq!(bob_view["connected"], true);

    // Ending the session ends joining.
    let (status, _) = p
        .as_user(
            &ada,
            Method::POST,
            &format!("/api/broadcasts/{}/status", s.id),
        )
        .send_json(&json!({"status": "completed"}))
        .await;
    assert_eq!(status, 200);
    let (status, ended) = s.join(&erin, "Erin", Value::Null).await;
    assert_eq!(
        (status, ended["code"].as_str()),
        (409, Some("session_ended"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn expired_invites_and_other_tenants() {
    let p = Platform::start_with(&[("sfu_api_key", SFU_KEY), ("sfu_api_secret", SFU_SECRET)]).await;
    let (t, other) = (
        p.register_client("Acme").await,
        p.register_client("Other").await,
    );
    let ada = p.signup(&t, "ada").await;
    let bob = p.signup(&t, "bob").await;
    let stranger = p.signup(&other, "stranger").await;
    let (_, created) = p
        .as_user(&ada, Method::POST, "/api/streaming/sessions")
        .send_json(&json!({"title": "Panel"}))
        .await;
    let s = Session {
        p: &p,
        id: created["id"].as_str().unwrap().to_string(),
        stream_id: created["streamId"].as_str().unwrap().to_string(),
    };
    p.as_user(
        &ada,
        Method::POST,
        &format!("/api/broadcasts/{}/status", s.id),
    )
    .send_json(&json!({"status": "active"}))
    .await;

    // Another tenant's user cannot see, join or be invited.
    let (status, _) = s
        .call(&stranger, Method::GET, "/multihost", Value::Null)
        .await;
    assert_eq!(status, 404);
    let (status, _) = s.join(&stranger, "S", Value::Null).await;
    assert_eq!(status, 404);
    // Invited, another tenant's user is no user of this app: the same answer as nobody.
    let (status, refused) = s.invite(&ada, &stranger, "default").await;
    assert_eq!(
        (status, refused["errors"][0]["field"].as_str()),
        (422, Some("userId")),
        "{refused}"
    );

    // An invite past its ten minutes is refused and changes nothing.
    let (status, invite) = s.invite(&ada, &bob, "moderator").await;
    assert_eq!(status, 200, "{invite}");
    // (Its expiry moved back rather than the clock forward: ten minutes without a
    // heartbeat would also end the broadcast.)
    p.db_execute(
        "UPDATE cohost_invites SET expires_at = expires_at - 601",
        &[],
    )
    .await;
    let (status, expired) = s
        .join(&bob, "Bob", json!({"inviteToken": invite["inviteToken"]}))
        .await;
    assert_eq!((status, expired["success"].clone()), (403, json!(false)));
    assert!(expired["message"].as_str().unwrap().contains("expired"));
    let (_, multi) = s.call(&ada, Method::GET, "/multihost", Value::Null).await;
    assert_eq!(multi["coHosts"], json!([]));
    let (status, bad) = s
        .call(
            &ada,
            Method::POST,
            "/invites",
            json!({"userId": bob.id, "permissions": "admin"}),
        )
        .await;
    assert_eq!(status, 422, "{bad}");
}
