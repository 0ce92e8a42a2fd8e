//! The stdio transport: one JSON-RPC message per line on stdin, answers one
//! per line on stdout, nothing else on stdout (logs and receipts go to
//! stderr).
//!
//! A line longer than [`MAX_LINE_BYTES`] is answered with a parse error and
//! skipped, so a runaway client cannot make the server buffer without
//! bound. At the end of stdin every call still in flight is stopped and the
//! server returns once the answers already made are written.

use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::protocol::{self, code};
use super::server::{Server, Session};

/// Longest line taken: 16 MiB.
pub const MAX_LINE_BYTES: u64 = 16 << 20;

/// Serve one session on `input` and `output` until `input` ends.
pub async fn serve<R, W>(server: Arc<Server>, input: R, mut output: W) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let session = Session::new(server);
    let (out, mut outgoing) = mpsc::unbounded_channel::<serde_json::Value>();
    let writer = tokio::spawn(async move {
        while let Some(message) = outgoing.recv().await {
            let mut line = message.to_string();
            line.push('\n');
            output.write_all(line.as_bytes()).await?;
            output.flush().await?;
        }
        Ok::<_, std::io::Error>(())
    });
    let mut reader = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut reader)
            .take(MAX_LINE_BYTES + 1)
            .read_until(b'\n', &mut line)
            .await?;
        if read == 0 {
            break;
        }
        if line.last() != Some(&b'\n') && line.len() as u64 > MAX_LINE_BYTES {
            let _ = out.send(protocol::error(
                serde_json::Value::Null,
                code::PARSE_ERROR,
                format!("message longer than {MAX_LINE_BYTES} bytes"),
            ));
            // Skip the rest of the line.
            let mut rest = Vec::new();
            reader.read_until(b'\n', &mut rest).await?;
            continue;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match protocol::parse(&line) {
            Ok(message) => session.handle(message, &out),
            Err(refused) => {
                let _ = out.send(refused.0);
            }
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
