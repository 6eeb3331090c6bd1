//! The bytes a client writes, as the pod reads them: cut into frames by the
//! connection's decoder (reads of any size, then end of input, driven the
//! way `FramedRead` drives it), each frame parsed into a method.
//!
//! Input: one byte choosing the read size, then the stream.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use pod::pod::{FrameDecoder, Inbound};
use pod::protocol::Request;
use tokio_util::codec::Decoder;

/// Small, so that over-long frames are exercised too.
const MAX_FRAME_BYTES: usize = 512;

fn handle(item: Inbound) {
    if let Inbound::Frame(frame) = item {
        assert!(frame.len() <= MAX_FRAME_BYTES + 1, "frame over the limit passed");
        if let Ok(request) = Request::parse(&frame) {
            // What parses must go out and parse back the same.
            let again = Request::parse(request.to_frame().trim_end().as_bytes());
            assert_eq!(again.as_ref(), Ok(&request));
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&read, stream)) = data.split_first() else {
        return;
    };
    let read = usize::from(read % 64) + 1;
    let mut decoder = FrameDecoder::new(MAX_FRAME_BYTES);
    let mut buf = BytesMut::new();
    for chunk in stream.chunks(read) {
        buf.extend_from_slice(chunk);
        while let Some(item) = decoder.decode(&mut buf).expect("decode never fails on bytes") {
            handle(item);
        }
    }
    // End of input: `FramedRead` calls `decode_eof` until it yields nothing.
    while let Some(item) = decoder
        .decode_eof(&mut buf)
        .expect("decode_eof never fails on bytes")
    {
        handle(item);
    }
});
