//! An Anthropic reply stream as the server sends it, cut into network reads,
//! parsed as server-sent events and decoded into model events.
//!
//! Input: one byte choosing the read size, then the body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pod::provider::fuzzing::{decode_stream, Wire};

fuzz_target!(|data: &[u8]| {
    let Some((&read, body)) = data.split_first() else {
        return;
    };
    let read = usize::from(read % 128) + 1;
    let chunks = body.chunks(read).map(<[u8]>::to_vec).collect();
    decode_stream(Wire::Anthropic, chunks);
});
