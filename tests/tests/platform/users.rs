//! Users, sessions, profiles, follows and contacts, over HTTP through edgehost.

use platform_tests::{Exchange, Method, Platform, json_of};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn signup_login_refresh_and_profile() {
    let p = Platform::start().await;
    let t = p.register_client("Acme").await;
    let ada = p.signup(&t, "ada").await;

    // Clashes are 409 (case-insensitive), weak passwords and bad e-mails 422.
    for (body, code) in [
        (
            json!({"username": "ADA", "email": "other@example.com", "password": "long enough"}),
            409,
        ),
        (
            json!({"username": "ada2", "email": "Ada@Example.com", "password": "long enough"}),
            409,
        ),
        (
            json!({"username": "bob", "email": "bob@example.com", "password": "short"}),
            422,
        ),
        (
            json!({"username": "bob", "email": "not-an-email", "password": "long enough"}),
            422,
        ),
        (
            json!({"username": "b o b", "email": "bob@example.com", "password": "long enough"}),
            422,
        ),
        (
            json!({"email": "bob@example.com", "password": "long enough"}),
            422,
        ),
    ] {
        let status = p
            .as_client(&t, Method::POST, "/api/users/signup")
            .json(&body)
            .status()
            .await;
        assert_eq!(status.as_u16(), code, "{body}");
    }

    // Login by e-mail or username; a wrong password and an unknown user look the same.
    for login in [
        json!({"email": "ADA@example.com", "password": "correct horse battery"}),
        json!({"username": "ada", "password": "correct horse battery"}),
    ] {
        let (status, body) = p
            .as_client(&t, Method::POST, "/api/users/login")
            .json(&login)
            .answer()
            .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["expiresIn"], 3600);
        assert_eq!(body["user"]["id"], ada.id.as_str());
        assert!(body["refreshToken"].is_string());
    }
    let (s1, b1) = p
        .as_client(&t, Method::POST, "/api/users/login")
        .json(&json!({"username": "ada", "password": "wrong password"}))
        .answer()
        .await;
    let (s2, b2) = p
        .as_client(&t, Method::POST, "/api/users/login")
        .json(&json!({"username": "nobody", "password": "wrong password"}))
        .answer()
        .await;
    assert_eq!((s1.as_u16(), s2.as_u16()), (401, 401));
    assert_eq!(b1["detail"], b2["detail"]);

    // Profile with counts; update; clash on update.
    let (status, body) = p
        .as_user(&ada, Method::GET, "/api/users/profile/full")
        .answer()
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        (
            body["username"].as_str(),
            body["followerCount"].as_i64(),
            body["followingCount"].as_i64()
        ),
        (Some("ada"), Some(0), Some(0))
    );
    let (status, body) = p.as_user(&ada, Method::PUT, "/api/users/profile")
            .json(&json!({"firstName": "Ada", "lastName": "Lovelace", "avatarUrl": "https://img.example/ada.png", "phoneNumber": "+44 1"}))
.answer().await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["firstName"].as_str(), body["username"].as_str()),
        (Some("Ada"), Some("ada"))
    );
    let _bob = p.signup(&t, "bob").await;
    let status = p
        .as_user(&ada, Method::PUT, "/api/users/profile")
        .json(&json!({"username": "Bob"}))
        .status()
        .await;
    assert_eq!(status, 409);
    let status = p
        .as_user(&ada, Method::PUT, "/api/users/profile")
        .json(&json!({"avatarUrl": "javascript:alert(1)"}))
        .status()
        .await;
    assert_eq!(status, 422);

    // Refresh rotates; reusing a rotated token revokes the family.
    let (status, body) = p
        .as_client(&t, Method::POST, "/api/users/refresh")
        .json(&json!({"refreshToken": ada.refresh_token}))
        .answer()
        .await;
    assert_eq!(status, 200, "{body}");
    let second = body["refreshToken"].as_str().unwrap().to_string();
    assert_ne!(second, ada.refresh_token);
    let (status, body) = p
        .as_client(&t, Method::POST, "/api/users/refresh")
        .json(&json!({"refreshToken": ada.refresh_token}))
        .answer()
        .await;
    assert_eq!(
        (status.as_u16(), body["code"].as_str()),
        (401, Some("refresh_token_reused"))
    );
    let status = p
        .as_client(&t, Method::POST, "/api/users/refresh")
        .json(&json!({"refreshToken": second}))
        .status()
        .await;
    assert_eq!(status, 401, "the family is revoked");
}

#[tokio::test(flavor = "multi_thread")]
async fn bearer_tokens_are_checked() {
    let p = Platform::start().await;
    let t = p.register_client("Acme").await;
    let ada = p.signup(&t, "ada").await;
    let missing = p
        .as_client(&t, Method::GET, "/api/users/profile/full")
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 401);
    let garbage = p
        .as_client(&t, Method::GET, "/api/users/profile/full")
        .bearer_auth("a.b.c")
        .send()
        .await
        .unwrap();
    assert_eq!(garbage.status(), 401);
    // A token of another tenant is refused even with a valid signature.
    let other = p.register_client("Other").await;
    let (status, body) = p
        .as_client(&other, Method::GET, "/api/users/profile/full")
        .bearer_auth(&ada.token)
        .answer()
        .await;
    assert_eq!(
        (status.as_u16(), body["code"].as_str()),
        (401, Some("tenant_mismatch"))
    );
    // An access token lasts an hour (`expiresIn`): past it, the same token is refused.
    let fresh = p
        .as_user(&ada, Method::GET, "/api/users/profile/full")
        .status()
        .await;
    assert_eq!(fresh, 200);
    p.advance_clock(std::time::Duration::from_secs(3601));
    let (status, body) = p
        .as_user(&ada, Method::GET, "/api/users/profile/full")
        .answer()
        .await;
    assert_eq!(
        (status.as_u16(), body["code"].as_str()),
        (401, Some("token_expired"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn password_change_and_account_deletion_revoke_tokens() {
    let p = Platform::start().await;
    let t = p.register_client("Acme").await;
    let ada = p.signup(&t, "ada").await;
    let status = p
        .as_user(&ada, Method::POST, "/api/users/change-password")
        .json(&json!({"currentPassword": "not it at all", "newPassword": "a new password"}))
        .status()
        .await;
    assert_eq!(status, 401);
    let (status, body) = p
        .as_user(&ada, Method::POST, "/api/users/change-password")
        .json(&json!({"currentPassword": "correct horse battery", "newPassword": "a new password"}))
        .answer()
        .await;
    assert_eq!(status, 200, "{body}");
    let fresh = body["token"].as_str().unwrap().to_string();
    // The old access and refresh tokens stop working; the new ones work.
    assert_eq!(
        p.as_user(&ada, Method::GET, "/api/users/profile/full")
            .status()
            .await,
        401
    );
    assert_eq!(
        p.as_client(&t, Method::POST, "/api/users/refresh")
            .json(&json!({"refreshToken": ada.refresh_token}))
            .status()
            .await,
        401
    );
    let ada = platform_tests::User {
        token: fresh,
        ..ada
    };
    assert_eq!(
        p.as_user(&ada, Method::GET, "/api/users/profile/full")
            .status()
            .await,
        200
    );
    let login = json!({"username": "ada", "password": "a new password"});
    assert_eq!(
        p.as_client(&t, Method::POST, "/api/users/login")
            .json(&login)
            .status()
            .await,
        200
    );

    // Deleting the account: its token stops working and the name is free again.
    let bob = p.signup(&t, "bob").await;
    p.as_user(&bob, Method::POST, &format!("/api/users/follow/{}", ada.id))
        .send()
        .await
        .unwrap();
    assert_eq!(
        p.as_user(&ada, Method::DELETE, "/api/users/profile")
            .status()
            .await,
        200
    );
    assert_eq!(
        p.as_user(&ada, Method::GET, "/api/users/profile/full")
            .status()
            .await,
        401
    );
    let (_, body) = p
        .as_user(&bob, Method::GET, "/api/users/profile/full")
        .answer()
        .await;
    assert_eq!(
        body["followingCount"], 0,
        "follows of a deleted user go with it"
    );
    p.signup(&t, "ada").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn login_is_throttled_after_five_failures() {
    let p = Platform::start().await;
    let t = p.register_client("Acme").await;
    p.signup(&t, "ada").await;
    let wrong = json!({"username": "ada", "password": "wrong password"});
    for _ in 0..5 {
        let status = p
            .as_client(&t, Method::POST, "/api/users/login")
            .json(&wrong)
            .status()
            .await;
        assert_eq!(status, 401);
    }
    let answer = p
        .as_client(&t, Method::POST, "/api/users/login")
        .json(&json!({"username": "ada", "password": "correct horse battery"}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 429);
    let retry: i64 = answer.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=900).contains(&retry), "{retry}");
    // Another account is not affected.
    p.signup(&t, "bob").await;
    let status = p
        .as_client(&t, Method::POST, "/api/users/login")
        .json(&json!({"username": "bob", "password": "correct horse battery"}))
        .status()
        .await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn follows_and_contacts() {
    let p = Platform::start().await;
    let t = p.register_client("Acme").await;
    let ada = p.signup(&t, "ada").await;
    let bob = p.signup(&t, "bob").await;
    let cy = p.signup(&t, "cyd").await;

    for (who, whom) in [(&ada, &bob), (&cy, &ada), (&ada, &bob)] {
        let status = p
            .as_user(who, Method::POST, &format!("/api/users/follow/{}", whom.id))
            .status()
            .await;
        assert_eq!(status, 200);
    }
    assert_eq!(
        p.as_user(&ada, Method::POST, &format!("/api/users/follow/{}", ada.id))
            .status()
            .await,
        422
    );
    assert_eq!(
        p.as_user(&ada, Method::POST, "/api/users/follow/not-a-uuid")
            .status()
            .await,
        400
    );
    assert_eq!(
        p.as_user(
            &ada,
            Method::POST,
            "/api/users/follow/6f9619ff-8b86-4011-b42d-00c04fc964ff"
        )
        .status()
        .await,
        404
    );

    let (_, body) = p
        .as_user(&ada, Method::GET, "/api/users/profile/full")
        .answer()
        .await;
    assert_eq!(
        (
            body["followerCount"].as_i64(),
            body["followingCount"].as_i64()
        ),
        (Some(1), Some(1))
    );
    let (status, body) = p
        .as_user(
            &bob,
            Method::GET,
            &format!("/api/users/{}/followers", bob.id),
        )
        .answer()
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        (
            body["total"].as_i64(),
            body["items"][0]["username"].as_str()
        ),
        (Some(1), Some("ada"))
    );
    let (_, body) = p
        .as_user(
            &bob,
            Method::GET,
            &format!("/api/users/{}/following?limit=1", ada.id),
        )
        .answer()
        .await;
    assert_eq!(
        (body["total"].as_i64(), body["limit"].as_i64()),
        (Some(1), Some(1))
    );

    // Ada's contacts: bob (she follows) and cy (follows her).
    let (status, body) = p.as_user(&ada, Method::GET, "/api/contacts").answer().await;
    assert_eq!(status, 200);
    assert_eq!(body["total"], 2);
    let items = body["items"].as_array().unwrap();
    let bob_contact = items.iter().find(|c| c["username"] == "bob").unwrap();
    let cy_contact = items.iter().find(|c| c["username"] == "cyd").unwrap();
    assert_eq!(
        (
            bob_contact["following"].as_bool(),
            bob_contact["followedBy"].as_bool()
        ),
        (Some(true), Some(false))
    );
    assert_eq!(
        (
            cy_contact["following"].as_bool(),
            cy_contact["followedBy"].as_bool()
        ),
        (Some(false), Some(true))
    );

    // Editing a contact changes only Ada's entry.
    let path = format!("/api/contacts/{}", bob_contact["id"].as_str().unwrap());
    let (status, body) = p
        .as_user(&ada, Method::PUT, &path)
        .json(&json!({"displayName": "Bobby", "phoneNumber": "+1 555"}))
        .answer()
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["displayName"], "Bobby");
    assert_eq!(
        p.as_user(&ada, Method::PUT, &path)
            .json(&json!({"email": "nope"}))
            .status()
            .await,
        422
    );
    assert_eq!(
        p.as_user(&bob, Method::PUT, &path)
            .json(&json!({"displayName": "x"}))
            .status()
            .await,
        404,
        "not bob's contact entry"
    );

    // Unfollow by contact id: bob is no longer a contact (neither follows the other).
    let unfollow = format!("{path}/follow");
    assert_eq!(
        p.as_user(&ada, Method::DELETE, &unfollow).status().await,
        200
    );
    let (_, body) = p.as_user(&ada, Method::GET, "/api/contacts").answer().await;
    assert_eq!(body["total"], 1);
    let (_, body) = p.as_user(&bob, Method::GET, "/api/contacts").answer().await;
    assert_eq!(body["total"], 0);
    // Unfollow by user id is idempotent.
    assert_eq!(
        p.as_user(
            &cy,
            Method::DELETE,
            &format!("/api/users/follow/{}", ada.id)
        )
        .status()
        .await,
        200
    );
    assert_eq!(
        p.as_user(
            &cy,
            Method::DELETE,
            &format!("/api/users/follow/{}", ada.id)
        )
        .status()
        .await,
        200
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn contact_form_is_public_validated_and_rate_limited() {
    let p = Platform::start().await;
    let bad = p
        .request(Method::POST, "/api/contact")
        .json(&json!({"name": "A", "email": "nope", "message": ""}))
        .send()
        .await
        .unwrap();
    let (status, body) = json_of(bad).await;
    assert_eq!(status, 422);
    assert_eq!(body["errors"].as_array().unwrap().len(), 2);
    let long = p
        .request(Method::POST, "/api/contact")
        .json(&json!({"name": "A", "email": "a@example.com", "message": "x".repeat(5001)}))
        .send()
        .await
        .unwrap();
    assert_eq!(long.status(), 422);
    for _ in 0..5 {
        let ok = p
            .request(Method::POST, "/api/contact")
            .json(&json!({"name": "A", "email": "a@example.com", "message": "hello"}))
            .send()
            .await
            .unwrap();
        assert_eq!(ok.status(), 200);
    }
    let limited = p
        .request(Method::POST, "/api/contact")
        .json(&json!({"name": "A", "email": "a@example.com", "message": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(limited.status(), 429);
    assert!(limited.headers().contains_key("retry-after"));
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_bodies_are_rejected_and_nothing_is_stored() {
    let p = Platform::start().await;
    let t = p.register_client("Acme").await;
    let too_big = "x".repeat(1024 * 1024 + 1);
    let status = p
        .as_client(&t, Method::POST, "/api/users/signup")
        .header("content-type", "application/json")
        .body(too_big)
        .status()
        .await;
    assert_eq!(status, 413);
    let status = p
        .as_client(&t, Method::POST, "/api/users/signup")
        .header("content-type", "text/plain")
        .body("{}")
        .status()
        .await;
    assert_eq!(status, 415);
    let status = p.as_client(&t, Method::POST, "/api/users/signup").json(&json!({"username": "x".repeat(300), "email": "a@example.com", "password": "long enough"})).status().await;
    assert_eq!(status, 422);
    // A login names its account.
    let (status, refused) = p
        .as_client(&t, Method::POST, "/api/users/login")
        .json(&json!({"password": "long enough"}))
        .answer()
        .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["errors"][0]["field"], "email", "{refused}");
    let (_, body) = p
        .as_server(&t, Method::GET, "/api/v1/users", None)
        .answer()
        .await;
    assert_eq!(body["total"], 0);
}
