//! Secret redaction: a guest must not read back a secret the host added to
//! its request, in any form a server plausibly reflects it.
//!
//! What counts as the secret: any run of [`WINDOW`] (12) consecutive bytes
//! of it, or the whole secret if it is shorter, so an error that echoes a
//! truncated key is caught as well as a full echo. What counts as a
//! reflection of such a run:
//!
//! - raw, ASCII case-insensitively;
//! - escaped: percent (`%4a`), JSON (`\"`, `\/`, `\\`, `\u004a`, surrogate
//!   pairs), `\x4a`, HTML character references (`&#74;`, `&#x4A;`, and the
//!   named references of ASCII punctuation such as `&amp;` or `&sol;`), in
//!   any mixture, one level deep;
//! - hex of the bytes, either case;
//! - base64 of the bytes at each of the three alignments a run can have
//!   inside a longer encoded text (a whole body, `Bearer <key>`), standard
//!   and URL-safe alphabets;
//! - any of those with whitespace inserted: line wrapping at a fixed width
//!   (CR/LF, also escaped as `\n`, `%0A`, `&#10;`), header folding, hex dumps
//!   with spaces. NUL bytes count as whitespace, which also catches UTF-16.
//!
//! How: one Aho-Corasick automaton holds every window of every secret in
//! each of those encodings (hex and base64 of a window keep only the
//! characters the window fully determines). The response runs through it
//! twice, in one pass and in linear time, each view remembering for each of
//! its bytes the source bytes it came from: once with whitespace dropped
//! (the secret as is, hex, base64), and once as a *canonical view* in which
//! escapes are decoded as well (escaped forms, in any mixture). Every
//! match marks a span of source bytes; overlapping and touching spans merge
//! and each merged span becomes one [`REDACTED`]. Both automaton states carry
//! across chunks, so a reflection split over chunk boundaries is found
//! without rescanning anything; a [`Stream`] holds back only the bytes a
//! match not yet complete could still cover (fewer than the longest needle,
//! plus an unfinished escape, plus at most [`MAX_GAP`] bytes of whitespace).
//!
//! What it cannot catch, by construction: a reflection the server transforms
//! on purpose (compresses, encrypts, reverses, encodes twice, splits into
//! pieces shorter than 12 bytes with something other than whitespace between
//! them). [`super::net`] keeps compression out of the picture for requests
//! that carry a secret; the rest is why a secret is granted only to hosts
//! trusted with it.
//!
//! This module only finds and replaces; it never sees a request, and it
//! decides nothing about what the guest may do.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use aho_corasick::automaton::{Automaton, StateID};
use aho_corasick::dfa::DFA;
use aho_corasick::nfa::contiguous::NFA;
use aho_corasick::{Anchored, MatchKind};
use base64::Engine as _;
use sha2::{Digest, Sha256};

/// Text that replaces a reflected secret.
pub(crate) const REDACTED: &str = "[REDACTED]";

/// Shortest run of a secret that counts as the secret, in bytes.
pub(crate) const WINDOW: usize = 12;

/// Whitespace (source bytes) after which a view starts over: a reflection
/// wrapped with more padding than this between two pieces is not joined
/// up. It bounds what a long run of whitespace makes the stream
/// hold back; 64 covers CR/LF plus any sane indentation.
pub(crate) const MAX_GAP: u64 = 64;

/// Encoded needles shorter than this are dropped: one to three characters
/// of base64 would match everywhere. Only secrets under four bytes lose
/// anything by it (their base64 and hex forms).
const MIN_ENCODED: usize = 4;

/// Up to this many needle bytes the matcher is a DFA (fastest, about 450
/// bytes of table per needle byte: 1.1 MiB for a 40-byte secret); above it,
/// a contiguous NFA (a tenth of the memory, 60-80% of the speed). 4 KiB of
/// needles is a secret of about 50 bytes.
const DFA_MAX_NEEDLE_BYTES: usize = 4 << 10;

/// Redactors kept for reuse across calls, most recent last.
const CACHE_SLOTS: usize = 8;

/// Longest HTML named character reference the decoder knows.
const MAX_ENTITY_NAME: usize = 16;

/// Why a redactor could not be built. The caller must refuse the response:
/// passing it on unredacted is not an option.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RedactError {
    /// The automaton outgrew its state ids (secrets of many megabytes).
    #[error("cannot build the secret matcher: {0}")]
    Build(#[from] aho_corasick::BuildError),
    /// The automaton refused an unanchored start; a bug in how it is built.
    #[error("cannot start the secret matcher: {0}")]
    Start(#[from] aho_corasick::MatchError),
}

/// The matcher for one set of secrets. Immutable and shared; each response
/// scans through its own [`Stream`].
pub(crate) struct Redactor {
    engine: Engine,
    start: StateID,
    /// For each pattern, the index of the (first) secret it came from.
    owners: Vec<usize>,
    secrets: usize,
    /// Longest needle, in bytes; at least 1.
    max_len: usize,
}

enum Engine {
    Dfa(DFA),
    Nfa(NFA),
}

impl std::fmt::Debug for Redactor {
    // Needles are the secret in other clothes: never print them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("secrets", &self.secrets)
            .field("patterns", &self.owners.len())
            .finish_non_exhaustive()
    }
}

impl Redactor {
    /// Build the matcher for `secrets` (empty ones are ignored).
    pub(crate) fn new(secrets: &[&[u8]]) -> Result<Self, RedactError> {
        Self::build(secrets, DFA_MAX_NEEDLE_BYTES)
    }

    /// [`Redactor::new`], with a DFA up to `dfa_limit` needle bytes.
    fn build(secrets: &[&[u8]], dfa_limit: usize) -> Result<Self, RedactError> {
        let mut needles: Vec<(Vec<u8>, usize)> = Vec::new();
        for (owner, secret) in secrets.iter().enumerate() {
            needles.extend(needles_of(secret).into_iter().map(|n| (n, owner)));
        }
        // The matcher ignores ASCII case: needles equal but for case are one.
        for (n, _) in &mut needles {
            n.make_ascii_lowercase();
        }
        needles.sort();
        needles.dedup_by(|a, b| a.0 == b.0);
        let bytes: usize = needles.iter().map(|(n, _)| n.len()).sum();
        let patterns = needles.iter().map(|(n, _)| n);
        let engine = if bytes <= dfa_limit {
            Engine::Dfa(
                DFA::builder()
                    .match_kind(MatchKind::Standard)
                    .ascii_case_insensitive(true)
                    .prefilter(false)
                    .build(patterns)?,
            )
        } else {
            Engine::Nfa(
                NFA::builder()
                    .match_kind(MatchKind::Standard)
                    .ascii_case_insensitive(true)
                    .prefilter(false)
                    .build(patterns)?,
            )
        };
        let start = match &engine {
            Engine::Dfa(a) => a.start_state(Anchored::No)?,
            Engine::Nfa(a) => a.start_state(Anchored::No)?,
        };
        Ok(Self {
            engine,
            start,
            max_len: needles.iter().map(|(n, _)| n.len()).max().unwrap_or(1),
            owners: needles.into_iter().map(|(_, o)| o).collect(),
            secrets: secrets.len(),
        })
    }

    /// The redactor for `secrets`, built once per process for each set in
    /// use (the last [`CACHE_SLOTS`] sets are kept). Building takes a few
    /// milliseconds for an ordinary key and tens for a kilobyte one, on the
    /// caller's thread: too little to hand to a blocking pool, and paid once.
    pub(crate) fn shared(secrets: &[&str]) -> Result<Arc<Self>, RedactError> {
        static CACHE: Mutex<Vec<([u8; 32], Arc<Redactor>)>> = Mutex::new(Vec::new());
        let mut hash = Sha256::new();
        for s in secrets {
            hash.update((s.len() as u64).to_le_bytes());
            hash.update(s.as_bytes());
        }
        let key: [u8; 32] = hash.finalize().into();
        // A poisoned cache is only a missed reuse.
        if let Ok(mut cache) = CACHE.lock()
            && let Some(i) = cache.iter().position(|(k, _)| *k == key)
        {
            let hit = cache.remove(i);
            let redactor = hit.1.clone();
            cache.push(hit);
            return Ok(redactor);
        }
        let bytes: Vec<&[u8]> = secrets.iter().map(|s| s.as_bytes()).collect();
        let built = Arc::new(Self::new(&bytes)?);
        if let Ok(mut cache) = CACHE.lock() {
            cache.push((key, built.clone()));
            if cache.len() > CACHE_SLOTS {
                cache.remove(0);
            }
        }
        Ok(built)
    }

    /// A scan of one byte stream.
    pub(crate) fn stream(self: &Arc<Self>) -> Stream {
        Stream {
            redactor: self.clone(),
            buf: Vec::new(),
            base: 0,
            total: 0,
            decoded: 0,
            strip: View::new(self),
            canon: View::new(self),
            spans: Vec::new(),
            open: false,
            hits: vec![false; self.secrets],
            reported: vec![false; self.secrets],
        }
    }

    /// Where `data` reflects a secret: merged source spans, in order.
    pub(crate) fn find(self: &Arc<Self>, data: &[u8]) -> Found {
        let mut stream = self.stream();
        stream.scan(data, true);
        Found {
            spans: stream
                .spans
                .iter()
                .map(|&(a, b)| a as usize..b as usize)
                .collect(),
            secrets: stream.take_hits(),
        }
    }

    /// `data` with every reflection replaced by [`REDACTED`], and which
    /// secrets were found.
    pub(crate) fn redact(self: &Arc<Self>, data: &[u8]) -> (Vec<u8>, Vec<usize>) {
        let mut stream = self.stream();
        let mut out = stream.push(data);
        out.extend(stream.finish());
        (out, stream.take_hits())
    }
}

/// What [`Redactor::find`] found.
#[derive(Debug, Default)]
pub(crate) struct Found {
    /// Source byte ranges to replace, sorted, disjoint and not touching.
    pub(crate) spans: Vec<Range<usize>>,
    /// Indexes of the secrets seen.
    pub(crate) secrets: Vec<usize>,
}

/// `data[range]` with the parts of `spans` (in `data` coordinates) that
/// fall inside `range` replaced by [`REDACTED`], one marker per span.
pub(crate) fn replace(data: &[u8], range: Range<usize>, spans: &[Range<usize>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(range.len());
    let mut at = range.start;
    for span in spans {
        let (a, b) = (span.start.max(range.start), span.end.min(range.end));
        if a >= b {
            continue;
        }
        out.extend_from_slice(&data[at..a]);
        out.extend_from_slice(REDACTED.as_bytes());
        at = b;
    }
    out.extend_from_slice(&data[at..range.end]);
    out
}

/// One response body (or any byte stream) on its way through a
/// [`Redactor`]. Feed it chunks with [`Stream::push`], end it with
/// [`Stream::finish`]; what comes out is the stream with reflections
/// replaced, delayed by at most the bytes a match could still cover.
pub(crate) struct Stream {
    redactor: Arc<Redactor>,
    /// Source bytes from `base` on: received, not yet let out.
    buf: Vec<u8>,
    /// Source offset of `buf[0]`; everything before it is out.
    base: u64,
    /// Source bytes received.
    total: u64,
    /// Source offset up to which the canonical view has decoded.
    decoded: u64,
    /// The stream with whitespace dropped and nothing decoded: finds the
    /// secret as it is, and hex or base64 of it, even where the canonical
    /// view read a stray `%`, `&` or `\` as the start of an escape.
    strip: View,
    /// The canonical view: escapes decoded, whitespace dropped.
    canon: View,
    /// Source ranges to replace: sorted, disjoint, not touching.
    spans: Vec<(u64, u64)>,
    /// The first span's marker is already out (it started before `base`).
    open: bool,
    hits: Vec<bool>,
    reported: Vec<bool>,
}

impl Stream {
    /// Take in `chunk`; return what can safely be let out now.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        self.scan(chunk, false);
        let safe = self.safe();
        self.emit(safe)
    }

    /// End of input: return everything still held.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        self.scan(&[], true);
        let out = self.emit(self.total);
        self.spans.clear();
        self.open = false;
        out
    }

    /// Bytes received and not yet let out.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.buf.len()
    }

    /// Indexes of the secrets found since the last call.
    pub(crate) fn take_hits(&mut self) -> Vec<usize> {
        let mut new = Vec::new();
        for (i, (hit, reported)) in self.hits.iter().zip(&mut self.reported).enumerate() {
            if *hit && !*reported {
                *reported = true;
                new.push(i);
            }
        }
        new
    }

    fn scan(&mut self, chunk: &[u8], last: bool) {
        let redactor = self.redactor.clone();
        match &redactor.engine {
            Engine::Dfa(aut) => self.scan_with(aut, &redactor, chunk, last),
            Engine::Nfa(aut) => self.scan_with(aut, &redactor, chunk, last),
        }
    }

    fn scan_with<A: Automaton>(&mut self, aut: &A, r: &Redactor, chunk: &[u8], last: bool) {
        // Matches are rare: the loops only note them (state and source
        // span), and spans are merged once the chunk is through.
        let mut found: Vec<(StateID, u64, u64)> = Vec::new();
        let strip = &mut self.strip;
        for (&b, from) in chunk.iter().zip(self.total..) {
            if DROPPED[usize::from(b)] {
                strip.skip(1, r);
            } else if let Some(sid) = strip.byte(aut, b, from) {
                let start = strip.start_of(longest(aut, sid), self.base);
                found.push((sid, start, from + 1));
            }
        }
        self.buf.extend_from_slice(chunk);
        self.total += chunk.len() as u64;
        self.decoded = decode(
            aut,
            r,
            &mut self.canon,
            &self.buf,
            self.base,
            self.decoded,
            last,
            &mut found,
        );
        for (sid, start, end) in found {
            self.note(aut, r, sid);
            self.add_span(start, end);
        }
    }

    /// Mark the secrets whose needles match at `sid` as seen.
    fn note<A: Automaton>(&mut self, aut: &A, r: &Redactor, sid: StateID) {
        for i in 0..aut.match_len(sid) {
            let pid = aut.match_pattern(sid, i);
            if let Some(&owner) = r.owners.get(pid.as_usize())
                && let Some(hit) = self.hits.get_mut(owner)
            {
                *hit = true;
            }
        }
    }

    fn add_span(&mut self, a: u64, b: u64) {
        // New spans almost always land at the end: search from there.
        let mut i = self.spans.len();
        while i > 0 && self.spans[i - 1].0 > a {
            i -= 1;
        }
        let at = if i > 0 && self.spans[i - 1].1 >= a {
            let prev = &mut self.spans[i - 1];
            prev.1 = prev.1.max(b);
            i - 1
        } else {
            self.spans.insert(i, (a, b));
            i
        };
        while at + 1 < self.spans.len() && self.spans[at + 1].0 <= self.spans[at].1 {
            let next = self.spans.remove(at + 1);
            self.spans[at].1 = self.spans[at].1.max(next.1);
        }
    }

    /// The source offset before which no future match can start.
    fn safe(&self) -> u64 {
        let keep = self.redactor.max_len - 1;
        let strip = self.strip.hold_from(keep, self.total);
        let canon = self.canon.hold_from(keep, self.decoded);
        strip.min(canon).max(self.base)
    }

    /// Let out source bytes up to `upto`, spans replaced.
    fn emit(&mut self, upto: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity((upto - self.base) as usize);
        let mut at = self.base;
        let local = |x: u64| (x - self.base) as usize;
        while let Some(&(a, b)) = self.spans.first() {
            if a >= upto {
                break;
            }
            if a > at {
                out.extend_from_slice(&self.buf[local(at)..local(a)]);
            }
            if !self.open {
                out.extend_from_slice(REDACTED.as_bytes());
            }
            if b >= upto {
                // The span may still grow: keep it, its marker is out.
                self.open = true;
                at = upto;
                break;
            }
            self.spans.remove(0);
            self.open = false;
            at = b;
        }
        if at < upto {
            out.extend_from_slice(&self.buf[local(at)..local(upto)]);
        }
        self.buf.drain(..local(upto));
        self.base = upto;
        out
    }
}

/// Run the canonical view over `buf` (which starts at source offset
/// `base`) from source offset `from` on, stopping before an escape that
/// more input may still complete unless this is the `last` of it. Notes
/// matches in `found`; returns the offset decoded up to.
#[expect(
    clippy::too_many_arguments,
    reason = "the hot loop borrows the stream's fields one by one"
)]
fn decode<A: Automaton>(
    aut: &A,
    r: &Redactor,
    view: &mut View,
    buf: &[u8],
    base: u64,
    from: u64,
    last: bool,
    found: &mut Vec<(StateID, u64, u64)>,
) -> u64 {
    let mut at = from;
    let mut off = (at - base) as usize;
    while let Some(&b) = buf.get(off) {
        if PLAIN[usize::from(b)] {
            if let Some(sid) = view.byte(aut, b, at) {
                found.push((sid, view.start_of(longest(aut, sid), base), at + 1));
            }
            at += 1;
            off += 1;
            continue;
        }
        let (len, token) = if DROPPED[usize::from(b)] {
            (1, Token::Drop)
        } else {
            match token(&buf[off..], last) {
                Some(t) => t,
                None => break,
            }
        };
        let to = at + len as u64;
        match token {
            Token::Drop => view.skip(len as u64, r),
            Token::Byte(b) => {
                if let Some(sid) = view.byte(aut, b, at) {
                    found.push((sid, view.start_of(longest(aut, sid), base), to));
                }
            }
            Token::Char(c) => {
                let mut utf8 = [0u8; 4];
                for &b in c.encode_utf8(&mut utf8).as_bytes() {
                    if let Some(sid) = view.byte(aut, b, at) {
                        found.push((sid, view.start_of(longest(aut, sid), base), to));
                    }
                }
            }
        }
        at = to;
        off += len;
    }
    at
}

/// Length of the longest needle matching at `sid`.
fn longest<A: Automaton>(aut: &A, sid: StateID) -> usize {
    (0..aut.match_len(sid))
        .map(|i| aut.pattern_len(aut.match_pattern(sid, i)))
        .max()
        .unwrap_or(0)
}

/// One view of a stream being matched: the automaton state and where in
/// the source each of its last bytes began.
struct View {
    sid: StateID,
    /// Source offset where each of the last `max_len` view bytes began.
    starts: Ring,
    /// Source bytes of whitespace since the last view byte.
    gap: u64,
}

impl View {
    fn new(r: &Redactor) -> Self {
        Self {
            sid: r.start,
            starts: Ring::new(r.max_len),
            gap: 0,
        }
    }

    /// Feed byte `b`, which began at source offset `from`; the match state
    /// if a needle ends here.
    #[inline]
    fn byte<A: Automaton>(&mut self, aut: &A, b: u8, from: u64) -> Option<StateID> {
        self.gap = 0;
        self.starts.push(from);
        self.sid = aut.next_state(Anchored::No, self.sid, b);
        (aut.is_special(self.sid) && aut.is_match(self.sid)).then_some(self.sid)
    }

    /// `len` source bytes of whitespace went by; past [`MAX_GAP`] the view
    /// starts over, so nothing before the gap can join what comes after.
    fn skip(&mut self, len: u64, r: &Redactor) {
        self.gap += len;
        if self.gap > MAX_GAP && self.starts.len > 0 {
            self.sid = r.start;
            self.starts.len = 0;
        }
    }

    /// Source start of a match `len` view bytes long that just ended. A
    /// match is never longer than the view bytes since the last restart, so
    /// its first byte is in `starts`; the fallback only widens the span.
    fn start_of(&self, len: usize, fallback: u64) -> u64 {
        self.starts.back(len).unwrap_or(fallback)
    }

    /// The earliest source offset a match completed later could start at:
    /// the start of the `keep`th-last view byte (a needle is at most `keep`
    /// bytes plus the one that completes it), or `next` (where the view's
    /// next byte will begin at the earliest) if fewer are kept.
    fn hold_from(&self, keep: usize, next: u64) -> u64 {
        if keep == 0 {
            return next;
        }
        self.starts
            .back(keep.min(self.starts.len))
            .unwrap_or(next)
            .min(next)
    }
}

/// The last few `u64`s pushed, in a power-of-two buffer.
struct Ring {
    buf: Box<[u64]>,
    mask: usize,
    /// Pushes ever made (wrapping); the next slot is `head & mask`.
    head: usize,
    /// How many of the last pushes are kept: at most the capacity.
    len: usize,
}

impl Ring {
    fn new(capacity: usize) -> Self {
        let size = capacity.max(1).next_power_of_two();
        Self {
            buf: vec![0; size].into_boxed_slice(),
            mask: size - 1,
            head: 0,
            len: 0,
        }
    }

    #[inline]
    fn push(&mut self, v: u64) {
        // `mask` is the buffer length minus one: always in bounds.
        self.buf[self.head & self.mask] = v;
        self.head = self.head.wrapping_add(1);
        self.len = (self.len + 1).min(self.mask + 1);
    }

    /// The `k`th value from the back (1 is the last pushed), if kept.
    fn back(&self, k: usize) -> Option<u64> {
        if k == 0 || k > self.len {
            return None;
        }
        self.buf.get(self.head.wrapping_sub(k) & self.mask).copied()
    }
}

/// Every needle that stands for `secret`: each window of it, raw, in hex
/// and in base64 at the three alignments, and each window of the two forms
/// it takes in the canonical view — `canonical(secret)` where the secret
/// itself appears (its own escapes decoded), and the secret without its
/// whitespace where an encoding of it appears (the encoding decoded).
fn needles_of(secret: &[u8]) -> Vec<Vec<u8>> {
    let canon = canonical(secret);
    let stripped: Vec<u8> = secret.iter().copied().filter(|b| !dropped(*b)).collect();
    let mut out = Vec::new();
    for form in [secret, canon.as_slice(), stripped.as_slice()] {
        for w in windows(form) {
            out.push(w.to_vec());
            out.push(hex::encode(w).into_bytes());
            for align in 0..3 {
                let core = base64_core(w, align);
                out.push(core.replace('+', "-").replace('/', "_").into_bytes());
                out.push(core.into_bytes());
            }
        }
    }
    out.retain(|n| !n.is_empty() && (n.len() >= MIN_ENCODED || windows(secret).any(|w| w == n)));
    out
}

/// The runs of `s` that count as the secret: every [`WINDOW`]-byte window,
/// or all of `s` if it is shorter.
fn windows(s: &[u8]) -> impl Iterator<Item = &[u8]> {
    let short = (!s.is_empty() && s.len() < WINDOW).then_some(s);
    s.windows(WINDOW).chain(short)
}

/// The base64 characters fully determined by `w` when it starts `align`
/// bytes into a 3-byte group; the characters at either end also depend on
/// the neighbouring bytes and are left out.
fn base64_core(w: &[u8], align: usize) -> String {
    let mut padded = vec![0u8; align];
    padded.extend_from_slice(w);
    let encoded = base64::engine::general_purpose::STANDARD_NO_PAD.encode(&padded);
    let first = (8 * align).div_ceil(6);
    let end = (8 * (align + w.len())) / 6;
    encoded.get(first..end).unwrap_or_default().to_owned()
}

/// The canonical view of `data` as one string: escapes decoded, whitespace
/// dropped. The same decoding [`Stream`] applies, minus the gap restarts.
fn canonical(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let mut at = 0;
    while at < data.len() {
        let Some((len, token)) = token(&data[at..], true) else {
            break;
        };
        match token {
            Token::Drop => {}
            Token::Byte(b) => out.push(b),
            Token::Char(c) => out.extend_from_slice(c.encode_utf8(&mut [0u8; 4]).as_bytes()),
        }
        at += len;
    }
    out
}

/// What one source token stands for in the canonical view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Byte(u8),
    /// A non-ASCII character, as its UTF-8 bytes.
    Char(char),
    /// Whitespace: nothing.
    Drop,
}

/// Bytes that stand for themselves: not whitespace, not an escape start.
static PLAIN: [bool; 256] = {
    let mut t = [true; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = !dropped(i as u8) && !matches!(i as u8, b'%' | b'\\' | b'&');
        i += 1;
    }
    t
};

/// [`dropped`] as a table, for the hot loops.
static DROPPED: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = dropped(i as u8);
        i += 1;
    }
    t
};

/// Whitespace and NUL: what wrapping, folding, hex dumps and UTF-16 insert.
const fn dropped(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n' | 0x0b | 0x0c | 0)
}

fn byte(b: u8) -> Token {
    if dropped(b) {
        Token::Drop
    } else {
        Token::Byte(b)
    }
}

fn char_token(c: char) -> Token {
    match u8::try_from(c) {
        Ok(b) if b.is_ascii() => byte(b),
        _ => Token::Char(c),
    }
}

/// The outcome of trying one escape syntax.
enum Parse {
    /// The escape is this many significant bytes long and stands for this.
    Done(usize, Token),
    /// Not this escape: the first byte stands for itself.
    No,
    /// Input ends before it is clear.
    More,
}

/// Longest escape the decoder knows, in significant bytes: `&` and a
/// 16-letter name and `;`, or `\uD83D\uDE00`.
const MAX_ESCAPE: usize = 24;

/// The significant bytes of an escape: whitespace inside one is skipped,
/// since wrapping at a fixed width falls inside escapes as readily as
/// between them (`&#x4\n1;`, `%4\r\n1`).
struct Esc<'a> {
    src: &'a [u8],
    /// Next source index to read.
    next: usize,
    /// Significant bytes read so far, with their source index.
    got: [(u8, u8); MAX_ESCAPE],
    len: usize,
    skipped: u64,
    /// Reading stopped for a reason other than the end of the input (too
    /// much whitespace, too long): more input would not help.
    cut: bool,
}

impl<'a> Esc<'a> {
    fn new(src: &'a [u8]) -> Self {
        Self {
            src,
            next: 0,
            got: [(0, 0); MAX_ESCAPE],
            len: 0,
            skipped: 0,
            cut: false,
        }
    }

    /// The `i`th significant byte, if the input has it.
    fn get(&mut self, i: usize) -> Option<u8> {
        while self.len <= i {
            if self.len == MAX_ESCAPE {
                self.cut = true;
                return None;
            }
            let &b = self.src.get(self.next)?;
            self.next += 1;
            if dropped(b) {
                self.skipped += 1;
                if self.skipped > MAX_GAP {
                    self.cut = true;
                    return None;
                }
                continue;
            }
            // At most MAX_ESCAPE + MAX_GAP bytes in: fits.
            let Ok(at) = u8::try_from(self.next - 1) else {
                self.cut = true;
                return None;
            };
            self.got[self.len] = (b, at);
            self.len += 1;
        }
        Some(self.got[i].0)
    }

    /// What a missing byte means: more input may complete the escape,
    /// unless reading stopped for another reason.
    fn missing(&self) -> Parse {
        if self.cut { Parse::No } else { Parse::More }
    }

    /// Source length of the first `n` significant bytes.
    fn source_len(&self, n: usize) -> usize {
        n.checked_sub(1)
            .and_then(|i| self.got.get(i))
            .map_or(1, |&(_, at)| usize::from(at) + 1)
    }

    /// `n` hex digits from significant byte `at` on.
    fn hex(&mut self, at: usize, n: usize) -> Result<u32, Parse> {
        let mut v = 0;
        for i in at..at + n {
            let Some(c) = self.get(i) else {
                return Err(self.missing());
            };
            let Some(d) = char::from(c).to_digit(16) else {
                return Err(Parse::No);
            };
            v = v * 16 + d;
        }
        Ok(v)
    }
}

/// The token at the start of `s` (not empty) and its length in bytes, or
/// `None` if `s` ends inside what may still become an escape and more input
/// may follow (`last` is false).
fn token(s: &[u8], last: bool) -> Option<(usize, Token)> {
    let first = *s.first()?;
    let mut esc = Esc::new(s);
    let parsed = match first {
        b'%' => match esc.hex(1, 2) {
            Ok(v) => Parse::Done(3, byte(v as u8)),
            Err(p) => p,
        },
        b'\\' => backslash(&mut esc),
        b'&' => entity(&mut esc, last),
        b => return Some((1, byte(b))),
    };
    match parsed {
        Parse::Done(n, token) => Some((esc.source_len(n), token)),
        Parse::More if !last => None,
        Parse::More | Parse::No => Some((1, Token::Byte(first))),
    }
}

/// JSON and C-style escapes: `\uXXXX` (and surrogate pairs), `\xHH`,
/// `\"`, `\/`, `\\`, `\'`, and the whitespace ones.
fn backslash(esc: &mut Esc<'_>) -> Parse {
    let Some(c) = esc.get(1) else {
        return esc.missing();
    };
    match c {
        b'u' => unicode(esc),
        b'x' => match esc.hex(2, 2) {
            Ok(v) => Parse::Done(4, byte(v as u8)),
            Err(p) => p,
        },
        b'n' | b'r' | b't' | b'f' | b'v' | b'0' => Parse::Done(2, Token::Drop),
        b'b' => Parse::Done(2, Token::Byte(8)),
        b'/' | b'"' | b'\\' | b'\'' => Parse::Done(2, Token::Byte(c)),
        _ => Parse::No,
    }
}

fn unicode(esc: &mut Esc<'_>) -> Parse {
    let high = match esc.hex(2, 4) {
        Ok(v) => v,
        Err(p) => return p,
    };
    if !(0xd800..0xdc00).contains(&high) {
        return char::from_u32(high).map_or(Parse::No, |c| Parse::Done(6, char_token(c)));
    }
    match (esc.get(6), esc.get(7)) {
        (Some(b'\\'), Some(b'u')) => {}
        (None, _) | (Some(b'\\'), None) => return esc.missing(),
        _ => return Parse::No,
    }
    let low = match esc.hex(8, 4) {
        Ok(v) => v,
        Err(p) => return p,
    };
    if !(0xdc00..0xe000).contains(&low) {
        return Parse::No;
    }
    let c = 0x10000 + ((high - 0xd800) << 10) + (low - 0xdc00);
    char::from_u32(c).map_or(Parse::No, |c| Parse::Done(12, char_token(c)))
}

/// HTML character references: `&#NN;`, `&#xHH;` (the `;` optional, as
/// browsers read them) and the named references in [`ENTITIES`].
fn entity(esc: &mut Esc<'_>, last: bool) -> Parse {
    let Some(c) = esc.get(1) else {
        return esc.missing();
    };
    if c == b'#' {
        let (from, radix, max) = match esc.get(2) {
            None => return esc.missing(),
            Some(b'x' | b'X') => (3, 16, 8),
            Some(_) => (2, 10, 10),
        };
        let mut value: u32 = 0;
        let mut digits = 0;
        let end = loop {
            let at = from + digits;
            match esc.get(at) {
                Some(d) => match char::from(d).to_digit(radix) {
                    Some(v) if digits < max => {
                        value = value.saturating_mul(radix).saturating_add(v);
                        digits += 1;
                    }
                    Some(_) => return Parse::No,
                    None => break at,
                },
                // More digits, or the `;`, may follow.
                None if !esc.cut && !last => return Parse::More,
                None => break at,
            }
        };
        let len = if esc.get(end) == Some(b';') {
            end + 1
        } else {
            end
        };
        return match char::from_u32(value) {
            Some(c) if digits > 0 => Parse::Done(len, char_token(c)),
            _ => Parse::No,
        };
    }
    if !c.is_ascii_alphabetic() {
        return Parse::No;
    }
    let mut name = [0u8; MAX_ENTITY_NAME];
    let mut len = 0;
    loop {
        match esc.get(1 + len) {
            Some(b';') => break,
            Some(b) if b.is_ascii_alphanumeric() && len < MAX_ENTITY_NAME => {
                name[len] = b;
                len += 1;
            }
            Some(_) => return Parse::No,
            None => return esc.missing(),
        }
    }
    ENTITIES
        .iter()
        .find(|(n, _)| n.as_bytes() == &name[..len])
        .map_or(Parse::No, |(_, c)| Parse::Done(len + 2, char_token(*c)))
}

/// HTML named character references for ASCII punctuation and whitespace
/// (the characters a secret or its encodings can contain), plus `&nbsp;`.
static ENTITIES: &[(&str, char)] = &[
    ("Tab", '\t'),
    ("NewLine", '\n'),
    ("nbsp", '\u{a0}'),
    ("excl", '!'),
    ("quot", '"'),
    ("QUOT", '"'),
    ("num", '#'),
    ("dollar", '$'),
    ("percnt", '%'),
    ("amp", '&'),
    ("AMP", '&'),
    ("apos", '\''),
    ("lpar", '('),
    ("rpar", ')'),
    ("ast", '*'),
    ("midast", '*'),
    ("plus", '+'),
    ("comma", ','),
    ("period", '.'),
    ("sol", '/'),
    ("colon", ':'),
    ("semi", ';'),
    ("lt", '<'),
    ("LT", '<'),
    ("equals", '='),
    ("gt", '>'),
    ("GT", '>'),
    ("quest", '?'),
    ("commat", '@'),
    ("lsqb", '['),
    ("lbrack", '['),
    ("bsol", '\\'),
    ("rsqb", ']'),
    ("rbrack", ']'),
    ("Hat", '^'),
    ("lowbar", '_'),
    ("UnderBar", '_'),
    ("grave", '`'),
    ("DiacriticalGrave", '`'),
    ("lcub", '{'),
    ("lbrace", '{'),
    ("verbar", '|'),
    ("vert", '|'),
    ("VerticalLine", '|'),
    ("rcub", '}'),
    ("rbrace", '}'),
];

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "sk-Abc123/xyz+QRS=tuv_987-LMN.opq~";

    fn redactor(secrets: &[&str]) -> Arc<Redactor> {
        let bytes: Vec<&[u8]> = secrets.iter().map(|s| s.as_bytes()).collect();
        Arc::new(Redactor::new(&bytes).expect("redactor builds"))
    }

    fn redact(r: &Arc<Redactor>, text: &[u8]) -> Vec<u8> {
        r.redact(text).0
    }

    /// Redact `text` fed in pieces of the given sizes (cycled).
    fn redact_chunked(r: &Arc<Redactor>, text: &[u8], sizes: &[usize]) -> Vec<u8> {
        let mut stream = r.stream();
        let mut out = Vec::new();
        let mut at = 0;
        let mut i = 0;
        while at < text.len() {
            let n = sizes[i % sizes.len()].clamp(1, text.len() - at);
            out.extend(stream.push(&text[at..at + n]));
            at += n;
            i += 1;
        }
        out.extend(stream.finish());
        out
    }

    fn contains(hay: &[u8], needle: &[u8]) -> bool {
        !needle.is_empty()
            && hay
                .windows(needle.len())
                .any(|w| w.eq_ignore_ascii_case(needle))
    }

    /// The runs of `secret` that must not survive.
    fn runs(secret: &[u8]) -> Vec<&[u8]> {
        if secret.len() <= WINDOW {
            vec![secret]
        } else {
            secret.windows(WINDOW).collect()
        }
    }

    // Encoders, written independently of the decoder under test.
    fn raw(s: &[u8]) -> String {
        String::from_utf8_lossy(s).into_owned()
    }
    fn json(s: &[u8]) -> String {
        let quoted = serde_json::to_string(&raw(s)).expect("json");
        quoted[1..quoted.len() - 1].replace('/', "\\/")
    }
    fn json_u(s: &[u8]) -> String {
        s.iter().map(|b| format!("\\u{:04x}", b)).collect()
    }
    fn json_u_upper(s: &[u8]) -> String {
        s.iter().map(|b| format!("\\u{:04X}", b)).collect()
    }
    fn percent(s: &[u8]) -> String {
        s.iter().map(|b| format!("%{b:02X}")).collect()
    }
    fn percent_lower(s: &[u8]) -> String {
        s.iter().map(|b| format!("%{b:02x}")).collect()
    }
    fn percent_reserved(s: &[u8]) -> String {
        s.iter()
            .map(|&b| {
                if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                    char::from(b).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect()
    }
    fn html_dec(s: &[u8]) -> String {
        s.iter().map(|b| format!("&#{b};")).collect()
    }
    fn html_dec_padded(s: &[u8]) -> String {
        s.iter().map(|b| format!("&#{b:04}")).collect()
    }
    fn html_hex(s: &[u8]) -> String {
        s.iter().map(|b| format!("&#x{b:x};")).collect()
    }
    fn html_hex_upper(s: &[u8]) -> String {
        s.iter().map(|b| format!("&#X{b:02X};")).collect()
    }
    fn html_named(s: &[u8]) -> String {
        s.iter()
            .map(
                |&b| match ENTITIES.iter().find(|(_, c)| u32::from(*c) == u32::from(b)) {
                    Some((name, _)) => format!("&{name};"),
                    None => char::from(b).to_string(),
                },
            )
            .collect()
    }
    fn hex_lower(s: &[u8]) -> String {
        hex::encode(s)
    }
    fn hex_upper(s: &[u8]) -> String {
        hex::encode_upper(s)
    }
    fn hex_dump(s: &[u8]) -> String {
        s.iter().map(|b| format!("{b:02x} ")).collect()
    }
    fn utf16le(s: &[u8]) -> String {
        s.iter().flat_map(|&b| [char::from(b), '\0']).collect()
    }
    fn mixed(s: &[u8]) -> String {
        s.iter()
            .enumerate()
            .map(|(i, b)| match i % 4 {
                0 => format!("%{b:02x}"),
                1 => format!("\\u{b:04x}"),
                2 => format!("&#{b};"),
                _ => char::from(*b).to_string(),
            })
            .collect()
    }

    type Encoder = fn(&[u8]) -> String;

    /// Every character-wise form: the encoding of a run is a substring of
    /// the encoding of the secret.
    const FORMS: &[(&str, Encoder)] = &[
        ("raw", raw),
        ("json", json),
        ("json \\u", json_u),
        ("json \\U", json_u_upper),
        ("percent", percent),
        ("percent lower", percent_lower),
        ("percent reserved", percent_reserved),
        ("html decimal", html_dec),
        ("html decimal without ;", html_dec_padded),
        ("html hex", html_hex),
        ("html HEX", html_hex_upper),
        ("html named", html_named),
        ("hex", hex_lower),
        ("HEX", hex_upper),
        ("hex dump", hex_dump),
        ("utf-16", utf16le),
        ("mixed escapes", mixed),
    ];

    /// Whether any run of `secret`, encoded by `enc`, is in `out`.
    fn leaks_form(out: &[u8], secret: &[u8], enc: Encoder) -> bool {
        runs(secret)
            .iter()
            .any(|w| contains(out, enc(w).as_bytes()))
    }

    /// Whether `out` holds any run of `secret` in base64: decode every run
    /// of base64 characters (whitespace and `\n` escapes removed) at each
    /// of the four character offsets and look for the raw run.
    fn leaks_base64(out: &[u8], secret: &[u8]) -> bool {
        let text = String::from_utf8_lossy(out)
            .replace("\\n", "")
            .replace("\\r", "")
            .replace(['\r', '\n', ' '], "");
        let value = |c: char| -> Option<u32> {
            match c {
                'A'..='Z' => Some(c as u32 - 'A' as u32),
                'a'..='z' => Some(c as u32 - 'a' as u32 + 26),
                '0'..='9' => Some(c as u32 - '0' as u32 + 52),
                '+' | '-' => Some(62),
                '/' | '_' => Some(63),
                _ => None,
            }
        };
        let chars: Vec<char> = text.chars().collect();
        for run in chars.split(|c| value(*c).is_none()) {
            for offset in 0..4.min(run.len()) {
                let mut bits = 0u32;
                let mut n = 0;
                let mut bytes = Vec::new();
                for c in &run[offset..] {
                    bits = (bits << 6) | value(*c).unwrap_or(0);
                    n += 6;
                    if n >= 8 {
                        n -= 8;
                        bytes.push((bits >> n) as u8);
                        bits &= (1 << n) - 1;
                    }
                }
                if runs(secret)
                    .iter()
                    .any(|w| bytes.windows(w.len()).any(|b| b == *w))
                {
                    return true;
                }
            }
        }
        false
    }

    fn base64_std(s: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }
    fn base64_url(s: &[u8]) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s)
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

    #[test]
    fn every_character_wise_form_is_redacted() {
        let r = redactor(&[SECRET]);
        for (name, enc) in FORMS {
            let body = format!(
                "{{\"echo\": \"Bearer {}\", \"n\": 1}}",
                enc(SECRET.as_bytes())
            );
            let out = redact(&r, body.as_bytes());
            assert!(
                !leaks_form(&out, SECRET.as_bytes(), *enc),
                "{name}: {}",
                raw(&out)
            );
            assert!(contains(&out, REDACTED.as_bytes()), "{name}: {}", raw(&out));
            assert!(
                out.starts_with(b"{\"echo\": \"Bearer "),
                "{name}: {}",
                raw(&out)
            );
            assert!(out.ends_with(b"\", \"n\": 1}"), "{name}: {}", raw(&out));
        }
    }

    /// A truncated echo (an error quoting the start of a key) is caught
    /// from 12 bytes on, at the start, middle or end of the secret.
    #[test]
    fn any_run_of_twelve_is_redacted() {
        let r = redactor(&[SECRET]);
        let s = SECRET.as_bytes();
        for start in 0..=s.len() - WINDOW {
            for end in start + WINDOW..=s.len() {
                for (name, enc) in FORMS {
                    let body = format!("invalid credential: Bearer {}...", enc(&s[start..end]));
                    let out = redact(&r, body.as_bytes());
                    assert!(
                        !leaks_form(&out, &s[start..end], *enc),
                        "{name} {start}..{end}: {}",
                        raw(&out)
                    );
                }
            }
        }
        // Eleven bytes are not the secret.
        let body = format!("key starts {}...", &SECRET[..WINDOW - 1]);
        assert_eq!(redact(&r, body.as_bytes()), body.as_bytes());
    }

    /// Base64 of a longer text holding the secret, at every alignment,
    /// both alphabets, with and without padding and wrapping.
    #[test]
    fn base64_at_every_alignment_is_redacted() {
        let r = redactor(&[SECRET]);
        for prefix in 0..6 {
            let inner = format!("{}Bearer {SECRET} and more", "p".repeat(prefix));
            for (name, enc) in [("std", base64_std as Encoder), ("url", base64_url)] {
                let encoded = enc(inner.as_bytes());
                for (wrapped, label) in [
                    (encoded.clone(), "plain"),
                    (wrap(&encoded, 76, "\r\n"), "mime"),
                    (wrap(&encoded, 64, "\n"), "pem"),
                    (json(wrap(&encoded, 60, "\n").as_bytes()), "json \\n"),
                ] {
                    let body = format!("data: {wrapped}\n");
                    let out = redact(&r, body.as_bytes());
                    assert!(
                        !leaks_base64(&out, SECRET.as_bytes()),
                        "{name} {label} prefix {prefix}: {}",
                        raw(&out)
                    );
                }
            }
        }
        // A secret of exactly one window (or shorter) has a single run: only
        // the needle at its own alignment can find it.
        for secret in ["0123456789ab", "k3y-5"] {
            let r = redactor(&[secret]);
            for prefix in 0..3 {
                for (name, enc) in [("std", base64_std as Encoder), ("url", base64_url)] {
                    let inner = format!("{}{secret}.", "p".repeat(prefix));
                    let out = redact(&r, enc(inner.as_bytes()).as_bytes());
                    assert!(
                        !leaks_base64(&out, secret.as_bytes()),
                        "{secret} {name} prefix {prefix}: {}",
                        raw(&out)
                    );
                }
            }
        }
        // `Authorization: Basic`-style: base64 of `Bearer <key>` in a header.
        let header = base64_std(format!("Bearer {SECRET}").as_bytes());
        let out = redact(&r, header.as_bytes());
        assert!(!leaks_base64(&out, SECRET.as_bytes()), "{}", raw(&out));
    }

    /// `secret` encoded by `enc` with `sep` after every `width` encoded
    /// bytes: an escaped line break goes between escapes, never inside one
    /// (that would take a second level of escaping to read back).
    fn wrap_units(secret: &[u8], enc: Encoder, width: usize, sep: &str) -> String {
        secret.chunks(width).map(enc).collect::<Vec<_>>().join(sep)
    }

    /// An echo wrapped at a fixed width, with raw line breaks anywhere
    /// (inside escapes too), escaped ones between escapes, and indentation.
    #[test]
    fn wrapped_echoes_are_redacted() {
        let r = redactor(&[SECRET]);
        let s = SECRET.as_bytes();
        for (name, enc) in FORMS {
            let encoded = enc(s);
            for width in [1, 2, 3, 5, 7, 8, 13, 16, 40] {
                let mut cases: Vec<(String, &str)> = [r"\n", r"\r\n", r"\r\n    ", "%0A", "&#10;"]
                    .into_iter()
                    .map(|sep| (wrap_units(s, *enc, width, sep), sep))
                    .collect();
                for sep in ["\n", "\r\n", "\r\n    "] {
                    cases.push((wrap(&encoded, width, sep), sep));
                }
                for (wrapped, sep) in cases {
                    let body = format!("echo: {wrapped}\nend");
                    let out = redact(&r, body.as_bytes());
                    let joined = raw(&out).replace(sep, "");
                    assert!(
                        !leaks_form(joined.as_bytes(), s, *enc),
                        "{name} width {width} sep {sep:?}: {}",
                        raw(&out)
                    );
                }
            }
        }
    }

    /// Splitting the input anywhere changes nothing: every single split
    /// point, every pair of split points on a short body, byte by byte.
    #[test]
    fn chunk_splits_at_every_offset_change_nothing() {
        let r = redactor(&[SECRET]);
        let mut bodies: Vec<String> = FORMS
            .iter()
            .map(|(_, enc)| {
                format!(
                    "a {} b {} c",
                    enc(SECRET.as_bytes()),
                    enc(&SECRET.as_bytes()[3..17])
                )
            })
            .collect();
        bodies.push(base64_std(format!("xx{SECRET}yy").as_bytes()));
        bodies.push(format!("{}{SECRET}", " ".repeat(200)));
        for body in &bodies {
            let body = body.as_bytes();
            let whole = redact(&r, body);
            assert_ne!(whole, body);
            for at in 0..=body.len() {
                let mut stream = r.stream();
                let mut out = stream.push(&body[..at]);
                out.extend(stream.push(&body[at..]));
                out.extend(stream.finish());
                assert_eq!(raw(&out), raw(&whole), "split at {at}");
            }
            assert_eq!(redact_chunked(&r, body, &[1]), whole);
        }
        let short = format!("[{}]", mixed(SECRET.as_bytes()));
        let short = short.as_bytes();
        let whole = redact(&r, short);
        for i in 0..=short.len() {
            for j in i..=short.len() {
                let mut stream = r.stream();
                let mut out = stream.push(&short[..i]);
                out.extend(stream.push(&short[i..j]));
                out.extend(stream.push(&short[j..]));
                out.extend(stream.finish());
                assert_eq!(out, whole, "splits at {i}, {j}");
            }
        }
    }

    #[test]
    fn text_without_the_secret_passes_unchanged() {
        let r = redactor(&[SECRET, "another-secret-value-0123"]);
        for text in [
            "",
            "plain text",
            "%41%42%zz %4 \\u0041\\uD83D\\uDE00 \\uD800x \\x41 \\q &amp; &#65; &#x41 &bogus; & &# &#x",
            "{\"a\": \"b\\n\\\"c\\\"\"}\r\n\t  \0\0",
            "sk-Abc123/x",        // eleven bytes of the secret, then nothing
            "c2stQWJjMTIzL3g",    // base64 of a shorter run
            "6b2d41626331323378", // hex of nine bytes
        ] {
            assert_eq!(raw(&redact(&r, text.as_bytes())), text);
            assert_eq!(raw(&redact_chunked(&r, text.as_bytes(), &[1, 2, 3])), text);
        }
        let mut body = Vec::new();
        for i in 0..20_000u32 {
            body.extend_from_slice(format!("{i} &amp; %20 \\u00e9 ").as_bytes());
        }
        assert_eq!(redact_chunked(&r, &body, &[4096, 1, 777]), body);
    }

    #[test]
    fn every_occurrence_becomes_one_marker() {
        let r = redactor(&["hunter2"]);
        assert_eq!(
            redact(&r, b"a hunter2 b HUNTER2"),
            b"a [REDACTED] b [REDACTED]"
        );
        assert_eq!(redact(&r, b"hunter"), b"hunter");
        let r = redactor(&[SECRET]);
        let twice = format!("{SECRET}{SECRET}");
        assert_eq!(redact(&r, twice.as_bytes()), REDACTED.as_bytes());
        let found = r.find(format!("x {SECRET} y {} z", percent(SECRET.as_bytes())).as_bytes());
        assert_eq!(found.spans.len(), 2, "{found:?}");
        assert_eq!(found.secrets, vec![0]);
    }

    /// Which secret was seen is reported once per stream.
    #[test]
    fn hits_name_the_secret() {
        let r = redactor(&["first-secret-aaaa", "second-secret-bbbb"]);
        let mut stream = r.stream();
        stream.push(b"xx second-secret-bbbb");
        stream.push(b" yy");
        assert_eq!(stream.take_hits(), vec![1]);
        stream.push(b"second-secret-bbbb first-secret-aaaa");
        stream.finish();
        assert_eq!(stream.take_hits(), vec![0]);
        assert_eq!(stream.take_hits(), Vec::<usize>::new());
    }

    /// The stream holds back a bounded tail, whatever the input: long
    /// bodies, long whitespace runs, unfinished escapes.
    #[test]
    fn hold_back_is_bounded() {
        let r = redactor(&[SECRET]);
        let bound = r.max_len * 18 + MAX_GAP as usize + 32;
        let mut stream = r.stream();
        let mut out = 0;
        for chunk in [
            vec![b'a'; 10_000],
            vec![b' '; 10_000],
            b"&#x4".to_vec(),
            vec![b'\n'; 5_000],
            b"%".to_vec(),
            vec![b'z'; 100],
        ] {
            out += stream.push(&chunk).len();
            assert!(stream.held() <= bound, "held {} > {bound}", stream.held());
        }
        out += stream.finish().len();
        assert_eq!(out, 25_105);
        assert_eq!(stream.held(), 0);
    }

    /// Needles are built from windows and their encodings only: the secret
    /// does not show in Debug.
    #[test]
    fn debug_does_not_show_the_secret() {
        let r = redactor(&[SECRET]);
        assert!(!format!("{r:?}").contains("Abc123"));
    }

    #[test]
    fn short_and_odd_secrets_work() {
        let r = redactor(&["", "abc"]);
        assert_eq!(redact(&r, b"xabcx YWJj"), b"x[REDACTED]x [REDACTED]");
        // A secret with spaces and escapes in it is found raw and decoded.
        let odd = "pass word %41 &amp; \\n x";
        let r = redactor(&[odd]);
        assert_eq!(redact(&r, odd.as_bytes()), REDACTED.as_bytes());
        assert_eq!(
            redact(&r, percent(odd.as_bytes()).as_bytes()),
            REDACTED.as_bytes()
        );
        // JSON doubles the backslash of `\n`: a form of the secret's own
        // escape, not of its bytes; no 12-byte run survives even so.
        let out = redact(&r, json(odd.as_bytes()).as_bytes());
        assert!(!leaks_form(&out, odd.as_bytes(), json), "{}", raw(&out));
        // Non-ASCII secrets, and \u escapes with surrogate pairs.
        let r = redactor(&["gehéim-😀-schlüssel"]);
        let escaped = serde_json::to_string("gehéim-😀-schlüssel").unwrap_or_default();
        let ascii = escaped
            .chars()
            .map(|c| {
                if c.is_ascii() {
                    c.to_string()
                } else {
                    c.encode_utf16(&mut [0; 2])
                        .iter()
                        .map(|u| format!("\\u{u:04x}"))
                        .collect()
                }
            })
            .collect::<String>();
        assert_eq!(
            redact(&r, ascii.as_bytes()),
            format!("\"{REDACTED}\"").as_bytes()
        );
        // No secrets at all: nothing matches.
        let r = redactor(&[]);
        assert_eq!(redact(&r, b"anything"), b"anything");
    }

    /// A small deterministic generator, so a failing case prints its seed.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            // splitmix64
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn pick(&mut self, from: &[u8]) -> u8 {
            from[self.below(from.len())]
        }
    }

    /// Whether a redacted output still holds the secret.
    type LeakCheck = Box<dyn Fn(&[u8]) -> bool>;

    const SECRET_CHARS: &[u8] =
        b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~+/=!$'()*,;:@";
    const TEXT_CHARS: &[u8] = b"abcxyzABC0189 \n\r\t%&\\#;:\"'{}[]<>/+=-_.,uxXnr";

    /// A random secret, embedded in random text in a random form, wrapped
    /// or not, split into random chunks, never survives; and the chunking
    /// never changes the output.
    #[test]
    fn random_secrets_in_random_forms_are_always_removed() {
        for seed in 0..400u64 {
            let mut rng = Rng(seed);
            let len = 4 + rng.below(45);
            let secret: Vec<u8> = (0..len).map(|_| rng.pick(SECRET_CHARS)).collect();
            let r = redactor(&[std::str::from_utf8(&secret).unwrap_or_default()]);
            let noise = |rng: &mut Rng| -> String {
                let n = rng.below(60);
                (0..n).map(|_| char::from(rng.pick(TEXT_CHARS))).collect()
            };
            // A neutral byte on either side: text ending in a stray escape
            // start (`&#x`, `%`, `\`) can take the first character of an
            // escaped secret into its own escape, and a digit after `&#65`
            // changes the number. Secrets over 12 bytes survive that (a run
            // of 12 is left); shorter ones, matched whole, would not.
            let before = format!("{}|", noise(&mut rng));
            let after = format!("|{}", noise(&mut rng));
            let kind = rng.below(FORMS.len() + 2);
            let (body, check): (String, LeakCheck) = if kind < FORMS.len() {
                let (_, enc) = FORMS[kind];
                let mut encoded = enc(&secret);
                let mut sep = "";
                match rng.below(4) {
                    0 => {
                        sep = ["\n", "\r\n", "\r\n  "][rng.below(3)];
                        encoded = wrap(&encoded, 1 + rng.below(30), sep);
                    }
                    1 => {
                        sep = ["\\n", "%0A", "&#10;"][rng.below(3)];
                        encoded = wrap_units(&secret, enc, 1 + rng.below(15), sep);
                    }
                    _ => {}
                }
                let secret = secret.clone();
                let sep = sep.to_owned();
                (
                    format!("{before}{encoded}{after}"),
                    Box::new(move |out: &[u8]| {
                        let out = if sep.is_empty() {
                            raw(out)
                        } else {
                            raw(out).replace(&sep, "")
                        };
                        leaks_form(out.as_bytes(), &secret, enc)
                    }),
                )
            } else {
                let enc = if kind == FORMS.len() {
                    base64_std
                } else {
                    base64_url
                };
                let mut inner = before.clone().into_bytes();
                inner.extend_from_slice(&secret);
                inner.extend_from_slice(after.as_bytes());
                let mut encoded = enc(&inner);
                if rng.below(2) == 0 {
                    encoded = wrap(&encoded, 4 + rng.below(80), "\r\n");
                }
                let secret = secret.clone();
                (
                    encoded,
                    Box::new(move |out: &[u8]| leaks_base64(out, &secret)),
                )
            };
            let whole = redact(&r, body.as_bytes());
            assert!(
                !check(&whole),
                "seed {seed}: secret {:?} leaked from {body:?}: {}",
                raw(&secret),
                raw(&whole)
            );
            let sizes: Vec<usize> = (0..4).map(|_| 1 + rng.below(20)).collect();
            assert_eq!(
                redact_chunked(&r, body.as_bytes(), &sizes),
                whole,
                "seed {seed}: chunks {sizes:?} of {body:?}"
            );
        }
    }

    /// Random text with no secret in it comes out byte for byte.
    #[test]
    fn random_text_without_the_secret_is_unchanged() {
        for seed in 0..200u64 {
            let mut rng = Rng(seed ^ 0x5eed);
            let len = WINDOW + rng.below(40);
            let secret: Vec<u8> = (0..len).map(|_| rng.pick(SECRET_CHARS)).collect();
            let r = redactor(&[std::str::from_utf8(&secret).unwrap_or_default()]);
            let text: Vec<u8> = (0..rng.below(2000)).map(|_| rng.pick(TEXT_CHARS)).collect();
            let sizes: Vec<usize> = (0..3).map(|_| 1 + rng.below(64)).collect();
            assert_eq!(redact_chunked(&r, &text, &sizes), text, "seed {seed}");
        }
    }

    /// Throughput of the body path (not a test: run it in release to
    /// measure; the type is crate-private, so a bench binary cannot reach it).
    ///
    /// `cargo test --release -p longhand-host --lib redact::tests::throughput -- --ignored --nocapture`
    #[test]
    #[ignore = "measurement; run by hand in release"]
    fn throughput() {
        let mut json = Vec::new();
        let mut i = 0u64;
        while json.len() < 4 << 20 {
            json.extend_from_slice(
                format!(
                    "{{\"id\": {i}, \"name\": \"item \\u00e9 {i}\", \"url\": \"https://example.com/a%20b?x=1&amp;y=2\"}},\n"
                )
                .as_bytes(),
            );
            i += 1;
        }
        let mut rng = Rng(7);
        let text: Vec<u8> = (0..4 << 20)
            .map(|_| b"abcdefghijklmnopqrstuvwxyz0123456789 .,\n"[rng.below(40)])
            .collect();
        let base64: Vec<u8> = base64_std(&text[..3 << 20]).into_bytes();
        for secret_len in [40usize, 200, 1000] {
            let secret: Vec<u8> = (0..secret_len).map(|_| rng.pick(SECRET_CHARS)).collect();
            let picked = match Redactor::new(&[&secret]).map(|r| r.engine) {
                Ok(Engine::Dfa(_)) => "dfa",
                _ => "nfa",
            };
            for (engine, limit) in [("dfa", usize::MAX), ("nfa", 0)] {
                let started = std::time::Instant::now();
                let r = Arc::new(Redactor::build(&[&secret], limit).expect("builds"));
                let built = started.elapsed();
                let memory = match &r.engine {
                    Engine::Dfa(a) => a.memory_usage(),
                    Engine::Nfa(a) => a.memory_usage(),
                };
                let mut rates = Vec::new();
                for body in [&json, &text, &base64] {
                    let started = std::time::Instant::now();
                    let out = redact_chunked(&r, body, &[64 << 10]);
                    let took = started.elapsed();
                    assert_eq!(out.len(), body.len());
                    rates.push(format!(
                        "{:.0}",
                        body.len() as f64 / took.as_secs_f64() / 1e6
                    ));
                }
                println!(
                    "secret {secret_len} B, {engine}{}: {} patterns, {} KiB, built in {built:.1?}; \
                     MB/s json {}, text {}, base64 {}",
                    if engine == picked { " (default)" } else { "" },
                    r.owners.len(),
                    memory >> 10,
                    rates[0],
                    rates[1],
                    rates[2],
                );
            }
        }
    }
}
