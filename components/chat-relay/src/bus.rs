//! Scale-out through Redis pub/sub: each frame is published on `chat:stream:{id}`; every
//! instance subscribes to `chat:stream:*` and delivers what arrives to its local sockets.
//! While the link is down the relay keeps serving its own sockets and reconnects with
//! backoff.

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::RwLock;

use crate::hub::Hub;
use crate::metrics::{Metrics, inc};

const CHANNEL_PREFIX: &str = "chat:stream:";
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// What travels on a stream's channel.
#[derive(Serialize, Deserialize)]
struct Envelope {
    /// The publishing instance.
    origin: String,
    /// The dedupe key (message id, `deleted:{id}`, or an event's id).
    key: String,
    /// The frame as sent to sockets.
    frame: String,
}

/// The Redis link of one relay instance.
pub struct Bus {
    url: String,
    instance: String,
    publisher: RwLock<Option<redis::aio::MultiplexedConnection>>,
    metrics: Arc<Metrics>,
}

impl Bus {
    pub fn new(url: &str, instance: &str, metrics: Arc<Metrics>) -> Bus {
        Bus {
            url: url.to_string(),
            instance: instance.to_string(),
            publisher: RwLock::new(None),
            metrics,
        }
    }

    /// True while both the subscription and the publishing connection are up.
    pub fn is_up(&self) -> bool {
        self.metrics.redis_connected.load(Ordering::Relaxed) == 1
    }

    /// Publishes a frame; false when it could not (the caller delivers locally instead).
    pub async fn publish(&self, stream: &str, key: &str, frame: &str) -> bool {
        let Some(mut conn) = self.publisher.read().await.clone() else {
            return false;
        };
        let envelope = Envelope {
            origin: self.instance.clone(),
            key: key.to_string(),
            frame: frame.to_string(),
        };
        let payload = serde_json::to_string(&envelope).unwrap_or_default();
        let channel = format!("{CHANNEL_PREFIX}{stream}");
        let sent = tokio::time::timeout(
            PUBLISH_TIMEOUT,
            redis::cmd("PUBLISH")
                .arg(&channel)
                .arg(payload)
                .query_async::<i64>(&mut conn),
        )
        .await;
        match sent {
            Ok(Ok(_)) => {
                inc(&self.metrics.redis_published);
                true
            }
            _ => {
                inc(&self.metrics.redis_publish_failures);
                false
            }
        }
    }

    /// Keeps the link up for as long as the relay runs.
    pub async fn run(self: Arc<Self>, hub: Arc<Hub>) {
        let mut backoff = Duration::from_millis(100);
        loop {
            match self.connect().await {
                Ok(mut pubsub) => {
                    backoff = Duration::from_millis(100);
                    inc(&self.metrics.redis_reconnects);
                    self.metrics.redis_connected.store(1, Ordering::Relaxed);
                    let mut messages = pubsub.on_message();
                    while let Some(msg) = messages.next().await {
                        let channel = msg.get_channel_name();
                        let Some(stream) = channel.strip_prefix(CHANNEL_PREFIX) else {
                            continue;
                        };
                        let Ok(payload) = msg.get_payload::<String>() else {
                            continue;
                        };
                        let Ok(envelope) = serde_json::from_str::<Envelope>(&payload) else {
                            continue;
                        };
                        inc(&self.metrics.redis_received);
                        hub.fan_out(stream, Some(&envelope.key), envelope.frame);
                    }
                    self.metrics.redis_connected.store(0, Ordering::Relaxed);
                    *self.publisher.write().await = None;
                    eprintln!("chat-relay: lost Redis; serving local sockets, reconnecting");
                }
                Err(e) => {
                    self.metrics.redis_connected.store(0, Ordering::Relaxed);
                    eprintln!("chat-relay: Redis unavailable ({e}); retrying in {backoff:?}");
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    async fn connect(&self) -> anyhow::Result<redis::aio::PubSub> {
        let client = redis::Client::open(self.url.as_str())?;
        let (pubsub, publisher) = tokio::time::timeout(CONNECT_TIMEOUT, async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.psubscribe(format!("{CHANNEL_PREFIX}*")).await?;
            let publisher = client.get_multiplexed_async_connection().await?;
            Ok::<_, redis::RedisError>((pubsub, publisher))
        })
        .await??;
        *self.publisher.write().await = Some(publisher);
        Ok(pubsub)
    }
}
