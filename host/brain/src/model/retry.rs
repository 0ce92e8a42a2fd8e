//! Retrying a model call: exponential backoff with jitter, honouring the
//! provider's `Retry-After`.
//!
//! The wrapper keeps no state beyond one call and writes nothing: each
//! failure is handed to the caller's `on_failure` hook, which is where the
//! loop appends its `ModelFailed` event, so the log shows every attempt and
//! how long we chose to wait.

use std::future::Future;
use std::time::{Duration, Instant};

use super::error::ModelError;
use super::model_provider::ModelProvider;
use super::types::{ModelRequest, ModelResponse};

/// How hard to retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included. Default 5; 1 means no retry.
    pub max_attempts: u32,
    /// Backoff before the second attempt; doubled for each one after.
    /// Default 1 s.
    pub base_delay: Duration,
    /// Cap on the backoff (before jitter). Default 60 s.
    pub max_delay: Duration,
    /// Cap on a wait the provider asked for with `Retry-After`: a server
    /// asking for an hour should not park a session for an hour silently.
    /// Default 10 min.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(60),
            max_retry_after: Duration::from_secs(600),
        }
    }
}

impl RetryPolicy {
    /// The wait after failed attempt number `attempt` (1-based).
    ///
    /// With a `retry_after`, that (capped by `max_retry_after`) plus up to
    /// 10 % jitter, never less: the server knows its own window. Otherwise
    /// "equal jitter": half the exponential backoff plus a random part of
    /// the other half, so sessions that failed together do not retry in
    /// lockstep.
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(after) = retry_after {
            let after = after.min(self.max_retry_after);
            return after + jitter(after / 10);
        }
        let exp = 2u32.saturating_pow(attempt.saturating_sub(1));
        let backoff = self.base_delay.saturating_mul(exp).min(self.max_delay);
        backoff / 2 + jitter(backoff / 2)
    }
}

/// Counts the failures of one request to decide whether to try again.
#[derive(Debug, Clone, Copy, Default)]
pub struct Attempts {
    tries: u32,
    bad_responses: u32,
}

impl Attempts {
    /// Attempts failed so far.
    pub fn tries(&self) -> u32 {
        self.tries
    }

    /// Count a failed attempt; the wait before the next one, or `None` to
    /// give up: the error cannot be helped by retrying, `max_attempts` are
    /// spent, or this is the second garbled answer ([`ModelError::BadResponse`]
    /// is retried once only: a server that garbles two answers in a row will
    /// likely keep doing so).
    pub fn failed(&mut self, policy: &RetryPolicy, err: &ModelError) -> Option<Duration> {
        self.tries += 1;
        if matches!(err, ModelError::BadResponse(_)) {
            self.bad_responses += 1;
        }
        let give_up =
            !err.retryable() || self.tries >= policy.max_attempts || self.bad_responses > 1;
        (!give_up).then(|| policy.delay(self.tries, err.retry_after()))
    }
}

/// A uniformly random duration in `[0, max]`.
fn jitter(max: Duration) -> Duration {
    let nanos = u64::try_from(max.as_nanos()).unwrap_or(u64::MAX);
    if nanos == 0 {
        return Duration::ZERO;
    }
    // Jitter needs no strong randomness, but getrandom is already here; if
    // the OS source fails, no jitter is still a correct backoff.
    let r = getrandom::u64().unwrap_or(0);
    Duration::from_nanos(r % nanos.saturating_add(1))
}

/// What a caller of [`retrying`] does around the attempts: the loop writes
/// every failure to its log before it waits, and gives up waiting (or
/// waiting for an answer) when the operator pauses or cancels.
pub trait RetryCaller: Send {
    /// Why the caller stopped the retries itself (its hook failed).
    type Error: Send;

    /// Run `work` (one attempt, or one wait between attempts); `None`
    /// drops it unfinished: the caller was told to stop.
    fn guard<T: Send>(
        &mut self,
        work: impl Future<Output = T> + Send,
    ) -> impl Future<Output = Option<T>> + Send;

    /// Attempt number `attempt` (1-based, this call's) failed with `err`;
    /// `wait` is the delay before the next one, or `None` when `err` is the
    /// one returned. An `Err` ends the retries with it.
    fn failed(
        &mut self,
        attempt: u32,
        err: &ModelError,
        wait: Option<Duration>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// How [`retrying`] ended.
#[derive(Debug)]
pub enum Retried<E> {
    /// An answer, and how long its attempt took.
    Answered(ModelResponse, Duration),
    /// [`Attempts::failed`] gave up: the last error.
    GaveUp(ModelError),
    /// The caller's [`RetryCaller::guard`] dropped an attempt or a wait.
    Stopped,
    /// The caller's [`RetryCaller::failed`] returned an error.
    Caller(E),
}

/// Calls `provider.complete(req)` until it succeeds or [`Attempts::failed`]
/// gives up, each attempt and each wait under `caller.guard`, each failure
/// told to `caller.failed` before the wait. The one retry loop: the agent
/// loop's model turn and [`complete_with_retry`] both run it.
pub async fn retrying<P, C>(
    provider: &P,
    req: &ModelRequest,
    policy: &RetryPolicy,
    caller: &mut C,
) -> Retried<C::Error>
where
    P: ModelProvider + ?Sized,
    C: RetryCaller,
{
    let mut attempts = Attempts::default();
    loop {
        let started = Instant::now();
        let err = match caller.guard(provider.complete(req)).await {
            None => return Retried::Stopped,
            Some(Ok(r)) => return Retried::Answered(r, started.elapsed()),
            Some(Err(e)) => e,
        };
        let next = attempts.failed(policy, &err);
        let attempt = attempts.tries();
        if let Err(e) = caller.failed(attempt, &err, next).await {
            return Retried::Caller(e);
        }
        let Some(wait) = next else {
            return Retried::GaveUp(err);
        };
        tracing::debug!(
            provider = provider.name(),
            attempt,
            error = %err,
            wait_ms = wait.as_millis() as u64,
            "model call failed; retrying"
        );
        if caller.guard(tokio::time::sleep(wait)).await.is_none() {
            return Retried::Stopped;
        }
    }
}

/// Calls `provider.complete(req)` until it succeeds or [`Attempts::failed`]
/// gives up; then returns the last error. [`retrying`] with a caller that
/// never stops.
///
/// `on_failure(attempt, error, next_delay)` is called for every failed
/// attempt (1-based), with the wait before the next one, or `None` when
/// this error is the one returned.
pub async fn complete_with_retry<P: ModelProvider + ?Sized>(
    provider: &P,
    req: &ModelRequest,
    policy: &RetryPolicy,
    on_failure: impl FnMut(u32, &ModelError, Option<Duration>) + Send,
) -> Result<ModelResponse, ModelError> {
    /// A caller that only reports failures.
    struct Reporting<F>(F);
    impl<F: FnMut(u32, &ModelError, Option<Duration>) + Send> RetryCaller for Reporting<F> {
        type Error = std::convert::Infallible;
        async fn guard<T: Send>(&mut self, work: impl Future<Output = T> + Send) -> Option<T> {
            Some(work.await)
        }
        async fn failed(
            &mut self,
            attempt: u32,
            err: &ModelError,
            wait: Option<Duration>,
        ) -> Result<(), Self::Error> {
            (self.0)(attempt, err, wait);
            Ok(())
        }
    }
    match retrying(provider, req, policy, &mut Reporting(on_failure)).await {
        Retried::Answered(r, _) => Ok(r),
        Retried::GaveUp(e) => Err(e),
        // `Reporting::guard` always finishes the work.
        Retried::Stopped => unreachable!("Reporting never stops"),
        Retried::Caller(never) => match never {},
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::model::error::Clock;
    use crate::model::types::{StopReason, Usage};

    /// Fails with the scripted errors, then answers.
    struct Scripted(Mutex<Vec<ModelError>>);

    #[async_trait::async_trait]
    impl ModelProvider for Scripted {
        fn name(&self) -> &str {
            "scripted"
        }
        fn model(&self) -> &str {
            "scripted"
        }
        async fn complete(&self, _: &ModelRequest) -> Result<ModelResponse, ModelError> {
            let mut errs = self.0.lock().unwrap();
            if errs.is_empty() {
                Ok(ModelResponse {
                    text: Some("ok".into()),
                    tool_calls: vec![],
                    stop_reason: StopReason::EndTurn,
                    usage: Usage::default(),
                    reasoning: vec![],
                })
            } else {
                Err(errs.remove(0))
            }
        }
    }

    fn fast() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(4),
            max_retry_after: Duration::from_millis(50),
        }
    }

    fn req() -> ModelRequest {
        ModelRequest {
            system: String::new(),
            messages: vec![],
            tools: vec![],
            max_tokens: 1,
            temperature: None,
            step: 0,
            agent: String::new(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_after_max_attempts_with_last_error() {
        let p = Scripted(Mutex::new(vec![
            ModelError::Timeout(Clock::Server),
            ModelError::Transport("reset".into()),
            ModelError::Server {
                status: 503,
                body: String::new(),
            },
            ModelError::Timeout(Clock::Server),
        ]));
        let mut seen = Vec::new();
        let e = complete_with_retry(&p, &req(), &fast(), |n, e, d| {
            seen.push((n, e.clone(), d.is_some()))
        })
        .await
        .unwrap_err();
        assert!(matches!(e, ModelError::Server { status: 503, .. }));
        assert_eq!(seen.len(), 3);
        assert_eq!(seen[0].0, 1);
        assert!(seen[0].2 && seen[1].2 && !seen[2].2);
    }

    #[tokio::test(start_paused = true)]
    async fn bad_response_is_retried_once() {
        let p = Scripted(Mutex::new(vec![
            ModelError::BadResponse("a".into()),
            ModelError::BadResponse("b".into()),
        ]));
        let mut n = 0;
        let e = complete_with_retry(
            &p,
            &req(),
            &RetryPolicy {
                max_attempts: 9,
                ..fast()
            },
            |_, _, _| n += 1,
        )
        .await
        .unwrap_err();
        assert_eq!(e, ModelError::BadResponse("b".into()));
        assert_eq!(n, 2);

        let p = Scripted(Mutex::new(vec![ModelError::BadResponse("a".into())]));
        assert!(
            complete_with_retry(&p, &req(), &fast(), |_, _, _| {})
                .await
                .is_ok()
        );
    }

    #[tokio::test]
    async fn not_retryable_stops_at_once() {
        let p = Scripted(Mutex::new(vec![ModelError::Diverged {
            turn: 0,
            expected_excerpt: "a".into(),
            got_excerpt: "b".into(),
        }]));
        let mut n = 0;
        let e = complete_with_retry(&p, &req(), &fast(), |_, _, _| n += 1).await;
        assert!(matches!(e, Err(ModelError::Diverged { .. })));
        assert_eq!(n, 1);
    }

    /// On tokio's paused clock the waits are exact and take no wall time:
    /// the clock jumps to each sleep's end.
    #[tokio::test(start_paused = true)]
    async fn waits_what_retry_after_says_then_backs_off() {
        let p = Scripted(Mutex::new(vec![
            ModelError::RateLimited {
                retry_after: Some(Duration::from_secs(7)),
            },
            ModelError::Server {
                status: 500,
                body: String::new(),
            },
        ]));
        let policy = RetryPolicy {
            base_delay: Duration::from_secs(2),
            ..RetryPolicy::default()
        };
        let mut waits = Vec::new();
        let t0 = tokio::time::Instant::now();
        let r = complete_with_retry(&p, &req(), &policy, |_, _, d| waits.push(d.unwrap()))
            .await
            .unwrap();
        assert_eq!(r.text.as_deref(), Some("ok"));
        // Retry-After 7 s plus up to 10 % jitter; then backoff after the
        // second failure: 2 s doubled, half of it fixed, half jitter.
        assert!(waits[0] >= Duration::from_secs(7) && waits[0] <= Duration::from_millis(7700));
        assert!(waits[1] >= Duration::from_secs(2) && waits[1] <= Duration::from_secs(4));
        // The paused clock sleeps in whole milliseconds.
        let slept = t0.elapsed();
        let asked = waits[0] + waits[1];
        assert!(
            slept >= asked && slept <= asked + Duration::from_millis(2),
            "{slept:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_huge_retry_after_is_capped() {
        let p = Scripted(Mutex::new(vec![ModelError::RateLimited {
            retry_after: Some(Duration::from_secs(86_400)),
        }]));
        let t0 = tokio::time::Instant::now();
        complete_with_retry(&p, &req(), &RetryPolicy::default(), |_, _, _| {})
            .await
            .unwrap();
        let waited = t0.elapsed();
        assert!(waited >= Duration::from_secs(600) && waited <= Duration::from_secs(660));
    }

    #[tokio::test(start_paused = true)]
    async fn an_auth_failure_is_final_at_once() {
        let p = Scripted(Mutex::new(vec![ModelError::Auth {
            status: 401,
            body: "bad key".into(),
        }]));
        let mut calls = Vec::new();
        let t0 = tokio::time::Instant::now();
        let e = complete_with_retry(&p, &req(), &RetryPolicy::default(), |n, e, d| {
            calls.push((n, e.kind(), d))
        })
        .await
        .unwrap_err();
        assert_eq!(e.kind(), crate::model::error::ErrorKind::Auth);
        assert_eq!(calls, vec![(1, crate::model::error::ErrorKind::Auth, None)]);
        assert_eq!(t0.elapsed(), Duration::ZERO);
    }

    #[test]
    fn delays() {
        let p = RetryPolicy::default();
        for attempt in 1..=10 {
            let d = p.delay(attempt, None);
            let full = p
                .base_delay
                .saturating_mul(2u32.pow(attempt - 1))
                .min(p.max_delay);
            assert!(d >= full / 2 && d <= full, "{attempt}: {d:?}");
        }
        let d = p.delay(1, Some(Duration::from_secs(3)));
        assert!(d >= Duration::from_secs(3) && d <= Duration::from_millis(3300));
        let d = p.delay(1, Some(Duration::from_secs(7200)));
        assert!(d >= p.max_retry_after && d <= p.max_retry_after + p.max_retry_after / 10);
        assert_eq!(p.delay(1, Some(Duration::ZERO)), Duration::ZERO);
        // No overflow far out.
        assert!(p.delay(u32::MAX, None) <= p.max_delay);
    }

    /// A caller like the agent loop's: it records each failure (as the loop
    /// writes `ModelFailed`), stops at its `stop_at`-th guarded step (an
    /// operator's pause), and its hook fails at `fail_at`.
    struct Loop {
        failures: Vec<(u32, bool)>,
        guarded: u32,
        stop_at: Option<u32>,
        fail_at: Option<u32>,
    }

    impl RetryCaller for Loop {
        type Error = String;
        async fn guard<T: Send>(&mut self, work: impl Future<Output = T> + Send) -> Option<T> {
            self.guarded += 1;
            if self.stop_at == Some(self.guarded) {
                return None;
            }
            Some(work.await)
        }
        async fn failed(
            &mut self,
            attempt: u32,
            _: &ModelError,
            wait: Option<Duration>,
        ) -> Result<(), String> {
            self.failures.push((attempt, wait.is_some()));
            match self.fail_at {
                Some(n) if n == attempt => Err(format!("log write {attempt} failed")),
                _ => Ok(()),
            }
        }
    }

    fn looping(stop_at: Option<u32>, fail_at: Option<u32>) -> Loop {
        Loop {
            failures: Vec::new(),
            guarded: 0,
            stop_at,
            fail_at,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn retrying_tells_every_failure_and_stops_when_the_caller_does() {
        let flaky = || {
            Scripted(Mutex::new(vec![
                ModelError::Timeout(Clock::Server),
                ModelError::Timeout(Clock::Server),
            ]))
        };
        // Answered after two failures, each told before its wait.
        let mut caller = looping(None, None);
        let end = retrying(&flaky(), &req(), &fast(), &mut caller).await;
        assert!(matches!(end, Retried::Answered(ref r, _) if r.text.as_deref() == Some("ok")));
        assert_eq!(caller.failures, [(1, true), (2, true)]);
        // Attempt, wait, attempt, wait: stopped during the second wait,
        // after telling the second failure; no third attempt.
        let mut caller = looping(Some(4), None);
        let end = retrying(&flaky(), &req(), &fast(), &mut caller).await;
        assert!(matches!(end, Retried::Stopped), "{end:?}");
        assert_eq!(caller.failures, [(1, true), (2, true)]);
        // Stopped during the first attempt: nothing told.
        let mut caller = looping(Some(1), None);
        let end = retrying(&flaky(), &req(), &fast(), &mut caller).await;
        assert!(matches!(end, Retried::Stopped), "{end:?}");
        assert!(caller.failures.is_empty());
        // A hook that fails ends the retries with its error.
        let mut caller = looping(None, Some(1));
        let end = retrying(&flaky(), &req(), &fast(), &mut caller).await;
        assert!(
            matches!(end, Retried::Caller(ref e) if e == "log write 1 failed"),
            "{end:?}"
        );
        // Giving up is told with no wait, then the last error returned.
        let p = Scripted(Mutex::new(vec![ModelError::Auth {
            status: 401,
            body: String::new(),
        }]));
        let mut caller = looping(None, None);
        let end = retrying(&p, &req(), &fast(), &mut caller).await;
        assert!(
            matches!(end, Retried::GaveUp(ModelError::Auth { .. })),
            "{end:?}"
        );
        assert_eq!(caller.failures, [(1, false)]);
    }
}
