//! The public contact form: no authentication, so it is validated strictly and rate
//! limited per client address.

use crate::ApiRoute;
use domain::request_body;
use domain::validate::body::{Checked, EmailAddress, Text};
use domain::{ApiError, validate};
use edge::endpoint;
use edge::rate::{Counts, RateLimit};
use edge::spin::endpoint::Json;
use edge::spin::http::PublicCtx;
use schemars::JsonSchema;
use serde::Serialize;
use store::tenants::{self, ContactMessage};

/// Messages one client address may send per minute.
const POSTS: RateLimit = RateLimit {
    bucket: "contact",
    max: 5,
    window_secs: 60,
    per: "client address",
    counts: Counts::Requests,
};

request_body! {
    /// A message through the public contact form.
    pub struct ContactFormBody as "ContactForm" {
        "name" name: Text<{ validate::MAX_NAME }>,
        /// An e-mail address to answer.
        "email" email: Checked<EmailAddress, 254>,
        "message" message: Text<5000>,
    }
}

/// A contact form message received: its id, and thanks.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "ContactMessageReceived")]
pub struct Received {
    #[schemars(extend("const" = true))]
    success: bool,
    #[schemars(extend("format" = "uuid"))]
    id: String,
    message: &'static str,
}

/// The client's IP address without the port (`spin-client-addr` is `ip:port`).
pub fn client_ip(addr: &str) -> &str {
    match addr.rsplit_once(':') {
        // "[::1]:5000" or "1.2.3.4:5000"
        Some((ip, port)) if port.bytes().all(|b| b.is_ascii_digit()) => {
            ip.trim_start_matches('[').trim_end_matches(']')
        }
        _ => addr,
    }
}

/// The public contact form.
pub const ROUTES: &[ApiRoute] = &[endpoint!(
    POST "/api/contact",
    Public(submit),
    "Submit (contact form)",
    |op| op.rate_limited(&POSTS),
)];

/// A message to the operator, rate limited per client address.
fn submit(
    ctx: &PublicCtx,
    ContactFormBody {
        name,
        email,
        message,
    }: ContactFormBody,
) -> Result<Json<Received>, ApiError> {
    let ip = client_ip(ctx.client_addr());
    let db = ctx.db()?;
    POSTS.hit(&db, ip, ctx.now())?;
    let message = ContactMessage {
        name,
        email,
        message,
        client_addr: ip.to_string(),
    };
    let id = tenants::insert_contact_message(&db, &message, ctx.now())?;
    Ok(Json(Received {
        success: true,
        id,
        message: "Thank you, your message has been received.",
    }))
}

#[cfg(test)]
mod tests {
    use super::client_ip;

    #[test]
    fn strips_ports() {
        assert_eq!(client_ip("127.0.0.1:5000"), "127.0.0.1");
        assert_eq!(client_ip("[::1]:5000"), "::1");
        assert_eq!(client_ip("unknown"), "unknown");
    }
}
