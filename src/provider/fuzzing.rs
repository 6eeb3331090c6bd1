//! Entry points for the fuzz targets in `fuzz/`, not an API: a server's
//! reply stream parsed the way a real reply is — cut into lines, read as
//! server-sent events, decoded by the provider's decoder into model events.

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
    let events = futures::stream::iter(
        chunks
            .into_iter()
            .map(|c| Ok::<_, Infallible>(Bytes::from(c))),
    )
    .flat_map({
        let mut lines = Lines::default();
        move |chunk| futures::stream::iter(lines.split(chunk))
    })
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
