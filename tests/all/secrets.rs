//! Secrets: the host adds them to requests for matching hosts, and the
//! guest never holds the value — not in its environment, not in what it
//! reads back, not anywhere in its linear memory — and neither does the
//! receipt.
//!
//! The canary is fresh per run, and the probe is asked to look for it by
//! hash only, so the test itself never carries it into the guest.
//!
//! Reflections: servers here echo the credential back in each form a real
//! one might (escaped, encoded, truncated, wrapped, compressed), and each
//! test checks four things — the guest's memory holds neither the secret
//! nor the form it was echoed in, what it read shows `[REDACTED]`, the
//! receipt says which secret came back from where, and the host serves an
//! ordinary call afterwards.

use longhand_hands::{CallOutcome, Grants, HostPattern, Secret, SecretGrant};
use serde_json::{Value, json};

use crate::support::server::{Reply, Request, Server, gzip};
use crate::support::{assert_still_serves, call_probe, needle, ok, unique};

const SECRET_NAME: &str = "API_TOKEN";

fn grants_with_secret(canary: &str, secret_host: &str, hosts: &[String]) -> Grants {
    Grants {
        hosts: hosts
            .iter()
            .map(|h| HostPattern::parse(h).expect("host pattern"))
            .collect(),
        secrets: vec![SecretGrant {
            name: SECRET_NAME.to_owned(),
            value: Secret::new(canary),
            host: HostPattern::parse(secret_host).expect("secret host"),
            header: "authorization".to_owned(),
        }],
        env: [("VISIBLE".to_owned(), "plain".to_owned())].into(),
        ..Grants::default()
    }
}

#[tokio::test]
async fn secret_reaches_the_server_but_never_the_guest() {
    let canary = unique("lh-canary");
    // Two `unique` values share their pid and clock prefix, a 12-byte run
    // of the canary that redaction would rightly remove from the marker:
    // reversed, the marker shares no run with it.
    let marker: String = unique("lh-marker").chars().rev().collect();
    let server = Server::echo(&marker);
    let host = format!("127.0.0.1:{}", server.port());
    let grants = grants_with_secret(&canary, &host, std::slice::from_ref(&host));

    let outcome = call_probe(
        &grants,
        "http",
        json!({
            "url": server.url("/whoami"),
            // The guest's own attempt at the header is overwritten.
            "headers": { "authorization": "Bearer chosen-by-the-guest" },
            "scan": [needle(&canary), needle(&marker)],
        }),
    )
    .await;
    let out = ok(&outcome);

    // The server got the real credential, once, in place of the guest's.
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent: Vec<&str> = requests[0]
        .headers
        .iter()
        .filter(|(n, _)| n == "authorization")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(sent, [format!("Bearer {canary}").as_str()]);

    // The server echoed it in a header and in the body; the guest saw neither.
    assert_eq!(out["status"], 200, "{out}");
    let echoed = out["headers"]
        .as_array()
        .and_then(|h| h.iter().find(|kv| kv[0] == "x-echo-authorization"))
        .unwrap_or_else(|| panic!("no echoed header in {out}"));
    assert_eq!(echoed[1], "Bearer [REDACTED]");
    let body = out["body"].as_str().unwrap_or_default();
    assert!(body.contains("Bearer [REDACTED]"), "{body}");
    assert!(body.contains(&marker), "{body}");

    // Not in the guest's memory, while something it did receive is: the
    // scan works, and the secret is simply not there.
    assert_eq!(out["scan"], json!([0, out["scan"][1]]), "{out}");
    assert!(
        out["scan"][1].as_u64().unwrap_or(0) >= 1,
        "control marker not found: {out}"
    );

    assert_not_leaked(&canary, &outcome);
    let used = &outcome.receipt.used[0].detail;
    assert!(
        used.contains(&format!("secret {SECRET_NAME} added")),
        "{used}"
    );
}

#[tokio::test]
async fn secret_is_not_sent_to_other_hosts() {
    let canary = unique("lh-canary");
    let secret_server = Server::echo("a");
    let other = Server::echo("b");
    let secret_host = format!("127.0.0.1:{}", secret_server.port());
    let other_host = format!("127.0.0.1:{}", other.port());
    let grants = grants_with_secret(&canary, &secret_host, &[secret_host.clone(), other_host]);

    let outcome = call_probe(&grants, "http", json!({ "url": other.url("/") })).await;
    assert_eq!(ok(&outcome)["status"], 200, "{}", ok(&outcome));
    let requests = other.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].header("authorization"),
        None,
        "{:?}",
        requests[0].headers
    );
    assert!(
        !requests[0].headers.iter().any(|(_, v)| v.contains(&canary)),
        "{:?}",
        requests[0].headers
    );
    assert!(secret_server.requests().is_empty());
    assert_not_leaked(&canary, &outcome);
}

#[tokio::test]
async fn secret_is_not_in_the_guest_environment() {
    let canary = unique("lh-canary");
    let grants = grants_with_secret(&canary, "127.0.0.1:1", &[]);
    let outcome = call_probe(&grants, "env_all", json!({})).await;
    assert_eq!(ok(&outcome)["vars"], json!({ "VISIBLE": "plain" }));
    assert_not_leaked(&canary, &outcome);

    let outcome = call_probe(
        &grants,
        "scan_memory",
        json!({ "needles": [needle(&canary)] }),
    )
    .await;
    assert_eq!(ok(&outcome)["hits"], json!([0]));
}

/// A server that reflects the credential with the canary split across two
/// writes: redaction has to hold back a partial match until it knows.
#[tokio::test]
async fn secret_split_across_body_chunks_is_redacted() {
    let canary = unique("lh-canary");
    let server = Server::start(|req| {
        let auth = req
            .header("authorization")
            .unwrap_or_default()
            .as_bytes()
            .to_vec();
        let mid = auth.len() - 5;
        let mut first = vec![b'.'; 10_000];
        first.extend_from_slice(&auth[..mid]);
        let mut second = auth[mid..].to_vec();
        second.extend_from_slice(b" end");
        Reply {
            status: 200,
            headers: Vec::new(),
            chunks: vec![first, second],
        }
    });
    let host = format!("127.0.0.1:{}", server.port());
    let grants = grants_with_secret(&canary, &host, std::slice::from_ref(&host));
    let outcome = call_probe(
        &grants,
        "http",
        json!({ "url": server.url("/"), "scan": [needle(&canary)] }),
    )
    .await;
    let out = ok(&outcome);
    let body = out["body"].as_str().unwrap_or_default();
    assert!(
        body.ends_with("Bearer [REDACTED] end"),
        "{}",
        &body[body.len().saturating_sub(80)..]
    );
    assert_eq!(body.len(), 10_000 + "Bearer [REDACTED] end".len());
    assert_eq!(out["scan"], json!([0]));
    assert_not_leaked(&canary, &outcome);
}

/// Redaction covers header names as well as values: a server that reflects
/// the credential into a header *name* must not hand it to the guest.
#[tokio::test]
async fn secret_in_a_response_header_name_is_redacted() {
    // Header names are lowercase tokens; `unique` gives exactly that.
    let canary = unique("lhcanary");
    let reflected = canary.clone();
    let server = Server::start(move |_| Reply {
        status: 200,
        headers: vec![(format!("x-{reflected}"), "1".to_owned())],
        chunks: vec![b"ok".to_vec()],
    });
    let host = format!("127.0.0.1:{}", server.port());
    let grants = grants_with_secret(&canary, &host, std::slice::from_ref(&host));
    let outcome = call_probe(
        &grants,
        "http",
        json!({ "url": server.url("/"), "scan": [needle(&canary)] }),
    )
    .await;
    let out = ok(&outcome);
    assert!(
        !out.to_string().contains(&canary),
        "the guest saw the secret: {out}"
    );
    assert_eq!(out["scan"], json!([0]));
}

/// The canary appears nowhere a person or a model could read: output,
/// receipt (all of it, serialised), captured stdio, logs.
#[track_caller]
fn assert_not_leaked(canary: &str, outcome: &longhand_hands::CallOutcome) {
    let receipt = serde_json::to_string(&outcome.receipt).expect("receipt serialises");
    assert!(
        !receipt.contains(canary),
        "the receipt holds the secret: {receipt}"
    );
    let result = match &outcome.result {
        Ok(v) => v.to_string(),
        Err(e) => e.to_string(),
    };
    assert!(
        !result.contains(canary),
        "the output holds the secret: {result}"
    );
    let debug = format!("{outcome:?}");
    assert!(
        !debug.contains(canary),
        "Debug of the outcome holds the secret"
    );
}

/// A canary with punctuation in it, so escapes and HTML entities have
/// something to escape: `lh-canary-<pid>-<nanos>/+=.&<>"'`.
fn punctuated_canary() -> String {
    format!("{}/+=.&<>\"'", unique("lh-canary"))
}

/// The `Bearer <key>` a request carried.
fn credential(req: &Request) -> Vec<u8> {
    req.header("authorization")
        .unwrap_or_default()
        .as_bytes()
        .to_vec()
}

type Encode = fn(&[u8]) -> String;

fn json_u(s: &[u8]) -> String {
    s.iter().map(|b| format!("\\u{b:04x}")).collect()
}
fn percent(s: &[u8]) -> String {
    s.iter().map(|b| format!("%{b:02X}")).collect()
}
fn html_decimal(s: &[u8]) -> String {
    s.iter().map(|b| format!("&#{b};")).collect()
}
fn html_hex(s: &[u8]) -> String {
    s.iter().map(|b| format!("&#x{b:x};")).collect()
}
/// What an HTML template engine does: named references for markup
/// characters, `&#x2F;` for the slash (OWASP), the rest as is.
fn html_escape(s: &[u8]) -> String {
    s.iter()
        .map(|&b| match b {
            b'&' => "&amp;".to_owned(),
            b'<' => "&lt;".to_owned(),
            b'>' => "&gt;".to_owned(),
            b'"' => "&quot;".to_owned(),
            b'\'' => "&#39;".to_owned(),
            b'/' => "&#x2F;".to_owned(),
            b'=' => "&equals;".to_owned(),
            _ => char::from(b).to_string(),
        })
        .collect()
}
fn hex_lower(s: &[u8]) -> String {
    s.iter().map(|b| format!("{b:02x}")).collect()
}
fn hex_upper(s: &[u8]) -> String {
    s.iter().map(|b| format!("{b:02X}")).collect()
}
/// `text` with `sep` inserted every `width` characters.
fn wrap(text: &str, width: usize, sep: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(width)
        .map(|c| c.iter().collect::<String>())
        .collect::<Vec<_>>()
        .join(sep)
}

/// Every character-wise form a server might echo the credential in.
const FORMS: &[(&str, Encode)] = &[
    ("json \\u escapes", json_u),
    ("percent", percent),
    ("html decimal", html_decimal),
    ("html hex", html_hex),
    ("html template", html_escape),
    ("hex", hex_lower),
    ("HEX", hex_upper),
];

/// Call the probe against `server` with the canary granted for it, asking
/// it to scan its memory for each of `forms` (text the guest must not
/// hold) and for `marker` (text it must hold, so the scan is shown to work).
async fn reflect(server: &Server, path: &str, canary: &str, forms: &[String]) -> CallOutcome {
    let host = format!("127.0.0.1:{}", server.port());
    let grants = grants_with_secret(canary, &host, std::slice::from_ref(&host));
    let scan: Vec<Value> = forms.iter().map(|f| needle(f)).collect();
    call_probe(
        &grants,
        "http",
        json!({ "url": server.url(path), "scan": scan }),
    )
    .await
}

/// The guest held none of `forms`, saw `[REDACTED]` where they were, the
/// receipt names the secret as reflected (in `place`), and nothing leaked.
#[track_caller]
fn assert_redacted(
    outcome: &CallOutcome,
    canary: &str,
    forms: &[String],
    place: &str,
    case: &str,
    status: u16,
) {
    let out = ok(outcome);
    assert_eq!(out["status"], status, "{case}: {out}");
    assert_eq!(
        out["scan"],
        json!(vec![0; forms.len()]),
        "{case}: the guest's memory holds a reflection: {out}"
    );
    // What the guest read, as it read it (not re-escaped as JSON).
    let mut read = out["body"].as_str().unwrap_or_default().to_owned();
    for kv in out["headers"].as_array().into_iter().flatten() {
        read.push_str(kv[1].as_str().unwrap_or_default());
        read.push('\n');
    }
    for form in forms {
        assert!(!read.contains(form.as_str()), "{case}: {form} in {read}");
    }
    assert!(read.contains("[REDACTED]"), "{case}: {read}");
    let noted = outcome.receipt.denied.iter().any(|d| {
        d.capability == "secret"
            && d.resource == SECRET_NAME
            && d.reason.starts_with("reflected by 127.0.0.1:")
            && d.reason.contains(&format!("in the response {place}"))
    });
    assert!(
        noted,
        "{case}: no reflection in the {place} noted: {:?}",
        outcome.receipt.denied
    );
    assert_not_leaked(canary, outcome);
}

/// The credential echoed in a body in each escaped or encoded form, whole
/// and truncated to its first 16 characters (an error quoting the key).
/// The server writes the JSON body by hand, so each form reaches the guest
/// exactly as a server would send it (one level of escaping).
#[tokio::test]
async fn escaped_and_encoded_reflections_are_redacted() {
    let canary = punctuated_canary();
    let server = Server::start(|req| {
        let auth = credential(req);
        let name = req.path.trim_start_matches('/');
        let (form, cut) = match name.strip_suffix("/truncated") {
            Some(form) => (form, true),
            None => (name, false),
        };
        let Some((_, encode)) = FORMS.iter().find(|(n, _)| n.replace(' ', "-") == form) else {
            return Reply::json(&json!({ "error": "no such form" }));
        };
        let (shown, tail) = if cut {
            (&auth[.."Bearer ".len() + 16], "...")
        } else {
            (&auth[..], "")
        };
        Reply {
            status: 401,
            headers: vec![("content-type".to_owned(), "application/json".to_owned())],
            chunks: vec![
                format!(
                    "{{\"error\":\"invalid credential: {}{tail}\"}}",
                    encode(shown)
                )
                .into_bytes(),
            ],
        }
    });
    let key = canary.as_bytes();
    for (name, encode) in FORMS {
        for cut in [false, true] {
            let path = format!(
                "/{}{}",
                name.replace(' ', "-"),
                if cut { "/truncated" } else { "" }
            );
            let shown = if cut { &key[..16] } else { key };
            // The reflection as sent, and one 12-byte run of it.
            let forms = vec![canary.clone(), encode(shown), encode(&shown[2..14])];
            let outcome = reflect(&server, &path, &canary, &forms).await;
            assert_redacted(&outcome, &canary, &forms, "body", &path, 401);
            let body = ok(&outcome)["body"].as_str().unwrap_or_default().to_owned();
            assert!(
                body.starts_with("{\"error\":\"invalid credential: "),
                "{path}: {body}"
            );
        }
    }
    assert_still_serves().await;
}

/// Base64, written here rather than taken from a crate so the test shares
/// nothing with the host's encoder.
fn base64(data: &[u8], url: bool) -> String {
    let alphabet: &[u8] = if url {
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    } else {
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    };
    let mut out = String::new();
    for group in data.chunks(3) {
        let n = group
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=group.len() {
            out.push(char::from(alphabet[(n >> (18 - 6 * i) & 63) as usize]));
        }
        if !url {
            out.push_str(&"=".repeat(3 - group.len()));
        }
    }
    out
}

/// The base64 characters of `encoded` (of some text) that only the text's
/// bytes `start..end` determine.
fn base64_core(encoded: &str, start: usize, end: usize) -> &str {
    &encoded[(8 * start).div_ceil(6)..(8 * end) / 6]
}

/// Base64 of a whole body holding the credential, at each of the three
/// alignments it can fall on, in both alphabets, plain and MIME-wrapped;
/// and base64 of `Bearer <key>` alone in a header.
#[tokio::test]
async fn base64_reflections_are_redacted_at_every_alignment() {
    let canary = unique("lh-canary");
    const WIDTH: usize = 76;
    let body = |pad: usize, auth: &[u8]| -> Vec<u8> {
        let mut inner = "x".repeat(pad).into_bytes();
        inner.extend_from_slice(b"{\"auth\":\"");
        inner.extend_from_slice(auth);
        inner.extend_from_slice(b"\"}");
        inner
    };
    let server = Server::start(move |req| {
        let auth = credential(req);
        let mut parts = req.path.trim_start_matches('/').split('/');
        let pad: usize = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        let url = parts.next() == Some("url");
        let mut text = base64(&body(pad, &auth), url);
        if parts.next() == Some("wrapped") {
            text = wrap(&text, WIDTH, "\r\n");
        }
        Reply {
            status: 200,
            headers: vec![("x-token".to_owned(), base64(&auth, false))],
            chunks: vec![text.into_bytes()],
        }
    });
    let bearer = format!("Bearer {canary}");
    let header_core = base64_core(&base64(bearer.as_bytes(), false), 7, bearer.len()).to_owned();
    for pad in 0..3 {
        for alphabet in ["std", "url"] {
            for layout in ["plain", "wrapped"] {
                let path = format!("/{pad}/{alphabet}/{layout}");
                let inner = body(pad, bearer.as_bytes());
                let start = pad + "{\"auth\":\"Bearer ".len();
                let encoded = base64(&inner, alphabet == "url");
                let core = base64_core(&encoded, start, start + canary.len());
                // 16 characters: 12 bytes of the key.
                let mut piece = core[..16].to_owned();
                if layout == "wrapped" {
                    // Where the piece lands once the body is wrapped.
                    let at = encoded.find(&piece).unwrap_or_default();
                    let wrapped = wrap(&encoded, WIDTH, "\r\n");
                    let from = at + 2 * (at / WIDTH);
                    let to = at + 15 + 2 * ((at + 15) / WIDTH) + 1;
                    piece = wrapped[from..to].to_owned();
                }
                let forms = vec![canary.clone(), piece, header_core.clone()];
                let outcome = reflect(&server, &path, &canary, &forms).await;
                assert_redacted(&outcome, &canary, &forms, "body", &path, 200);
                let headers = ok(&outcome)["headers"].to_string();
                assert!(headers.contains("[REDACTED]"), "{path}: {headers}");
            }
        }
    }
    assert_still_serves().await;
}

/// An echo wrapped at a fixed width: raw CR/LF in a text body, `\n`
/// escapes inside a JSON string, and across several headers.
#[tokio::test]
async fn wrapped_reflections_are_redacted() {
    let canary = unique("lh-canary");
    let server = Server::start(|req| {
        let auth = String::from_utf8_lossy(&credential(req)).into_owned();
        match req.path.as_str() {
            "/crlf" => Reply {
                status: 200,
                headers: Vec::new(),
                chunks: vec![format!("echo:\r\n{}\r\n", wrap(&auth, 8, "\r\n")).into_bytes()],
            },
            // serde writes the line breaks as `\n` escapes.
            "/json" => Reply::json(&json!({ "echo": wrap(&auth, 10, "\n") })),
            _ => Reply {
                status: 200,
                headers: auth
                    .as_bytes()
                    .chunks(9)
                    .enumerate()
                    .map(|(i, c)| {
                        (
                            format!("x-line-{i}"),
                            String::from_utf8_lossy(c).into_owned(),
                        )
                    })
                    .collect(),
                chunks: vec![b"see headers".to_vec()],
            },
        }
    });
    let bearer = format!("Bearer {canary}");
    for (path, forms, place) in [
        ("/crlf", vec![wrap(&bearer, 8, "\r\n")], "body"),
        ("/json", vec![wrap(&bearer, 10, "\\n")], "body"),
        (
            "/headers",
            // Each full line that lies inside the key: the guest holds
            // each header value separately.
            bearer
                .as_bytes()
                .chunks(9)
                .skip(1)
                .filter(|c| c.len() == 9)
                .map(|c| String::from_utf8_lossy(c).into_owned())
                .collect(),
            "headers",
        ),
    ] {
        let mut forms = forms;
        forms.push(canary.clone());
        let outcome = reflect(&server, path, &canary, &forms).await;
        assert_redacted(&outcome, &canary, &forms, place, path, 200);
    }
    assert_still_serves().await;
}

/// The echo arrives a few bytes at a time, in HTTP chunks, hex-encoded:
/// every piece is below the window on its own.
#[tokio::test]
async fn reflections_dribbled_across_chunks_are_redacted() {
    let canary = unique("lh-canary");
    let server = Server::start(|req| {
        let hex = hex_lower(&credential(req)).into_bytes();
        let mut chunks: Vec<Vec<u8>> = vec![b"hex: ".to_vec()];
        chunks.extend(hex.chunks(7).map(<[u8]>::to_vec));
        chunks.push(b" end".to_vec());
        Reply {
            status: 200,
            headers: vec![("transfer-encoding".to_owned(), "chunked".to_owned())],
            chunks,
        }
    });
    let forms = vec![canary.clone(), hex_lower(canary.as_bytes())];
    let outcome = reflect(&server, "/", &canary, &forms).await;
    assert_redacted(&outcome, &canary, &forms, "body", "dribble", 200);
    let body = ok(&outcome)["body"].as_str().unwrap_or_default().to_owned();
    assert!(
        body.starts_with("hex: ") && body.ends_with(" end"),
        "{body}"
    );
    assert_still_serves().await;
}

/// A request that carries a secret asks for an uncompressed answer, even
/// when the guest asked for gzip; a compressed answer to it is refused
/// (redaction cannot look inside), with the reason in the receipt. A
/// request without a secret gets its compressed answer as before, and the
/// host serves the next secret-bearing request normally.
#[tokio::test]
async fn compressed_answers_to_secret_requests_are_refused() {
    let canary = unique("lh-canary");
    let server = Server::start(|req| {
        let body = format!(
            "{{\"echo\":\"{}\"}}",
            String::from_utf8_lossy(&credential(req))
        );
        let coding = req.path.trim_start_matches('/');
        let header = match coding {
            "plain" => return Reply::json(&json!({ "ok": true })),
            "chunked-gzip" => ("transfer-encoding", "gzip, chunked"),
            "identity-then-gzip" => ("content-encoding", "identity, gzip"),
            "upper" => ("content-encoding", "GZIP"),
            "br" => ("content-encoding", "br"),
            _ => ("content-encoding", "gzip"),
        };
        Reply {
            status: 200,
            headers: vec![(header.0.to_owned(), header.1.to_owned())],
            chunks: vec![gzip(body.as_bytes())],
        }
    });
    let host = format!("127.0.0.1:{}", server.port());
    let grants = grants_with_secret(&canary, &host, std::slice::from_ref(&host));
    for (path, error) in [
        ("/gzip", "HttpResponseContentCoding(None)"),
        ("/upper", "HttpResponseContentCoding(None)"),
        ("/br", "HttpResponseContentCoding(None)"),
        ("/identity-then-gzip", "HttpResponseContentCoding(None)"),
        ("/chunked-gzip", "HttpResponseTransferCoding(None)"),
    ] {
        let before = server.requests().len();
        let outcome = call_probe(
            &grants,
            "http",
            json!({
                "url": server.url(path),
                "headers": { "accept-encoding": "gzip, br", "te": "gzip" },
                "scan": [needle(&canary)],
            }),
        )
        .await;
        let out = ok(&outcome);
        assert_eq!(out["error"], error, "{path}: {out}");
        assert_eq!(out["scan"], json!([0]), "{path}: {out}");
        assert_eq!(out["body"], Value::Null, "{path}: {out}");
        let denial = outcome
            .receipt
            .denied
            .iter()
            .find(|d| d.capability == "http" && d.resource == host)
            .unwrap_or_else(|| panic!("{path}: no denial in {:?}", outcome.receipt.denied));
        assert!(
            denial.reason.contains("compressed answers")
                && denial.reason.contains(SECRET_NAME)
                && (denial.reason.contains("gzip") || denial.reason.contains("br")),
            "{path}: {}",
            denial.reason
        );
        assert_not_leaked(&canary, &outcome);
        // The host overrode what the guest asked for.
        let requests = server.requests();
        assert_eq!(requests.len(), before + 1);
        let sent = &requests[before];
        assert_eq!(sent.header("accept-encoding"), Some("identity"), "{path}");
        assert_eq!(sent.header("te"), None, "{path}");
    }

    // Without a secret the guest gets the compressed body as it came.
    let other = Server::start(|_| Reply {
        status: 200,
        headers: vec![("content-encoding".to_owned(), "gzip".to_owned())],
        chunks: vec![gzip(b"public data")],
    });
    let other_host = format!("127.0.0.1:{}", other.port());
    let grants = grants_with_secret(&canary, &host, &[host.clone(), other_host]);
    let outcome = call_probe(
        &grants,
        "http",
        json!({ "url": other.url("/"), "headers": { "accept-encoding": "gzip" } }),
    )
    .await;
    assert_eq!(ok(&outcome)["status"], 200, "{}", ok(&outcome));
    assert_eq!(other.requests()[0].header("accept-encoding"), Some("gzip"));

    // And the same host still serves a secret-bearing call.
    let outcome = call_probe(&grants, "http", json!({ "url": server.url("/plain") })).await;
    assert_eq!(ok(&outcome)["status"], 200, "{}", ok(&outcome));
    assert!(
        outcome.receipt.denied.is_empty(),
        "{:?}",
        outcome.receipt.denied
    );
    assert_still_serves().await;
}

/// A byte range could fetch an echo of the secret in pieces shorter than
/// the redaction window, one request at a time: a request that carries a
/// secret goes out without `Range`; one without a secret keeps it.
#[tokio::test]
async fn secret_bearing_requests_lose_their_range_header() {
    let canary = unique("lh-range");
    let server = Server::echo("range");
    let host = format!("127.0.0.1:{}", server.port());
    let with_secret = grants_with_secret(&canary, &host, std::slice::from_ref(&host));
    let without = Grants {
        hosts: vec![HostPattern::parse(&host).expect("pattern")],
        ..Grants::default()
    };
    for grants in [&with_secret, &without] {
        let outcome = call_probe(
            grants,
            "http",
            json!({
                "url": server.url("/echo"),
                "headers": { "range": "bytes=7-17", "if-range": "\"etag\"" },
            }),
        )
        .await;
        assert_eq!(ok(&outcome)["status"], 200, "{}", ok(&outcome));
    }
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0].header("range"),
        None,
        "{:?}",
        requests[0].headers
    );
    assert_eq!(requests[0].header("if-range"), None);
    assert_eq!(requests[1].header("range"), Some("bytes=7-17"));
    assert_still_serves().await;
}
