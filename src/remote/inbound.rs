//! A client's WebSocket frames (RFC 6455), read as their bytes arrive.
//!
//! A frame's payload is handed on piece by piece, unmasked, as it comes
//! off the connection — never gathered into one buffer — so a frame of any
//! length costs no more memory than one read of the socket. That is what
//! lets the bridge skip a message over `--max-frame-bytes` sent in one
//! frame and keep the connection: a codec that assembles frames (as
//! actix-http's does) can only refuse such a frame by ending the
//! connection, since it cannot find the next frame without reading this
//! one. The header itself is parsed by tungstenite.
//!
//! Only control frames (at most 125 bytes each, by the RFC) are held whole.
//! Everything the RFC forbids a client — an unmasked frame, a reserved bit
//! or opcode (no extension is negotiated), a fragmented or long control
//! frame, a continuation outside a message or a new message inside one —
//! is a [`Violation`], which closes the connection.

use std::io::Cursor;

use bytes::{Buf as _, Bytes, BytesMut};
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Control, Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::FrameHeader;

/// The longest payload of a control frame (RFC 6455, 5.5).
const MAX_CONTROL: u64 = 125;

/// What the client sent, as far as it has arrived.
#[derive(Debug, PartialEq, Eq)]
pub enum Part {
    /// The next bytes of a text message; `last` when the message ends with
    /// them.
    Text {
        bytes: Bytes,
        last: bool,
    },
    /// A binary message ended (its bytes were dropped as they came).
    BinaryEnded,
    Ping(Bytes),
    Pong,
    Close,
}

/// The client broke the protocol; the connection is closed with 1002.
#[derive(Debug, PartialEq, Eq)]
pub struct Violation(pub &'static str);

/// The kind of message a data frame belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Binary,
}

/// The data frame whose payload is being read.
struct InFrame {
    kind: Kind,
    /// Payload bytes still to come.
    remaining: u64,
    mask: [u8; 4],
    /// Payload bytes already unmasked: where in the mask the next one is.
    offset: u64,
    /// The frame ends its message.
    fin: bool,
}

/// Reads frames from the bytes given to [`Reader::extend`].
#[derive(Default)]
pub struct Reader {
    /// Received and not yet read: at most a header, a control frame, or
    /// what one read of the socket brought.
    buffer: BytesMut,
    frame: Option<InFrame>,
    /// Inside a fragmented message: its kind.
    message: Option<Kind>,
}

impl Reader {
    /// Bytes as they came off the connection.
    pub fn extend(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// The next part, `None` until more bytes arrive.
    pub fn next_part(&mut self) -> Result<Option<Part>, Violation> {
        loop {
            if let Some(frame) = &mut self.frame {
                let Some((bytes, ended)) = Self::payload(&mut self.buffer, frame) else {
                    return Ok(None);
                };
                let (kind, last) = (frame.kind, ended && frame.fin);
                if ended {
                    self.frame = None;
                }
                match kind {
                    Kind::Text if last || !bytes.is_empty() => {
                        return Ok(Some(Part::Text { bytes, last }))
                    }
                    Kind::Binary if last => return Ok(Some(Part::BinaryEnded)),
                    // Nothing to hand on: an empty fragment, or a binary
                    // message's bytes, dropped.
                    Kind::Text | Kind::Binary => continue,
                }
            }
            let mut cursor = Cursor::new(&self.buffer[..]);
            let Some((header, length)) = FrameHeader::parse(&mut cursor)
                .map_err(|_| Violation("a frame header that cannot be read"))?
            else {
                return Ok(None);
            };
            let header_len = cursor.position() as usize;
            if header.rsv1 || header.rsv2 || header.rsv3 {
                return Err(Violation("a reserved bit is set (no extension was agreed)"));
            }
            let Some(mask) = header.mask else {
                return Err(Violation("a client's frame must be masked"));
            };
            match header.opcode {
                OpCode::Control(control) => {
                    if !header.is_final || length > MAX_CONTROL {
                        return Err(Violation(
                            "a control frame must be one frame of at most 125 bytes",
                        ));
                    }
                    let whole = header_len + length as usize;
                    if self.buffer.len() < whole {
                        return Ok(None);
                    }
                    self.buffer.advance(header_len);
                    let mut payload = self.buffer.split_to(length as usize);
                    unmask(&mut payload, mask, 0);
                    return match control {
                        Control::Ping => Ok(Some(Part::Ping(payload.freeze()))),
                        Control::Pong => Ok(Some(Part::Pong)),
                        Control::Close => Ok(Some(Part::Close)),
                        Control::Reserved(_) => Err(Violation("a reserved control opcode")),
                    };
                }
                OpCode::Data(data) => {
                    let kind = match (data, self.message) {
                        (Data::Text, None) => Kind::Text,
                        (Data::Binary, None) => Kind::Binary,
                        (Data::Continue, Some(kind)) => kind,
                        (Data::Continue, None) => {
                            return Err(Violation("a continuation frame outside a message"))
                        }
                        (Data::Text | Data::Binary, Some(_)) => {
                            return Err(Violation(
                                "a new message before the last fragment of the one before",
                            ))
                        }
                        (Data::Reserved(_), _) => return Err(Violation("a reserved data opcode")),
                    };
                    self.buffer.advance(header_len);
                    self.message = (!header.is_final).then_some(kind);
                    self.frame = Some(InFrame {
                        kind,
                        remaining: length,
                        mask,
                        offset: 0,
                        fin: header.is_final,
                    });
                }
            }
        }
    }

    /// The frame's payload bytes that have arrived, unmasked, and whether
    /// the frame ended with them; `None` while none have (unless the
    /// payload is empty).
    fn payload(buffer: &mut BytesMut, frame: &mut InFrame) -> Option<(Bytes, bool)> {
        let available = (buffer.len() as u64).min(frame.remaining) as usize;
        if available == 0 && frame.remaining > 0 {
            return None;
        }
        let mut bytes = buffer.split_to(available);
        unmask(&mut bytes, frame.mask, frame.offset);
        frame.offset += available as u64;
        frame.remaining -= available as u64;
        Some((bytes.freeze(), frame.remaining == 0))
    }
}

/// XORs payload bytes that start `offset` bytes into the frame with its
/// mask.
fn unmask(bytes: &mut [u8], mask: [u8; 4], offset: u64) {
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte ^= mask[((offset + i as u64) % 4) as usize];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;

    fn masked(payload: &[u8], opcode: OpCode, fin: bool) -> Vec<u8> {
        let mut frame = match opcode {
            OpCode::Control(_) => Frame::ping(payload.to_vec()),
            OpCode::Data(_) => Frame::message(payload.to_vec(), opcode, fin),
        };
        frame.header_mut().mask = Some([1, 2, 3, 4]);
        let mut out = Vec::new();
        frame.format(&mut out).unwrap();
        out
    }

    /// Every part the reader gives for `wire` fed in pieces of `step`.
    fn read(wire: &[u8], step: usize) -> Result<Vec<Part>, Violation> {
        let mut reader = Reader::default();
        let mut parts = Vec::new();
        for piece in wire.chunks(step.max(1)) {
            reader.extend(piece);
            while let Some(part) = reader.next_part()? {
                parts.push(part);
            }
        }
        Ok(parts)
    }

    /// The text messages in `parts`, joined.
    fn texts(parts: &[Part]) -> Vec<Vec<u8>> {
        let mut messages = Vec::new();
        let mut current = Vec::new();
        for part in parts {
            if let Part::Text { bytes, last } = part {
                current.extend_from_slice(bytes);
                if *last {
                    messages.push(std::mem::take(&mut current));
                }
            }
        }
        messages
    }

    #[test]
    fn a_long_frame_comes_out_as_the_pieces_that_arrive() {
        let payload = vec![b'a'; 100_000];
        let wire = masked(&payload, OpCode::Data(Data::Text), true);
        let mut reader = Reader::default();
        reader.extend(&wire[..1000]);
        let Some(Part::Text { bytes, last }) = reader.next_part().unwrap() else {
            panic!("a piece")
        };
        assert!(!last);
        assert_eq!(bytes.len(), 1000 - 4 - 10, "no more than has arrived");
        assert!(reader.buffer.is_empty(), "nothing held");
    }

    #[test]
    fn what_the_rfc_forbids_a_client_is_a_violation() {
        let unmasked = {
            let mut out = Vec::new();
            Frame::message(b"x".to_vec(), OpCode::Data(Data::Text), true)
                .format(&mut out)
                .unwrap();
            out
        };
        let continuation = masked(b"x", OpCode::Data(Data::Continue), true);
        let long_ping = masked(&[0; 126], OpCode::Control(Control::Ping), true);
        let mut interleaved = masked(b"x", OpCode::Data(Data::Text), false);
        interleaved.extend(masked(b"y", OpCode::Data(Data::Binary), true));
        for wire in [unmasked, continuation, long_ping, interleaved] {
            assert!(read(&wire, 7).is_err());
        }
    }

    proptest! {
        /// However the bytes are cut, messages (fragmented or not, with
        /// control frames between fragments) come out whole and in order.
        #[test]
        fn messages_survive_any_cut(
            messages in proptest::collection::vec(
                (proptest::collection::vec(any::<u8>(), 0..300), 1usize..4, any::<bool>()),
                1..6,
            ),
            step in 1usize..64,
        ) {
            let mut wire = Vec::new();
            let mut expected = Vec::new();
            for (payload, fragments, binary) in &messages {
                let size = payload.len().div_ceil(*fragments).max(1);
                let chunks: Vec<&[u8]> = if payload.is_empty() {
                    vec![&[]]
                } else {
                    payload.chunks(size).collect()
                };
                for (i, chunk) in chunks.iter().enumerate() {
                    let data = match (i, binary) {
                        (0, true) => Data::Binary,
                        (0, false) => Data::Text,
                        _ => Data::Continue,
                    };
                    wire.extend(masked(chunk, OpCode::Data(data), i + 1 == chunks.len()));
                    wire.extend(masked(b"p", OpCode::Control(Control::Ping), true));
                }
                if !binary {
                    expected.push(payload.clone());
                }
            }
            let parts = read(&wire, step).unwrap();
            prop_assert_eq!(texts(&parts), expected);
            let ended = parts.iter().filter(|p| **p == Part::BinaryEnded).count();
            prop_assert_eq!(ended, messages.iter().filter(|m| m.2).count());
        }
    }
}
