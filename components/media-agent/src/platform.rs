//! The agent's calls to the platform (`/api/media/...`, media tier): JSON bodies of
//! `domain::media::protocol`, authenticated by `X-Media-Secret`.

use domain::media::protocol::{
    Accepted, Clip, ClipAnswer, PendingClips, Publish, PublishDone, Replay, ReplayAnswer,
    ReplayDeletions, SECRET_HEADER, ServerReport, Update,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::time::Duration;

/// How long one call may take: nginx waits on the publish and update answers.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// What the platform answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer<T> {
    /// 2xx with a body of the expected shape.
    Ok(T),
    /// 4xx: the platform says no (`code` from its problem+json, if any).
    Refused { status: u16, code: Option<String> },
    /// 5xx, no answer, or an answer of the wrong shape: the platform could not decide.
    Unavailable(String),
}

/// A client of one platform.
#[derive(Clone)]
pub struct Platform {
    http: reqwest::Client,
    base: String,
    secret: String,
}

impl Platform {
    pub fn new(base_url: &str, media_secret: &str) -> anyhow::Result<Platform> {
        let base = base_url.trim_end_matches('/').to_string();
        let mut builder = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .connect_timeout(Duration::from_secs(3))
            .user_agent(concat!("media-agent/", env!("CARGO_PKG_VERSION")));
        // A platform on this host is never reached through a proxy from the environment.
        if is_loopback_url(&base) {
            builder = builder.no_proxy();
        }
        Ok(Platform {
            http: builder.build()?,
            base,
            secret: media_secret.to_string(),
        })
    }

    /// `POST /api/media/publish`.
    pub async fn publish(&self, body: &Publish) -> Answer<Accepted> {
        self.call("/api/media/publish", body).await
    }

    /// `POST /api/media/update`.
    pub async fn update(&self, body: &Update) -> Answer<Accepted> {
        self.call("/api/media/update", body).await
    }

    /// `POST /api/media/server`: whether the media server runs.
    pub async fn server(&self, body: &ServerReport) -> Answer<ServerReport> {
        self.call("/api/media/server", body).await
    }

    /// `POST /api/media/replay`: where a stream's replay stands; answers what to do next.
    pub async fn replay(&self, body: &Replay) -> Answer<ReplayAnswer> {
        self.call("/api/media/replay", body).await
    }

    /// `POST /api/media/clips/pending`: the clips to make and those to delete.
    pub async fn clips_pending(&self) -> Answer<PendingClips> {
        self.call("/api/media/clips/pending", &serde_json::json!({}))
            .await
    }

    /// `POST /api/media/clip`: where a clip stands; answers what to do next.
    pub async fn clip(&self, body: &Clip) -> Answer<ClipAnswer> {
        self.call("/api/media/clip", body).await
    }

    /// `POST /api/media/replays/deletions`: the replays whose media to delete.
    pub async fn replay_deletions(&self) -> Answer<ReplayDeletions> {
        self.call("/api/media/replays/deletions", &serde_json::json!({}))
            .await
    }

    /// `POST /api/media/publish-done` (any 2xx body).
    pub async fn publish_done(&self, body: &PublishDone) -> Answer<()> {
        match self
            .call::<_, serde_json::Value>("/api/media/publish-done", body)
            .await
        {
            Answer::Ok(_) => Answer::Ok(()),
            Answer::Refused { status, code } => Answer::Refused { status, code },
            Answer::Unavailable(why) => Answer::Unavailable(why),
        }
    }

    async fn call<B: Serialize, T: DeserializeOwned>(&self, path: &str, body: &B) -> Answer<T> {
        let sent = self
            .http
            .post(format!("{}{path}", self.base))
            .header(SECRET_HEADER, &self.secret)
            .json(body)
            .send()
            .await;
        let response = match sent {
            Ok(r) => r,
            Err(e) if e.is_timeout() => {
                return Answer::Unavailable(format!("no answer from {path} within {TIMEOUT:?}"));
            }
            Err(e) if e.is_connect() => {
                return Answer::Unavailable(format!("cannot connect to the platform ({path})"));
            }
            Err(e) => return Answer::Unavailable(format!("{path}: {}", without_url(&e))),
        };
        let status = response.status().as_u16();
        let text = response.bytes().await.unwrap_or_default();
        if (200..300).contains(&status) {
            // publish-done may answer 204 with no body.
            let body: &[u8] = if text.is_empty() { b"null" } else { &text };
            return match serde_json::from_slice::<T>(body) {
                Ok(t) => Answer::Ok(t),
                Err(e) => Answer::Unavailable(format!(
                    "{path} answered {status} with an unexpected body: {e}"
                )),
            };
        }
        let code = serde_json::from_slice::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v.get("code").and_then(|c| c.as_str()).map(str::to_string));
        if (400..500).contains(&status) {
            Answer::Refused { status, code }
        } else {
            Answer::Unavailable(format!(
                "{path} answered {status}{}",
                code.map(|c| format!(" ({c})")).unwrap_or_default()
            ))
        }
    }
}

/// A transport error's text without its URL (reqwest appends it).
fn without_url(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    if let Some(url) = e.url() {
        text = text.replace(&format!(" for url ({url})"), "");
    }
    text
}

/// Whether `url`'s host is loopback (`localhost`, `127.x`, `[::1]`).
pub fn is_loopback_url(url: &str) -> bool {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority
        .rsplit_once('@')
        .map(|(_, h)| h)
        .unwrap_or(authority);
    let host = if let Some(v6) = host.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        host.split(':').next().unwrap_or("")
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_urls() {
        assert!(is_loopback_url("http://127.0.0.1:3000"));
        assert!(is_loopback_url("http://localhost"));
        assert!(is_loopback_url("http://[::1]:3000/x"));
        assert!(!is_loopback_url("https://live.example.com"));
        assert!(!is_loopback_url("http://10.0.0.1:3000"));
    }
}
