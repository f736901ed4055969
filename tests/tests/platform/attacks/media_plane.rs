//! Attacks on the media plane: each runs the platform with its real media server (nginx
//! with its RTMP module, driven by media-agent) over loopback.

use platform_tests::media::{Publisher, playlist_segments, wait_for};
use platform_tests::{Exchange, Method, Platform, User};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn platform() -> Platform {
    Platform::start_with_media(&[("restream_allow_private", "true")]).await
}

async fn caster(p: &Platform) -> User {
    let tenant = p.register_client("Media attacks").await;
    p.signup(&tenant, "caster").await
}

async fn broadcast(p: &Platform, user: &User, visibility: &str) -> Value {
    let (status, b) = p
        .as_user(user, Method::POST, "/api/broadcasts")
        .send_json(&json!({"title": "Show", "visibility": visibility}))
        .await;
    assert_eq!(status, 200, "{b}");
    b
}

fn text(v: &Value, field: &str) -> String {
    v[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} in {v}"))
        .to_string()
}

async fn ingest_state(p: &Platform, user: &User, id: &str) -> String {
    let (_, b) = p
        .as_user(user, Method::GET, &format!("/api/broadcasts/{id}"))
        .answer()
        .await;
    b["ingest"]["state"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

async fn until_live(p: &Platform, user: &User, id: &str) {
    wait_for("the ingest to be live", Duration::from_secs(20), || async {
        (ingest_state(p, user, id).await == "live").then_some(())
    })
    .await;
}

/// The status of a GET of `url` and its body.
async fn fetch(url: &str) -> (u16, String) {
    let answer = reqwest::get(url).await.expect("the media server answers");
    let status = answer.status().as_u16();
    (status, answer.text().await.unwrap_or_default())
}

async fn until_playlist(url: &str) -> String {
    wait_for("a playable playlist", Duration::from_secs(20), || async {
        let (status, body) = fetch(url).await;
        (status == 200 && !playlist_segments(&body).is_empty()).then_some(body)
    })
    .await
}

/// One RTMP connection of a flood from `source`: it sends C0 and then one byte of C1 a
/// second, never completing the handshake. Answers how long after `start` the server
/// closed it (`None`: still open at `until`).
async fn trickled_handshake(
    rtmp: SocketAddr,
    source: &str,
    start: Instant,
    until: Instant,
) -> Option<Duration> {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind((source.parse::<std::net::IpAddr>().unwrap(), 0).into())
        .unwrap();
    let Ok(mut stream) = socket.connect(rtmp).await else {
        return Some(start.elapsed());
    };
    if stream.write_all(&[3]).await.is_err() {
        return Some(start.elapsed());
    }
    let mut buf = [0u8; 4096];
    loop {
        let wait = Duration::from_secs(1).min(until.saturating_duration_since(Instant::now()));
        if wait.is_zero() {
            return None;
        }
        match tokio::time::timeout(wait, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Some(start.elapsed()),
            Ok(Ok(_)) => {}
            Err(_) => {
                if stream.write_all(&[0]).await.is_err() {
                    return Some(start.elapsed());
                }
            }
        }
    }
}

/// Idle RTMP connections from one address, each sending one handshake byte a second,
/// once held every connection of nginx's single worker: HLS and new publishers of every
/// tenant were refused for as long as the attacker liked. Now one address holds a few
/// connections, for the handshake's bound at most, and playback and ingest go on for
/// everyone else during the flood.
#[tokio::test(flavor = "multi_thread")]
async fn an_rtmp_flood_from_one_address_stops_no_one_elses_playback_or_ingest() {
    let p = platform().await;
    let user = caster(&p).await;
    let watched = broadcast(&p, &user, "public").await;
    let playing = Publisher::start(&text(&watched, "rtmpUrl"));
    until_live(&p, &user, &text(&watched, "id")).await;
    let hls = text(&watched, "hlsUrl");
    until_playlist(&hls).await;

    let rtmp = p.media().rtmp_addr();
    let defaults = media_agent::Config::new("http://127.0.0.1", "s");
    let (per_address, handshake) = (defaults.rtmp_per_address, defaults.rtmp_handshake_secs);
    // Enough connections to pass the per-address limit several times over: each one more
    // would have been one more of nginx's connections.
    let flood = per_address * 4;
    let start = Instant::now();
    let until = start + Duration::from_secs(handshake + 6);
    let attackers: Vec<_> = (0..flood)
        .map(|_| tokio::spawn(trickled_handshake(rtmp, "127.0.0.9", start, until)))
        .collect();
    tokio::time::sleep(Duration::from_secs(2)).await;

    // During the flood, from another address: the playlist plays and a new encoder
    // publishes.
    let (status, playlist) = fetch(&hls).await;
    assert_eq!(status, 200, "HLS during the flood");
    assert!(!playlist_segments(&playlist).is_empty(), "{playlist}");
    let newcomer = broadcast(&p, &user, "public").await;
    let publishing = Publisher::start(&text(&newcomer, "rtmpUrl"));
    until_live(&p, &user, &text(&newcomer, "id")).await;
    until_playlist(&text(&newcomer, "hlsUrl")).await;
    let served_during_flood = start.elapsed();

    let mut closed = Vec::new();
    for attacker in attackers {
        closed.push(attacker.await.unwrap());
    }
    let refused = closed
        .iter()
        .filter(|c| c.is_some_and(|at| at < Duration::from_secs(1)))
        .count();
    let held: Vec<Duration> = closed
        .iter()
        .filter_map(|c| *c)
        .filter(|at| *at >= Duration::from_secs(1))
        .collect();
    let never_closed = closed.iter().filter(|c| c.is_none()).count();
    println!(
        "flood of {flood}: {refused} refused at once, {} held (closed after {:?}), {never_closed} never closed; the others served within {served_during_flood:?}",
        held.len(),
        held.iter().max()
    );
    assert_eq!(
        never_closed, 0,
        "a trickled handshake is held past its bound"
    );
    assert!(
        held.len() + never_closed <= per_address,
        "one address held {} connections (limit {per_address})",
        held.len() + never_closed
    );
    assert_eq!(refused + held.len(), flood);
    let earliest_release = held.iter().min().copied().unwrap_or_default();
    assert!(
        served_during_flood < earliest_release,
        "the other address was served while the flood held its connections \
         ({served_during_flood:?} before {earliest_release:?})"
    );
    for at in &held {
        assert!(
            *at <= Duration::from_secs(handshake + 2),
            "a handshake trickled for {at:?}"
        );
    }
    // The publishers from before and during the flood are still live.
    assert_eq!(ingest_state(&p, &user, &text(&watched, "id")).await, "live");
    assert_eq!(fetch(&hls).await.0, 200);
    publishing.stop().await;
    playing.stop().await;
}

/// The broadcast's restream targets, as its owner lists them.
async fn restreams(p: &Platform, user: &User, id: &str) -> Value {
    let (status, list) = p
        .as_user(
            user,
            Method::GET,
            &format!("/api/broadcasts/{id}/restreams"),
        )
        .answer()
        .await;
    assert_eq!(status, 200, "{list}");
    list
}

async fn add_restream(p: &Platform, user: &User, id: &str, url: &str, key: &str) {
    let (status, target) = p
        .as_user(
            user,
            Method::POST,
            &format!("/api/broadcasts/{id}/restreams"),
        )
        .send_json(&json!({"url": url, "streamKey": key, "name": "Target"}))
        .await;
    assert_eq!(status, 201, "{target}");
}

/// Waits for the broadcast's one target to be errored; answers its error.
async fn until_errored(p: &Platform, user: &User, id: &str) -> String {
    wait_for(
        "the target to be errored",
        Duration::from_secs(30),
        || async {
            let list = restreams(p, user, id).await;
            let target = &list["items"][0];
            (target["state"] == "errored")
                .then(|| target["error"].as_str().unwrap_or_default().to_string())
        },
    )
    .await
}

/// A resolver that answers a public address the first time it is asked and loopback
/// afterwards (DNS rebinding), and a dialer that never leaves loopback: a public address
/// is only recorded, and refused, never contacted.
struct Rebinding {
    asked: std::sync::Mutex<u32>,
    dialed: std::sync::Mutex<Vec<SocketAddr>>,
}

impl media_agent::restreams::Network for Rebinding {
    fn resolve<'a>(
        &'a self,
        _host: &'a str,
        _port: u16,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = std::io::Result<Vec<std::net::IpAddr>>> + Send + 'a>,
    > {
        let mut asked = self.asked.lock().unwrap();
        *asked += 1;
        let answer: std::net::IpAddr = if *asked == 1 {
            [8, 8, 8, 8].into()
        } else {
            [127, 0, 0, 1].into()
        };
        Box::pin(async move { Ok(vec![answer]) })
    }

    fn connect(
        &self,
        addr: SocketAddr,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = std::io::Result<tokio::net::TcpStream>> + Send>,
    > {
        self.dialed.lock().unwrap().push(addr);
        Box::pin(async move {
            if addr.ip().is_loopback() {
                tokio::net::TcpStream::connect(addr).await
            } else {
                Err(std::io::ErrorKind::ConnectionRefused.into())
            }
        })
    }
}

/// A restream's host name answered a public address when the media server checked it and
/// loopback a moment later: the media server once pushed into an internal RTMP port. It
/// now connects to the address it checked, so the loopback service never hears from it.
#[tokio::test(flavor = "multi_thread")]
async fn a_restream_name_that_rebinds_to_loopback_never_reaches_it() {
    let network = std::sync::Arc::new(Rebinding {
        asked: std::sync::Mutex::new(0),
        dialed: std::sync::Mutex::default(),
    });
    let mut options = platform_tests::media::server_options();
    options.config.restream_network = Some(network.clone());
    let p = Platform::start_media_with(options, &[]).await;
    let user = caster(&p).await;
    let b = broadcast(&p, &user, "public").await;
    let id = text(&b, "id");
    // The internal service the name rebinds to.
    let internal = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = internal.local_addr().unwrap().port();
    let reached = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = reached.clone();
    let listening = tokio::spawn(async move {
        while let Ok((_connection, _)) = internal.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    add_restream(
        &p,
        &user,
        &id,
        &format!("rtmp://rebind.example:{port}/live"),
        "rebind-key-0123456789",
    )
    .await;
    let publisher = Publisher::start(&text(&b, "rtmpUrl"));
    until_live(&p, &user, &id).await;
    let error = until_errored(&p, &user, &id).await;
    // Let a retry or two happen: each resolves anew, and is checked anew.
    tokio::time::sleep(Duration::from_secs(3)).await;
    publisher.stop().await;
    listening.abort();
    let dialed = network.dialed.lock().unwrap().clone();
    println!("dialed {dialed:?}; error {error:?}");
    assert_eq!(
        reached.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the internal port was reached"
    );
    assert!(!dialed.is_empty(), "the target was tried");
    assert!(
        dialed
            .iter()
            .all(|a| *a == SocketAddr::from(([8, 8, 8, 8], port))),
        "only the checked address is dialed: {dialed:?}"
    );
    assert_eq!(error, media_agent::restreams::UNREACHABLE);
}

/// An `rtmps://` target behind a certificate no trusted authority signed (a man in the
/// middle): the restream is errored with the reason, and not a byte of the stream, its
/// key least of all, reaches the impostor.
#[tokio::test(flavor = "multi_thread")]
async fn an_rtmps_target_with_an_untrusted_certificate_gets_nothing() {
    let p = platform().await;
    let user = caster(&p).await;
    let b = broadcast(&p, &user, "public").await;
    let id = text(&b, "id");
    let ca = platform_tests::tls::TestCa::new("Impostor CA", &["127.0.0.1"]);
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![ca.cert_der.clone().into()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(ca.key_der.clone().into()),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(server));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let received = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let connections = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (sink, count) = (received.clone(), connections.clone());
    let impostor = tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let (acceptor, sink) = (acceptor.clone(), sink.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut buf = [0u8; 4096];
                while let Ok(n) = tls.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    sink.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            });
        }
    });
    let key = "impostor-key-0123456789";
    add_restream(
        &p,
        &user,
        &id,
        &format!("rtmps://127.0.0.1:{port}/live"),
        key,
    )
    .await;
    let publisher = Publisher::start(&text(&b, "rtmpUrl"));
    until_live(&p, &user, &id).await;
    let error = until_errored(&p, &user, &id).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    publisher.stop().await;
    impostor.abort();
    let received = received.lock().unwrap().clone();
    println!(
        "{} connections, {} bytes received; error {error:?}",
        connections.load(std::sync::atomic::Ordering::SeqCst),
        received.len()
    );
    assert!(
        connections.load(std::sync::atomic::Ordering::SeqCst) > 0,
        "the target was tried"
    );
    assert!(
        !String::from_utf8_lossy(&received).contains(key),
        "the stream key reached the impostor"
    );
    assert!(
        received.is_empty(),
        "the impostor received {} bytes",
        received.len()
    );
    assert_eq!(error, media_agent::restreams::UNVERIFIED);
}

/// The directory nginx writes a live stream's HLS to (`hls/<key>`), as its workers own it.
fn key_directory(p: &Platform, stream_id: &str) -> std::path::PathBuf {
    let hls = p.media().state_dir().join("hls");
    let key = std::fs::read_link(hls.join(stream_id)).expect("the stream's link");
    hls.join(key)
}

/// nginx's workers own the directory the thumbnail is written in (they run as `nobody`
/// when the agent is root): a link they plant in place of the temporary thumbnail once
/// made the agent overwrite the file it pointed to, with the agent's rights.
#[tokio::test(flavor = "multi_thread")]
async fn a_link_planted_in_a_streams_directory_overwrites_nothing() {
    let p = platform().await;
    let user = caster(&p).await;
    let b = broadcast(&p, &user, "public").await;
    let (id, stream_id) = (text(&b, "id"), text(&b, "streamId"));
    let publisher = Publisher::start(&text(&b, "rtmpUrl"));
    until_live(&p, &user, &id).await;
    let thumbnail = text(&b, "thumbnailUrl");
    wait_for("a thumbnail", Duration::from_secs(20), || async {
        (fetch(&thumbnail).await.0 == 200).then_some(())
    })
    .await;
    let dir = key_directory(&p, &stream_id);
    let victims = tempfile::tempdir().unwrap();
    let victim = victims.path().join("agents-own-file");
    std::fs::write(&victim, "the agent's user's file").unwrap();
    for name in ["thumbnail.tmp.jpg", "thumbnail.jpg"] {
        let planted = dir.join(name);
        let _ = std::fs::remove_file(&planted);
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
    }
    // Thumbnails are refreshed every 2 s here: let a few runs go by.
    wait_for("a new thumbnail", Duration::from_secs(15), || async {
        let meta = std::fs::symlink_metadata(dir.join("thumbnail.jpg")).ok()?;
        meta.file_type().is_file().then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        std::fs::read(&victim).unwrap() == b"the agent's user's file",
        "the file a planted link named was overwritten"
    );
    let (status, _) = fetch(&thumbnail).await;
    assert_eq!(status, 200, "thumbnails go on");
    publisher.stop().await;
}

/// The loopback ports nginx (the master `pid` and its workers) listens on.
fn nginx_loopback_ports(pid: u32) -> Vec<u16> {
    let mut inodes = std::collections::HashSet::new();
    let mut pids = vec![pid.to_string()];
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        if status.lines().any(|l| l == format!("PPid:\t{pid}")) {
            pids.push(name);
        }
    }
    for p in pids {
        for fd in std::fs::read_dir(format!("/proc/{p}/fd"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let target = std::fs::read_link(fd.path()).unwrap_or_default();
            let target = target.to_string_lossy();
            if let Some(inode) = target
                .strip_prefix("socket:[")
                .and_then(|t| t.strip_suffix(']'))
            {
                inodes.insert(inode.to_string());
            }
        }
    }
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let mut ports: Vec<u16> = table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (local, state, inode) = (fields[1], fields[3], fields[9]);
            let (ip, port) = local.split_once(':')?;
            (state == "0A" && ip == "0100007F" && inodes.contains(inode))
                .then(|| u16::from_str_radix(port, 16).ok())
                .flatten()
        })
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// Runs `program` with `args` as a local user other than the agent's and nginx's (uid
/// 54321): whether it succeeded, and what it printed.
fn as_another_user(program: &str, args: &[&str]) -> (bool, String) {
    use std::os::unix::process::CommandExt;
    let output = std::process::Command::new(program)
        .args(args)
        .uid(54321)
        .gid(54321)
        .output()
        .expect("runs as another user (the suite runs as root)");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).to_string(),
    )
}

/// Any local user could read every live stream key: from nginx's statistics on a
/// loopback port, and by listing the HLS directory (named by keys) or reading its links.
#[tokio::test(flavor = "multi_thread")]
async fn a_local_user_reads_no_stream_key() {
    let p = platform().await;
    let user = caster(&p).await;
    let b = broadcast(&p, &user, "public").await;
    let (id, stream_id, key) = (text(&b, "id"), text(&b, "streamId"), text(&b, "streamKey"));
    let publisher = Publisher::start(&text(&b, "rtmpUrl"));
    until_live(&p, &user, &id).await;
    until_playlist(&text(&b, "hlsUrl")).await;

    let ports = nginx_loopback_ports(p.media().nginx_pid().expect("nginx runs"));
    assert!(ports.len() >= 2, "nginx's loopback ports: {ports:?}");
    for port in &ports {
        for path in ["/stat", "/stat/", "/"] {
            // Some are not HTTP (nginx's RTMP listener): those answer nothing.
            let client = reqwest::Client::builder()
                .timeout(Duration::from_secs(2))
                .build()
                .unwrap();
            let url = format!("http://127.0.0.1:{port}{path}");
            let Ok(answer) = client.get(url).send().await else {
                continue;
            };
            let body = answer.text().await.unwrap_or_default();
            assert!(!body.contains(&key), "port {port}{path} names the key");
        }
    }

    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("not root: the directory checks need another user");
        publisher.stop().await;
        return;
    }
    let state = p.media().state_dir().to_string_lossy().to_string();
    let hls = format!("{state}/hls");
    // The state directory is reachable by others (nginx's workers run as nobody): the
    // checks below are of hls/ itself.
    let (reachable, _) = as_another_user("/bin/ls", &[&state]);
    assert!(
        reachable,
        "the state directory is not reachable by other users"
    );
    let (listed, listing) = as_another_user("/bin/ls", &[&hls]);
    assert!(!listing.contains(&key), "hls/ lists the key: {listing}");
    assert!(!listed, "hls/ is listable by any user");
    let link = format!("{hls}/{stream_id}");
    let (read, target) = as_another_user("/bin/readlink", &[&link]);
    assert!(
        !target.contains(&key) && !read,
        "the stream's link names the key"
    );
    // Playback goes on (nginx's workers still reach it).
    assert_eq!(fetch(&text(&b, "hlsUrl")).await.0, 200);
    publisher.stop().await;
}

/// When the platform last heard of the broadcast's publisher (its last update).
async fn last_seen(p: &Platform, user: &User, id: &str) -> String {
    let (_, b) = p
        .as_user(user, Method::GET, &format!("/api/broadcasts/{id}"))
        .answer()
        .await;
    b["ingest"]["lastSeenAt"].to_string()
}

/// The visibility change reaches playback at the next update, and nginx's file cache may
/// keep the old answer a moment longer: public to private, open playback stops within the
/// documented 5 s, also when the change comes just after an update (the worst moment).
#[tokio::test(flavor = "multi_thread")]
async fn a_broadcast_made_private_stops_open_playback_within_five_seconds() {
    let mut options = platform_tests::media::server_options();
    // The production interval between updates, which sets the bound.
    options.config.update_secs = media_agent::Config::new("http://127.0.0.1", "s").update_secs;
    let p = Platform::start_media_with(options, &[]).await;
    let user = caster(&p).await;
    let b = broadcast(&p, &user, "public").await;
    let id = text(&b, "id");
    let open = text(&b, "hlsUrl");
    let publisher = Publisher::start(&text(&b, "rtmpUrl"));
    until_live(&p, &user, &id).await;
    until_playlist(&open).await;
    let mut cuts = Vec::new();
    for _ in 0..3 {
        let before = last_seen(&p, &user, &id).await;
        let deadline = Instant::now() + Duration::from_secs(15);
        while last_seen(&p, &user, &id).await == before {
            assert!(Instant::now() < deadline, "no update");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let status = p
            .as_user(&user, Method::PATCH, &format!("/api/broadcasts/{id}"))
            .json(&json!({"visibility": "private"}))
            .status()
            .await;
        assert_eq!(status, 200);
        let changed = Instant::now();
        loop {
            let (status, _) = fetch(&open).await;
            if status == 403 {
                break;
            }
            assert!(changed.elapsed() < Duration::from_secs(15), "never cut");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        cuts.push(changed.elapsed());
        let status = p
            .as_user(&user, Method::PATCH, &format!("/api/broadcasts/{id}"))
            .json(&json!({"visibility": "public"}))
            .status()
            .await;
        assert_eq!(status, 200);
        until_playlist(&open).await;
    }
    println!("open playback cut after {cuts:?}");
    publisher.stop().await;
    for cut in cuts {
        assert!(
            cut <= Duration::from_secs(5),
            "open playback went on for {cut:?}"
        );
    }
}
