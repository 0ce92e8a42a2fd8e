//! A small incremental Server-Sent Events parser, enough for the streaming
//! answers of the OpenAI and Anthropic APIs.
//!
//! Bytes arrive in arbitrary chunks (a line, an event or a UTF-8 character
//! may be split across them), so the parser buffers until a line is whole.
//! Lines end in `\n` or `\r\n`; a bare `\r` line ending (allowed by the spec,
//! used by neither API) is not supported. An event that was still being
//! built when the stream ended is dropped, as the spec says: callers detect
//! truncation from the events they did *not* get.

use super::error::ModelError;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, or empty when the event had none.
    pub event: String,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
}

#[derive(Debug, Default)]
pub(crate) struct SseParser {
    buf: Vec<u8>,
    event: String,
    data: String,
    has_data: bool,
}

impl SseParser {
    /// Feeds one chunk and returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, ModelError> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        let mut start = 0;
        while let Some(nl) = self.buf[start..].iter().position(|&b| b == b'\n') {
            let end = start + nl;
            let mut line = &self.buf[start..end];
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            let line = std::str::from_utf8(line)
                .map_err(|_| ModelError::BadResponse("stream is not UTF-8".into()))?
                .to_owned();
            start = end + 1;
            self.line(&line, &mut out);
        }
        self.buf.drain(..start);
        Ok(out)
    }

    fn line(&mut self, line: &str, out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            if self.has_data {
                out.push(SseEvent {
                    event: std::mem::take(&mut self.event),
                    data: std::mem::take(&mut self.data),
                });
            }
            self.event.clear();
            self.data.clear();
            self.has_data = false;
            return;
        }
        if line.starts_with(':') {
            return; // comment (keep-alive)
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            _ => {} // id, retry and unknown fields mean nothing to us
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_across_chunks() {
        let mut p = SseParser::default();
        let text = "event: a\ndata: {\"x\":\r\ndata: 1}\n\n: ping\n\ndata: [DONE]\n\ndata: half";
        let mut events = Vec::new();
        for b in text.as_bytes().chunks(3) {
            events.extend(p.push(b).unwrap());
        }
        assert_eq!(
            events,
            vec![
                SseEvent {
                    event: "a".into(),
                    data: "{\"x\":\n1}".into()
                },
                SseEvent {
                    event: String::new(),
                    data: "[DONE]".into()
                },
            ]
        );
    }

    #[test]
    fn utf8_split_inside_a_character() {
        let mut p = SseParser::default();
        let bytes = "data: é\n\n".as_bytes();
        let mut events = p.push(&bytes[..7]).unwrap();
        events.extend(p.push(&bytes[7..]).unwrap());
        assert_eq!(events[0].data, "é");
    }
}
