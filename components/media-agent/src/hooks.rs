//! The listener nginx-rtmp notifies (loopback only): `on_publish`, `on_update` and
//! `on_publish_done` of the ingest application. Each answer is what nginx acts on: 2xx
//! goes on, anything else drops the client. The agent never renames a stream (a 3xx with
//! `Location`): nginx-rtmp's HLS would keep writing under the name the encoder sent.

use crate::agent::Agent;
use crate::form;
use crate::logging::{is_stream_id, key_hint};
use crate::platform::Answer;
use domain::media::is_stream_key;
use domain::media::protocol::{Publish, Update};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// nginx's notifications are a few hundred bytes.
const MAX_BODY: usize = 16 * 1024;

/// How long after an accepted publish its restreams start: nginx creates the stream only
/// once it has the answer.
const RESTREAM_DELAY: Duration = Duration::from_secs(1);

type Reply = Response<Full<Bytes>>;

/// Serves nginx's notifications on `listener` (under `/<token>/`) until `stop` flips.
pub fn serve(
    agent: Arc<Agent>,
    listener: TcpListener,
    token: String,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let token: Arc<str> = token.into();
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = crate::supervisor::stopped(&mut stop) => break,
            };
            let Ok((stream, _)) = accepted else {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            };
            let (agent, token) = (agent.clone(), token.clone());
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let (agent, token) = (agent.clone(), token.clone());
                async move { Ok::<_, std::convert::Infallible>(handle(agent, &token, req).await) }
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}

async fn handle(agent: Arc<Agent>, token: &str, req: Request<Incoming>) -> Reply {
    let path = req.uri().path().trim_start_matches('/');
    let (given, hook) = path.split_once('/').unwrap_or((path, ""));
    if !same(given.as_bytes(), token.as_bytes()) {
        return status(StatusCode::NOT_FOUND);
    }
    let hook = hook.to_string();
    if let Some(object) = hook.strip_prefix("store/") {
        return read_object(&agent, req.method(), object).await;
    }
    if req.method() != Method::POST {
        return status(StatusCode::METHOD_NOT_ALLOWED);
    }
    let Ok(body) = Limited::new(req.into_body(), MAX_BODY).collect().await else {
        return status(StatusCode::PAYLOAD_TOO_LARGE);
    };
    let form = form::parse(&body.to_bytes());
    match hook.as_str() {
        "on_publish" => on_publish(&agent, &form).await,
        "on_update" => on_update(&agent, &form).await,
        "on_publish_done" => on_publish_done(&agent, &form),
        _ => status(StatusCode::NOT_FOUND),
    }
}

/// A publisher connected: the platform decides and names the stream; its public HLS
/// directory (`hls/<stream id>`) is linked to the one its ffmpeg writes (`hls/<key>`) before
/// nginx hears the answer.
async fn on_publish(agent: &Arc<Agent>, form: &[(String, String)]) -> Reply {
    let get = |name| form::get(form, name).unwrap_or("");
    // nginx sees the ingress's relayed connection; the client is the ingress's to name.
    let client = agent.ingress.client_of(get("addr"));
    let addr = client.map(|ip| ip.to_string()).unwrap_or_default();
    if get("call") != "publish" || get("app") != agent.config.rtmp_app {
        return status(StatusCode::FORBIDDEN);
    }
    let key = get("name");
    if !is_stream_key(key) {
        eprintln!(
            "media-agent: refused a publish from {addr}: its stream name ({}) is not a stream key",
            key_hint(key)
        );
        return status(StatusCode::FORBIDDEN);
    }
    let Ok(client_id) = get("clientid").parse::<u64>() else {
        return status(StatusCode::FORBIDDEN);
    };
    let connection = agent.connection(client_id);
    let request = Publish {
        key: key.to_string(),
        connection: connection.clone(),
        client_addr: (!addr.is_empty()).then(|| addr.to_string()),
    };
    let refuse = |why: String| {
        eprintln!(
            "media-agent: refused a publish from {addr} (key {}): {why}",
            key_hint(key)
        );
        status(StatusCode::FORBIDDEN)
    };
    let accepted = match agent.platform.publish(&request).await {
        Answer::Ok(accepted) => accepted,
        Answer::Refused { status, code } => {
            return refuse(format!(
                "the platform answered {status}{}",
                code.map(|c| format!(" {c}")).unwrap_or_default()
            ));
        }
        Answer::Unavailable(why) => return refuse(format!("the platform is unavailable: {why}")),
    };
    if !is_stream_id(&accepted.stream_id) {
        agent.report_done(&connection, key);
        return refuse("the platform named the stream with something other than a UUID".into());
    }
    // The marker decides how the first playlist request is answered, and the link where
    // it is read: both are in place before nginx hears of the stream.
    if let Err(why) = agent.accept(&connection, key, client_id, &accepted, RESTREAM_DELAY) {
        agent.report_done(&connection, key);
        return refuse(why);
    }
    eprintln!(
        "media-agent: publish accepted: stream {} (key {}, connection {connection}, {} restream{})",
        accepted.stream_id,
        key_hint(key),
        accepted.restreams.len(),
        if accepted.restreams.len() == 1 {
            ""
        } else {
            "s"
        }
    );
    status(StatusCode::OK)
}

/// A publisher is still live (every `update_secs`): report its health and restreams.
async fn on_update(agent: &Arc<Agent>, form: &[(String, String)]) -> Reply {
    let get = |name| form::get(form, name).unwrap_or("");
    // nginx also reports players (`update_play`: the restreams).
    if get("call") != "update_publish" {
        return status(StatusCode::OK);
    }
    let Ok(client_id) = get("clientid").parse::<u64>() else {
        return status(StatusCode::FORBIDDEN);
    };
    let connection = agent.connection(client_id);
    let Some((key, stream_id)) = agent.publisher(&connection) else {
        eprintln!("media-agent: dropping unknown publisher {connection}");
        return status(StatusCode::FORBIDDEN);
    };
    if get("name") != key {
        eprintln!("media-agent: dropping publisher {connection}: its stream name changed");
        return status(StatusCode::FORBIDDEN);
    }
    let update = Update {
        connection: connection.clone(),
        key: key.clone(),
        health: agent.health(&connection),
        restreams: agent.restream_reports(&connection),
        dvr_seconds: agent.dvr_seconds(&stream_id),
    };
    match agent.platform.update(&update).await {
        Answer::Ok(accepted) => {
            if accepted.stream_id != stream_id {
                eprintln!(
                    "media-agent: the platform moved live stream {stream_id} to {}; keeping {stream_id}",
                    accepted.stream_id
                );
            }
            match agent.apply(&connection, &accepted) {
                Ok(()) => status(StatusCode::OK),
                Err(e) => {
                    eprintln!(
                        "media-agent: dropping stream {stream_id}: cannot set its playback marker: {e}"
                    );
                    agent.stop_restreams(&connection);
                    status(StatusCode::FORBIDDEN)
                }
            }
        }
        Answer::Refused {
            status: code,
            code: problem,
        } => {
            eprintln!(
                "media-agent: the platform ended stream {stream_id} ({code}{}); dropping the publisher",
                problem.map(|c| format!(" {c}")).unwrap_or_default()
            );
            agent.stop_restreams(&connection);
            status(StatusCode::FORBIDDEN)
        }
        Answer::Unavailable(why) => {
            // An accepted stream keeps going through a platform blip.
            eprintln!(
                "media-agent: update of stream {stream_id} not delivered ({why}); the stream goes on"
            );
            status(StatusCode::OK)
        }
    }
}

/// A publisher went away.
fn on_publish_done(agent: &Arc<Agent>, form: &[(String, String)]) -> Reply {
    let get = |name| form::get(form, name).unwrap_or("");
    if get("call") == "publish_done"
        && let Ok(client_id) = get("clientid").parse::<u64>()
    {
        agent.finish(&agent.connection(client_id), "the publisher left");
    }
    status(StatusCode::OK)
}

/// Compares in time independent of where the inputs differ.
/// Whether nginx may read `object` through the agent: a replay's or a clip's file, by the
/// store's own rule for names (nginx's locations are stricter still).
pub fn is_readable_object(object: &str) -> bool {
    crate::media_store::is_object_name(object)
        && (object.starts_with("replays/") || object.starts_with("clips/"))
}

/// The media store's reader for nginx (an S3-compatible store's objects, spool first):
/// `GET /<token>/store/<object>`, the object whole with its type.
async fn read_object(agent: &Arc<Agent>, method: &Method, object: &str) -> Reply {
    if method != Method::GET && method != Method::HEAD {
        return status(StatusCode::METHOD_NOT_ALLOWED);
    }
    if !is_readable_object(object) {
        return status(StatusCode::BAD_REQUEST);
    }
    let store = agent.store.clone();
    let name = object.to_string();
    let read = tokio::task::spawn_blocking(move || store.get(&name)).await;
    let bytes = match read {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return status(StatusCode::NOT_FOUND);
        }
        Ok(Err(e)) => {
            eprintln!("media-agent: cannot read {object} from the media store: {e}");
            return status(StatusCode::BAD_GATEWAY);
        }
        Err(_) => return status(StatusCode::INTERNAL_SERVER_ERROR),
    };
    let kind = match object.rsplit_once('.').map(|(_, ext)| ext) {
        Some("m3u8") => "application/vnd.apple.mpegurl",
        Some("ts") => "video/mp2t",
        Some("jpg") => "image/jpeg",
        Some("mp4") => "video/mp4",
        _ => "application/octet-stream",
    };
    let mut response = Response::new(Full::new(if method == Method::HEAD {
        Bytes::new()
    } else {
        Bytes::from(bytes)
    }));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(kind),
    );
    response
}

fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn status(code: StatusCode) -> Reply {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = code;
    response
}

#[cfg(test)]
mod tests {
    use super::is_readable_object;

    #[test]
    fn the_reader_takes_only_replay_and_clip_objects() {
        for good in [
            "replays/0b6c3c8e-5a3e-4f7c-9d1e-3f2a1b0c9d8e/v0_12.ts",
            "replays/0b6c3c8e-5a3e-4f7c-9d1e-3f2a1b0c9d8e/clips/c1/v0.m3u8",
            "clips/c1/clip.mp4",
        ] {
            assert!(is_readable_object(good), "{good}");
        }
        for bad in [
            "replays/../secret",
            "replays/a/../../x",
            "spool/objects/x",
            "/replays/a",
            "replays//a",
            "replays/a/.hidden",
            "replays/a/b%2Fc",
            "replays/a?x=1",
            "",
        ] {
            assert!(!is_readable_object(bad), "{bad}");
        }
    }
}
