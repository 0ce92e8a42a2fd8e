//! [`ModelProvider`]: the one trait every provider implements — one
//! request in, one whole answer or one [`ModelError`] out, nothing kept
//! between calls — and its impls for `Box` and `Arc`. Every provider file
//! and the retry wrapper sit on this; it sits on [`types`](super::types)
//! and [`error`](super::error) only.

use super::error::ModelError;
use super::types::{ModelRequest, ModelResponse};

/// A language model behind some API.
///
/// Implementations are stateless between calls (a call may be retried, or
/// re-sent by another process after a crash) and safe to share between
/// sessions.
#[async_trait::async_trait]
pub trait ModelProvider: Send + Sync {
    /// The provider's name, for events and logs (`openai`, `anthropic`,
    /// `replay`…).
    fn name(&self) -> &str;

    /// The model asked for, as the provider names it.
    fn model(&self) -> &str;

    /// Sends one request and waits for the whole answer. Streaming, if the
    /// provider uses it, is an implementation detail: the answer is
    /// assembled before it is returned.
    async fn complete(&self, req: &ModelRequest) -> Result<ModelResponse, ModelError>;
}

#[async_trait::async_trait]
impl<T: ModelProvider + ?Sized> ModelProvider for Box<T> {
    fn name(&self) -> &str {
        (**self).name()
    }

    fn model(&self) -> &str {
        (**self).model()
    }

    async fn complete(&self, req: &ModelRequest) -> Result<ModelResponse, ModelError> {
        (**self).complete(req).await
    }
}

#[async_trait::async_trait]
impl<T: ModelProvider + ?Sized> ModelProvider for std::sync::Arc<T> {
    fn name(&self) -> &str {
        (**self).name()
    }

    fn model(&self) -> &str {
        (**self).model()
    }

    async fn complete(&self, req: &ModelRequest) -> Result<ModelResponse, ModelError> {
        (**self).complete(req).await
    }
}
