//! `application/x-www-form-urlencoded`: the bodies of nginx-rtmp's notifications.

/// The pairs of a form body, decoded (`+` is a space, `%XX` a byte); a pair without `=`
/// has an empty value, and invalid UTF-8 is replaced rather than refused.
pub fn parse(body: &[u8]) -> Vec<(String, String)> {
    body.split(|b| *b == b'&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = match pair.iter().position(|b| *b == b'=') {
                Some(i) => (&pair[..i], &pair[i + 1..]),
                None => (pair, &[][..]),
            };
            (decode(name), decode(value))
        })
        .collect()
}

/// The first value named `name`.
pub fn get<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

fn decode(text: &[u8]) -> String {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < text.len() => match (hex(text[i + 1]), hex(text[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nginx_rtmp_notifications() {
        // As nginx-rtmp 1.2.2 sends them (captured).
        let body = b"app=live&flashver=FMLE/3.0%20(compatible%3B%20Lavf59.27&swfurl=&\
tcurl=rtmp://127.0.0.1:29350/live&pageurl=&addr=127.0.0.1&clientid=1&call=publish&\
name=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa&type=live&foo=bar";
        let pairs = parse(body);
        assert_eq!(get(&pairs, "call"), Some("publish"));
        assert_eq!(
            get(&pairs, "name"),
            Some("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
        );
        assert_eq!(get(&pairs, "clientid"), Some("1"));
        assert_eq!(get(&pairs, "addr"), Some("127.0.0.1"));
        assert_eq!(
            get(&pairs, "flashver"),
            Some("FMLE/3.0 (compatible; Lavf59.27")
        );
        assert_eq!(get(&pairs, "swfurl"), Some(""));
        assert_eq!(get(&pairs, "foo"), Some("bar"));
        assert_eq!(get(&pairs, "missing"), None);
    }

    #[test]
    fn decodes_and_tolerates_malformed_input() {
        let pairs = parse(b"a=1+2%2B3&b&&c=%&d=%4&e=%zz&f=%C3%A9&g=%FF&a=second");
        assert_eq!(get(&pairs, "a"), Some("1 2+3"));
        assert_eq!(get(&pairs, "b"), Some(""));
        assert_eq!(get(&pairs, "c"), Some("%"));
        assert_eq!(get(&pairs, "d"), Some("%4"));
        assert_eq!(get(&pairs, "e"), Some("%zz"));
        assert_eq!(get(&pairs, "f"), Some("é"));
        assert_eq!(get(&pairs, "g"), Some("\u{fffd}"));
        assert!(parse(b"").is_empty());
    }
}
