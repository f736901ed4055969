//! Resumable uploads end to end: a file declared, sent in parts (any order, concurrently,
//! retried), checked and served whole; a corrupted part caught by the SHA-256 and sent
//! again; progress; bounds and bad input; expiry through the prune job. The hostile cases
//! (other users, oversize parts, floods) are in `attacks.rs`.

use platform_tests::{Exchange, Method, Platform, User};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::time::Duration;

const MIB: usize = 1024 * 1024;

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Deterministic, non-repeating test bytes.
fn bytes_of(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[1] ^ seed)
        .collect()
}

async fn declare(p: &Platform, user: &User, body: Value) -> (u16, Value) {
    let (status, answer) = p
        .as_user(user, Method::POST, "/api/files/uploads")
        .send_json(&body)
        .await;
    (status.as_u16(), answer)
}

async fn put_part(p: &Platform, user: &User, upload: &str, n: u64, bytes: Vec<u8>) -> (u16, Value) {
    let (status, answer) = p
        .as_user(
            user,
            Method::PUT,
            &format!("/api/files/uploads/{upload}/parts/{n}"),
        )
        .header("content-type", "application/octet-stream")
        .body(bytes)
        .answer()
        .await;
    (status.as_u16(), answer)
}

async fn call(p: &Platform, user: &User, method: Method, path: &str) -> (u16, Value) {
    let (status, answer) = p.as_user(user, method, path).answer().await;
    (status.as_u16(), answer)
}

async fn complete(p: &Platform, user: &User, upload: &str) -> (u16, Value) {
    call(
        p,
        user,
        Method::POST,
        &format!("/api/files/uploads/{upload}/complete"),
    )
    .await
}

async fn download(p: &Platform, user: &User, file: &str) -> Vec<u8> {
    let response = p
        .as_user(user, Method::GET, &format!("/api/files/{file}/download"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.bytes().await.unwrap().to_vec()
}

fn part(bytes: &[u8], part_size: usize, n: usize) -> Vec<u8> {
    let start = (n - 1) * part_size;
    bytes[start..(start + part_size).min(bytes.len())].to_vec()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_large_file_arrives_in_parts_in_any_order_and_is_served_whole() {
    let p = Platform::start().await;
    let t = p.register_client("resumable").await;
    let ada = p.signup(&t, "ada").await;
    let film = bytes_of(17 * MIB + 123, 7);

    let (status, upload) = declare(
        &p,
        &ada,
        json!({"filename": "film.mp4", "size": film.len(), "sha256": sha256_hex(&film),
               "contentType": "video/mp4", "public": true}),
    )
    .await;
    assert_eq!(status, 201, "{upload}");
    let id = upload["id"].as_str().unwrap().to_string();
    assert_eq!(upload["partSize"], 8 * MIB);
    assert_eq!(upload["partCount"], 3);
    assert_eq!(upload["status"], "open");
    assert_eq!(upload["missing"], json!([1, 2, 3]));
    assert!(upload["expiresAt"].as_str().unwrap().ends_with('Z'));

    // The last part first; the progress names what arrived.
    let last = part(&film, 8 * MIB, 3);
    let (status, stored) = put_part(&p, &ada, &id, 3, last.clone()).await;
    assert_eq!(status, 200, "{stored}");
    assert_eq!(
        (stored["n"].clone(), stored["size"].clone()),
        (json!(3), json!(last.len()))
    );
    assert_eq!(stored["sha256"], sha256_hex(&last));
    let (_, progress) = call(&p, &ada, Method::GET, &format!("/api/files/uploads/{id}")).await;
    assert_eq!(progress["missing"], json!([1, 2]));
    assert_eq!(progress["receivedBytes"], last.len());
    assert_eq!(progress["parts"][0]["sha256"], sha256_hex(&last));

    // Not complete yet.
    let (status, answer) = complete(&p, &ada, &id).await;
    assert_eq!(status, 409, "{answer}");
    assert_eq!(answer["code"], "upload_incomplete");
    assert_eq!(answer["missing"], json!([1, 2]));

    // Parts 1 and 2 at once, then part 1 again (a client retrying after a lost answer).
    let (one, two) = tokio::join!(
        put_part(&p, &ada, &id, 1, part(&film, 8 * MIB, 1)),
        put_part(&p, &ada, &id, 2, part(&film, 8 * MIB, 2)),
    );
    assert_eq!((one.0, two.0), (200, 200), "{one:?} {two:?}");
    let (status, _) = put_part(&p, &ada, &id, 1, part(&film, 8 * MIB, 1)).await;
    assert_eq!(status, 200);
    // The retried part's earlier bytes are gone: one attempt per part is kept.
    let staged = p.kv_keys(&format!("upload:{}:{id}:", t.client_id)).await;
    assert_eq!(staged.len(), 8 + 8 + 2, "{staged:?}");

    let (status, file) = complete(&p, &ada, &id).await;
    assert_eq!(status, 200, "{file}");
    assert_eq!(file["id"], id.as_str());
    assert_eq!(file["size"], film.len());
    assert_eq!(file["sha256"], sha256_hex(&film));
    assert_eq!(file["filename"], "film.mp4");
    assert_eq!(file["public"], true);
    assert_eq!(download(&p, &ada, &id).await, film);
    let public = p
        .request(Method::GET, &format!("/api/files/{id}/public"))
        .header("range", "bytes=8388600-8388615")
        .send()
        .await
        .unwrap();
    assert_eq!(public.status(), 206);
    assert_eq!(
        public.bytes().await.unwrap().as_ref(),
        &film[8_388_600..8_388_616]
    );
    // The staged parts went with the completion.
    assert!(
        p.kv_keys(&format!("upload:{}:{id}:", t.client_id))
            .await
            .is_empty()
    );

    // Completing again answers the same file; parts are refused from now on. (A small body:
    // the refusal comes before the body is read, and a client still sending 8 MiB may see
    // the connection close before it reads the answer.)
    let (status, again) = complete(&p, &ada, &id).await;
    assert_eq!((status, &again["sha256"]), (200, &file["sha256"]));
    let (status, answer) = put_part(&p, &ada, &id, 1, vec![0; 16]).await;
    assert_eq!(
        (status, answer["code"].as_str()),
        (409, Some("upload_closed"))
    );
    let (_, progress) = call(&p, &ada, Method::GET, &format!("/api/files/uploads/{id}")).await;
    assert_eq!(progress["status"], "complete");
    let (_, list) = call(&p, &ada, Method::GET, "/api/files").await;
    assert_eq!(list["total"], 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_corrupted_part_fails_the_checksum_and_is_sent_again() {
    let p = Platform::start().await;
    let t = p.register_client("resumable").await;
    let ada = p.signup(&t, "ada").await;
    let notes = bytes_of(2 * MIB + MIB / 2, 3);
    let (status, upload) = declare(
        &p,
        &ada,
        json!({"filename": "notes.bin", "size": notes.len(), "sha256": sha256_hex(&notes),
               "contentType": "application/octet-stream", "partSize": MIB}),
    )
    .await;
    assert_eq!(status, 201, "{upload}");
    assert_eq!(upload["partCount"], 3);
    let id = upload["id"].as_str().unwrap().to_string();
    let mut bad = part(&notes, MIB, 2);
    bad[1000] ^= 0xff;
    for (n, bytes) in [
        (1, part(&notes, MIB, 1)),
        (2, bad.clone()),
        (3, part(&notes, MIB, 3)),
    ] {
        assert_eq!(put_part(&p, &ada, &id, n, bytes).await.0, 200);
    }
    let (status, answer) = complete(&p, &ada, &id).await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(answer["code"], "checksum_mismatch");
    assert_ne!(answer["sha256"], sha256_hex(&notes));
    // Nothing is served; the upload is open again, and its parts say which one differs.
    assert_eq!(
        call(&p, &ada, Method::GET, &format!("/api/files/{id}"))
            .await
            .0,
        404
    );
    let (_, progress) = call(&p, &ada, Method::GET, &format!("/api/files/uploads/{id}")).await;
    assert_eq!(progress["status"], "open");
    let differing: Vec<u64> = progress["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| {
            let n = p["n"].as_u64().unwrap() as usize;
            p["sha256"] != sha256_hex(&part(&notes, MIB, n))
        })
        .map(|p| p["n"].as_u64().unwrap())
        .collect();
    assert_eq!(differing, [2]);
    assert_eq!(
        put_part(&p, &ada, &id, 2, part(&notes, MIB, 2)).await.0,
        200
    );
    let (status, file) = complete(&p, &ada, &id).await;
    assert_eq!(status, 200, "{file}");
    assert_eq!(download(&p, &ada, &id).await, notes);
}

#[tokio::test(flavor = "multi_thread")]
async fn declarations_and_parts_are_checked() {
    let p = Platform::start_with(&[("max_upload_bytes", "4194304")]).await;
    let t = p.register_client("resumable").await;
    let ada = p.signup(&t, "ada").await;
    let sha = "ab".repeat(32);
    let good = json!({"filename": "a.bin", "size": 3 * MIB, "sha256": sha,
                      "contentType": "application/octet-stream", "partSize": MIB});

    // The total is bounded by max_upload_bytes.
    let mut big = good.clone();
    big["size"] = json!(4 * MIB + 1);
    let (status, answer) = declare(&p, &ada, big).await;
    assert_eq!(
        (status, answer["code"].as_str()),
        (413, Some("payload_too_large")),
        "{answer}"
    );
    // Bad fields are named.
    for (field, value) in [
        ("size", json!(0)),
        ("size", json!(-1)),
        ("sha256", json!("not-a-hash")),
        ("partSize", json!(MIB + 1)),
        ("partSize", json!(9 * MIB)),
        ("filename", json!("../etc/passwd")),
        ("contentType", json!("not a type")),
    ] {
        let mut body = good.clone();
        body[field] = value.clone();
        let (status, answer) = declare(&p, &ada, body).await;
        assert_eq!(status, 422, "{field}={value}: {answer}");
        assert_eq!(answer["errors"][0]["field"], field, "{answer}");
    }
    let (status, answer) = declare(&p, &ada, json!({"filename": "a"})).await;
    assert_eq!(status, 422, "{answer}");

    let (status, upload) = declare(&p, &ada, good).await;
    assert_eq!(status, 201, "{upload}");
    let id = upload["id"].as_str().unwrap();
    // Part numbers are 1..=partCount; each part has exactly its length.
    for n in [0, 4] {
        let (status, answer) = put_part(&p, &ada, id, n, vec![0; 10]).await;
        assert_eq!(
            (status, answer["code"].as_str()),
            (404, Some("no_such_part")),
            "{n}"
        );
    }
    let (status, answer) = put_part(&p, &ada, id, 1, vec![0; MIB - 1]).await;
    assert_eq!(
        (status, answer["code"].as_str()),
        (422, Some("part_size_mismatch"))
    );
    assert_eq!(answer["expectedSize"], MIB);
    // A body without Content-Length that runs past its part is stopped while read.
    let stream = futures_util::stream::iter(
        (0..3).map(|_| Ok::<_, std::io::Error>(bytes::Bytes::from(vec![1u8; MIB / 2 + 1]))),
    );
    let (status, answer) = p
        .as_user(
            &ada,
            Method::PUT,
            &format!("/api/files/uploads/{id}/parts/2"),
        )
        .body(reqwest::Body::wrap_stream(stream))
        .answer()
        .await;
    assert_eq!(
        (status.as_u16(), answer["code"].as_str()),
        (422, Some("part_size_mismatch"))
    );
    // No part was kept from those.
    let (_, progress) = call(&p, &ada, Method::GET, &format!("/api/files/uploads/{id}")).await;
    assert_eq!(progress["parts"], json!([]));
    assert!(
        p.kv_keys(&format!("upload:{}:{id}:", t.client_id))
            .await
            .is_empty()
    );
    // Malformed ids.
    assert_eq!(
        call(&p, &ada, Method::GET, "/api/files/uploads/nope")
            .await
            .0,
        400
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn expired_and_abandoned_uploads_are_removed_with_their_parts() {
    let p = Platform::start().await;
    let t = p.register_client("resumable").await;
    let ada = p.signup(&t, "ada").await;
    let body = |seed| {
        json!({"filename": format!("f{seed}.bin"), "size": 2 * MIB, "sha256": "cd".repeat(32),
               "contentType": "application/octet-stream", "partSize": MIB})
    };
    let (_, kept) = declare(&p, &ada, body(1)).await;
    let (_, dropped) = declare(&p, &ada, body(2)).await;
    let (kept, dropped) = (
        kept["id"].as_str().unwrap(),
        dropped["id"].as_str().unwrap(),
    );
    for id in [kept, dropped] {
        assert_eq!(put_part(&p, &ada, id, 1, bytes_of(MIB, 1)).await.0, 200);
    }
    let prefix = |id: &str| format!("upload:{}:{id}:", t.client_id);
    assert_eq!(p.kv_keys(&prefix(dropped)).await.len(), 1);

    // Given up by its owner: gone at once.
    let (status, _) = call(
        &p,
        &ada,
        Method::DELETE,
        &format!("/api/files/uploads/{dropped}"),
    )
    .await;
    assert_eq!(status, 200);
    assert!(p.kv_keys(&prefix(dropped)).await.is_empty());
    assert_eq!(
        call(
            &p,
            &ada,
            Method::GET,
            &format!("/api/files/uploads/{dropped}")
        )
        .await
        .0,
        404
    );

    // A day later the other has expired: refused at once, removed by the prune job.
    p.advance_clock(Duration::from_secs(24 * 3600 + 1));
    // (Ada's hour-long token has expired too: she refreshes it.)
    let (status, fresh) = p
        .request(Method::POST, "/api/users/refresh")
        .header("x-api-key", &ada.api_key)
        .send_json(&json!({"refreshToken": ada.refresh_token}))
        .await;
    assert_eq!(status, 200, "{fresh}");
    let ada = User {
        token: fresh["token"].as_str().unwrap().to_string(),
        refresh_token: fresh["refreshToken"].as_str().unwrap().to_string(),
        ..ada
    };
    assert_eq!(
        call(&p, &ada, Method::GET, &format!("/api/files/uploads/{kept}"))
            .await
            .0,
        404
    );
    assert_eq!(put_part(&p, &ada, kept, 2, bytes_of(MIB, 2)).await.0, 404);
    let token = p.variable("jobs_token").expect("a jobs token");
    let (status, pruned) = p
        .request(Method::POST, "/api/jobs/prune")
        .header("authorization", format!("Bearer {token}"))
        .answer()
        .await;
    assert_eq!(status, 200, "{pruned}");
    assert_eq!(
        pruned["removed"]["expired_resumable_uploads"], 1,
        "{pruned}"
    );
    assert!(p.kv_keys(&prefix(kept)).await.is_empty());
}
