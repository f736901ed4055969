//! Outbound HTTP with timeouts and a response size cap, on the raw `wasi:http` interface
//! (the SDK's `send` has no way to set request options).
//!
//! The host decides which hosts a component may reach (`allowed_outbound_hosts`); this
//! module only reports a refusal as [`OutboundError::Denied`].

use std::time::Duration;
use wasi::http::outgoing_handler;
use wasi::http::types::{
    ErrorCode, Fields, FutureIncomingResponse, IncomingResponse, Method, OutgoingBody,
    OutgoingRequest, RequestOptions, Scheme,
};
use wasi::io::streams::StreamError;

pub struct OutboundRequest<'a> {
    pub method: &'a str,
    pub url: &'a str,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: &'a [u8],
    pub timeout: Duration,
    /// Largest response body read; a longer one is an error.
    pub max_response_bytes: usize,
}

impl<'a> OutboundRequest<'a> {
    pub fn get(url: &'a str) -> Self {
        Self {
            method: "GET",
            url,
            headers: Vec::new(),
            body: &[],
            timeout: Duration::from_secs(10),
            max_response_bytes: 10 * 1024 * 1024,
        }
    }
}

#[derive(Debug)]
pub struct OutboundResponse {
    pub status: u16,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

impl OutboundResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum OutboundError {
    /// The URL or a header could not be sent.
    Invalid(String),
    /// The host does not allow this destination.
    Denied,
    /// No connection or no answer in time.
    Timeout,
    /// DNS failure, refused connection, TLS failure and the like.
    Unreachable(String),
    /// The answer was larger than allowed.
    TooLarge,
}

impl std::fmt::Display for OutboundError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Invalid(why) => write!(f, "invalid request: {why}"),
            Self::Denied => write!(f, "destination not allowed"),
            Self::Timeout => write!(f, "timed out"),
            Self::Unreachable(why) => write!(f, "unreachable: {why}"),
            Self::TooLarge => write!(f, "response too large"),
        }
    }
}

/// Splits an absolute http(s) URL into scheme, authority and path-with-query.
pub fn split_url(url: &str) -> Option<(&str, &str, &str)> {
    let (scheme, rest) = url.split_once("://")?;
    if !matches!(scheme, "http" | "https") {
        return None;
    }
    let cut = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(cut);
    if authority.is_empty() || authority.contains('@') {
        return None;
    }
    Some((scheme, authority, path))
}

/// Sends a request and reads the whole answer, blocking the (single-threaded) component.
pub fn send(req: &OutboundRequest<'_>) -> Result<OutboundResponse, OutboundError> {
    let pending = start(req)?;
    let response = wait(&pending)?;
    read_response(response, req.max_response_bytes, false)
}

/// One answer of [`send_all`] and how long its head took to arrive.
pub struct Sent {
    pub result: Result<OutboundResponse, OutboundError>,
    pub elapsed: Duration,
}

/// Sends several requests at once and answers each one's result, in order: the waits for
/// the answers overlap, so one slow receiver costs its own timeout, not the others'.
/// Bodies are read up to `max_response_bytes` and the rest is left unread (not an error):
/// for callers to whom the status is what matters.
pub fn send_all(reqs: &[OutboundRequest<'_>]) -> Vec<Sent> {
    let began = std::time::Instant::now();
    let started: Vec<_> = reqs.iter().map(start).collect();
    let mut elapsed = vec![None; reqs.len()];
    {
        // Readiness is watched through pollables: `get` would take the answer.
        let pollables: Vec<_> = started
            .iter()
            .map(|s| s.as_ref().ok().map(FutureIncomingResponse::subscribe))
            .collect();
        loop {
            let mut waiting = Vec::new();
            for (at, pollable) in pollables.iter().enumerate() {
                match pollable {
                    Some(p) if !p.ready() => waiting.push(p),
                    _ => {
                        elapsed[at].get_or_insert_with(|| began.elapsed());
                    }
                }
            }
            if waiting.is_empty() {
                break;
            }
            wasi::io::poll::poll(&waiting);
        }
    }
    started
        .into_iter()
        .zip(reqs)
        .zip(elapsed)
        .map(|((pending, req), elapsed)| Sent {
            result: pending.and_then(|p| read_response(wait(&p)?, req.max_response_bytes, true)),
            elapsed: elapsed.unwrap_or_default(),
        })
        .collect()
}

/// Sends the request line, headers and body; the answer is still to come.
fn start(req: &OutboundRequest<'_>) -> Result<FutureIncomingResponse, OutboundError> {
    // The answer may take its whole timeout: meanwhile the request holds none of the
    // pool's database connections (a slow party would otherwise take them from everyone).
    super::store::set_aside();
    let (scheme, authority, path) =
        split_url(req.url).ok_or_else(|| OutboundError::Invalid(format!("bad URL {}", req.url)))?;
    // The body's length is sent: without it the host streams the body chunked, which
    // many receivers (serverless gateways, simple servers) read as an empty body.
    let mut fields = req.headers.clone();
    let has_length = fields
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("content-length"));
    let bodiless = req.body.is_empty()
        && matches!(
            req.method.to_ascii_uppercase().as_str(),
            "GET" | "HEAD" | "DELETE" | "OPTIONS"
        );
    if !has_length && !bodiless {
        fields.push((
            "content-length".into(),
            req.body.len().to_string().into_bytes(),
        ));
    }
    let headers = Fields::from_list(&fields)
        .map_err(|e| OutboundError::Invalid(format!("bad header: {e:?}")))?;
    let outgoing = OutgoingRequest::new(headers);
    let method = match req.method.to_ascii_uppercase().as_str() {
        "GET" => Method::Get,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        "PATCH" => Method::Patch,
        "HEAD" => Method::Head,
        "OPTIONS" => Method::Options,
        other => Method::Other(other.to_string()),
    };
    let scheme = if scheme == "https" {
        Scheme::Https
    } else {
        Scheme::Http
    };
    let path = if path.is_empty() { "/" } else { path };
    let invalid = |what: &str| OutboundError::Invalid(what.to_string());
    outgoing
        .set_method(&method)
        .map_err(|()| invalid("method"))?;
    outgoing
        .set_scheme(Some(&scheme))
        .map_err(|()| invalid("scheme"))?;
    outgoing
        .set_authority(Some(authority))
        .map_err(|()| invalid("authority"))?;
    outgoing
        .set_path_with_query(Some(path))
        .map_err(|()| invalid("path"))?;

    let options = RequestOptions::new();
    let nanos = u64::try_from(req.timeout.as_nanos()).unwrap_or(u64::MAX);
    // Hosts may not support every option; the ones they do bound the wait.
    let _ = options.set_connect_timeout(Some(nanos));
    let _ = options.set_first_byte_timeout(Some(nanos));
    let _ = options.set_between_bytes_timeout(Some(nanos));

    let body = outgoing.body().map_err(|()| invalid("body"))?;
    let pending = outgoing_handler::handle(outgoing, Some(options)).map_err(map_error)?;
    {
        let stream = body.write().map_err(|()| invalid("body stream"))?;
        for chunk in req.body.chunks(4096) {
            stream
                .blocking_write_and_flush(chunk)
                .map_err(|e| OutboundError::Unreachable(format!("sending the body: {e:?}")))?;
        }
    }
    OutgoingBody::finish(body, None).map_err(map_error)?;
    Ok(pending)
}

/// Blocks until the answer's head has arrived (or the request failed).
fn wait(pending: &FutureIncomingResponse) -> Result<IncomingResponse, OutboundError> {
    loop {
        match pending.get() {
            Some(Ok(Ok(response))) => return Ok(response),
            Some(Ok(Err(code))) => return Err(map_error(code)),
            Some(Err(())) => {
                return Err(OutboundError::Invalid("response already taken".into()));
            }
            None => pending.subscribe().block(),
        }
    }
}

/// Reads the answer's body up to `max` bytes: beyond that, an error, or with `truncate` the
/// rest is left unread.
fn read_response(
    response: IncomingResponse,
    max: usize,
    truncate: bool,
) -> Result<OutboundResponse, OutboundError> {
    let status = response.status();
    let headers = response.headers().entries();
    let incoming = response
        .consume()
        .map_err(|()| OutboundError::Invalid("response body".into()))?;
    let mut body = Vec::new();
    {
        let stream = incoming
            .stream()
            .map_err(|()| OutboundError::Invalid("response stream".into()))?;
        loop {
            match stream.blocking_read(64 * 1024) {
                Ok(chunk) => {
                    if body.len() + chunk.len() > max {
                        if truncate {
                            body.extend_from_slice(&chunk[..max - body.len()]);
                            break;
                        }
                        return Err(OutboundError::TooLarge);
                    }
                    body.extend_from_slice(&chunk);
                }
                Err(StreamError::Closed) => break,
                Err(StreamError::LastOperationFailed(e)) => {
                    let why = e.to_debug_string();
                    return Err(if why.to_ascii_lowercase().contains("timeout") {
                        OutboundError::Timeout
                    } else {
                        OutboundError::Unreachable(why)
                    });
                }
            }
        }
    }
    Ok(OutboundResponse {
        status,
        headers,
        body,
    })
}

fn map_error(code: ErrorCode) -> OutboundError {
    match code {
        ErrorCode::HttpRequestDenied => OutboundError::Denied,
        ErrorCode::ConnectionTimeout
        | ErrorCode::ConnectionReadTimeout
        | ErrorCode::ConnectionWriteTimeout
        | ErrorCode::HttpResponseTimeout => OutboundError::Timeout,
        ErrorCode::HttpRequestUriInvalid | ErrorCode::HttpRequestMethodInvalid => {
            OutboundError::Invalid(format!("{code:?}"))
        }
        other => OutboundError::Unreachable(format!("{other:?}")),
    }
}
