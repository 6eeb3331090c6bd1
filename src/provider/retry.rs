//! When to try a model call again: the one retry policy every provider that
//! talks to a server (or pretends to, like `script`) goes through.

use std::time::Duration;

use super::stream::Emitter;
use super::{ModelError, ModelEvent};
use crate::protocol::TurnErrorCode;

/// How hard to try before giving up on a model call.
///
/// Retries happen only before the first token of a reply: once the user has
/// seen part of an answer, a silent second attempt would repeat or contradict
/// it, so a later failure ends the turn instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts after the first one.
    pub max_retries: u32,
    /// Wait before the first retry; doubled for each further one.
    pub base_delay: Duration,
    /// Cap on any single wait, including one a server asked for with
    /// `retry-after`, so a misbehaving server cannot park a turn for hours.
    pub max_delay: Duration,
    pub connect_timeout: Duration,
    /// Longest silence tolerated while waiting for the response headers and
    /// between two events of a stream. Generous because local servers such as
    /// Ollama send no headers until they have loaded the model.
    pub idle_timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
        }
    }
}

impl RetryPolicy {
    /// Same number of retries, waits of milliseconds: for tests that exercise
    /// retries without slowing the suite down.
    pub fn fast() -> Self {
        Self {
            max_retries: 4,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(20),
            connect_timeout: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(5),
        }
    }

    /// The wait before retry number `retry` (0 for the first): what the
    /// server asked for, else the doubled backoff with jitter, capped.
    fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        let wait = match retry_after {
            Some(asked) => asked,
            None => jittered(self.backoff(retry), random_fraction()),
        };
        wait.min(self.max_delay)
    }

    fn backoff(&self, retry: u32) -> Duration {
        self.base_delay
            .saturating_mul(2u32.saturating_pow(retry.min(16)))
    }
}

/// `backoff` spread over its upper half by `fraction` (0.0 ..= 1.0).
///
/// Several pods — a parent and its children — often share one API key: a
/// rate limit fails their calls at the same moment, and with the same fixed
/// backoff they would all retry at the same moment too and be refused
/// again, together. Half of the wait stays, so a retry never comes sooner
/// than half the backoff; the other half is random, so they drift apart.
fn jittered(backoff: Duration, fraction: f64) -> Duration {
    let half = backoff / 2;
    half + half.mul_f64(fraction.clamp(0.0, 1.0))
}

/// A random number in 0.0 ..= 1.0 from the OS; 1.0 (no jitter, the full
/// backoff) in the unlikely case the OS has none to give.
fn random_fraction() -> f64 {
    let mut bytes = [0u8; 4];
    match getrandom::fill(&mut bytes) {
        Ok(()) => f64::from(u32::from_le_bytes(bytes)) / f64::from(u32::MAX),
        Err(_) => 1.0,
    }
}

/// One failed attempt of a model call, before any token reached the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AttemptError {
    /// What the user is told, with the kind of failure `turn_end.error` records.
    pub error: ModelError,
    /// Whether another attempt may succeed (rate limit, overload, network).
    pub retryable: bool,
    /// How long the server asked us to wait.
    pub retry_after: Option<Duration>,
    /// A failure that is worth one more try but no more, however many the
    /// policy allows: a server that answers an empty stream twice will do
    /// so every time (see `http::EMPTY_REPLY`).
    pub once: bool,
}

impl AttemptError {
    /// A failure no retry can fix, of the given kind.
    pub fn fatal_with(code: TurnErrorCode, message: impl Into<String>) -> Self {
        Self {
            error: ModelError::with_code(code, message),
            retryable: false,
            retry_after: None,
            once: false,
        }
    }

    /// A reply that was malformed or reported its own failure: final.
    pub fn fatal(message: impl Into<String>) -> Self {
        Self::fatal_with(TurnErrorCode::ProviderStream, message)
    }

    /// A failure that another attempt may not meet, of the given kind.
    pub fn retryable_with(code: TurnErrorCode, message: impl Into<String>) -> Self {
        Self {
            retryable: true,
            ..Self::fatal_with(code, message)
        }
    }

    /// A stream that broke off or reported a passing overload.
    pub fn retryable(message: impl Into<String>) -> Self {
        Self::retryable_with(TurnErrorCode::ProviderStream, message)
    }
}

/// Counts the retries of one model call and announces each one.
///
/// A value rather than a higher-order `retry(|| ...)` function because the
/// attempts stream into an emitter they borrow mutably, which a closure
/// returning a future cannot express.
pub(crate) struct Retrier<'a> {
    policy: &'a RetryPolicy,
    retries: u32,
}

impl<'a> Retrier<'a> {
    pub fn new(policy: &'a RetryPolicy) -> Self {
        Self { policy, retries: 0 }
    }

    /// Decides what follows a failed attempt. `Ok` means: try again — the
    /// retry was announced on `out` as [`ModelEvent::Retry`] and its delay
    /// has passed. `Err` is the error that ends the call.
    ///
    /// A call is retried only while nothing of it has reached the consumer
    /// (`out.emitted()` is false): once part of a reply was streamed, a
    /// second attempt would repeat or contradict it, so the failure ends the
    /// turn instead. Retry announcements themselves do not count as streamed.
    pub async fn after_failure(
        &mut self,
        failure: AttemptError,
        out: &mut Emitter,
    ) -> Result<(), ModelError> {
        if !failure.retryable || out.emitted() {
            return Err(failure.error);
        }
        if self.retries >= self.policy.max_retries || (failure.once && self.retries >= 1) {
            return Err(ModelError::with_code(
                failure.error.code,
                format!(
                    "{} (gave up after {} retries)",
                    failure.error.message, self.retries
                ),
            ));
        }
        let delay = self.policy.delay(self.retries, failure.retry_after);
        self.retries += 1;
        out.emit(ModelEvent::Retry {
            attempt: self.retries,
            max_attempts: self.policy.max_retries,
            delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            error: failure.error.message,
        })
        .await;
        tokio::time::sleep(delay).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped() {
        let policy = RetryPolicy::default();
        assert_eq!(policy.backoff(0), Duration::from_millis(500));
        assert_eq!(policy.backoff(2), Duration::from_secs(2));
        assert_eq!(policy.delay(40, None), Duration::from_secs(60));
        assert_eq!(policy.delay(3, Some(Duration::ZERO)), Duration::ZERO);
        assert_eq!(
            policy.delay(0, Some(Duration::from_secs(7200))),
            Duration::from_secs(60)
        );
    }

    proptest::proptest! {
        /// A jittered wait is never under half the backoff nor over it.
        #[test]
        fn jitter_stays_in_the_upper_half(ms in 0u64..1_000_000, fraction in -1.0f64..2.0) {
            let backoff = Duration::from_millis(ms);
            let wait = jittered(backoff, fraction);
            proptest::prop_assert!(wait >= backoff / 2 && wait <= backoff);
        }
    }

    /// Pods that fail together do not retry together: of many draws of the
    /// same retry's wait, not all are equal.
    #[test]
    fn waits_of_one_retry_differ() {
        let policy = RetryPolicy::default();
        let waits: std::collections::BTreeSet<Duration> =
            (0..16).map(|_| policy.delay(3, None)).collect();
        assert!(waits.len() > 1, "{waits:?}");
        assert!(waits
            .iter()
            .all(|w| *w >= Duration::from_secs(2) && *w <= Duration::from_secs(4)));
    }

    /// Runs `failures` through one retrier, as one call's attempts would.
    async fn run(
        policy: &RetryPolicy,
        failures: Vec<AttemptError>,
    ) -> (Vec<ModelEvent>, Option<ModelError>) {
        let stream = super::super::stream::generate(|mut out| {
            let policy = policy.clone();
            async move {
                let mut retrier = Retrier::new(&policy);
                for failure in failures {
                    retrier.after_failure(failure, &mut out).await?;
                }
                Ok(())
            }
        });
        let items: Vec<_> = futures::StreamExt::collect(stream).await;
        let mut events = Vec::new();
        let mut error = None;
        for item in items {
            match item {
                Ok(event) => events.push(event),
                Err(e) => error = Some(e),
            }
        }
        (events, error)
    }

    #[tokio::test]
    async fn announces_each_retry_then_gives_up_keeping_the_code() {
        let policy = RetryPolicy {
            max_retries: 2,
            ..RetryPolicy::fast()
        };
        let busy = || AttemptError::retryable_with(TurnErrorCode::ProviderHttp, "x: HTTP 429");
        let (events, error) = run(&policy, vec![busy(), busy(), busy()]).await;
        // Each wait is its backoff (1 ms, then 2 ms) with jitter: between
        // half of it and all of it.
        let expected = [(1, 0..=1), (2, 1..=2)];
        assert_eq!(events.len(), expected.len(), "{events:?}");
        for (event, (attempt, delays)) in events.iter().zip(expected) {
            let ModelEvent::Retry {
                attempt: a,
                max_attempts: 2,
                delay_ms,
                error,
            } = event
            else {
                panic!("not a retry of 2: {event:?}");
            };
            assert_eq!((*a, error.as_str()), (attempt, "x: HTTP 429"));
            assert!(delays.contains(delay_ms), "{delay_ms} ms for retry {a}");
        }
        let error = error.unwrap();
        assert_eq!(error.message, "x: HTTP 429 (gave up after 2 retries)");
        assert_eq!(error.code, TurnErrorCode::ProviderHttp);

        let (events, error) = run(&policy, vec![AttemptError::fatal("bad")]).await;
        assert!(events.is_empty());
        assert_eq!(error, Some(ModelError::new("bad")));
    }

    #[tokio::test]
    async fn nothing_is_retried_once_part_of_the_reply_went_out() {
        let policy = RetryPolicy::fast();
        let stream = super::super::stream::generate(|mut out| async move {
            out.emit(ModelEvent::TextDelta("Hel".into())).await;
            Retrier::new(&policy)
                .after_failure(AttemptError::retryable("cut"), &mut out)
                .await
        });
        let items: Vec<_> = futures::StreamExt::collect(stream).await;
        assert_eq!(
            items,
            vec![
                Ok(ModelEvent::TextDelta("Hel".into())),
                Err(ModelError::new("cut"))
            ]
        );
    }
}
