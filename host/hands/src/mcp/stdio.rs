//! An MCP server over stdio, run under the same sandbox as `exec`
//! ([`crate::sandbox::confined`]): only its directories at their guest
//! paths, only its programs, no network, a cleared environment, memory and
//! process limits; its whole process tree dies with the session (and with
//! the harness, `kill -9` included).
//!
//! Messages are lines of JSON. A line longer than the session's message
//! bound is never held whole: its first and last bytes are kept to find
//! which request it answered, that request fails as too large, and the
//! rest is skipped.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};

use super::StdioSpec;
use super::rpc::{Conn, Outgoing, RpcError};
use crate::sandbox::confined;

/// Bytes kept of each end of an over-long line, to find its id.
const ENDS: usize = 256;

/// Start the server and wire it to `conn`: a writer of its stdin, a
/// reader of its stdout and one of its stderr (into the log ring), and a
/// watcher that ends the session when the process exits and kills the
/// process when the session ends.
pub(crate) async fn start(
    spec: &StdioSpec,
    conn: &Arc<Conn>,
    mut outbox: tokio::sync::mpsc::UnboundedReceiver<Outgoing>,
    max_message: usize,
) -> Result<(), String> {
    spec.program
        .verify()
        .map_err(|e| format!("program `{}`: {e}", spec.program.name))?;
    crate::dirs::check_protected(&spec.program.file).map_err(|why| why.to_string())?;
    for dir in &spec.dirs {
        crate::dirs::open(dir).map_err(|why| format!("{}: {why}", dir.guest_path()))?;
    }
    let system = crate::process::system_view(&spec.toolchains, &spec.program);
    let cwd = spec
        .dirs
        .first()
        .map(|d| PathBuf::from(d.guest_path()))
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    let confined_spec = confined::Spec {
        program: spec.program.file.clone(),
        args: spec.args.clone(),
        arg0: spec.program.arg0(),
        cwd,
        env: spec.env.clone(),
        stdin: None,
        mounts: crate::process::mounts(&spec.dirs),
        system,
        limits: confined::Limits {
            // A server lives as long as its session: no wall or CPU time
            // of its own (each call has its timeout).
            wall: std::time::Duration::MAX,
            cpu: std::time::Duration::from_secs(u32::MAX.into()),
            memory: spec.memory,
            processes: spec.processes,
            open_files: confined::Limits::default().open_files,
            file_size: spec.file_size,
            output: 0,
        },
        spill: None,
    };
    // Kept whole until the server ends: it holds the run's /tmp.
    let mut started = confined::start(&confined_spec, confined::Pipes::Talk)
        .await
        .map_err(|e| e.to_string())?;
    let child = &mut started.child;
    let (Some(mut stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err("the server's pipes could not be opened".into());
    };
    // Writer: our messages, one per line, until the session ends.
    let writer = Arc::clone(conn);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                next = outbox.recv() => {
                    let Some(out) = next else { break };
                    let mut line = serde_json::to_vec(&out.message).unwrap_or_default();
                    line.push(b'\n');
                    if let Err(e) = stdin.write_all(&line).await {
                        writer.close(format!("the server stopped reading its stdin: {e}"));
                        break;
                    }
                    let _ = stdin.flush().await;
                }
                _ = writer.ended() => break,
            }
        }
    });
    let reader = Arc::clone(conn);
    tokio::spawn(async move {
        read_lines(stdout, &reader, max_message).await;
    });
    let errors = Arc::clone(conn);
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr);
        let mut line = Vec::new();
        loop {
            line.clear();
            // A line of stderr is read up to 64 KiB at a time.
            match (&mut lines)
                .take(64 << 10)
                .read_until(b'\n', &mut line)
                .await
            {
                Ok(0) | Err(_) => break,
                Ok(_) => errors.log(&format!(
                    "stderr: {}",
                    String::from_utf8_lossy(&line).trim_end()
                )),
            }
        }
    });
    // Watcher: the process and the session end together. The child is
    // the keeper of the tree; killing it kills every process of the run.
    let watcher = Arc::clone(conn);
    tokio::spawn(async move {
        tokio::select! {
            status = started.child.wait() => {
                let how = match status {
                    Ok(s) => match (s.code(), std::os::unix::process::ExitStatusExt::signal(&s)) {
                        (Some(code), _) => format!("exited with code {code}"),
                        (None, Some(sig)) => format!("was killed by signal {sig}"),
                        _ => "ended".into(),
                    },
                    Err(e) => format!("could not be waited for: {e}"),
                };
                let tail = watcher.recent_logs(3).join(" | ");
                watcher.close(if tail.is_empty() {
                    format!("the MCP server {how}")
                } else {
                    format!("the MCP server {how} (last lines: {tail})")
                });
            }
            _ = watcher.ended() => {
                let _ = started.child.kill().await;
            }
        }
    });
    Ok(())
}

/// Read newline-delimited JSON from `pipe` into `conn` until it closes.
async fn read_lines(pipe: impl AsyncRead + Unpin, conn: &Arc<Conn>, max_message: usize) {
    let mut pipe = BufReader::with_capacity(64 << 10, pipe);
    let mut line: Vec<u8> = Vec::new();
    // Over-long line: its head, its last bytes, and its length so far.
    let mut over: Option<(Vec<u8>, Vec<u8>, u64)> = None;
    loop {
        let buf = match pipe.fill_buf().await {
            Ok([]) | Err(_) => break,
            Ok(buf) => buf,
        };
        let (chunk, ends_line) = match buf.iter().position(|&b| b == b'\n') {
            Some(at) => (&buf[..at], true),
            None => (buf, false),
        };
        let used = chunk.len() + usize::from(ends_line);
        match &mut over {
            Some((_, tail, total)) => {
                *total += chunk.len() as u64;
                tail.extend_from_slice(chunk);
                if tail.len() > ENDS {
                    tail.drain(..tail.len() - ENDS);
                }
            }
            None if line.len() + chunk.len() > max_message => {
                let mut head = std::mem::take(&mut line);
                head.extend_from_slice(chunk);
                let total = head.len() as u64;
                let tail = head[head.len().saturating_sub(ENDS)..].to_vec();
                head.truncate(ENDS);
                over = Some((head, tail, total));
            }
            None => line.extend_from_slice(chunk),
        }
        pipe.consume(used);
        if !ends_line {
            continue;
        }
        if let Some((head, tail, total)) = over.take() {
            too_large(conn, &head, &tail, total, max_message);
        } else if !line.iter().all(u8::is_ascii_whitespace) {
            match serde_json::from_slice(&line) {
                Ok(message) => conn.incoming(message),
                Err(e) => unreadable(conn, &line, &e),
            }
        }
        line.clear();
    }
    // The process is usually exiting: give the watcher a moment to end
    // the session with its exit status, which says more.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), conn.ended()).await;
    conn.close("the MCP server closed its stdout".into());
}

/// An over-long message: fail the request it answers, found by its id at
/// either end (servers write `"id"` first or last), or every waiting
/// request when it cannot be told.
fn too_large(conn: &Conn, head: &[u8], tail: &[u8], total: u64, max_message: usize) {
    let error = RpcError::TooLarge(format!(
        "the server's answer was {total} bytes or more, over the {max_message}-byte limit on one \
         message; ask for less (a smaller range, a filter), or the operator raises max_output"
    ));
    let id = find_id(head).or_else(|| find_id(tail));
    match id {
        Some(id) if conn.waiting().contains(&id) => conn.fail(id, error),
        _ => conn.fail_all(error),
    }
}

/// A line that is not JSON Longhand reads: when it names a request that
/// waits (a result nested deeper than the parser's 128 levels, say), that
/// request fails at once, saying why; otherwise it is the server's noise
/// (a log line printed to stdout by mistake) and goes to the log.
fn unreadable(conn: &Conn, line: &[u8], error: &serde_json::Error) {
    let head = &line[..line.len().min(ENDS)];
    let tail = &line[line.len().saturating_sub(ENDS)..];
    match find_id(head).or_else(|| find_id(tail)) {
        Some(id) if conn.waiting().contains(&id) => conn.fail(
            id,
            RpcError::Unreadable(format!(
                "the server's answer ({} bytes) is not JSON Longhand reads: {error} (JSON nested \
                 deeper than 128 levels is refused)",
                line.len()
            )),
        ),
        _ => conn.log(&format!(
            "stdout (not JSON-RPC): {}",
            String::from_utf8_lossy(&line[..line.len().min(512)])
        )),
    }
}

/// The number after the last `"id":` in `bytes`.
fn find_id(bytes: &[u8]) -> Option<u64> {
    let text = String::from_utf8_lossy(bytes);
    let at = text.rfind("\"id\":")?;
    let digits: String = text[at + 5..]
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    #[tokio::test]
    async fn an_over_long_answer_fails_its_request_and_the_next_one_is_read() {
        let (conn, mut out) = Conn::new(vec![]);
        let c = Arc::clone(&conn);
        let big = tokio::spawn(async move {
            c.request("tools/call", json!({}), Duration::from_secs(5))
                .await
        });
        let first = out.recv().await.unwrap().id.unwrap();
        let c = Arc::clone(&conn);
        let small = tokio::spawn(async move {
            c.request("tools/list", json!({}), Duration::from_secs(5))
                .await
        });
        let second = out.recv().await.unwrap().id.unwrap();
        let mut stream = format!(
            "{{\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{}\"}}]}},\"jsonrpc\":\"2.0\",\"id\":{first}}}\n",
            "x".repeat(300_000)
        )
        .into_bytes();
        stream.extend(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{second},\"result\":{{\"tools\":[]}}}}\n")
                .bytes(),
        );
        read_lines(&stream[..], &conn, 64 << 10).await;
        let err = big.await.unwrap().unwrap_err().to_string();
        assert!(err.contains("over the 65536-byte limit"), "{err}");
        assert_eq!(small.await.unwrap().unwrap(), json!({"tools": []}));
    }
}
