//! Files and playlists end to end: uploads fetched back byte-identical, ranges, CORS, the
//! retry when bytes are late, tenant isolation, bad input, oversize bodies, playlist
//! tracks and their reorder invariants, posters checked by magic bytes.

use platform_tests::{Exchange, Method, Platform, User};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::time::{Duration, Instant};

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Deterministic, non-repeating test bytes.
fn bytes_of(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[1] ^ seed)
        .collect()
}

async fn upload(p: &Platform, user: &User, query: &str, ct: &str, body: Vec<u8>) -> (u16, Value) {
    send_bytes(p, user, &format!("/api/files{query}"), ct, body).await
}

/// POSTs `body` with content type `ct` to `path` as `user`.
async fn send_bytes(
    p: &Platform,
    user: &User,
    path: &str,
    ct: &str,
    body: Vec<u8>,
) -> (u16, Value) {
    let (status, answer) = p
        .as_user(user, Method::POST, path)
        .header("content-type", ct)
        .body(body)
        .answer()
        .await;
    (status.as_u16(), answer)
}

/// Sends only the head of a POST declaring `len` body bytes and answers the status the
/// platform replies with, without sending the body.
async fn status_before_body(p: &Platform, user: &User, path: &str, ct: &str, len: u64) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut socket = tokio::net::TcpStream::connect(p.addr()).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {}\r\nx-api-key: {}\r\nauthorization: Bearer {}\r\n\
         content-type: {ct}\r\ncontent-length: {len}\r\n\r\n",
        p.addr(),
        user.api_key,
        user.token
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    let mut reply = vec![0u8; 12];
    tokio::time::timeout(Duration::from_secs(10), socket.read_exact(&mut reply))
        .await
        .expect("the platform answers before the body arrives")
        .unwrap();
    String::from_utf8_lossy(&reply[9..12]).parse().unwrap()
}

/// The status of a body-less call as `user`.
async fn status_of(p: &Platform, user: &User, method: Method, path: &str) -> u16 {
    p.as_user(user, method, path).answer().await.0.as_u16()
}

async fn fetch(p: &Platform, path: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut req = p.request(Method::GET, path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.expect("request reaches the platform")
}

fn header<'a>(r: &'a reqwest::Response, name: &str) -> &'a str {
    r.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

#[tokio::test(flavor = "multi_thread")]
async fn uploads_come_back_byte_identical_with_ranges_cors_and_etags() {
    let p = Platform::start().await;
    let t = p.register_client("files").await;
    let ada = p.signup(&t, "ada").await;

    // A small raw upload.
    let small = b"hello, media world".to_vec();
    let (status, file) = upload(
        &p,
        &ada,
        "?filename=hello.txt&public=true",
        "text/plain",
        small.clone(),
    )
    .await;
    assert_eq!(status, 201, "{file}");
    assert_eq!(file["filename"], "hello.txt");
    assert_eq!(file["contentType"], "text/plain");
    assert_eq!(file["size"], small.len());
    assert_eq!(file["sha256"], sha256_hex(&small));
    assert_eq!(file["public"], true);
    let id = file["id"].as_str().unwrap().to_string();
    assert!(
        file["publicUrl"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/api/files/{id}/public"))
    );
    assert!(
        file["downloadUrl"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/api/files/{id}/download"))
    );
    let r = fetch(&p, &format!("/api/files/{id}/public"), &[]).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "access-control-allow-origin"), "*");
    assert_eq!(header(&r, "content-type"), "text/plain");
    assert_eq!(header(&r, "accept-ranges"), "bytes");
    assert_eq!(header(&r, "content-length"), small.len().to_string());
    let etag = header(&r, "etag").to_string();
    assert_eq!(etag, format!("\"{}\"", sha256_hex(&small)));
    assert_eq!(r.bytes().await.unwrap().as_ref(), small.as_slice());
    let r = fetch(
        &p,
        &format!("/api/files/{id}/public"),
        &[("if-none-match", &etag)],
    )
    .await;
    assert_eq!(r.status(), 304);

    // A multi-chunk upload (2.5 MiB: three 1 MiB chunks).
    let big = bytes_of(5 * 512 * 1024, 7);
    let (status, file) = upload(
        &p,
        &ada,
        "?filename=clip.mp4&public=true",
        "video/mp4",
        big.clone(),
    )
    .await;
    assert_eq!(status, 201, "{file}");
    assert_eq!(file["sha256"], sha256_hex(&big));
    let big_id = file["id"].as_str().unwrap().to_string();
    let path = format!("/api/files/{big_id}/public");
    let r = fetch(&p, &path, &[]).await;
    assert_eq!(r.status(), 200);
    assert_eq!(sha256_hex(&r.bytes().await.unwrap()), sha256_hex(&big));

    // Ranges: across a chunk boundary, open-ended, suffix, past the end.
    let mib = 1024 * 1024;
    let r = fetch(
        &p,
        &path,
        &[("range", &format!("bytes={}-{}", mib - 10, mib + 9))],
    )
    .await;
    assert_eq!(r.status(), 206);
    assert_eq!(
        header(&r, "content-range"),
        format!("bytes {}-{}/{}", mib - 10, mib + 9, big.len())
    );
    assert_eq!(header(&r, "content-length"), "20");
    assert_eq!(r.bytes().await.unwrap().as_ref(), &big[mib - 10..mib + 10]);
    let r = fetch(
        &p,
        &path,
        &[("range", &format!("bytes={}-", 2 * mib + 100))],
    )
    .await;
    assert_eq!(r.status(), 206);
    assert_eq!(r.bytes().await.unwrap().as_ref(), &big[2 * mib + 100..]);
    let r = fetch(&p, &path, &[("range", "bytes=-500")]).await;
    assert_eq!(r.status(), 206);
    assert_eq!(r.bytes().await.unwrap().as_ref(), &big[big.len() - 500..]);
    let r = fetch(&p, &path, &[("range", &format!("bytes={}-", big.len()))]).await;
    assert_eq!(r.status(), 416);
    assert_eq!(
        header(&r, "content-range"),
        format!("bytes */{}", big.len())
    );
    assert_eq!(header(&r, "access-control-allow-origin"), "*");

    // The CORS preflight.
    let r = p
        .request(Method::OPTIONS, &path)
        .header("origin", "https://player.example")
        .header("access-control-request-method", "GET")
        .header("access-control-request-headers", "range")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(header(&r, "access-control-allow-origin"), "*");
    assert!(header(&r, "access-control-allow-methods").contains("GET"));
    assert!(header(&r, "access-control-allow-headers").contains("Range"));

    // Multipart with one file part and a public field.
    let part = bytes_of(3000, 9);
    let mut body = b"--b0undary\r\nContent-Disposition: form-data; name=\"public\"\r\n\r\ntrue\r\n\
--b0undary\r\nContent-Disposition: form-data; name=\"file\"; filename=\"song.mp3\"\r\n\
Content-Type: audio/mpeg\r\n\r\n"
        .to_vec();
    body.extend_from_slice(&part);
    body.extend_from_slice(b"\r\n--b0undary--\r\n");
    let (status, file) = upload(&p, &ada, "", "multipart/form-data; boundary=b0undary", body).await;
    assert_eq!(status, 201, "{file}");
    assert_eq!(file["filename"], "song.mp3");
    assert_eq!(file["contentType"], "audio/mpeg");
    assert_eq!(file["public"], true);
    assert_eq!(file["sha256"], sha256_hex(&part));

    // A private file: no public access; the download is an attachment for the tenant.
    let secret = b"private bytes".to_vec();
    let (status, file) = upload(
        &p,
        &ada,
        "?filename=notes.txt",
        "text/plain",
        secret.clone(),
    )
    .await;
    assert_eq!(status, 201);
    assert_eq!(file["public"], false);
    assert!(file["publicUrl"].is_null());
    let private_id = file["id"].as_str().unwrap().to_string();
    let r = fetch(&p, &format!("/api/files/{private_id}/public"), &[]).await;
    assert_eq!(r.status(), 404);
    let r = p
        .as_user(
            &ada,
            Method::GET,
            &format!("/api/files/{private_id}/download"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(header(&r, "content-disposition").starts_with("attachment; filename=\"notes.txt\""));
    assert_eq!(r.bytes().await.unwrap().as_ref(), secret.as_slice());

    // The list is the user's, newest first, paginated.
    let (status, list) = p
        .as_user(&ada, Method::GET, "/api/files?limit=2")
        .answer()
        .await;
    assert_eq!(status, 200);
    assert_eq!(list["total"], 4);
    assert_eq!(list["items"].as_array().unwrap().len(), 2);

    // Delete removes row and chunks.
    let status = status_of(&p, &ada, Method::DELETE, &format!("/api/files/{big_id}")).await;
    assert_eq!(status, 200);
    let r = fetch(&p, &path, &[]).await;
    assert_eq!(r.status(), 404);
    let left = p.kv_keys("file:").await;
    assert!(
        !left.iter().any(|k| k.contains(&format!(":{big_id}:"))),
        "{left:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn late_bytes_are_retried_before_a_404() {
    let p = Platform::start().await;
    let t = p.register_client("late").await;
    let ada = p.signup(&t, "ada").await;
    let data = bytes_of(1024 * 1024 + 4096, 3);
    let (status, file) = upload(&p, &ada, "?public=true", "audio/ogg", data.clone()).await;
    assert_eq!(status, 201, "{file}");
    let id = file["id"].as_str().unwrap().to_string();
    let key = format!("file:{}:{id}:1", t.client_id);
    let hidden_key = format!("hidden:{key}");
    let hide = |hidden: bool| {
        let (from, to) = if hidden {
            (key.as_str(), hidden_key.as_str())
        } else {
            (hidden_key.as_str(), key.as_str())
        };
        p.kv_rename(from, to)
    };

    // The second chunk appears 250 ms after the request: the retries find it.
    hide(true).await;
    let url = p.url(&format!("/api/files/{id}/public"));
    let started = Instant::now();
    let request = tokio::spawn(async move { reqwest::get(url).await.unwrap() });
    tokio::time::sleep(Duration::from_millis(250)).await;
    hide(false).await;
    let r = request.await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert_eq!(sha256_hex(&r.bytes().await.unwrap()), sha256_hex(&data));

    // Bytes that never appear: 404 after the three retries (100 + 200 + 300 ms).
    hide(true).await;
    let started = Instant::now();
    let r = fetch(&p, &format!("/api/files/{id}/public"), &[]).await;
    assert_eq!(r.status(), 404);
    assert!(started.elapsed() >= Duration::from_millis(600));
    // A range within the first chunk does not need the missing one.
    let r = fetch(
        &p,
        &format!("/api/files/{id}/public"),
        &[("range", "bytes=0-99")],
    )
    .await;
    assert_eq!(r.status(), 206);
}

#[tokio::test(flavor = "multi_thread")]
async fn tenants_owners_and_bad_input() {
    let p = Platform::start_with(&[("max_upload_bytes", "4096")]).await;
    let t = p.register_client("one").await;
    let other = p.register_client("two").await;
    let ada = p.signup(&t, "ada").await;
    let bob = p.signup(&t, "bob").await;
    let eve = p.signup(&other, "eve").await;
    let (status, file) = upload(
        &p,
        &ada,
        "?filename=a.bin",
        "application/octet-stream",
        vec![1; 100],
    )
    .await;
    assert_eq!(status, 201, "{file}");
    let id = file["id"].as_str().unwrap().to_string();

    // A private file is its owner's: to another tenant's user and to another user of the
    // same tenant it is unknown (404) everywhere.
    for (method, path) in [
        (Method::GET, format!("/api/files/{id}/download")),
        (Method::GET, format!("/api/files/{id}")),
        (Method::DELETE, format!("/api/files/{id}")),
    ] {
        for intruder in [&eve, &bob] {
            let (status, body) = p.as_user(intruder, method.clone(), &path).answer().await;
            assert_eq!(status, 404, "{path}: {body}");
        }
    }
    let status = status_of(&p, &ada, Method::GET, &format!("/api/files/{id}/download")).await;
    assert_eq!(status, 200);
    let (_, list) = p.as_user(&eve, Method::GET, "/api/files").answer().await;
    assert_eq!(list["total"], 0);
    // No authentication on download: 401.
    let r = fetch(&p, &format!("/api/files/{id}/download"), &[]).await;
    assert_eq!(r.status(), 401);

    // Bad ids and path tricks.
    for path in [
        "/api/files/not-a-uuid/public",
        "/api/files/..%2F..%2Fetc%2Fpasswd/public",
    ] {
        let r = fetch(&p, path, &[]).await;
        assert!(
            r.status() == 400 || r.status() == 404,
            "{path}: {}",
            r.status()
        );
        assert_eq!(header(&r, "access-control-allow-origin"), "*");
    }
    let r = fetch(&p, "/api/files/not-a-uuid/public", &[]).await;
    assert_eq!(r.status(), 400);
    let (status, _) = p
        .as_user(&ada, Method::GET, "/api/files/12345/download")
        .answer()
        .await;
    assert_eq!(status, 400);
    for name in ["../x", "..", "a%2Fb", "a%5Cb"] {
        let (status, body) = upload(
            &p,
            &ada,
            &format!("?filename={name}"),
            "text/plain",
            b"x".to_vec(),
        )
        .await;
        assert_eq!(status, 422, "{name}: {body}");
    }

    // Wrong content types.
    let (status, _) = p
        .as_user(&ada, Method::POST, "/api/files")
        .body("no type")
        .answer()
        .await;
    assert_eq!(status, 415);
    let (status, _) = upload(&p, &ada, "", "not a type", b"x".to_vec()).await;
    assert_eq!(status, 415);
    let (status, _) = upload(&p, &ada, "", "multipart/mixed; boundary=x", b"x".to_vec()).await;
    assert_eq!(status, 415);
    let (status, body) = upload(
        &p,
        &ada,
        "",
        "multipart/form-data; boundary=x",
        b"junk".to_vec(),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let (status, _) = upload(&p, &ada, "?public=maybe", "text/plain", b"x".to_vec()).await;
    assert_eq!(status, 422);

    // Over the limit (4096 bytes here): 413, nothing stored; a declared length over the limit
    // is answered before any of the body is sent.
    assert_eq!(
        status_before_body(&p, &ada, "/api/files", "text/plain", 100_000_000).await,
        413
    );
    let (status, body) = upload(&p, &ada, "", "application/octet-stream", vec![0; 5000]).await;
    assert_eq!(status, 413, "{body}");
    // A multipart body may be read (its Content-Length allows for the form's overhead),
    // but a file part over the limit is still refused.
    let mut form =
        b"--x\r\nContent-Disposition: form-data; name=\"f\"; filename=\"big.bin\"\r\n\r\n".to_vec();
    form.extend_from_slice(&[0; 5000]);
    form.extend_from_slice(b"\r\n--x--\r\n");
    let (status, body) = upload(&p, &ada, "", "multipart/form-data; boundary=x", form).await;
    assert_eq!(status, 413, "{body}");
    let (_, list) = p.as_user(&ada, Method::GET, "/api/files").answer().await;
    assert_eq!(list["total"], 1, "{list}");
    assert_eq!(p.kv_keys("file:").await.len(), 1);
    assert_eq!(p.db_number("SELECT COUNT(*) FROM files", &[]).await, 1);
}

fn ids_of(playlist: &Value) -> Vec<String> {
    playlist["tracks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn playlists_tracks_reorder_and_posters() {
    let p = Platform::start().await;
    let t = p.register_client("lists").await;
    let other = p.register_client("other").await;
    let ada = p.signup(&t, "ada").await;
    let bob = p.signup(&t, "bob").await;
    let eve = p.signup(&other, "eve").await;

    let (status, list) = p
        .as_user(&ada, Method::POST, "/api/playlists")
        .send_json(&json!({"name": "Mix", "description": "evening", "visibility": "public"}))
        .await;
    assert_eq!(status, 201, "{list}");
    let pid = list["id"].as_str().unwrap().to_string();
    let (status, hidden) = p
        .as_user(&ada, Method::POST, "/api/playlists")
        .send_json(&json!({"name": "Drafts", "visibility": "private"}))
        .await;
    assert_eq!(status, 201);
    let hidden_id = hidden["id"].as_str().unwrap().to_string();
    let (status, body) = p
        .as_user(&ada, Method::POST, "/api/playlists")
        .send_json(&json!({"visibility": "secret", "colour": "red"}))
        .await;
    assert_eq!(status, 422, "{body}");

    // Tracks: a file of ada's, external URLs; bad ones name their fields.
    let (_, file) = upload(&p, &ada, "?filename=a.mp3", "audio/mpeg", vec![5; 64]).await;
    let file_id = file["id"].as_str().unwrap();
    let (_, eve_file) = upload(&p, &eve, "?public=true", "audio/mpeg", vec![6; 64]).await;
    let tracks = p.as_user(&ada, Method::POST, &format!("/api/playlists/{pid}/tracks"));
    let (status, list) = tracks
        .send_json(&json!({"tracks": [
            {"title": "One", "artist": "A", "durationSeconds": 180, "fileId": file_id},
            {"title": "Two", "url": "https://cdn.example/two.mp3"},
            {"title": "Three", "url": "https://cdn.example/three.mp3"},
        ]}))
        .await;
    assert_eq!(status, 200, "{list}");
    let order = ids_of(&list);
    assert_eq!(order.len(), 3);
    assert_eq!(list["tracks"][0]["fileId"], file_id);
    assert_eq!(list["tracks"][1]["url"], "https://cdn.example/two.mp3");
    let (status, body) = p
        .as_user(&ada, Method::POST, &format!("/api/playlists/{pid}/tracks"))
        .send_json(&json!({"tracks": [
            {"title": "Foreign", "fileId": eve_file["id"]},
            {"title": "Both", "url": "https://x.example/a", "fileId": file_id},
            {"url": "javascript:alert(1)"},
        ]}))
        .await;
    assert_eq!(status, 422, "{body}");
    let fields: Vec<&str> = body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    for f in [
        "tracks[0].fileId",
        "tracks[1].fileId",
        "tracks[2].title",
        "tracks[2].url",
    ] {
        assert!(fields.contains(&f), "{f} missing from {fields:?}");
    }

    // Reorder: the complete set once, else 422 and the order unchanged.
    let reorder = format!("/api/playlists/{pid}/tracks/reorder");
    let foreign = "00000000-0000-4000-8000-000000000000".to_string();
    for bad in [
        json!({"trackIds": [order[0], order[1]]}),
        json!({"trackIds": [order[0], order[1], order[1]]}),
        json!({"trackIds": [order[0], order[1], order[2], order[0]]}),
        json!({"trackIds": [order[0], order[1], foreign]}),
        json!({"trackIds": [order[0], order[1], "nope"]}),
        json!({"trackIds": "all"}),
    ] {
        let (status, body) = p.as_user(&ada, Method::PUT, &reorder).send_json(&bad).await;
        assert_eq!(status, 422, "{bad}: {body}");
        let (_, now) = p
            .as_user(&ada, Method::GET, &format!("/api/playlists/{pid}"))
            .answer()
            .await;
        assert_eq!(ids_of(&now), order);
    }
    let new_order = vec![order[2].clone(), order[0].clone(), order[1].clone()];
    let (status, list) = p
        .as_user(&ada, Method::PUT, &reorder)
        .send_json(&json!({"trackIds": new_order}))
        .await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(ids_of(&list), new_order);
    let (status, body) = p
        .as_user(&bob, Method::PUT, &reorder)
        .send_json(&json!({"trackIds": order}))
        .await;
    assert_eq!(status, 403, "{body}");

    // Remove a track.
    let (status, list) = p
        .as_user(
            &ada,
            Method::DELETE,
            &format!("/api/playlists/{pid}/tracks/{}", order[0]),
        )
        .answer()
        .await;
    assert_eq!(status, 200);
    assert_eq!(ids_of(&list), vec![order[2].clone(), order[1].clone()]);
    let (status, _) = p
        .as_user(
            &ada,
            Method::DELETE,
            &format!("/api/playlists/{pid}/tracks/{}", order[0]),
        )
        .answer()
        .await;
    assert_eq!(status, 404);

    // Listing: all for the owner, public ones for others, nothing across tenants.
    let (_, mine) = p
        .as_user(&ada, Method::GET, "/api/playlists")
        .answer()
        .await;
    assert_eq!(mine["total"], 2);
    let (_, seen) = p
        .as_user(
            &bob,
            Method::GET,
            &format!("/api/playlists?userId={}", ada.id),
        )
        .answer()
        .await;
    assert_eq!(seen["total"], 1);
    assert_eq!(seen["items"][0]["trackCount"], 2);
    let status = status_of(
        &p,
        &bob,
        Method::GET,
        &format!("/api/playlists/{hidden_id}"),
    )
    .await;
    assert_eq!(status, 404);
    let status = status_of(&p, &eve, Method::GET, &format!("/api/playlists/{pid}")).await;
    assert_eq!(status, 404);
    let (_, none) = p
        .as_user(
            &eve,
            Method::GET,
            &format!("/api/playlists?userId={}", ada.id),
        )
        .answer()
        .await;
    assert_eq!(none["total"], 0);
    let (status, _) = p
        .as_user(&ada, Method::GET, "/api/playlists?userId=me")
        .answer()
        .await;
    assert_eq!(status, 400);
    let (status, _) = p
        .as_user(&ada, Method::GET, "/api/playlists/x")
        .answer()
        .await;
    assert_eq!(status, 400);

    // Update.
    let (status, list) = p
        .as_user(&ada, Method::PUT, &format!("/api/playlists/{pid}"))
        .send_json(&json!({"name": "Night mix", "description": ""}))
        .await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["name"], "Night mix");
    assert!(list["description"].is_null());
    assert_eq!(list["visibility"], "public");
    let (status, _) = p
        .as_user(&bob, Method::PUT, &format!("/api/playlists/{pid}"))
        .send_json(&json!({"name": "mine now"}))
        .await;
    assert_eq!(status, 403);
    // Null is "no change", as the document says; an empty name is refused.
    let (status, list) = p
        .as_user(&ada, Method::PUT, &format!("/api/playlists/{pid}"))
        .send_json(&json!({"name": null, "visibility": "unlisted"}))
        .await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["name"], "Night mix");
    assert_eq!(list["visibility"], "unlisted");
    let (status, problem) = p
        .as_user(&ada, Method::PUT, &format!("/api/playlists/{pid}"))
        .send_json(&json!({"name": " ", "visibility": "hidden"}))
        .await;
    assert_eq!(status, 422, "{problem}");
    assert_eq!(
        problem["errors"],
        json!([
            {"field": "name", "message": "must not be empty"},
            {"field": "visibility", "message": "must be public, unlisted or private"},
        ])
    );

    // Posters: magic bytes decide, 5 MiB at most, the poster is a public file.
    let poster = format!("/api/playlists/{pid}/poster");
    let png = [b"\x89PNG\r\n\x1a\n".as_slice(), &bytes_of(500, 1)].concat();
    let (status, list) = send_bytes(&p, &ada, &poster, "image/png", png.clone()).await;
    assert_eq!(status, 200, "{list}");
    let url = list["posterUrl"].as_str().unwrap();
    let path = &url[url.find("/api/").unwrap()..];
    let r = fetch(&p, path, &[]).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "content-type"), "image/png");
    assert_eq!(r.bytes().await.unwrap().as_ref(), png.as_slice());
    for (ct, body) in [
        ("image/png", b"GIF89a not a png".to_vec()),
        ("image/jpeg", b"<svg onload=alert(1)>".to_vec()),
    ] {
        let (status, body) = send_bytes(&p, &ada, &poster, ct, body).await;
        assert_eq!(status, 415, "{body}");
    }
    let too_big = 5 * 1024 * 1024 + 1;
    assert_eq!(
        status_before_body(&p, &ada, &poster, "image/jpeg", too_big).await,
        413
    );
    let webp = [b"RIFF\x10\0\0\0WEBPVP8 ".as_slice(), &bytes_of(100, 2)].concat();
    let (status, list) = send_bytes(&p, &ada, &poster, "image/webp", webp).await;
    assert_eq!(status, 200);
    assert_ne!(list["posterUrl"].as_str().unwrap(), url);
    // The replaced poster is gone.
    assert_eq!(fetch(&p, path, &[]).await.status(), 404);
    let (status, _) = send_bytes(&p, &bob, &poster, "image/png", png).await;
    assert_eq!(status, 403);

    // Delete: only the owner; the playlist and its tracks go.
    let status = status_of(&p, &bob, Method::DELETE, &format!("/api/playlists/{pid}")).await;
    assert_eq!(status, 403);
    let status = status_of(&p, &ada, Method::DELETE, &format!("/api/playlists/{pid}")).await;
    assert_eq!(status, 200);
    let status = status_of(&p, &ada, Method::GET, &format!("/api/playlists/{pid}")).await;
    assert_eq!(status, 404);
}
