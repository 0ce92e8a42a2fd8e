//! The stdio transport: one JSON-RPC message per line on stdin, answers one
//! per line on stdout, nothing else on stdout (logs and receipts go to
//! stderr).
//!
//! Memory is bounded whatever the client does:
//!
//! - A line longer than [`MAX_LINE_BYTES`] is answered with a parse error
//!   and skipped in constant memory: it is read in the reader's buffer's
//!   chunks and dropped up to its newline, never gathered.
//! - Backpressure: a request is *pending* from the moment it is read until
//!   its answer is written to stdout (or, for a notification or a
//!   cancelled call, until nothing can answer it any more). At most
//!   [`MAX_PENDING`] requests (or `--max-concurrent`, when that is more),
//!   holding at most [`MAX_PENDING_BYTES`] of request text, are pending;
//!   at the bound the server stops reading stdin, so a client that does
//!   not read stdout fills its own pipe and blocks instead of growing the
//!   server. Calls still run side by side up to that bound (and
//!   `--max-concurrent` run at once).
//! - Each answer is serialized once when it is made ([`Outgoing`]); the
//!   queue to the writer holds that text only.
//!
//! One consequence of stopping the read: a client with [`MAX_PENDING`]
//! calls in flight must wait for one to answer before the server reads its
//! next message, a `notifications/cancelled` included.
//!
//! At the end of stdin every call still in flight is stopped and the
//! server returns once the answers already made are written.

use std::sync::Arc;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Semaphore;

use super::protocol::{self, code};
use super::server::{Outbox, Server, Session};

/// Longest line taken: 16 MiB.
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// Requests read but not yet answered on stdout before the server stops
/// reading: 16, `--max-concurrent`'s default, or `--max-concurrent` when
/// the operator raised it (so that many calls can still run side by side).
/// Memory, not speed, sets it: a stalled session holds up to this many
/// answers, and the calls behind them ran side by side (measured in
/// docs/mcp.md).
pub const MAX_PENDING: usize = 16;

/// Bytes of request text pending before the server stops reading: 16 MiB.
/// A single line up to [`MAX_LINE_BYTES`] is still taken when nothing else
/// is pending.
pub const MAX_PENDING_BYTES: usize = 16 << 20;

/// The reader's buffer, and so the chunk an over-long line is skipped in.
const READ_CHUNK: usize = 64 << 10;

/// A line buffer grown past this by a long message is given back after it,
/// so one large message does not keep its memory for the session.
const KEEP_LINE_CAPACITY: usize = 1 << 20;

/// What one read from stdin gave.
#[derive(Debug, PartialEq)]
enum Frame {
    /// A line (without its newline) is in the buffer.
    Line,
    /// A line over [`MAX_LINE_BYTES`] was skipped; this many bytes of it.
    TooLong(u64),
    /// stdin ended.
    End,
}

/// Read one line into `line`, or skip it whole if it is longer than
/// `limit` bytes, holding no more of it than the reader's buffer. A last
/// line without a newline counts as a line.
async fn read_frame<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<Frame> {
    line.clear();
    let mut skipped: u64 = 0;
    loop {
        let chunk = reader.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(match (skipped, line.is_empty()) {
                (0, true) => Frame::End,
                (0, false) => Frame::Line,
                (n, _) => Frame::TooLong(n),
            });
        }
        let newline = chunk.iter().position(|&b| b == b'\n');
        let body = &chunk[..newline.unwrap_or(chunk.len())];
        if skipped == 0 && line.len() + body.len() <= limit {
            line.extend_from_slice(body);
        } else {
            if skipped == 0 {
                skipped = line.len() as u64;
                *line = Vec::new();
            }
            skipped += body.len() as u64;
        }
        let used = newline.map_or(chunk.len(), |at| at + 1);
        reader.consume(used);
        if newline.is_some() {
            return Ok(if skipped == 0 {
                Frame::Line
            } else {
                Frame::TooLong(skipped)
            });
        }
    }
}

/// Serve one session on `input` and `output` until `input` ends.
pub async fn serve<R, W>(server: Arc<Server>, input: R, mut output: W) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let pending = MAX_PENDING.max(server.concurrency());
    let session = Session::new(server);
    let (out, mut outgoing) = Outbox::new();
    let writer = tokio::spawn(async move {
        while let Some(message) = outgoing.recv().await {
            output.write_all(message.text.as_bytes()).await?;
            output.write_all(b"\n").await?;
            output.flush().await?;
            // Dropping the message releases its request's pending slot.
            drop(message);
        }
        Ok::<_, std::io::Error>(())
    });
    let slots = Arc::new(Semaphore::new(pending));
    let budget = Arc::new(Semaphore::new(MAX_PENDING_BYTES));
    let mut reader = BufReader::with_capacity(READ_CHUNK, input);
    let mut line = Vec::new();
    loop {
        // A slot before reading: when every slot is taken, stdin is not
        // read at all (backpressure). The semaphores are never closed.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            break;
        };
        let frame = read_frame(&mut reader, &mut line, MAX_LINE_BYTES).await?;
        match frame {
            Frame::End => break,
            Frame::TooLong(skipped) => {
                let _ = out.holding(slot).send(protocol::error(
                    serde_json::Value::Null,
                    code::PARSE_ERROR,
                    format!(
                        "message of {skipped} bytes is longer than {MAX_LINE_BYTES} bytes; \
                         it was skipped"
                    ),
                ));
                continue;
            }
            Frame::Line => {}
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        // The text's share of the byte budget, held as long as the slot;
        // a line larger than the whole budget takes all of it.
        let weight = u32::try_from(line.len().clamp(1, MAX_PENDING_BYTES)).unwrap_or(u32::MAX);
        let Ok(bytes) = budget.clone().acquire_many_owned(weight).await else {
            break;
        };
        let request_out = out.holding((slot, bytes));
        match protocol::parse(&line) {
            Ok(message) => session.handle(message, &request_out),
            Err(refused) => {
                let _ = request_out.send(refused.0);
            }
        }
        drop(request_out);
        if line.capacity() > KEEP_LINE_CAPACITY {
            line = Vec::new();
        }
    }
    session.cancel_all();
    drop(session);
    drop(out);
    match writer.await {
        Ok(result) => result,
        Err(e) => Err(std::io::Error::other(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn frames(input: &[u8], limit: usize) -> Vec<(Frame, Vec<u8>)> {
        // A tiny buffer, so lines cross chunk boundaries.
        let mut reader = BufReader::with_capacity(3, input);
        let mut line = Vec::new();
        let mut got = Vec::new();
        loop {
            let frame = read_frame(&mut reader, &mut line, limit).await.unwrap();
            if frame == Frame::End {
                return got;
            }
            got.push((frame, line.clone()));
        }
    }

    #[tokio::test]
    async fn long_lines_are_skipped_whole_and_the_next_one_read() {
        let got = frames(b"abcd\nabcdefgh\nxy\n\nlast", 4).await;
        assert_eq!(
            got,
            [
                (Frame::Line, b"abcd".to_vec()),
                (Frame::TooLong(8), vec![]),
                (Frame::Line, b"xy".to_vec()),
                (Frame::Line, vec![]),
                (Frame::Line, b"last".to_vec()),
            ]
        );
        // An over-long last line without a newline.
        assert_eq!(frames(b"abcdefg", 4).await, [(Frame::TooLong(7), vec![])]);
    }
}
