//! Rate limits a worker shares across its sessions: requests per minute and
//! tokens per minute, per provider.
//!
//! A [`RateLimit`] is two token buckets refilled continuously (a minute's
//! allowance over a minute, never more than a minute's worth banked). A
//! request waits until one request and its estimated tokens — the request's
//! size over four — are available; once answered, the estimate is replaced
//! by the usage the provider reported, so a bucket runs on what was billed.
//! Wrapping every session's provider of one kind with the same limit
//! ([`RateLimited`]) makes them queue together, which is what a provider's
//! account-wide limit needs.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use super::error::ModelError;
use super::model_provider::ModelProvider;
use super::types::{ModelRequest, ModelResponse};

/// A limit: requests and tokens per minute (either may be absent).
#[derive(Debug)]
pub struct RateLimit {
    rpm: Option<u32>,
    tpm: Option<u64>,
    state: Mutex<Buckets>,
}

#[derive(Debug)]
struct Buckets {
    requests: f64,
    tokens: f64,
    last: Instant,
}

impl RateLimit {
    /// A limit of `rpm` requests and `tpm` tokens per minute, full at first.
    pub fn new(rpm: Option<u32>, tpm: Option<u64>) -> Arc<Self> {
        Arc::new(Self {
            rpm,
            tpm,
            state: Mutex::new(Buckets {
                requests: f64::from(rpm.unwrap_or(0)),
                tokens: tpm.unwrap_or(0) as f64,
                last: Instant::now(),
            }),
        })
    }

    /// Parse `RPM[:TPM]`, e.g. `60` or `60:200000` or `:200000`.
    pub fn parse(text: &str) -> Result<Arc<Self>, String> {
        let (rpm, tpm) = text.split_once(':').unwrap_or((text, ""));
        let number = |s: &str, what: &str| -> Result<Option<u64>, String> {
            if s.is_empty() {
                return Ok(None);
            }
            match s.parse::<u64>() {
                Ok(0) | Err(_) => Err(format!("{what} `{s}` is not a whole number above 0")),
                Ok(n) => Ok(Some(n)),
            }
        };
        let rpm = number(rpm, "requests per minute")?.map(|n| u32::try_from(n).unwrap_or(u32::MAX));
        let tpm = number(tpm, "tokens per minute")?;
        if rpm.is_none() && tpm.is_none() {
            return Err("give RPM, :TPM or RPM:TPM".to_owned());
        }
        Ok(Self::new(rpm, tpm))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Buckets> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn refill(&self, b: &mut Buckets, now: Instant) {
        let minutes = now.duration_since(b.last).as_secs_f64() / 60.0;
        b.last = now;
        if let Some(rpm) = self.rpm {
            b.requests = (b.requests + minutes * f64::from(rpm)).min(f64::from(rpm));
        }
        if let Some(tpm) = self.tpm {
            b.tokens = (b.tokens + minutes * tpm as f64).min(tpm as f64);
        }
    }

    /// Wait for one request and `tokens` (capped at a minute's worth, so a
    /// request larger than the limit still goes, alone).
    pub async fn acquire(&self, tokens: u64) {
        loop {
            let wait = {
                let mut b = self.lock();
                self.refill(&mut b, Instant::now());
                let want_tokens = self.tpm.map_or(0.0, |tpm| tokens.min(tpm) as f64);
                let need_requests = self.rpm.map_or(0.0, |_| (1.0 - b.requests).max(0.0));
                let need_tokens = self.tpm.map_or(0.0, |_| (want_tokens - b.tokens).max(0.0));
                if need_requests == 0.0 && need_tokens == 0.0 {
                    if self.rpm.is_some() {
                        b.requests -= 1.0;
                    }
                    if self.tpm.is_some() {
                        b.tokens -= tokens as f64;
                    }
                    return;
                }
                let for_requests = self
                    .rpm
                    .map_or(0.0, |rpm| need_requests / f64::from(rpm) * 60.0);
                let for_tokens = self.tpm.map_or(0.0, |tpm| need_tokens / tpm as f64 * 60.0);
                Duration::from_secs_f64(for_requests.max(for_tokens).max(0.001))
            };
            tokio::time::sleep(wait).await;
        }
    }

    /// Replace an estimate by what was billed.
    pub fn settle(&self, estimated: u64, billed: u64) {
        if self.tpm.is_some() {
            let mut b = self.lock();
            b.tokens += estimated as f64 - billed as f64;
        }
    }
}

/// A provider whose requests wait for a shared [`RateLimit`].
pub struct RateLimited {
    inner: Arc<dyn ModelProvider>,
    limit: Arc<RateLimit>,
}

impl RateLimited {
    /// Wrap `inner`.
    pub fn new(inner: Arc<dyn ModelProvider>, limit: Arc<RateLimit>) -> Self {
        Self { inner, limit }
    }
}

#[async_trait]
impl ModelProvider for RateLimited {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    async fn complete(&self, req: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let size = req.system.len()
            + serde_json::to_string(&req.messages).map_or(0, |s| s.len())
            + serde_json::to_string(&req.tools).map_or(0, |s| s.len());
        let estimate = (size / 4) as u64 + u64::from(req.max_tokens);
        self.limit.acquire(estimate).await;
        let result = self.inner.complete(req).await;
        let billed = result
            .as_ref()
            .map_or(estimate, |r| r.usage.input_tokens + r.usage.output_tokens);
        self.limit.settle(estimate, billed);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn requests_past_the_minute_allowance_wait_for_the_refill() {
        let limit = RateLimit::new(Some(60), None);
        let start = Instant::now();
        // A minute's allowance goes at once…
        for _ in 0..60 {
            limit.acquire(0).await;
        }
        assert!(start.elapsed() < Duration::from_millis(10));
        // …then one a second.
        limit.acquire(0).await;
        limit.acquire(0).await;
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_millis(1900) && waited < Duration::from_millis(2200),
            "{waited:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn tokens_are_charged_as_billed() {
        let limit = RateLimit::new(None, Some(6000));
        let start = Instant::now();
        limit.acquire(6000).await;
        // Billed far less than estimated: the difference comes back at once.
        limit.settle(6000, 600);
        limit.acquire(5000).await;
        assert!(start.elapsed() < Duration::from_millis(10));
        // 400 left: 1,200 more take 8 s at 100 a second.
        limit.settle(5000, 5000);
        limit.acquire(1200).await;
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_millis(7900) && waited < Duration::from_millis(8500),
            "{waited:?}"
        );
    }

    #[test]
    fn limits_parse_and_bad_ones_say_why() {
        assert!(RateLimit::parse("60").is_ok());
        assert!(RateLimit::parse("60:200000").is_ok());
        assert!(RateLimit::parse(":200000").is_ok());
        assert!(RateLimit::parse("0").unwrap_err().contains("above 0"));
        assert!(
            RateLimit::parse("x:1")
                .unwrap_err()
                .contains("requests per minute")
        );
        assert!(RateLimit::parse(":").unwrap_err().contains("RPM"));
    }
}
