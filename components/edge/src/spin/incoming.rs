//! Reading request bodies from the host's stream, bounded before they are buffered: JSON
//! endpoints get their body buffered (at most 1 MiB, refused from `Content-Length` before
//! anything is read, else as soon as the bytes pass the limit); upload endpoints are
//! authenticated first and then read their body chunk by chunk.

use super::http::problem;
use domain::ApiError;
use domain::validate::MAX_JSON_BODY;
use futures::{Stream, StreamExt};
use spin_sdk::http::{
    Headers, IncomingRequest, OutgoingBody, OutgoingResponse, Request, Response, ResponseOutparam,
};
use std::pin::Pin;

/// A request body as it arrives.
pub type BodyStream = Pin<Box<dyn Stream<Item = Result<Vec<u8>, String>>>>;

/// Where an upload's bytes come from.
pub enum Source {
    /// The request body, read as it arrives.
    Stream(BodyStream),
    /// Bytes already read (a signed upload, a multipart part or a poster).
    Bytes(Vec<u8>, std::ops::Range<usize>),
}

/// The request head (method, URI, headers) with an empty body.
pub fn head_of(req: &IncomingRequest) -> Request {
    Request::builder()
        .method(req.method())
        .uri(req.uri())
        .headers(req.headers())
        .build()
}

/// The body of `req` as a stream of pieces.
pub fn body_stream(req: IncomingRequest) -> BodyStream {
    Box::pin(
        req.into_body_stream()
            .map(|piece| piece.map_err(|e| e.to_debug_string())),
    )
}

/// The declared `Content-Length`, if any and well-formed.
pub fn content_length(head: &Request) -> Option<u64> {
    head.header("content-length")?.as_str()?.trim().parse().ok()
}

/// Reads the whole body, refusing (413) one longer than `max` bytes: from
/// `Content-Length` before reading anything, else as soon as the bytes pass `max`.
pub async fn collect(head: &Request, mut body: BodyStream, max: u64) -> Result<Vec<u8>, ApiError> {
    if content_length(head).is_some_and(|n| n > max) {
        return Err(too_large(max));
    }
    let mut out = Vec::new();
    while let Some(piece) = body.next().await {
        let piece = piece.map_err(unreadable)?;
        if (out.len() + piece.len()) as u64 > max {
            return Err(too_large(max));
        }
        out.extend_from_slice(&piece);
    }
    Ok(out)
}

pub fn too_large(max: u64) -> ApiError {
    ApiError::payload_too_large(usize::try_from(max).unwrap_or(usize::MAX))
}

pub fn unreadable(e: String) -> ApiError {
    ApiError::bad_request(
        "unreadable_body",
        format!("the request body could not be read: {e}"),
    )
}

/// Reads a JSON endpoint's body (at most [`MAX_JSON_BODY`]) into `head`.
pub async fn buffered(mut head: Request, body: BodyStream) -> Result<Request, ApiError> {
    *head.body_mut() = collect(&head, body, MAX_JSON_BODY as u64).await?;
    Ok(head)
}

/// Sends `response` through the host.
pub async fn send(out: ResponseOutparam, mut response: Response) {
    let body = std::mem::take(response.body_mut());
    match outgoing(&response) {
        Ok(head) => {
            if let Err(e) = send_with_body(out, head, &body) {
                eprintln!("error: could not send the response body: {e}");
            }
        }
        Err(e) => {
            eprintln!("error: could not build the response: {e}");
            let fallback = problem(
                &ApiError::internal("the response could not be built"),
                "response",
            );
            if let Ok(head) = outgoing(&fallback) {
                let _ = out.set_with_body(head, Vec::new()).await;
            }
        }
    }
}

/// Hands the host `head` with `body`. A body that fits the host's buffer is written
/// before the head is handed over, so that the host has the whole response at once and
/// can send it in one write: handed the head first, a host that does not disable Nagle's
/// algorithm on its connections (Spin) may send the head alone and hold the body back
/// until the client acknowledges it, which a client delaying its acknowledgements does
/// 40 ms later. A larger body is written after the head, as the host takes it.
fn send_with_body(
    out: ResponseOutparam,
    head: OutgoingResponse,
    body: &[u8],
) -> Result<(), String> {
    let outgoing = head.body().map_err(|()| "the body was taken".to_string())?;
    let stream = outgoing
        .write()
        .map_err(|()| "the body is not writable".to_string())?;
    let room = stream.check_write().map_err(|e| e.to_string())?;
    if body.len() as u64 <= room {
        stream.write(body).map_err(|e| e.to_string())?;
        drop(stream);
        OutgoingBody::finish(outgoing, None).map_err(|e| e.to_string())?;
        out.set(head);
        return Ok(());
    }
    out.set(head);
    let mut rest = body;
    while !rest.is_empty() {
        let room = stream.check_write().map_err(|e| e.to_string())?;
        if room == 0 {
            stream.subscribe().block();
            continue;
        }
        let n = rest.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        stream.write(&rest[..n]).map_err(|e| e.to_string())?;
        rest = &rest[n..];
    }
    stream.blocking_flush().map_err(|e| e.to_string())?;
    drop(stream);
    OutgoingBody::finish(outgoing, None).map_err(|e| e.to_string())
}

/// The head of `response` (status and headers) as the host's response. Built here rather
/// than with spin-sdk's `TryFrom`, whose `anyhow` error links std's backtrace printer and
/// symbol demangler (about 46 KB of code).
fn outgoing(response: &Response) -> Result<OutgoingResponse, String> {
    let headers: Vec<(String, Vec<u8>)> = response
        .headers()
        .map(|(name, value)| (name.to_owned(), value.as_bytes().to_vec()))
        .collect();
    let fields = Headers::from_list(&headers).map_err(|e| e.to_string())?;
    let head = OutgoingResponse::new(fields);
    let status = *response.status();
    head.set_status_code(status)
        .map_err(|()| format!("error setting status code to {status}"))?;
    Ok(head)
}
