//! WebSocket frames as the server puts them on the wire (RFC 6455 §5.2: a server's frames
//! are never masked), encoded once so that the same bytes go to every socket of a room.

use bytes::{BufMut, Bytes, BytesMut};

const FIN: u8 = 0x80;
const TEXT: u8 = 0x1;
const CLOSE: u8 = 0x8;
const PING: u8 = 0x9;

/// A whole frame of `opcode` carrying `payload`.
fn frame(opcode: u8, payload: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(payload.len() + 10);
    put_frame(&mut out, opcode, payload);
    out.freeze()
}

fn put_frame(out: &mut BytesMut, opcode: u8, payload: &[u8]) {
    out.put_u8(FIN | opcode);
    match payload.len() {
        n @ 0..=125 => out.put_u8(n as u8),
        n @ 126..=0xFFFF => {
            out.put_u8(126);
            out.put_u16(n as u16);
        }
        n => {
            out.put_u8(127);
            out.put_u64(n as u64);
        }
    }
    out.put_slice(payload);
}

/// A text frame.
pub fn text(payload: &str) -> Bytes {
    frame(TEXT, payload.as_bytes())
}

/// Text frames, one per payload, back to back: several frames in one write.
pub fn texts<'a>(payloads: impl Iterator<Item = &'a str> + Clone) -> Bytes {
    let size: usize = payloads.clone().map(|p| p.len() + 10).sum();
    let mut out = BytesMut::with_capacity(size);
    for p in payloads {
        put_frame(&mut out, TEXT, p.as_bytes());
    }
    out.freeze()
}

/// A ping with no payload.
pub fn ping() -> Bytes {
    frame(PING, &[])
}

/// A close frame: `code` and a reason (at most 123 bytes, as a control frame's payload is
/// at most 125).
pub fn close(code: u16, reason: &str) -> Bytes {
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let mut payload = Vec::with_capacity(2 + end);
    payload.extend_from_slice(&code.to_be_bytes());
    payload.extend_from_slice(&reason.as_bytes()[..end]);
    frame(CLOSE, &payload)
}

/// A close frame without a code (a normal close).
pub fn close_normal() -> Bytes {
    frame(CLOSE, &[])
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
    use tokio_tungstenite::tungstenite::protocol::{Role, WebSocket};

    /// What a client reads from `bytes`, parsed by tungstenite.
    fn read_as_client(bytes: &[u8]) -> Vec<Message> {
        let mut ws =
            WebSocket::from_raw_socket(std::io::Cursor::new(bytes.to_vec()), Role::Client, None);
        let mut out = Vec::new();
        while let Ok(m) = ws.read() {
            out.push(m);
        }
        out
    }

    #[test]
    fn frames_of_every_length_class_read_back_as_sent() {
        for len in [0, 1, 125, 126, 127, 65_535, 65_536, 200_000] {
            let payload = "x".repeat(len);
            let read = read_as_client(&text(&payload));
            assert_eq!(read, vec![Message::text(payload)], "length {len}");
        }
    }

    #[test]
    fn frames_back_to_back_read_as_separate_messages() {
        let read = read_as_client(&texts(["a", "bc", &"d".repeat(300)].into_iter()));
        let texts: Vec<String> = read
            .iter()
            .map(|m| m.to_text().unwrap().to_string())
            .collect();
        assert_eq!(texts, ["a", "bc", &"d".repeat(300)]);
    }

    #[test]
    fn pings_and_closes_carry_their_code_and_a_bounded_reason() {
        let mut both = ping().to_vec();
        both.extend_from_slice(&close(1008, &"é".repeat(100)));
        let read = read_as_client(&both);
        assert!(matches!(read[0], Message::Ping(ref p) if p.is_empty()));
        let Message::Close(Some(frame)) = &read[1] else {
            panic!("{read:?}")
        };
        assert_eq!(frame.code, CloseCode::Policy);
        assert_eq!(frame.reason.len(), 122, "cut at a character boundary");
        assert_eq!(read_as_client(&close_normal()), vec![Message::Close(None)]);
    }
}
