//! The platform's persisted-chat API, as the relay calls it. The relay secret counts only
//! on the three chat routes called here (history, post, delete), and only together with
//! the user's JWT (acting as that user) or, for anonymous reads, `X-Tenant-Id`; a socket
//! opened with the public API key reads with that key alone. Every id in a path is a
//! checked [`Uuid`].

use serde_json::{Value, json};
use std::time::Duration;

use crate::protocol::Uuid;

/// Who a call is made for. A socket opened with a ticket forwards it (`X-Relay-Ticket`)
/// with every call: a client that requires signed calls accepts none from the relay
/// without it.
#[derive(Clone, Debug)]
pub enum Caller {
    /// A signed-in user: `Authorization: Bearer <token>`.
    User {
        token: String,
        ticket: Option<String>,
    },
    /// A read-only socket of a tenant, named by its client id.
    Tenant {
        client_id: Uuid,
        ticket: Option<String>,
    },
    /// A read-only socket of a tenant, named by its (public) API key.
    ApiKey { api_key: String },
}

/// Why the API did not do what was asked.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiFailure {
    /// The HTTP status (502 when the API could not be reached).
    pub status: u16,
    pub code: String,
    pub detail: String,
    /// Seconds, from `Retry-After` on 429.
    pub retry_after: Option<u64>,
}

impl ApiFailure {
    /// The cause goes to the log; the client learns only that the API failed.
    fn unreachable(e: impl std::fmt::Display) -> ApiFailure {
        eprintln!("chat-relay: chat API call failed: {e}");
        ApiFailure {
            status: 502,
            code: "api_unavailable".into(),
            detail: "the chat API could not be reached".into(),
            retry_after: None,
        }
    }
}

/// The largest API answer the relay reads (a page of history is far below it).
const MAX_ANSWER_BYTES: usize = 1024 * 1024;

/// A client of `{api_url}/api/streams/{id}/chat`.
#[derive(Clone)]
pub struct ChatApi {
    base: String,
    relay_secret: String,
    http: reqwest::Client,
}

impl ChatApi {
    /// `base` may be `https://`: the public web's certificate authorities are trusted,
    /// and `roots` besides.
    pub fn new(base: &str, relay_secret: &str, roots: &[reqwest::Certificate]) -> ChatApi {
        let builder = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .pool_max_idle_per_host(64);
        let http = roots
            .iter()
            .fold(builder, |b, root| b.add_root_certificate(root.clone()))
            .build()
            .expect("an HTTP client with TLS builds");
        ChatApi {
            base: base.trim_end_matches('/').to_string(),
            relay_secret: relay_secret.to_string(),
            http,
        }
    }

    fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        caller: &Caller,
    ) -> reqwest::RequestBuilder {
        let req = self.http.request(method, format!("{}{path}", self.base));
        let with_ticket = |req: reqwest::RequestBuilder, ticket: &Option<String>| match ticket {
            Some(ticket) => req.header("x-relay-ticket", ticket),
            None => req,
        };
        match caller {
            Caller::User { token, ticket } => with_ticket(
                req.header("x-relay-secret", &self.relay_secret)
                    .bearer_auth(token),
                ticket,
            ),
            Caller::Tenant { client_id, ticket } => with_ticket(
                req.header("x-relay-secret", &self.relay_secret)
                    .header("x-tenant-id", client_id.as_str()),
                ticket,
            ),
            // The API key is the tenant's own public credential: a plain anonymous call.
            Caller::ApiKey { api_key } => req.header("x-api-key", api_key),
        }
    }

    /// The newest `limit` messages, oldest first.
    pub async fn history(
        &self,
        stream: &Uuid,
        caller: &Caller,
        limit: u32,
    ) -> Result<Vec<Value>, ApiFailure> {
        let path = format!("/api/streams/{stream}/chat?limit={limit}");
        let body = send(self.request(reqwest::Method::GET, &path, caller)).await?;
        Ok(body["items"].as_array().cloned().unwrap_or_default())
    }

    /// Stores `message`; answers the stored record.
    pub async fn post(
        &self,
        stream: &Uuid,
        caller: &Caller,
        message: &str,
    ) -> Result<Value, ApiFailure> {
        let path = format!("/api/streams/{stream}/chat");
        let record = send(
            self.request(reqwest::Method::POST, &path, caller)
                .json(&json!({ "message": message })),
        )
        .await?;
        if record["id"].as_str().is_none() {
            return Err(ApiFailure::unreachable("the stored record has no id"));
        }
        Ok(record)
    }

    /// Deletes message `id`.
    pub async fn delete(
        &self,
        stream: &Uuid,
        caller: &Caller,
        id: &Uuid,
    ) -> Result<(), ApiFailure> {
        let path = format!("/api/streams/{stream}/chat/{id}");
        send(self.request(reqwest::Method::DELETE, &path, caller))
            .await
            .map(|_| ())
    }
}

async fn send(req: reqwest::RequestBuilder) -> Result<Value, ApiFailure> {
    let mut resp = req.send().await.map_err(ApiFailure::unreachable)?;
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok());
    let mut text = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(ApiFailure::unreachable)? {
        if text.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(ApiFailure::unreachable("the answer is larger than 1 MiB"));
        }
        text.extend_from_slice(&chunk);
    }
    let body: Value = serde_json::from_slice(&text).unwrap_or(Value::Null);
    if (200..300).contains(&status) {
        return Ok(body);
    }
    let code = body["code"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| match status {
            401 => "unauthorized".into(),
            403 => "forbidden".into(),
            404 => "not_found".into(),
            422 => "invalid_message".into(),
            429 => "rate_limited".into(),
            _ => "api_error".into(),
        });
    let detail = body["detail"]
        .as_str()
        .or(body["message"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| format!("the chat API answered {status}"));
    Err(ApiFailure {
        status,
        code,
        detail,
        retry_after,
    })
}
