//! The SFU settings, read from Spin variables.
//!
//! Two addresses: `sfu_server_url`, what browsers and SDKs connect to (ws/wss), and
//! `sfu_api_url`, what the server calls (http/https; the only one that belongs in
//! `allowed_outbound_hosts`). When `sfu_api_url` is unset (a component without it), it is
//! derived from `sfu_server_url`: wss → https, ws → http.

use super::config;
use domain::ApiError;
use domain::sfu::{derived_api_url, is_api_url};

/// The SFU settings; configured when the server URL, API key and secret are all set.
pub struct SfuConfig {
    pub server_url: Option<String>,
    pub api_url: Option<String>,
    pub api_key: Option<String>,
    pub api_secret: Option<String>,
}

/// A usable SFU: where it is and the key pair that signs its access tokens.
pub struct SfuCredentials {
    pub server_url: String,
    pub api_key: String,
    pub api_secret: String,
}

impl SfuConfig {
    pub fn load() -> Self {
        let server_url = config::var("sfu_server_url");
        Self::new(
            server_url,
            config::var("sfu_api_url"),
            config::var("sfu_api_key"),
            config::var("sfu_api_secret"),
        )
    }

    /// The settings from the variables' values (unset or empty is `None`).
    pub fn new(
        server_url: Option<String>,
        api_url: Option<String>,
        api_key: Option<String>,
        api_secret: Option<String>,
    ) -> Self {
        let api_url = api_url.or_else(|| server_url.as_deref().and_then(derived_api_url));
        Self {
            server_url,
            api_url,
            api_key,
            api_secret,
        }
    }

    pub fn is_configured(&self) -> bool {
        self.server_url.is_some() && self.api_key.is_some() && self.api_secret.is_some()
    }

    /// The http(s) address the server calls, or a 503 saying why there is none.
    pub fn api_url(&self) -> Result<&str, ApiError> {
        match self.api_url.as_deref() {
            Some(url) if is_api_url(url) => Ok(url),
            Some(_) => Err(ApiError::unavailable(
                "sfu_misconfigured",
                "sfu_api_url must be an http:// or https:// URL",
            )),
            None => Err(ApiError::unavailable(
                "sfu_misconfigured",
                "set sfu_api_url (http/https), or a ws/wss sfu_server_url to derive it from",
            )),
        }
    }

    /// The credentials, or a 503 naming what is missing.
    pub fn credentials(self) -> Result<SfuCredentials, ApiError> {
        match (self.server_url, self.api_key, self.api_secret) {
            (Some(server_url), Some(api_key), Some(api_secret)) => Ok(SfuCredentials {
                server_url,
                api_key,
                api_secret,
            }),
            _ => Err(ApiError::unavailable(
                "sfu_not_configured",
                "the SFU is not configured: set sfu_server_url, sfu_api_key and sfu_api_secret",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(server: Option<&str>, api: Option<&str>) -> SfuConfig {
        SfuConfig::new(
            server.map(String::from),
            api.map(String::from),
            Some("key".into()),
            Some("secret".into()),
        )
    }

    #[test]
    fn an_unset_api_url_is_derived_from_the_server_url() {
        let sfu = config(Some("wss://my.livekit.cloud"), None);
        assert_eq!(sfu.api_url().ok(), Some("https://my.livekit.cloud"));
        let sfu = config(Some("ws://127.0.0.1:7880"), None);
        assert_eq!(sfu.api_url().ok(), Some("http://127.0.0.1:7880"));
    }

    #[test]
    fn a_set_api_url_wins() {
        let sfu = config(
            Some("wss://my.livekit.cloud"),
            Some("http://livekit.internal:7880"),
        );
        assert_eq!(sfu.api_url().ok(), Some("http://livekit.internal:7880"));
    }

    #[test]
    fn an_api_url_that_is_not_http_is_a_configuration_error() {
        let sfu = config(
            Some("wss://my.livekit.cloud"),
            Some("wss://my.livekit.cloud"),
        );
        assert_eq!(sfu.api_url().err().map(|e| e.status), Some(503));
        let sfu = config(None, None);
        assert!(sfu.api_url().is_err());
        let sfu = config(Some("livekit"), None);
        assert!(sfu.api_url().is_err());
    }
}
