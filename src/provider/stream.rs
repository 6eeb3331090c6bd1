//! Writing a [`ModelStream`] as straight-line async code.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use futures::Stream;

use super::{ModelError, ModelEvent, ModelStream};

type Item = Result<ModelEvent, ModelError>;

/// The one item on its way from the producer to the stream that polls it.
type Slot = Arc<Mutex<Option<Item>>>;

fn take(slot: &Slot) -> Option<Item> {
    slot.lock().unwrap_or_else(PoisonError::into_inner).take()
}

/// Where a producer puts the events of the reply it is streaming.
pub(crate) struct Emitter {
    slot: Slot,
    emitted: bool,
}

impl Emitter {
    /// Hands `event` to the consumer, resuming once it asks for the next.
    pub async fn emit(&mut self, event: ModelEvent) {
        // A retry announcement is about the call, not part of its reply.
        self.emitted |= !matches!(event, ModelEvent::Retry { .. });
        *self.slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(Ok(event));
        // Suspends once, without asking to be woken: the stream polling this
        // producer finds the event in the slot and yields it at once, and
        // whoever receives it polls the stream — and so this — again.
        let mut handed_over = false;
        std::future::poll_fn(|_| {
            if handed_over {
                Poll::Ready(())
            } else {
                handed_over = true;
                Poll::Pending
            }
        })
        .await
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
/// The producer is polled by the stream itself (no spawned task, no
/// channel), so dropping the stream abandons the call at once — the
/// worker's way of cancelling — and an event costs no wake-up: it is
/// passed through a slot the stream empties in the same poll.
pub(crate) fn generate<F, Fut>(producer: F) -> ModelStream
where
    F: FnOnce(Emitter) -> Fut,
    Fut: Future<Output = Result<(), ModelError>> + Send + 'static,
{
    let slot = Slot::default();
    let body = producer(Emitter {
        slot: Arc::clone(&slot),
        emitted: false,
    });
    Box::pin(Generated {
        producer: Some(Box::pin(body)),
        slot,
    })
}

struct Generated<Fut> {
    /// `None` once the producer has finished.
    producer: Option<Pin<Box<Fut>>>,
    slot: Slot,
}

impl<Fut> Stream for Generated<Fut>
where
    Fut: Future<Output = Result<(), ModelError>>,
{
    type Item = Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        let Some(producer) = self.producer.as_mut() else {
            return Poll::Ready(None);
        };
        let finished = producer.as_mut().poll(cx);
        // An emitting producer is always pending: it resumes on the next
        // poll, once its event has been taken here.
        if let Some(item) = take(&self.slot) {
            return Poll::Ready(Some(item));
        }
        match finished {
            Poll::Pending => Poll::Pending,
            Poll::Ready(result) => {
                self.producer = None;
                Poll::Ready(result.err().map(Err))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

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

    #[tokio::test]
    async fn waits_for_the_producer_between_events_and_ends_after_success() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let mut stream = generate(|mut out| async move {
            out.emit(ModelEvent::TextDelta("before".into())).await;
            let _ = rx.await;
            out.emit(ModelEvent::TextDelta("after".into())).await;
            Ok(())
        });
        assert_eq!(
            stream.next().await,
            Some(Ok(ModelEvent::TextDelta("before".into())))
        );
        let waiting = futures::poll!(stream.next());
        assert!(
            waiting.is_pending(),
            "nothing to yield until the producer goes on"
        );
        let _ = tx.send(());
        assert_eq!(
            stream.next().await,
            Some(Ok(ModelEvent::TextDelta("after".into())))
        );
        assert_eq!(stream.next().await, None);
        assert_eq!(stream.next().await, None);
    }
}
