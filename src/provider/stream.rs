//! Writing a [`ModelStream`] as straight-line async code.

use std::future::Future;

use futures::channel::mpsc;
use futures::{FutureExt, SinkExt, StreamExt};

use super::{ModelError, ModelEvent, ModelStream};

/// Where a producer puts the events of the reply it is streaming.
pub(crate) struct Emitter {
    tx: mpsc::Sender<Result<ModelEvent, ModelError>>,
    emitted: bool,
}

impl Emitter {
    pub async fn emit(&mut self, event: ModelEvent) {
        // A retry announcement is about the call, not part of its reply.
        self.emitted |= !matches!(event, ModelEvent::Retry { .. });
        // The receiver lives in the same stream as the producer, so it can
        // only be gone when the producer is being dropped too.
        let _ = self.tx.send(Ok(event)).await;
    }

    /// Whether any part of the reply reached the consumer yet; decides
    /// whether a failure may still be retried.
    pub fn emitted(&self) -> bool {
        self.emitted
    }
}

/// Runs `producer` as the body of a stream: what it emits is yielded in
/// order, and an `Err` it returns becomes the stream's last item.
///
/// The producer is polled by the stream itself (no spawned task), so dropping
/// the stream abandons the call at once — the worker's way of cancelling.
pub(crate) fn generate<F, Fut>(producer: F) -> ModelStream
where
    F: FnOnce(Emitter) -> Fut,
    Fut: Future<Output = Result<(), ModelError>> + Send + 'static,
{
    let (tx, rx) = mpsc::channel(32);
    let mut last = tx.clone();
    let body = producer(Emitter { tx, emitted: false });
    let driver = async move {
        if let Err(error) = body.await {
            // As in `emit`: the receiver outlives the producer.
            let _ = last.send(Err(error)).await;
        }
    }
    .into_stream()
    .filter_map(|()| async { None });
    futures::stream::select(rx, driver).boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn yields_in_order_then_the_error() {
        let stream = generate(|mut out| async move {
            out.emit(ModelEvent::TextDelta("a".into())).await;
            out.emit(ModelEvent::BlockEnd).await;
            Err(ModelError::new("boom"))
        });
        let items: Vec<_> = stream.collect().await;
        assert_eq!(
            items,
            vec![
                Ok(ModelEvent::TextDelta("a".into())),
                Ok(ModelEvent::BlockEnd),
                Err(ModelError::new("boom"))
            ]
        );
    }
}
