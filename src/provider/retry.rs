//! When to try a model call again: the one retry policy every provider that
//! talks to a server (or pretends to, like `script`) goes through.

use std::time::Duration;

use super::ModelError;

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

    fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        let backoff = self
            .base_delay
            .saturating_mul(2u32.saturating_pow(retry.min(16)));
        retry_after.unwrap_or(backoff).min(self.max_delay)
    }
}

/// One failed attempt of a model call, before any token reached the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AttemptError {
    pub error: ModelError,
    /// Whether another attempt may succeed (rate limit, overload, network).
    pub retryable: bool,
    /// How long the server asked us to wait.
    pub retry_after: Option<Duration>,
}

impl AttemptError {
    pub fn fatal(message: impl Into<String>) -> Self {
        Self {
            error: ModelError::new(message),
            retryable: false,
            retry_after: None,
        }
    }

    pub fn retryable(message: impl Into<String>) -> Self {
        Self {
            retryable: true,
            ..Self::fatal(message)
        }
    }
}

/// Counts the retries of one model call.
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

    /// Waits and returns `Ok` when the failed attempt should be retried;
    /// otherwise returns the error that ends the call.
    pub async fn after_failure(&mut self, failure: AttemptError) -> Result<(), ModelError> {
        if !failure.retryable {
            return Err(failure.error);
        }
        if self.retries >= self.policy.max_retries {
            return Err(ModelError::new(format!(
                "{} (gave up after {} retries)",
                failure.error.message, self.retries
            )));
        }
        tokio::time::sleep(self.policy.delay(self.retries, failure.retry_after)).await;
        self.retries += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped() {
        let policy = RetryPolicy::default();
        assert_eq!(policy.delay(0, None), Duration::from_millis(500));
        assert_eq!(policy.delay(2, None), Duration::from_secs(2));
        assert_eq!(policy.delay(40, None), Duration::from_secs(60));
        assert_eq!(policy.delay(3, Some(Duration::ZERO)), Duration::ZERO);
        assert_eq!(
            policy.delay(0, Some(Duration::from_secs(7200))),
            Duration::from_secs(60)
        );
    }

    #[tokio::test]
    async fn gives_up_after_max_retries_and_says_so() {
        let policy = RetryPolicy {
            max_retries: 2,
            ..RetryPolicy::fast()
        };
        let mut retrier = Retrier::new(&policy);
        let busy = || AttemptError::retryable("x: HTTP 429");
        assert!(retrier.after_failure(busy()).await.is_ok());
        assert!(retrier.after_failure(busy()).await.is_ok());
        let err = retrier.after_failure(busy()).await.unwrap_err();
        assert_eq!(err.message, "x: HTTP 429 (gave up after 2 retries)");
        let err = Retrier::new(&policy)
            .after_failure(AttemptError::fatal("bad"))
            .await
            .unwrap_err();
        assert_eq!(err.message, "bad");
    }
}
