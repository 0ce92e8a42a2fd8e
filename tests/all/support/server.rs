//! A small HTTP/1.1 server on 127.0.0.1 that records every request it gets.
//!
//! Hand-written on `std::net` rather than hyper so the tests see exactly the
//! bytes the host sent (every header, including the ones the host added) and
//! control exactly the bytes it answers with, down to how the body is split
//! across writes. It runs on its own thread, so it works whatever runtime
//! the test uses, and stops when dropped.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::json;

/// A request as the server received it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// Path and query.
    pub path: String,
    /// Names lowercased, in the order received.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What the server answers.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// Written one after another with a flush and a pause between, so a
    /// test can make the body arrive in pieces.
    pub chunks: Vec<Vec<u8>>,
}

impl Reply {
    /// A 200 with a JSON body.
    pub fn json(body: &serde_json::Value) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type".to_owned(), "application/json".to_owned())],
            chunks: vec![body.to_string().into_bytes()],
        }
    }
}

type Handler = dyn Fn(&Request) -> Reply + Send + Sync;

pub struct Server {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<Request>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Serve with `handler` on a fresh loopback port.
    pub fn start(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let handler: Arc<Handler> = Arc::new(handler);
        let thread = {
            let requests = requests.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    // A broken connection is the client's business; the
                    // test sees it as a missing request.
                    let _ = serve(stream, &requests, &*handler);
                }
            })
        };
        Self {
            addr,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    /// A server that answers every request with a JSON description of it
    /// (method, path, headers, body), echoes any `authorization` header back
    /// in `x-echo-authorization`, and includes `marker` in the body.
    pub fn echo(marker: &str) -> Self {
        let marker = marker.to_owned();
        Self::start(move |req| {
            let headers: serde_json::Map<String, serde_json::Value> = req
                .headers
                .iter()
                .map(|(n, v)| (n.clone(), json!(v)))
                .collect();
            let mut reply = Reply::json(&json!({
                "method": req.method,
                "path": req.path,
                "headers": headers,
                "body": String::from_utf8_lossy(&req.body),
                "marker": marker,
            }));
            if let Some(auth) = req.header("authorization") {
                reply
                    .headers
                    .push(("x-echo-authorization".to_owned(), auth.to_owned()));
            }
            reply
        })
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Everything received so far.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().expect("server lock").clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept so the thread sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(
    stream: TcpStream,
    requests: &Mutex<Vec<Request>>,
    handler: &Handler,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(());
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        if let Some((name, value)) = trimmed.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let mut req = Request {
        method,
        path,
        headers,
        body: Vec::new(),
    };
    if let Some(len) = req
        .header("content-length")
        .and_then(|v| v.parse::<usize>().ok())
    {
        req.body.resize(len, 0);
        reader.read_exact(&mut req.body)?;
    } else if req
        .header("transfer-encoding")
        .is_some_and(|v| v.contains("chunked"))
    {
        req.body = read_chunked(&mut reader)?;
    }
    let reply = handler(&req);
    requests.lock().expect("server lock").push(req);

    let mut out = stream;
    // A reply that names a transfer-encoding is sent chunked, one HTTP
    // chunk per `chunks` entry; any other has a content-length.
    let chunked = reply
        .headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("transfer-encoding"));
    let mut head = format!("HTTP/1.1 {} X\r\nconnection: close\r\n", reply.status);
    if !chunked {
        let len: usize = reply.chunks.iter().map(Vec::len).sum();
        head.push_str(&format!("content-length: {len}\r\n"));
    }
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes())?;
    for (i, chunk) in reply.chunks.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(30));
        }
        if chunked {
            out.write_all(format!("{:x}\r\n", chunk.len()).as_bytes())?;
            out.write_all(chunk)?;
            out.write_all(b"\r\n")?;
        } else {
            out.write_all(chunk)?;
        }
        out.flush()?;
    }
    if chunked {
        out.write_all(b"0\r\n\r\n")?;
    }
    out.shutdown(std::net::Shutdown::Write)
}

/// `data` as a gzip member whose one deflate block uses the fixed Huffman
/// code: a real compressed body (any gunzip reads it) in which no byte of
/// `data` appears as itself, so only decompressing reveals what it holds.
pub fn gzip(data: &[u8]) -> Vec<u8> {
    struct Bits {
        out: Vec<u8>,
        acc: u32,
        n: u32,
    }
    impl Bits {
        /// `len` bits of `value`, least significant first.
        fn put(&mut self, value: u32, len: u32) {
            self.acc |= value << self.n;
            self.n += len;
            while self.n >= 8 {
                self.out.push(self.acc as u8);
                self.acc >>= 8;
                self.n -= 8;
            }
        }
        /// A Huffman code: most significant bit first.
        fn code(&mut self, code: u32, len: u32) {
            self.put(code.reverse_bits() >> (32 - len), len);
        }
    }
    let mut bits = Bits {
        out: vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff],
        acc: 0,
        n: 0,
    };
    bits.put(1, 1); // last block
    bits.put(1, 2); // fixed Huffman codes
    for &b in data {
        match b {
            0..=143 => bits.code(0x30 + u32::from(b), 8),
            _ => bits.code(0x190 + u32::from(b) - 144, 9),
        }
    }
    bits.code(0, 7); // end of block
    if bits.n > 0 {
        bits.out.push(bits.acc as u8);
    }
    let mut out = bits.out;
    let crc = data.iter().fold(!0u32, |crc, &b| {
        (0..8).fold(crc ^ u32::from(b), |c, _| {
            if c & 1 == 1 {
                (c >> 1) ^ 0xedb8_8320
            } else {
                c >> 1
            }
        })
    });
    out.extend_from_slice(&(!crc).to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out
}

fn read_chunked(reader: &mut impl BufRead) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or("0"), 16)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        if size == 0 {
            // Trailers, then the empty line.
            loop {
                line.clear();
                if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
                    return Ok(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..])?;
        line.clear();
        reader.read_line(&mut line)?;
    }
}
