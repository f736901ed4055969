//! An S3-compatible bucket (AWS S3, Cloudflare R2, Garage, Ceph RGW): how the agent
//! reaches it ([`S3Settings`], checked, its secret never printed) and the few calls the
//! media store makes ([`Client`]: put, get, list, delete), addressed path-style
//! (`<endpoint>/<bucket>/<object>`) and signed with SigV4.

use super::{checked, is_object_name, sigv4};
use std::io;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// How the agent reaches its bucket. The secret never leaves: `Debug` hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct S3Settings {
    /// `http(s)://host[:port]`, no path (`https://<account>.r2.cloudflarestorage.com`,
    /// `https://s3.eu-west-1.amazonaws.com`, `http://127.0.0.1:3900`).
    pub endpoint: String,
    pub bucket: String,
    /// The region the signature names (`auto` for R2, Garage's `s3_region`).
    pub region: String,
    pub access_key_id: String,
    pub secret_access_key: String,
}

impl std::fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Settings")
            .field("endpoint", &self.endpoint)
            .field("bucket", &self.bucket)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

impl S3Settings {
    /// Each value's syntax: an http(s) endpoint without path, query or credentials, an S3
    /// bucket name, a region of letters, digits and `-`, keys present.
    pub fn check(&self) -> Result<(), String> {
        let url = reqwest::Url::parse(&self.endpoint).map_err(|_| {
            format!(
                "the media store's endpoint ({}) is not a URL",
                self.endpoint
            )
        })?;
        if !matches!(url.scheme(), "http" | "https")
            || url.host_str().is_none()
            || !url.username().is_empty()
            || url.password().is_some()
            || url.path() != "/"
            || url.query().is_some()
            || url.fragment().is_some()
        {
            return Err(format!(
                "the media store's endpoint ({}) must be http(s)://host[:port], nothing after",
                self.endpoint
            ));
        }
        let bucket_ok = (3..=63).contains(&self.bucket.len())
            && self
                .bucket
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
            && !self.bucket.starts_with(['-', '.'])
            && !self.bucket.ends_with(['-', '.']);
        if !bucket_ok {
            return Err(format!(
                "the media store's bucket ({}) is not an S3 bucket name",
                self.bucket
            ));
        }
        if self.region.is_empty()
            || self.region.len() > 64
            || !self
                .region
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(format!(
                "the media store's region ({}) may hold only letters, digits, - and _",
                self.region
            ));
        }
        if self.access_key_id.is_empty() || self.secret_access_key.is_empty() {
            return Err("the media store needs an access key id and its secret".into());
        }
        Ok(())
    }
}

/// A store's answer that is not the object.
fn store_error(what: &str, status: reqwest::StatusCode, body: &[u8]) -> io::Error {
    let code = std::str::from_utf8(body)
        .ok()
        .and_then(|b| {
            let start = b.find("<Code>")? + 6;
            let end = b[start..].find("</Code>")? + start;
            Some(b[start..end].to_string())
        })
        .unwrap_or_default();
    io::Error::other(format!(
        "the media store answered {what} with {status} {code}"
    ))
}

fn network(e: reqwest::Error) -> io::Error {
    // Without the URL: it is the endpoint, logged elsewhere if needed, never a secret,
    // but the error's own text says enough.
    io::Error::new(
        io::ErrorKind::ConnectionRefused,
        e.without_url().to_string(),
    )
}

/// The bucket's HTTP API: the few calls the store makes.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    settings: Arc<S3Settings>,
    base: reqwest::Url,
    /// `host[:port]` as the `Host` header carries it.
    host: String,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Client {
    pub fn new(settings: S3Settings) -> io::Result<Client> {
        settings.check().map_err(io::Error::other)?;
        let base = reqwest::Url::parse(&settings.endpoint).map_err(io::Error::other)?;
        let host = match base.port() {
            Some(port) => format!("{}:{port}", base.host_str().unwrap_or_default()),
            None => base.host_str().unwrap_or_default().to_string(),
        };
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(3))
            .timeout(Duration::from_secs(60))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(io::Error::other)?;
        Ok(Client {
            http,
            settings: Arc::new(settings),
            base,
            host,
        })
    }

    /// A signed request for `object` (None: the bucket itself).
    async fn send(
        &self,
        method: reqwest::Method,
        object: Option<&str>,
        query: &[(&str, &str)],
        body: Vec<u8>,
    ) -> io::Result<reqwest::Response> {
        let mut path = format!("/{}", sigv4::uri_encode(&self.settings.bucket, false));
        if let Some(object) = object {
            path.push('/');
            path.push_str(&sigv4::uri_encode(checked(object)?, true));
        }
        let payload = if body.is_empty() {
            sigv4::EMPTY_SHA256.to_string()
        } else {
            sigv4::sha256_hex(&body)
        };
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let date = sigv4::amz_date(now);
        let authorization = sigv4::Signer {
            access_key_id: &self.settings.access_key_id,
            secret_access_key: &self.settings.secret_access_key,
            region: &self.settings.region,
            service: "s3",
            amz_date: &date,
        }
        .authorization(&sigv4::Request {
            method: method.as_str(),
            path: &path,
            query,
            headers: &[
                ("host", &self.host),
                ("x-amz-content-sha256", &payload),
                ("x-amz-date", &date),
            ],
            payload_sha256: &payload,
        });
        let mut url = self.base.clone();
        url.set_path(&path);
        let query = sigv4::canonical_query(query);
        url.set_query((!query.is_empty()).then_some(query.as_str()));
        self.http
            .request(method, url)
            .header("x-amz-content-sha256", payload)
            .header("x-amz-date", date)
            .header("authorization", authorization)
            .body(body)
            .send()
            .await
            .map_err(network)
    }

    pub async fn put(&self, object: &str, body: Vec<u8>) -> io::Result<()> {
        let answer = self
            .send(reqwest::Method::PUT, Some(object), &[], body)
            .await?;
        let status = answer.status();
        if status.is_success() {
            return Ok(());
        }
        let body = answer.bytes().await.unwrap_or_default();
        Err(store_error("an upload", status, &body))
    }

    /// The object, or None when the store has none of that name.
    pub async fn get(&self, object: &str) -> io::Result<Option<Vec<u8>>> {
        let answer = self
            .send(reqwest::Method::GET, Some(object), &[], Vec::new())
            .await?;
        let status = answer.status();
        let body = answer.bytes().await.map_err(network)?;
        match status {
            s if s.is_success() => Ok(Some(body.to_vec())),
            reqwest::StatusCode::NOT_FOUND => Ok(None),
            s => Err(store_error("a read", s, &body)),
        }
    }

    pub async fn head(&self, object: &str) -> io::Result<bool> {
        let answer = self
            .send(reqwest::Method::HEAD, Some(object), &[], Vec::new())
            .await?;
        match answer.status() {
            s if s.is_success() => Ok(true),
            reqwest::StatusCode::NOT_FOUND => Ok(false),
            s => Err(store_error("a look-up", s, &[])),
        }
    }

    pub async fn delete(&self, object: &str) -> io::Result<()> {
        let answer = self
            .send(reqwest::Method::DELETE, Some(object), &[], Vec::new())
            .await?;
        let status = answer.status();
        if status.is_success() || status == reqwest::StatusCode::NOT_FOUND {
            return Ok(());
        }
        let body = answer.bytes().await.unwrap_or_default();
        Err(store_error("a deletion", status, &body))
    }

    /// Every object under `prefix/` (ListObjectsV2, page after page).
    pub async fn list(&self, prefix: &str) -> io::Result<Vec<String>> {
        let prefix = format!("{}/", checked(prefix)?);
        let mut objects = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut query = vec![("list-type", "2"), ("prefix", prefix.as_str())];
            if let Some(token) = &token {
                query.push(("continuation-token", token.as_str()));
            }
            let answer = self
                .send(reqwest::Method::GET, None, &query, Vec::new())
                .await?;
            let status = answer.status();
            let body = answer.bytes().await.map_err(network)?;
            if !status.is_success() {
                return Err(store_error("a listing", status, &body));
            }
            let text = std::str::from_utf8(&body).map_err(io::Error::other)?;
            let doc = roxmltree::Document::parse(text).map_err(io::Error::other)?;
            let root = doc.root_element();
            let child = |node: roxmltree::Node, name: &str| {
                node.children()
                    .find(|c| c.tag_name().name() == name)
                    .and_then(|c| c.text())
                    .map(str::to_string)
            };
            for contents in root
                .children()
                .filter(|c| c.tag_name().name() == "Contents")
            {
                if let Some(key) = child(contents, "Key") {
                    objects.push(key);
                }
            }
            token = match child(root, "IsTruncated").as_deref() {
                Some("true") => child(root, "NextContinuationToken"),
                _ => None,
            };
            if token.is_none() {
                return Ok(objects);
            }
        }
    }

    /// Deletes every object under `prefix` (that it names as an object: a name from the
    /// store that is not one is left alone).
    pub async fn delete_prefix(&self, prefix: &str) -> io::Result<usize> {
        let objects = self.list(prefix).await?;
        let mut deleted = 0;
        for object in objects.iter().filter(|o| is_object_name(o)) {
            self.delete(object).await?;
            deleted += 1;
        }
        Ok(deleted)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::media_store) fn settings(endpoint: &str) -> S3Settings {
        S3Settings {
            endpoint: endpoint.into(),
            bucket: "media".into(),
            region: "garage".into(),
            access_key_id: "GK0123".into(),
            secret_access_key: "very-secret".into(),
        }
    }
    #[test]
    fn settings_are_checked_and_the_secret_never_printed() {
        assert!(settings("http://127.0.0.1:3900").check().is_ok());
        for bad in [
            "ftp://x",
            "http://x/path",
            "http://u:p@x",
            "x",
            "http://x?a=b",
        ] {
            assert!(settings(bad).check().is_err(), "{bad}");
        }
        let mut s = settings("https://s3.example.com");
        s.bucket = "Bad_Bucket".into();
        assert!(s.check().is_err());
        let s = settings("https://s3.example.com");
        assert!(!format!("{s:?}").contains("very-secret"));
    }
}
