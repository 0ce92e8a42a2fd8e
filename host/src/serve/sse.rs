//! `GET /api/sessions/{id}/events/stream`: a session's events as
//! Server-Sent Events, live.
//!
//! Each event is one SSE message: `id` is its seq, `data` the record as
//! JSON (one line: JSON escapes newlines). A client that reconnects sends
//! the last id it saw as `Last-Event-ID` (or `?after=`) and gets the
//! events after it, none twice and none skipped: the log is gap-free and
//! append-only, so "after seq n" names the same events every time.
//!
//! New events are found by reading the store after each
//! `Store::wait_for_change` (at most [`POLL`]): on PostgreSQL a commit
//! anywhere wakes the stream at once (LISTEN/NOTIFY); on SQLite it is a
//! poll, cheap when nothing is new (an indexed read past the last seq).
//! A session that finished or failed gets an `end` message once
//! everything is sent — its data is the session's last seq, whatever the
//! client asked for — and the stream closes; a paused one stays open,
//! since a resume goes on in the same log.
//!
//! `Last-Event-ID` and `after` are whole numbers from 0 to 2^64−1; one at
//! or past [`MAX_SEQ`] (2^63−1, the largest seq a store keeps) is past the
//! end of every log: nothing is sent, and an ended session's `end` comes
//! at once. Anything else is 400.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as Sse, KeepAlive};
use axum::response::{IntoResponse, Response};
use futures_util::stream;

use super::AppState;
use super::api::{MAX_SEQ, read_after, session_id, summary};
use super::error::{ApiError, ApiResult};
use longhand_session::SessionStatus;

/// How often the store is asked for new events.
pub const POLL: Duration = Duration::from_millis(200);

/// Events sent per read, so a long log is streamed in pieces.
const BATCH: usize = 500;

/// The stream (see the module docs).
pub async fn stream(
    State(state): State<AppState>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let id = session_id(&id)?;
    summary(&state, &id).await?;
    let from_header = headers
        .get("last-event-id")
        .map(|v| {
            v.to_str()
                .ok()
                .and_then(|t| t.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    ApiError::invalid(
                        "`Last-Event-ID` must be an event's seq: a whole number from 0 to \
                         18446744073709551615",
                    )
                })
        })
        .transpose()?;
    let from_query = raw
        .as_deref()
        .and_then(|q| q.split('&').find_map(|p| p.strip_prefix("after=")))
        .map(|t| {
            t.parse::<u64>().map_err(|_| {
                ApiError::invalid(
                    "`after` must be an event's seq: a whole number from 0 to \
                     18446744073709551615",
                )
            })
        })
        .transpose()?;
    // The header wins: it is what a reconnecting client last saw.
    let after = from_header.or(from_query).unwrap_or(0);
    let (tx, rx) = tokio::sync::mpsc::channel::<Sse>(64);
    tokio::spawn(async move {
        // The last seq sent (or the client's `after`): the next read is
        // after it.
        let mut sent = after.min(MAX_SEQ);
        loop {
            let records = match read_after(&state, &id, sent).await {
                Ok(records) => records,
                Err(e) => {
                    let error = ApiError::from_store(e);
                    let data = serde_json::json!({"code": error.code, "message": error.message});
                    let _ = tx
                        .send(Sse::default().event("error").data(data.to_string()))
                        .await;
                    return;
                }
            };
            let fresh = records.is_empty();
            for record in records.into_iter().take(BATCH) {
                sent = record.seq;
                let Ok(data) = serde_json::to_string(&record) else {
                    continue;
                };
                let message = Sse::default().id(record.seq.to_string()).data(data);
                if tx.send(message).await.is_err() {
                    // The client went away.
                    return;
                }
            }
            if fresh {
                let last = match state.store.summary(&id).await {
                    // Ended, and everything up to its last event sent (a
                    // last event appended since the read above is read
                    // next time round, not skipped).
                    Ok(s)
                        if matches!(s.status, SessionStatus::Finished | SessionStatus::Failed) =>
                    {
                        (s.last_seq <= sent).then_some(s.last_seq)
                    }
                    Ok(_) => None,
                    Err(e) => {
                        let error = ApiError::from_store(e);
                        let data =
                            serde_json::json!({"code": error.code, "message": error.message});
                        let _ = tx
                            .send(Sse::default().event("error").data(data.to_string()))
                            .await;
                        return;
                    }
                };
                if let Some(last) = last {
                    let _ = tx
                        .send(Sse::default().event("end").data(last.to_string()))
                        .await;
                    return;
                }
                // PostgreSQL wakes this at once on a commit (LISTEN/NOTIFY);
                // SQLite sleeps POLL. A change between the read above and
                // this wait is seen at the next POLL at the latest.
                tokio::select! {
                    _ = state.store.wait_for_change(POLL) => {}
                    _ = tx.closed() => return,
                }
            }
        }
    });
    let events = stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx))
    });
    Ok(axum::response::sse::Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}
