//! AWS Signature Version 4 for S3 requests (the `Authorization` header form), as any
//! S3-compatible store checks it: AWS S3, Cloudflare R2, Garage, Ceph RGW.
//! <https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html>

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

/// The hash of an empty body.
pub const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// Lowercase hex of SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(data);
    mac.finalize().into_bytes().into()
}

/// The key of one day, region and service: `AWS4<secret>` through HMACs of each.
pub fn signing_key(secret: &str, date: &str, region: &str, service: &str) -> [u8; 32] {
    let k_date = hmac(format!("AWS4{secret}").as_bytes(), date.as_bytes());
    let k_region = hmac(&k_date, region.as_bytes());
    let k_service = hmac(&k_region, service.as_bytes());
    hmac(&k_service, b"aws4_request")
}

/// URI-encodes `s` as SigV4 wants: every byte but `A-Za-z0-9-._~` as `%XX` (uppercase),
/// and `/` too unless `keep_slash` (object keys in paths keep theirs).
pub fn uri_encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric()
            || matches!(b, b'-' | b'.' | b'_' | b'~')
            || (keep_slash && b == b'/')
        {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The query string in canonical form (and as sent): names and values encoded, sorted.
pub fn canonical_query(query: &[(&str, &str)]) -> String {
    let mut pairs: Vec<(String, String)> = query
        .iter()
        .map(|(k, v)| (uri_encode(k, false), uri_encode(v, false)))
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// One request to sign. `headers` are every header signed, names in any case (`host` and
/// `x-amz-date` among them, `x-amz-content-sha256` for S3).
pub struct Request<'a> {
    pub method: &'a str,
    /// The path, already URI-encoded (`/bucket/replays/x/v0_1.ts`).
    pub path: &'a str,
    pub query: &'a [(&'a str, &'a str)],
    pub headers: &'a [(&'a str, &'a str)],
    pub payload_sha256: &'a str,
}

/// Who signs, where, and when (`yyyymmddThhmmssZ`).
pub struct Signer<'a> {
    pub access_key_id: &'a str,
    pub secret_access_key: &'a str,
    pub region: &'a str,
    pub service: &'a str,
    pub amz_date: &'a str,
}

impl Request<'_> {
    /// The signed headers' names (lowercase, sorted, `;`-joined) and the canonical
    /// request.
    pub fn canonical(&self) -> (String, String) {
        let mut headers: Vec<(String, String)> = self
            .headers
            .iter()
            .map(|(k, v)| {
                let value = v.split_whitespace().collect::<Vec<_>>().join(" ");
                (k.to_ascii_lowercase(), value)
            })
            .collect();
        headers.sort();
        let signed = headers
            .iter()
            .map(|(k, _)| k.as_str())
            .collect::<Vec<_>>()
            .join(";");
        let canonical_headers: String = headers.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
        let request = format!(
            "{}\n{}\n{}\n{}\n{}\n{}",
            self.method,
            self.path,
            canonical_query(self.query),
            canonical_headers,
            signed,
            self.payload_sha256
        );
        (signed, request)
    }
}

impl Signer<'_> {
    fn scope(&self) -> String {
        format!(
            "{}/{}/{}/aws4_request",
            &self.amz_date[..8],
            self.region,
            self.service
        )
    }

    /// The string to sign of a canonical request.
    pub fn string_to_sign(&self, canonical_request: &str) -> String {
        format!(
            "AWS4-HMAC-SHA256\n{}\n{}\n{}",
            self.amz_date,
            self.scope(),
            sha256_hex(canonical_request.as_bytes())
        )
    }

    /// The `Authorization` header of `request`.
    pub fn authorization(&self, request: &Request) -> String {
        let (signed, canonical) = request.canonical();
        let key = signing_key(
            self.secret_access_key,
            &self.amz_date[..8],
            self.region,
            self.service,
        );
        let signature = hex::encode(hmac(&key, self.string_to_sign(&canonical).as_bytes()));
        format!(
            "AWS4-HMAC-SHA256 Credential={}/{},SignedHeaders={signed},Signature={signature}",
            self.access_key_id,
            self.scope()
        )
    }
}

/// `yyyymmddThhmmssZ` of a Unix time.
pub fn amz_date(unix_secs: i64) -> String {
    domain::time::format_rfc3339(unix_secs).replace(['-', ':'], "")
}

#[cfg(test)]
mod tests {
    use super::*;

    // The examples of AWS's documentation ("Signature Calculations for the Authorization
    // Header: Transferring Payload in a Single Chunk", and the IAM example of the general
    // SigV4 guide).
    const KEY_ID: &str = "AKIAIOSFODNN7EXAMPLE";
    const SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

    fn signer(date: &str) -> Signer<'_> {
        Signer {
            access_key_id: KEY_ID,
            secret_access_key: SECRET,
            region: "us-east-1",
            service: "s3",
            amz_date: date,
        }
    }

    #[test]
    fn the_documented_get_object_example() {
        let request = Request {
            method: "GET",
            path: "/test.txt",
            query: &[],
            headers: &[
                ("Host", "examplebucket.s3.amazonaws.com"),
                ("Range", "bytes=0-9"),
                ("x-amz-content-sha256", EMPTY_SHA256),
                ("x-amz-date", "20130524T000000Z"),
            ],
            payload_sha256: EMPTY_SHA256,
        };
        let (signed, canonical) = request.canonical();
        assert_eq!(signed, "host;range;x-amz-content-sha256;x-amz-date");
        assert_eq!(
            sha256_hex(canonical.as_bytes()),
            "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972"
        );
        assert_eq!(
            signer("20130524T000000Z").authorization(&request),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,\
             SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,\
             Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        );
    }

    #[test]
    fn the_documented_list_objects_example() {
        let request = Request {
            method: "GET",
            path: "/",
            query: &[("prefix", "J"), ("max-keys", "2")],
            headers: &[
                ("host", "examplebucket.s3.amazonaws.com"),
                ("x-amz-content-sha256", EMPTY_SHA256),
                ("x-amz-date", "20130524T000000Z"),
            ],
            payload_sha256: EMPTY_SHA256,
        };
        assert!(request.canonical().1.contains("\nmax-keys=2&prefix=J\n"));
        assert!(
            signer("20130524T000000Z")
                .authorization(&request)
                .ends_with(
                    "Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"
                )
        );
    }

    #[test]
    fn the_documented_put_object_example() {
        let body = b"Welcome to Amazon S3.";
        let hash = sha256_hex(body);
        assert_eq!(
            hash,
            "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"
        );
        let request = Request {
            method: "PUT",
            path: &uri_encode("/test$file.text", true),
            query: &[],
            headers: &[
                ("Host", "examplebucket.s3.amazonaws.com"),
                ("Date", "Fri, 24 May 2013 00:00:00 GMT"),
                ("x-amz-date", "20130524T000000Z"),
                ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
                ("x-amz-content-sha256", &hash),
            ],
            payload_sha256: &hash,
        };
        assert!(
            request
                .canonical()
                .1
                .starts_with("PUT\n/test%24file.text\n")
        );
        assert!(
            signer("20130524T000000Z")
                .authorization(&request)
                .ends_with(
                    "Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"
                )
        );
    }

    #[test]
    fn the_documented_signing_key() {
        // The general guide's IAM example: its signing key.
        assert_eq!(
            hex::encode(signing_key(
                "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                "20150830",
                "us-east-1",
                "iam"
            )),
            "c4afb1cc5771d871763a393e44b703571b55cc28424d1a5e86da6ed3c154a4b9"
        );
    }

    #[test]
    fn encoding_and_dates() {
        assert_eq!(uri_encode("a b/c~d", false), "a%20b%2Fc~d");
        assert_eq!(uri_encode("replays/x/v0_1.ts", true), "replays/x/v0_1.ts");
        assert_eq!(amz_date(1_369_353_600), "20130524T000000Z");
        assert_eq!(
            canonical_query(&[("list-type", "2"), ("continuation-token", "a/b=")]),
            "continuation-token=a%2Fb%3D&list-type=2"
        );
    }
}
