//! Identifiers and secrets, all drawn from the operating system's CSPRNG.

const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A random UUID v4 in its hyphenated lowercase form.
pub fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A UUID v7: led by the time in milliseconds, then 74 random bits. For the records
/// written at a high rate (the ledger's transfers and pending changes, gifts): rows
/// inserted one after another land in the same leaf of an index on the id, where random
/// ids put each insert in a leaf of its own, and every leaf a commit changes is another
/// page written to the log (SQLite's WAL, PostgreSQL's).
pub fn ordered_uuid() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// 8 base62 characters of the time in milliseconds (in the alphabet's order, so the
/// text sorts as the time does), then `random` random base62 characters: an identifier
/// that is unguessable like [`random_base62`] and ordered like [`ordered_uuid`].
pub fn ordered_base62(random: usize) -> String {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let mut time = [b'0'; 8];
    let mut rest = millis;
    for digit in time.iter_mut().rev() {
        *digit = BASE62[(rest % 62) as usize];
        rest /= 62;
    }
    let mut out = String::from_utf8_lossy(&time).into_owned();
    out.push_str(&random_base62(random));
    out
}

/// `n` random bytes. Panics only if the platform has no entropy source at all.
pub fn random_bytes(n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    getrandom::fill(&mut buf).expect("the platform provides no randomness");
    buf
}

/// `bytes` random bytes as lowercase hex.
pub fn random_hex(bytes: usize) -> String {
    hex::encode(random_bytes(bytes))
}

/// A random base62 string of `len` characters, without modulo bias.
pub fn random_base62(len: usize) -> String {
    let mut out = String::with_capacity(len);
    while out.len() < len {
        for b in random_bytes(len * 2) {
            // 62 * 4 = 248: rejecting bytes >= 248 keeps every character equally likely.
            if b < 248 && out.len() < len {
                out.push(BASE62[(b % 62) as usize] as char);
            }
        }
    }
    out
}

/// Parses a UUID in any accepted form and answers it hyphenated and lowercase.
pub fn parse_uuid(text: &str) -> Option<String> {
    uuid::Uuid::try_parse(text).ok().map(|u| u.to_string())
}

/// Lowercase hex SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base62_has_requested_length_and_alphabet() {
        let s = random_base62(8);
        assert_eq!(s.len(), 8);
        assert!(s.bytes().all(|b| BASE62.contains(&b)));
        assert_ne!(random_base62(16), random_base62(16));
    }

    #[test]
    fn ordered_ids_sort_by_time_and_stay_random() {
        let first = ordered_uuid();
        let second_base62 = ordered_base62(16);
        std::thread::sleep(std::time::Duration::from_millis(2));
        let (later, later_base62) = (ordered_uuid(), ordered_base62(16));
        assert!(first < later, "{first} then {later}");
        assert!(
            second_base62 < later_base62,
            "{second_base62} then {later_base62}"
        );
        assert_eq!(uuid::Uuid::parse_str(&first).unwrap().get_version_num(), 7);
        assert_eq!(later_base62.len(), 24);
        assert!(later_base62.bytes().all(|b| BASE62.contains(&b)));
        // Same millisecond, different ids.
        assert_ne!(ordered_base62(16), ordered_base62(16));
        assert_ne!(ordered_uuid(), ordered_uuid());
    }

    #[test]
    fn uuids_are_v4_and_parse_back() {
        let id = uuid();
        assert_eq!(parse_uuid(&id).as_deref(), Some(id.as_str()));
        assert_eq!(id.as_bytes()[14], b'4');
        assert!(parse_uuid("not-a-uuid").is_none());
        assert_eq!(
            parse_uuid("6F9619FF-8B86-D011-B42D-00C04FC964FF").as_deref(),
            Some("6f9619ff-8b86-d011-b42d-00c04fc964ff")
        );
    }

    #[test]
    fn sha256_matches_known_vector() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
