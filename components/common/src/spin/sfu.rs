//! The SFU settings, read from Spin variables.

use super::config;
use crate::ApiError;

/// The SFU settings; configured when the server URL, API key and secret are all set.
pub struct SfuConfig {
    pub server_url: Option<String>,
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
        Self {
            server_url: config::var("sfu_server_url"),
            api_key: config::var("sfu_api_key"),
            api_secret: config::var("sfu_api_secret"),
        }
    }

    pub fn is_configured(&self) -> bool {
        self.server_url.is_some() && self.api_key.is_some() && self.api_secret.is_some()
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
