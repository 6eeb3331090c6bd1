//! Entry points for the fuzz targets in `fuzz/` and for `examples/bench`,
//! not an API: a server's reply stream parsed the way a real reply is — cut
//! into lines, read as server-sent events, decoded by the provider's decoder
//! into model events; and a request body written as a provider writes it.

use std::convert::Infallible;

use bytes::Bytes;
use eventsource_stream::Eventsource;
use futures::StreamExt;

use super::http::{Lines, SseDecoder};
use super::ModelEvent;

/// Which provider's wire format the bytes are in.
#[derive(Debug, Clone, Copy)]
pub enum Wire {
    OpenAi,
    Anthropic,
}

/// Decodes a reply arriving as `chunks` (network reads) until the decoder
/// fails, completes or the stream ends; returns the events decoded.
pub fn decode_stream(wire: Wire, chunks: Vec<Vec<u8>>) -> Vec<ModelEvent> {
    match wire {
        Wire::OpenAi => run(super::openai::Decoder::default(), chunks),
        Wire::Anthropic => run(super::anthropic::Decoder::default(), chunks),
    }
}

fn run(mut decoder: impl SseDecoder, chunks: Vec<Vec<u8>>) -> Vec<ModelEvent> {
    let events = Lines::new(futures::stream::iter(
        chunks
            .into_iter()
            .map(|c| Ok::<_, Infallible>(Bytes::from(c))),
    ))
    .eventsource();
    futures::executor::block_on(async move {
        let mut out = Vec::new();
        futures::pin_mut!(events);
        while let Some(Ok(event)) = events.next().await {
            match decoder.decode(&event) {
                Ok(decoded) => out.extend(decoded),
                Err(_) => break,
            }
            if decoder.is_complete() {
                break;
            }
        }
        out
    })
}

/// A few hundred mutations of the fuzz seeds on every test run: what a
/// malformed reply can do is bounded by these (no panic, whatever the
/// bytes and however they are cut); `cargo fuzz` goes further.
/// The request body `wire` sends for `request` (images filled in from the
/// blob store), as the bench measures it.
pub fn write_body(wire: Wire, request: &super::ModelRequest<'_>) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::new();
    match wire {
        Wire::OpenAi => super::openai::write_body("gpt-4o", request, &mut out)?,
        Wire::Anthropic => super::anthropic::write_body_for_bench("claude", request, &mut out)?,
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn seeds(wire: &str) -> Vec<Vec<u8>> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz/seeds")
            .join(wire);
        let mut seeds: Vec<Vec<u8>> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| std::fs::read(entry.unwrap().path()).unwrap())
            .collect();
        seeds.sort();
        seeds
    }

    /// A seed with bytes overwritten, cut short or spliced into.
    fn mutated(wire: &'static str) -> impl Strategy<Value = (Vec<u8>, usize)> {
        let seeds = seeds(wire);
        (
            0..seeds.len(),
            prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
            any::<prop::sample::Index>(),
            1usize..64,
        )
            .prop_map(move |(seed, flips, cut, read)| {
                let mut bytes = seeds[seed].clone();
                for (at, byte) in flips {
                    if !bytes.is_empty() {
                        let at = at.index(bytes.len());
                        bytes[at] = byte;
                    }
                }
                if !bytes.is_empty() {
                    let keep = cut.index(bytes.len()) + 1;
                    if keep % 3 == 0 {
                        bytes.truncate(keep);
                    }
                }
                (bytes, read)
            })
    }

    fn chunks(bytes: &[u8], read: usize) -> Vec<Vec<u8>> {
        bytes.chunks(read).map(<[u8]>::to_vec).collect()
    }

    proptest! {
        #[test]
        fn openai_replies_never_panic((bytes, read) in mutated("sse_openai")) {
            decode_stream(Wire::OpenAi, chunks(&bytes, read));
        }

        #[test]
        fn anthropic_replies_never_panic((bytes, read) in mutated("sse_anthropic")) {
            decode_stream(Wire::Anthropic, chunks(&bytes, read));
        }
    }
}
