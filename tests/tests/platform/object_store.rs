//! Replays kept in an S3-compatible object store: a real Garage server (its own process on
//! loopback, `platform_tests::garage`) behind the media server, which writes every kept
//! segment and playlist to a local spool and uploads it; nginx serves the replay, signed,
//! through the agent's loopback reader. The store going down mid-show loses nothing.

use crate::media::{create, get, setup, text, until_ingest};
use crate::replays::{end, fetch, fetch_text, until_replay_ready};
use platform_tests::garage::Garage;
use platform_tests::media::{
    Publisher, durations, resolve, server_options, test_clip, variants, wait_for,
};
use platform_tests::{Exchange, Method, Platform};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A platform whose media server keeps its replays in `garage`'s bucket.
async fn platform_on(garage: &Garage) -> Platform {
    let mut options = server_options();
    options.config.media_store = Some(garage.settings());
    Platform::start_media_with(
        options,
        &[
            ("webhook_allow_http", "true"),
            ("ingest_reconnect_window", "60"),
        ],
    )
    .await
}

/// The replay's media playlists, each a VOD that ends: (address, text) per rendition.
async fn replay_playlists(hls_url: &str) -> Vec<(String, String)> {
    let (master, renditions) = crate::replays::replay_playlists(hls_url).await;
    assert!(!renditions.is_empty(), "{master}");
    for (_, playlist) in &renditions {
        assert!(
            playlist.trim_end().ends_with("#EXT-X-ENDLIST"),
            "{playlist}"
        );
    }
    renditions
}

/// The segment names of a playlist's lines (query dropped).
fn names(playlist: &str) -> Vec<String> {
    durations(playlist)
        .into_iter()
        .map(|(_, uri)| uri.split('?').next().unwrap().to_string())
        .collect()
}

/// Every segment the live playlists of the open stream at `hls_url` list, polled twice
/// a second until `stop`.
fn watch_live(
    hls_url: String,
    stop: Arc<Mutex<bool>>,
) -> tokio::task::JoinHandle<BTreeSet<String>> {
    tokio::spawn(async move {
        let mut seen = BTreeSet::new();
        while !*stop.lock().unwrap() {
            if let (200, master) = fetch_text(&hls_url).await {
                for v in variants(&master) {
                    if let (200, playlist) = fetch_text(&resolve(&hls_url, &v.uri)).await {
                        seen.extend(names(&playlist));
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        seen
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replay_plays_signed_from_garage_and_its_deletion_empties_the_bucket() {
    let started = Instant::now();
    let garage = Garage::start().await;
    println!(
        "Garage up, with its layout, bucket and key, in {:?}",
        started.elapsed()
    );
    let p = platform_on(&garage).await;
    let (_, user) = setup(&p).await;
    let b = create(&p, &user, "public").await;
    let (id, stream) = (text(&b, "id"), text(&b, "streamId"));
    let publisher = Publisher::start_clip(&test_clip(), &text(&b, "rtmpUrl"), 1.0);
    until_ingest(&p, &user, &id, "live").await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    publisher.stop().await;
    end(&p, &user, &id).await;
    let ended = Instant::now();
    let b = until_replay_ready(&p, &user, &id, Duration::from_secs(20)).await;
    println!(
        "replay ready {:?} after the end, from Garage",
        ended.elapsed()
    );
    // Ready means in the store: the spool holds nothing of it.
    assert_eq!(p.media().store_pending(), 0);
    assert!(
        !p.media()
            .state_dir()
            .join("spool/objects/replays")
            .join(&stream)
            .join("index.m3u8")
            .exists()
    );
    assert!(
        !p.media()
            .work_dir()
            .join("media/replays")
            .join(&stream)
            .exists()
    );

    let hls_url = text(&b["replay"], "hlsUrl");
    let stored: BTreeSet<String> = garage
        .list(&format!("replays/{stream}"))
        .await
        .into_iter()
        .collect();
    for file in ["index.m3u8", "thumbnail.jpg"] {
        assert!(
            stored.contains(&format!("replays/{stream}/{file}")),
            "{file} in {stored:?}"
        );
    }
    let client = garage.client();
    let mut segments = 0;
    for (url, playlist) in replay_playlists(&hls_url).await {
        let media = url
            .split('?')
            .next()
            .unwrap()
            .rsplit('/')
            .next()
            .unwrap()
            .to_string();
        assert!(
            stored.contains(&format!("replays/{stream}/{media}")),
            "{media}"
        );
        for (_, uri) in durations(&playlist) {
            assert!(uri.contains("?exp="), "signed lines: {uri}");
            let name = uri.split('?').next().unwrap();
            let object = format!("replays/{stream}/{name}");
            assert!(stored.contains(&object), "{object} in the bucket");
            // nginx serves what Garage holds (twice: the second from its cache).
            let from_store = client.get(&object).await.unwrap().expect("in Garage");
            for _ in 0..2 {
                let (status, served) = fetch(&resolve(&url, &uri)).await;
                assert_eq!(status, 200, "{uri}");
                assert_eq!(served, from_store, "{uri}");
            }
            segments += 1;
        }
    }
    assert!(segments >= 4, "{segments} segments");
    let (status, jpeg) = fetch(&text(&b["replay"], "thumbnailUrl")).await;
    assert_eq!(status, 200);
    assert_eq!(&jpeg[..3], &[0xFF, 0xD8, 0xFF]);

    // A clip of the replay: its playlists and its MP4 are objects of the bucket too, and
    // the MP4 outlives the replay.
    let (status, made) = crate::clips::clip(
        &p,
        &user,
        &id,
        &json!({"startOffset": 0, "duration": 5, "title": "From the bucket"}),
    )
    .await;
    assert_eq!(status, 201, "{made}");
    let clip_id = text(&made, "id");
    let (made, took) = crate::clips::until_mp4(&p, &user, &clip_id).await;
    println!("clip's MP4 ready in {took:?}, in Garage");
    let mp4_object = format!("clips/{clip_id}/clip.mp4");
    wait_for(
        "the clip's MP4 in the bucket",
        Duration::from_secs(20),
        || async { client.get(&mp4_object).await.ok().flatten() },
    )
    .await;
    assert!(
        garage
            .list(&format!("replays/{stream}/clips/{clip_id}"))
            .await
            .contains(&format!("replays/{stream}/clips/{clip_id}/index.m3u8"))
    );
    let mp4_url = text(&made, "mp4Url");
    let (status, mp4) = fetch(&mp4_url).await;
    assert_eq!(status, 200);
    assert_eq!(Some(mp4.clone()), client.get(&mp4_object).await.unwrap());

    // Deleted by its owner: gone from the bucket.
    let (status, body) = p
        .as_user(
            &user,
            Method::DELETE,
            &format!("/api/broadcasts/{id}/replay"),
        )
        .answer()
        .await;
    assert_eq!(status, 200, "{body}");
    wait_for(
        "the bucket to be emptied",
        Duration::from_secs(20),
        || async {
            garage
                .list(&format!("replays/{stream}"))
                .await
                .is_empty()
                .then_some(())
        },
    )
    .await;
    assert_eq!(fetch(&hls_url).await.0, 404);
    // The clip's MP4 stays, served from the bucket.
    assert_eq!(fetch(&mp4_url).await, (200, mp4));
}

#[tokio::test(flavor = "multi_thread")]
async fn garage_down_for_ten_seconds_mid_show_loses_nothing() {
    let mut garage = Garage::start().await;
    let p = platform_on(&garage).await;
    let (_, user) = setup(&p).await;
    let b = create(&p, &user, "public").await;
    let (id, stream) = (text(&b, "id"), text(&b, "streamId"));
    let publisher = Publisher::start_clip(&test_clip(), &text(&b, "rtmpUrl"), 1.0);
    until_ingest(&p, &user, &id, "live").await;
    let stop = Arc::new(Mutex::new(false));
    let live = watch_live(text(&b, "hlsUrl"), stop.clone());
    tokio::time::sleep(Duration::from_secs(6)).await;
    let uploaded_before = garage.list(&format!("replays/{stream}")).await.len();
    assert!(uploaded_before > 0, "segments reach the store while live");

    // The store goes away for 10 s while the show goes on.
    garage.kill();
    let down = Instant::now();
    let mut most_spooled = 0;
    while down.elapsed() < Duration::from_secs(10) {
        most_spooled = most_spooled.max(p.media().store_pending());
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // One-second segments: about ten per rendition while the store was away.
    assert!(
        most_spooled >= 5,
        "the spool held what the store could not take ({most_spooled} objects)"
    );
    garage.restart();
    let back = Instant::now();
    wait_for(
        "the spool to be caught up",
        Duration::from_secs(30),
        || async { (p.media().store_pending() == 0).then_some(()) },
    )
    .await;
    println!(
        "{most_spooled} objects spooled during the outage, uploaded {:?} after the store came back",
        back.elapsed()
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    publisher.stop().await;
    *stop.lock().unwrap() = true;
    let listed_live = live.await.unwrap();
    end(&p, &user, &id).await;
    let b = until_replay_ready(&p, &user, &id, Duration::from_secs(30)).await;

    // Every segment any live playlist listed, across the outage, is in the replay, in
    // the bucket, and plays; no discontinuity.
    let stored: BTreeSet<String> = garage
        .list(&format!("replays/{stream}"))
        .await
        .into_iter()
        .collect();
    let mut in_replay = BTreeMap::new();
    for (url, playlist) in replay_playlists(&text(&b["replay"], "hlsUrl")).await {
        assert!(!playlist.contains("#EXT-X-DISCONTINUITY"), "{playlist}");
        for (_, uri) in durations(&playlist) {
            let name = uri.split('?').next().unwrap().to_string();
            let object = format!("replays/{stream}/{name}");
            assert!(stored.contains(&object), "{object} in the bucket");
            in_replay.insert(name, resolve(&url, &uri));
        }
    }
    let missing: Vec<_> = listed_live
        .iter()
        .filter(|name| !in_replay.contains_key(*name))
        .collect();
    assert!(
        missing.is_empty(),
        "listed live but not in the replay: {missing:?} (replay: {:?})",
        in_replay.keys()
    );
    assert!(
        listed_live.len() >= 15,
        "{} segments seen live",
        listed_live.len()
    );
    for (name, url) in &in_replay {
        let (status, bytes) = fetch(url).await;
        assert_eq!(status, 200, "{name}");
        assert_eq!(bytes.first(), Some(&0x47), "MPEG-TS: {name}");
    }
}

/// `GET <path>` sent as it is (no client normalises it): the status.
async fn raw_get(addr: &str, path: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer);
    answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{answer}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn replays_in_the_store_play_only_signed_and_the_reader_takes_only_object_names() {
    let garage = Garage::start().await;
    let p = platform_on(&garage).await;
    let (_, user) = setup(&p).await;
    let b = create(&p, &user, "private").await;
    let (id, stream) = (text(&b, "id"), text(&b, "streamId"));
    let publisher = Publisher::start_clip(&test_clip(), &text(&b, "rtmpUrl"), 1.0);
    until_ingest(&p, &user, &id, "live").await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    publisher.stop().await;
    end(&p, &user, &id).await;
    let b = until_replay_ready(&p, &user, &id, Duration::from_secs(20)).await;
    let signed = text(&b["replay"], "hlsUrl");
    let renditions = replay_playlists(&signed).await;
    let (media_url, playlist) = &renditions[0];
    let segment = resolve(media_url, &durations(playlist)[0].1);
    assert_eq!(fetch(&segment).await.0, 200);
    // Unsigned, or with a forged signature: refused before the store is asked.
    let bare = |url: &str| url.split('?').next().unwrap().to_string();
    for url in [&signed, media_url, &segment] {
        assert_eq!(fetch(&bare(url)).await.0, 403, "{url}");
        let forged = format!("{}?exp=4102444800&sig=AAAAAAAAAAAAAAAAAAAAAA", bare(url));
        assert_eq!(fetch(&forged).await.0, 403, "{url}");
    }
    // Names nginx's patterns do not take never reach the reader.
    let http = p.media().http_addr().to_string();
    let query = signed.split_once('?').unwrap().1;
    for path in [
        format!("/hls/{stream}/replay/../../../etc/passwd?{query}"),
        format!("/hls/{stream}/replay/..%2F..%2Fspool%2Fx?{query}"),
        format!("/hls/{stream}/replay/clips/x.ts?{query}"),
        format!("/hls/{stream}/replay/v0_1.mp4?{query}"),
    ] {
        let status = raw_get(&http, &path).await;
        assert!(matches!(status, 400 | 403 | 404), "{path}: {status}");
    }

    // The reader itself (loopback, under the agent's token from nginx.conf): well-formed
    // replay and clip object names only.
    let conf = std::fs::read_to_string(p.media().state_dir().join("nginx.conf")).unwrap();
    let reader = conf
        .lines()
        .find_map(|l| l.trim().strip_prefix("proxy_pass http://"))
        .and_then(|l| l.strip_suffix("/store/$object;"))
        .unwrap_or_else(|| panic!("the reader in {conf}"))
        .to_string();
    let (addr, token) = reader.split_once('/').unwrap();
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    assert_eq!(
        raw_get(addr, &format!("/{token}/store/replays/{stream}/index.m3u8")).await,
        200
    );
    assert_eq!(
        raw_get(addr, &format!("/wrong/store/replays/{stream}/index.m3u8")).await,
        404
    );
    for bad in [
        format!("replays/{stream}/../../spool/objects/x"),
        format!("replays/{stream}/%2e%2e/x"),
        format!("replays//{stream}/index.m3u8"),
        format!("replays/{stream}/.hidden"),
        "spool/objects/x".to_string(),
        "nginx.conf".to_string(),
    ] {
        assert_eq!(
            raw_get(addr, &format!("/{token}/store/{bad}")).await,
            400,
            "{bad}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_show_that_ends_while_the_store_is_down_is_ready_once_its_replay_is_uploaded() {
    let mut garage = Garage::start().await;
    let p = platform_on(&garage).await;
    let (_, user) = setup(&p).await;
    let b = create(&p, &user, "public").await;
    let (id, stream) = (text(&b, "id"), text(&b, "streamId"));
    let publisher = Publisher::start_clip(&test_clip(), &text(&b, "rtmpUrl"), 1.0);
    until_ingest(&p, &user, &id, "live").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    garage.kill();
    tokio::time::sleep(Duration::from_secs(2)).await;
    publisher.stop().await;
    end(&p, &user, &id).await;
    // Written, but only to the spool: not ready while the store cannot have it.
    let processing = wait_for(
        "the replay to be processing",
        Duration::from_secs(10),
        || async {
            let b = get(&p, &user, &id).await;
            (b["replay"]["state"] == "processing").then_some(b)
        },
    )
    .await;
    assert!(
        processing["replay"]["hlsUrl"].is_null(),
        "{}",
        processing["replay"]
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    let b = get(&p, &user, &id).await;
    assert_eq!(b["replay"]["state"], "processing", "{}", b["replay"]);
    assert!(p.media().store_pending() > 0);
    garage.restart();
    let back = Instant::now();
    let b = until_replay_ready(&p, &user, &id, Duration::from_secs(20)).await;
    println!("ready {:?} after the store came back", back.elapsed());
    let stored = garage.list(&format!("replays/{stream}")).await;
    for (_, playlist) in replay_playlists(&text(&b["replay"], "hlsUrl")).await {
        for name in names(&playlist) {
            let object = format!("replays/{stream}/{name}");
            assert!(stored.contains(&object), "{object} in the bucket");
        }
    }
    assert!(stored.contains(&format!("replays/{stream}/index.m3u8")));
    // The thumbnail too, from a segment that had already left the spool.
    assert!(
        stored.contains(&format!("replays/{stream}/thumbnail.jpg")),
        "{stored:?}"
    );
    let (status, jpeg) = fetch(&text(&b["replay"], "thumbnailUrl")).await;
    assert_eq!(status, 200);
    assert_eq!(&jpeg[..3], &[0xFF, 0xD8, 0xFF]);
}
