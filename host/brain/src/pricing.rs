//! Model prices, and what a model call cost.
//!
//! Owns the price table: its TOML format, the defaults shipped in the
//! binary (`host/brain/src/prices.toml`, dated by `as_of`), the
//! operator's file that overrides and extends them, and the arithmetic from
//! a call's [`Usage`] to micro-dollars. It does not record spend, enforce
//! budgets or read sessions: the loop freezes one [`ModelPrice`] into a
//! session when it starts ([`Prices::freeze_for`]) and prices each answer
//! with it, so a session's cost never changes when the file changes later.
//!
//! Money is integers. A rate is kept in picodollars per token (which is
//! micro-dollars per million tokens), a cost in micro-dollars; products are
//! taken in `u128` and a call's cost is rounded up, so it is never
//! under-stated and never overflows. A model the table does not know has no
//! price (`None`), never a price of 0: the caller records the tokens and
//! says the cost is unknown — with one rule: a model served on this
//! machine's loopback ([`is_loopback`]) that no entry prices is priced 0
//! ([`Prices::freeze_served`]). An entry always wins over the rule, so an
//! operator whose `localhost` forwards to a paid API prices it there
//! (docs/design.md, "A local model is free by rule, unless priced").

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::model::types::Usage;

/// The table shipped in the binary. Its `as_of` says when it was last
/// checked; a test proves it parses.
const SHIPPED: &str = include_str!("prices.toml");

/// Where the shipped table's entries say they came from.
const SHIPPED_SOURCE: &str = "shipped";

/// The source a price given by the loopback rule records
/// ([`Prices::freeze_served`]).
pub const LOOPBACK_SOURCE: &str = "loopback rule: served on this machine, no entry in prices.toml";

/// The `as_of` of a price the loopback rule gives: the day the rule was
/// made (it does not go stale: a model on this machine bills nobody).
const LOOPBACK_AS_OF: &str = "2026-12-06";

/// Whether `base_url` is served by this machine's loopback interface:
/// its host is `localhost` (or a name under `.localhost`, which resolvers
/// must keep on loopback, RFC 6761), an IPv4 address in 127.0.0.0/8, or
/// `::1` (also as `::ffff:127.x.y.z`). Nothing else counts as local: a
/// LAN or private address is another machine, which may bill.
pub fn is_loopback(base_url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(base_url) else {
        return false;
    };
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(ip)) => ip.is_loopback(),
        Ok(std::net::IpAddr::V6(ip)) => {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        Err(_) => {
            let name = host.trim_end_matches('.').to_ascii_lowercase();
            name == "localhost" || name.ends_with(".localhost")
        }
    }
}

/// The name of the operator's price file in the data or config directory.
pub const FILE_NAME: &str = "prices.toml";

/// Why a price table could not be loaded. The caller does not retry: the
/// operator fixes the file (every message names it, and a bad value names
/// its line and field) or removes it.
#[derive(Debug, thiserror::Error)]
pub enum PriceError {
    /// The file exists but could not be read.
    #[error("cannot read price file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a valid price table: bad TOML, an unknown provider
    /// or field, a negative or too precise price, a bad date. `message`
    /// carries the parser's line, column and excerpt.
    #[error("price file {}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where.
        message: String,
    },
}

/// A price per token, in picodollars (10⁻¹² USD) per token, which is the
/// same number as micro-dollars per million tokens: `$2.50` per million
/// tokens is `Rate(2_500_000)`. Serialized as that integer, so a frozen
/// price reads back exactly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Rate(pub u64);

impl Rate {
    /// The rate in USD per million tokens, for display.
    pub fn usd_per_mtok(self) -> f64 {
        self.0 as f64 / 1e6
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "${}/Mtok", self.usd_per_mtok())
    }
}

/// The price of one model, as frozen into a session at its start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelPrice {
    /// The provider section the entry came from (`openai`, `anthropic`…;
    /// `openai` also when an `openai-responses` model used it).
    pub provider: String,
    /// The entry's key: an exact model name, or a prefix ending in `*`.
    pub pattern: String,
    /// When the price was last checked (`YYYY-MM-DD`).
    pub as_of: String,
    /// Where it came from: `shipped`, or the operator file's path.
    pub source: String,
    /// Uncached prompt tokens.
    pub input: Rate,
    /// Prompt tokens read from the provider's cache.
    pub cached_input: Rate,
    /// Prompt tokens written to the provider's cache.
    pub cache_write: Rate,
    /// Generated tokens, reasoning included.
    pub output: Rate,
}

impl ModelPrice {
    /// What `usage` cost, in micro-dollars, rounded up.
    ///
    /// Cache reads and writes are parts of `input_tokens` (see [`Usage`]):
    /// each is priced at its own rate and the rest of the prompt at the
    /// input rate. Counts that claim more cached tokens than the prompt
    /// held are clamped to the prompt, reads first, so a provider's odd
    /// report can never make a call cheaper than its prompt at the lowest
    /// rate. Saturates at `u64::MAX` (18 trillion dollars) rather than
    /// wrapping.
    pub fn cost_micros(&self, usage: &UsageLike) -> u64 {
        let cached = usage.cached_input_tokens.min(usage.input_tokens);
        let written = usage.cache_write_tokens.min(usage.input_tokens - cached);
        let plain = usage.input_tokens - cached - written;
        let parts = [
            (plain, self.input),
            (cached, self.cached_input),
            (written, self.cache_write),
            (usage.output_tokens, self.output),
        ];
        // Each product of two u64 fits in u128; only the sum can overflow.
        let pico = parts.iter().fold(0u128, |sum, (tokens, rate)| {
            sum.saturating_add(u128::from(*tokens) * u128::from(rate.0))
        });
        let micros = pico.div_ceil(1_000_000);
        u64::try_from(micros).unwrap_or(u64::MAX)
    }
}

/// The token counts a cost is computed from: the fields of [`Usage`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsageLike {
    /// The whole prompt, cached or not.
    pub input_tokens: u64,
    /// Generated tokens, reasoning included.
    pub output_tokens: u64,
    /// Of `input_tokens`, those read from the prompt cache.
    pub cached_input_tokens: u64,
    /// Of `input_tokens`, those written to the prompt cache.
    pub cache_write_tokens: u64,
}

impl From<&Usage> for UsageLike {
    fn from(usage: &Usage) -> Self {
        UsageLike {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cached_input_tokens: usage.cached_input_tokens,
            cache_write_tokens: usage.cache_write_tokens,
        }
    }
}

/// A price table: the shipped defaults, possibly merged with an
/// operator's file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prices {
    /// Entries by provider, then by pattern.
    entries: BTreeMap<String, BTreeMap<String, ModelPrice>>,
}

impl Prices {
    /// The table shipped in the binary.
    pub fn shipped() -> Prices {
        // A proven invariant: the embedded file is fixed at build time and
        // the test `shipped_table_parses_and_is_dated` parses it.
        parse(SHIPPED, SHIPPED_SOURCE, Path::new("<shipped prices.toml>"))
            .expect("the shipped price table parses")
    }

    /// The table in `path` alone, without the shipped defaults.
    pub fn load(path: &Path) -> Result<Prices, PriceError> {
        let text = std::fs::read_to_string(path).map_err(|source| PriceError::Read {
            path: path.to_owned(),
            source,
        })?;
        parse(&text, &path.display().to_string(), path)
    }

    /// This table with `other`'s entries added; an entry of `other` with
    /// the same provider and pattern replaces this one's whole (fields are
    /// not mixed between the two).
    pub fn merged(mut self, other: Prices) -> Prices {
        for (provider, models) in other.entries {
            self.entries.entry(provider).or_default().extend(models);
        }
        self
    }

    /// The entry that prices `model` of `provider`: an exact name first,
    /// else the longest matching prefix. `openai-responses` falls back to
    /// the `openai` entries (same vendor, same prices) when none of its
    /// own match. `None` when nothing matches.
    pub fn freeze_for(&self, provider: &str, model: &str) -> Option<ModelPrice> {
        let own = self.lookup(provider, model);
        let fallback = || match provider {
            "openai-responses" => self.lookup("openai", model),
            _ => None,
        };
        own.or_else(fallback).cloned()
    }

    /// The price of `model` of `provider` served at `base_url` (`None`:
    /// the provider's public API): its entry in this table
    /// ([`Prices::freeze_for`]) when it has one, else 0 when `base_url` is
    /// on this machine's loopback ([`is_loopback`]), with
    /// [`LOOPBACK_SOURCE`] as its source so that what priced it is
    /// recorded with the session; else `None`. A self-run model costs
    /// nothing; a loopback proxy to a paid API would be counted as free
    /// too, which is why an entry (the operator's `prices.toml`, or the
    /// shipped one for a model name it knows) is looked up first.
    pub fn freeze_served(
        &self,
        provider: &str,
        model: &str,
        base_url: Option<&str>,
    ) -> Option<ModelPrice> {
        self.freeze_for(provider, model).or_else(|| {
            base_url.filter(|url| is_loopback(url)).map(|_| ModelPrice {
                provider: provider.to_owned(),
                pattern: model.to_owned(),
                as_of: LOOPBACK_AS_OF.to_owned(),
                source: LOOPBACK_SOURCE.to_owned(),
                input: Rate(0),
                cached_input: Rate(0),
                cache_write: Rate(0),
                output: Rate(0),
            })
        })
    }

    /// What `usage` cost with `model` of `provider`, in micro-dollars
    /// (rounded up); `None` when the table has no price for the model.
    pub fn cost_micros(&self, provider: &str, model: &str, usage: &UsageLike) -> Option<u64> {
        self.freeze_for(provider, model)
            .map(|price| price.cost_micros(usage))
    }

    /// Every entry, by provider then pattern (for listing the table).
    pub fn entries(&self) -> impl Iterator<Item = &ModelPrice> {
        self.entries.values().flat_map(BTreeMap::values)
    }

    fn lookup(&self, provider: &str, model: &str) -> Option<&ModelPrice> {
        let models = self.entries.get(provider)?;
        if let Some(exact) = models.get(model) {
            return Some(exact);
        }
        models
            .iter()
            .filter_map(|(pattern, price)| {
                let prefix = pattern.strip_suffix('*')?;
                model.starts_with(prefix).then_some((prefix.len(), price))
            })
            .max_by_key(|(len, _)| *len)
            .map(|(_, price)| price)
    }
}

/// The shipped table merged with the operator's file, when there is one:
/// `<data_dir>/prices.toml` (the CLI passes `$LONGHAND_HOME`, or its XDG
/// data directory) and, only when `LONGHAND_HOME` is not set,
/// `$XDG_CONFIG_HOME/longhand/prices.toml` (else
/// `~/.config/longhand/prices.toml`). The first that exists is used; a
/// file that exists but is unreadable or invalid is an error, never
/// skipped, so a typo cannot silently fall back to the shipped prices.
pub fn resolve_default(data_dir: Option<&Path>) -> Result<Prices, PriceError> {
    let home_set = std::env::var_os("LONGHAND_HOME").is_some_and(|v| !v.is_empty());
    let config = if home_set { None } else { config_file() };
    resolve_in(
        data_dir
            .map(|d| d.join(FILE_NAME))
            .into_iter()
            .chain(config),
    )
}

/// The shipped table merged with the first of `candidates` that exists.
fn resolve_in(candidates: impl IntoIterator<Item = PathBuf>) -> Result<Prices, PriceError> {
    for path in candidates {
        match std::fs::metadata(&path) {
            Ok(_) => return Ok(Prices::shipped().merged(Prices::load(&path)?)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(PriceError::Read { path, source }),
        }
    }
    Ok(Prices::shipped())
}

/// `$XDG_CONFIG_HOME/longhand/prices.toml`, else
/// `~/.config/longhand/prices.toml`.
fn config_file() -> Option<PathBuf> {
    let nonempty = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    let dir = match nonempty("XDG_CONFIG_HOME") {
        Some(config) => PathBuf::from(config),
        None => PathBuf::from(nonempty("HOME")?).join(".config"),
    };
    Some(dir.join("longhand").join(FILE_NAME))
}

/// A price file as written. Each provider is a field, so a misspelled
/// section is refused as an unknown field rather than ignored.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceFile {
    as_of: Option<AsOf>,
    #[serde(default)]
    openai: BTreeMap<Pattern, EntryFile>,
    #[serde(default, rename = "openai-responses")]
    openai_responses: BTreeMap<Pattern, EntryFile>,
    #[serde(default)]
    anthropic: BTreeMap<Pattern, EntryFile>,
    #[serde(default)]
    replay: BTreeMap<Pattern, EntryFile>,
    #[serde(default)]
    script: BTreeMap<Pattern, EntryFile>,
}

/// One entry as written, USD per million tokens.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryFile {
    input: UsdPerMtok,
    output: UsdPerMtok,
    cached_input: Option<UsdPerMtok>,
    cache_write: Option<UsdPerMtok>,
    as_of: Option<AsOf>,
}

fn parse(text: &str, source: &str, path: &Path) -> Result<Prices, PriceError> {
    let invalid = |message: String| PriceError::Invalid {
        path: path.to_owned(),
        message,
    };
    let file: PriceFile = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
    let sections = [
        ("openai", file.openai),
        ("openai-responses", file.openai_responses),
        ("anthropic", file.anthropic),
        ("replay", file.replay),
        ("script", file.script),
    ];
    let mut entries = BTreeMap::new();
    for (provider, models) in sections {
        let mut table = BTreeMap::new();
        for (Pattern(pattern), entry) in models {
            let as_of = entry.as_of.or_else(|| file.as_of.clone()).ok_or_else(|| {
                invalid(format!(
                    "[{provider}.\"{pattern}\"] has no date: add `as_of = \"YYYY-MM-DD\"` \
                         at the top of the file (or to the entry) saying when the price was checked"
                ))
            })?;
            let input = entry.input.0;
            let price = ModelPrice {
                provider: provider.to_owned(),
                pattern: pattern.clone(),
                as_of: as_of.0,
                source: source.to_owned(),
                input,
                cached_input: entry.cached_input.map_or(input, |r| r.0),
                cache_write: entry.cache_write.map_or(input, |r| r.0),
                output: entry.output.0,
            };
            table.insert(pattern, price);
        }
        if !table.is_empty() {
            entries.insert(provider.to_owned(), table);
        }
    }
    Ok(Prices { entries })
}

/// A price as written: USD per million tokens, an integer or a decimal
/// with at most six decimal places (a micro-dollar per million tokens),
/// not negative. Checked while parsing so the error carries its line.
struct UsdPerMtok(Rate);

impl<'de> Deserialize<'de> for UsdPerMtok {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = UsdPerMtok;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a price in USD per million tokens (a number, 0 or more)")
            }

            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<UsdPerMtok, E> {
                v.checked_mul(1_000_000)
                    .map(|pico| UsdPerMtok(Rate(pico)))
                    .ok_or_else(|| E::custom(format!("price {v} is too large")))
            }

            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<UsdPerMtok, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::custom(format!(
                        "price {v} is negative: prices are USD per million tokens, 0 or more"
                    ))),
                }
            }

            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<UsdPerMtok, E> {
                if v.is_nan() || v < 0.0 {
                    return Err(E::custom(format!(
                        "price {v} is negative: prices are USD per million tokens, 0 or more"
                    )));
                }
                let micros = v * 1e6;
                let whole = micros.round();
                // Decimals print and parse inexactly (0.075 * 1e6 is
                // 75000.00000000001): allow float noise, refuse a real
                // seventh decimal place rather than round it away.
                if (micros - whole).abs() > 1e-3_f64.max(whole * 1e-12) {
                    return Err(E::custom(format!(
                        "price {v} has more than six decimal places (USD per million tokens)"
                    )));
                }
                if !whole.is_finite() || whole >= u64::MAX as f64 {
                    return Err(E::custom(format!("price {v} is too large")));
                }
                // `whole` is a finite whole number in [0, u64::MAX), so the
                // cast is exact.
                Ok(UsdPerMtok(Rate(whole as u64)))
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// A date, `YYYY-MM-DD`, in quotes.
#[derive(Clone)]
struct AsOf(String);

impl<'de> Deserialize<'de> for AsOf {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d).map_err(|_| {
            serde::de::Error::custom("as_of must be a date in quotes: as_of = \"YYYY-MM-DD\"")
        })?;
        if !is_date(&text) {
            return Err(serde::de::Error::custom(format!(
                "as_of {text:?} is not a date: write \"YYYY-MM-DD\""
            )));
        }
        Ok(AsOf(text))
    }
}

/// `YYYY-MM-DD` with a month 01–12 and a day 01–31 (not checked against
/// the month: the date is for people to read, not to compute with).
fn is_date(text: &str) -> bool {
    let b = text.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    if !(digits(0..4) && digits(5..7) && digits(8..10)) {
        return false;
    }
    let month = (b[5] - b'0') * 10 + (b[6] - b'0');
    let day = (b[8] - b'0') * 10 + (b[9] - b'0');
    (1..=12).contains(&month) && (1..=31).contains(&day)
}

/// A model key: an exact name, or a prefix ending in `*`. A `*` anywhere
/// else is refused: a key means one thing, not whatever a glob engine makes
/// of it.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Pattern(String);

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let body = text.strip_suffix('*').unwrap_or(&text);
        if body.contains('*') {
            return Err(serde::de::Error::custom(format!(
                "model {text:?}: `*` may only end a name (a prefix, like \"gpt-4o*\")"
            )));
        }
        if text.is_empty() {
            return Err(serde::de::Error::custom(
                "an empty model name: write the model's name, or \"*\" for every model",
            ));
        }
        Ok(Pattern(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Result<Prices, PriceError> {
        parse(text, "test", Path::new("test/prices.toml"))
    }

    fn usage(input: u64, cached: u64, written: u64, output: u64) -> UsageLike {
        UsageLike {
            input_tokens: input,
            output_tokens: output,
            cached_input_tokens: cached,
            cache_write_tokens: written,
        }
    }

    fn error(text: &str) -> String {
        table(text).unwrap_err().to_string()
    }

    #[test]
    fn loopback_hosts_are_this_machine_and_nothing_else_is() {
        for local in [
            "http://127.0.0.1:11434/v1",
            "http://127.1.2.3/v1",
            "http://localhost:8000/v1",
            "https://LOCALHOST./v1",
            "http://ollama.localhost/v1",
            "http://[::1]:8080/v1",
            "http://[::ffff:127.0.0.1]/v1",
        ] {
            assert!(is_loopback(local), "{local}");
        }
        for remote in [
            "https://api.openai.com/v1",
            "http://10.0.0.5:11434/v1",
            "http://192.168.1.2/v1",
            "http://0.0.0.0:8000/v1",
            "http://localhost.example.com/v1",
            "http://[fe80::1]/v1",
            "not a url",
        ] {
            assert!(!is_loopback(remote), "{remote}");
        }
    }

    #[test]
    fn a_loopback_model_is_free_by_rule_and_an_entry_wins_over_the_rule() {
        let shipped = Prices::shipped();
        let local = shipped
            .freeze_served("openai", "llama3.1", Some("http://127.0.0.1:11434/v1"))
            .unwrap();
        assert_eq!((local.input, local.output), (Rate(0), Rate(0)));
        assert_eq!(local.source, LOOPBACK_SOURCE);
        assert!(
            shipped
                .freeze_served("openai", "llama3.1", Some("http://10.0.0.5/v1"))
                .is_none()
        );
        assert!(shipped.freeze_served("openai", "llama3.1", None).is_none());
        // A model the shipped table knows keeps its price through a
        // loopback proxy, and the operator's entry beats the rule.
        let proxied = shipped
            .freeze_served("openai", "gpt-4o", Some("http://localhost:4000"))
            .unwrap();
        assert!(proxied.output > Rate(0), "{proxied:?}");
        let mine = shipped.merged(
            table("as_of = \"2026-12-01\"\n[openai.\"llama3.1\"]\ninput = 1\noutput = 2\n")
                .unwrap(),
        );
        let priced = mine
            .freeze_served("openai", "llama3.1", Some("http://127.0.0.1:11434/v1"))
            .unwrap();
        assert_eq!(priced.output, Rate(2_000_000));
    }

    #[test]
    fn shipped_table_parses_and_is_dated() {
        let prices = parse(SHIPPED, SHIPPED_SOURCE, Path::new("shipped")).unwrap();
        assert_eq!(prices, Prices::shipped());
        let all: Vec<_> = prices.entries().collect();
        assert!(all.len() >= 15, "{} entries", all.len());
        for price in all {
            assert!(is_date(&price.as_of), "{price:?}");
            assert_eq!(price.source, "shipped");
        }
        // Each model the brief names has a price, and no paid model is
        // priced at 0.
        for (provider, model) in [
            ("openai", "gpt-4o"),
            ("openai", "gpt-4o-mini"),
            ("openai", "gpt-4.1"),
            ("openai", "gpt-4.1-mini"),
            ("openai", "o3"),
            ("openai", "o4-mini"),
            ("openai-responses", "gpt-5"),
            ("anthropic", "claude-sonnet-4-5"),
            ("anthropic", "claude-sonnet-4-5-20250929"),
            ("anthropic", "claude-opus-4-1"),
            ("anthropic", "claude-opus-4-5"),
            ("anthropic", "claude-haiku-4-5"),
        ] {
            let price = prices.freeze_for(provider, model).unwrap();
            assert!(
                price.input.0 > 0 && price.output.0 > 0,
                "{provider} {model}"
            );
        }
        for provider in ["replay", "script"] {
            let cost = prices.cost_micros(provider, "anything", &usage(1000, 0, 0, 1000));
            assert_eq!(cost, Some(0));
        }
    }

    /// Known list prices, worked by hand: gpt-4o is $2.50 in, $1.25
    /// cached, $10 out per million tokens.
    #[test]
    fn costs_split_cached_and_uncached_input() {
        let prices = Prices::shipped();
        let cost = |u| prices.cost_micros("openai", "gpt-4o", &u).unwrap();
        // 1M uncached in, nothing out: $2.50.
        assert_eq!(cost(usage(1_000_000, 0, 0, 0)), 2_500_000);
        // 1M in of which 400k cached, 100k out:
        // 600k * 2.5 + 400k * 1.25 + 100k * 10 = 1.5 + 0.5 + 1.0 = $3.00.
        assert_eq!(cost(usage(1_000_000, 400_000, 0, 100_000)), 3_000_000);
        // One token in: 2.5 micro-dollars, rounded up to 3.
        assert_eq!(cost(usage(1, 0, 0, 0)), 3);
        assert_eq!(cost(usage(0, 0, 0, 0)), 0);

        // Anthropic Sonnet: $3 in, $0.30 read, $3.75 write, $15 out.
        // 10k prompt = 2k plain + 5k read + 3k written; 1k out:
        // 2000*3 + 5000*0.3 + 3000*3.75 + 1000*15 = 6000 + 1500 + 11250 + 15000.
        let sonnet = prices.freeze_for("anthropic", "claude-sonnet-4-5").unwrap();
        assert_eq!(
            sonnet.cost_micros(&usage(10_000, 5_000, 3_000, 1_000)),
            33_750
        );
        // The same prompt with no cache at all costs 10k * 3 + 15000.
        assert_eq!(sonnet.cost_micros(&usage(10_000, 0, 0, 1_000)), 45_000);
    }

    #[test]
    fn odd_usage_is_clamped_and_huge_usage_saturates() {
        let price = Prices::shipped()
            .freeze_for("anthropic", "claude-opus-4-1")
            .unwrap();
        // More cached than the prompt: the prompt counts as all cached.
        assert_eq!(
            price.cost_micros(&usage(1_000, 5_000, 5_000, 0)),
            price.cost_micros(&usage(1_000, 1_000, 0, 0)),
        );
        let max = usage(u64::MAX, 0, 0, u64::MAX);
        assert_eq!(price.cost_micros(&max), u64::MAX);
        // Large but representable: 1e12 output tokens at $75/M = $75M.
        assert_eq!(
            price.cost_micros(&usage(0, 0, 0, 1_000_000_000_000)),
            75_000_000_000_000
        );
    }

    #[test]
    fn exact_beats_prefix_and_longest_prefix_wins() {
        let prices = table(
            "as_of = \"2025-01-02\"\n\
             [openai.\"gpt-4o*\"]\ninput = 2.5\noutput = 10\n\
             [openai.\"gpt-4o-mini*\"]\ninput = 0.15\noutput = 0.6\n\
             [openai.\"gpt-4o-mini-special\"]\ninput = 7\noutput = 7\n",
        )
        .unwrap();
        let pattern = |model| prices.freeze_for("openai", model).map(|p| p.pattern);
        assert_eq!(pattern("gpt-4o").as_deref(), Some("gpt-4o*"));
        assert_eq!(pattern("gpt-4o-2024-08-06").as_deref(), Some("gpt-4o*"));
        assert_eq!(
            pattern("gpt-4o-mini-2024-07-18").as_deref(),
            Some("gpt-4o-mini*")
        );
        assert_eq!(
            pattern("gpt-4o-mini-special").as_deref(),
            Some("gpt-4o-mini-special")
        );
        assert_eq!(pattern("gpt-4").as_deref(), None);
        // openai-responses uses the openai entries; other providers do not.
        assert_eq!(
            prices
                .freeze_for("openai-responses", "gpt-4o")
                .map(|p| p.provider)
                .as_deref(),
            Some("openai")
        );
        assert!(prices.freeze_for("anthropic", "gpt-4o").is_none());
    }

    #[test]
    fn unknown_models_have_no_price() {
        let prices = Prices::shipped();
        let u = usage(100, 0, 0, 100);
        assert_eq!(prices.cost_micros("openai", "llama3.1:8b", &u), None);
        assert_eq!(prices.cost_micros("anthropic", "claude-2.1", &u), None);
        assert_eq!(prices.cost_micros("bedrock", "gpt-4o", &u), None);
    }

    #[test]
    fn operator_file_overrides_and_extends() {
        let operator = table(
            "as_of = \"2026-11-01\"\n\
             [openai.\"gpt-4o*\"]\ninput = 2\noutput = 8\n\
             [openai.\"llama3.1:8b\"]\ninput = 0\noutput = 0\n\
             [openai-responses.\"gpt-4.1\"]\ninput = 1\noutput = 4\nas_of = \"2026-11-15\"\n",
        )
        .unwrap();
        let prices = Prices::shipped().merged(operator);
        let gpt4o = prices.freeze_for("openai", "gpt-4o").unwrap();
        assert_eq!(
            (gpt4o.input, gpt4o.output),
            (Rate(2_000_000), Rate(8_000_000))
        );
        // Replaced whole: the shipped cached price does not survive.
        assert_eq!(gpt4o.cached_input, Rate(2_000_000));
        assert_eq!(
            (gpt4o.as_of.as_str(), gpt4o.source.as_str()),
            ("2026-11-01", "test")
        );
        // Added.
        let u = usage(1000, 0, 0, 1000);
        assert_eq!(prices.cost_micros("openai", "llama3.1:8b", &u), Some(0));
        // An entry of its own beats the openai fallback, with its own date.
        let own = prices.freeze_for("openai-responses", "gpt-4.1").unwrap();
        assert_eq!(
            (own.input, own.as_of.as_str()),
            (Rate(1_000_000), "2026-11-15")
        );
        assert_eq!(
            prices.freeze_for("openai", "gpt-4.1").unwrap().source,
            "shipped"
        );
        // Untouched entries stay.
        assert_eq!(
            prices.freeze_for("anthropic", "claude-haiku-4-5"),
            Prices::shipped().freeze_for("anthropic", "claude-haiku-4-5")
        );
    }

    #[test]
    fn frozen_price_round_trips_exactly() {
        let price = Prices::shipped()
            .freeze_for("openai", "gpt-4o-mini")
            .unwrap();
        assert_eq!(price.cached_input, Rate(75_000));
        let json = serde_json::to_string(&price).unwrap();
        assert!(json.contains("\"cached_input\":75000"), "{json}");
        assert_eq!(serde_json::from_str::<ModelPrice>(&json).unwrap(), price);
    }

    #[test]
    fn bad_files_say_what_and_where() {
        let head = "as_of = \"2025-01-02\"\n[openai.\"m\"]\ninput = 1\noutput = 2\n";

        let e = error(&format!("{head}cache_read = 0.1\n"));
        assert!(e.contains("test/prices.toml"), "{e}");
        assert!(
            e.contains("line 5") && e.contains("unknown field `cache_read`"),
            "{e}"
        );

        let e = error("as_of = \"2025-01-02\"\n[openai.\"m\"]\ninput = -1\noutput = 2\n");
        assert!(e.contains("line 3") && e.contains("negative"), "{e}");
        let e = error("as_of = \"2025-01-02\"\n[openai.\"m\"]\ninput = 1\noutput = -0.5\n");
        assert!(e.contains("line 4") && e.contains("negative"), "{e}");

        let e = error("as_of = \"2025-01-02\"\n[openai.\"m\"]\ninput = 1\noutput = 0.0000001\n");
        assert!(
            e.contains("line 4") && e.contains("six decimal places"),
            "{e}"
        );

        let e = error("as_of = \"2025-01-02\"\n[opneai.\"m\"]\ninput = 1\noutput = 2\n");
        assert!(
            e.contains("line 2") && e.contains("unknown field `opneai`"),
            "{e}"
        );

        let e = error("as_of = \"2025-01-02\"\n[openai.\"m\"]\ninput = 1\n");
        assert!(e.contains("missing field `output`"), "{e}");

        let e = error("as_of = \"2025-01-02\"\n[openai.\"m\"\ninput = 1\n");
        assert!(e.contains("line 2"), "{e}");

        let e = error("as_of = \"yesterday\"\n");
        assert!(e.contains("line 1") && e.contains("YYYY-MM-DD"), "{e}");
        let e = error("as_of = 2025-01-02\n");
        assert!(e.contains("in quotes"), "{e}");

        let e = error("[openai.\"m\"]\ninput = 1\noutput = 2\n");
        assert!(e.contains("[openai.\"m\"] has no date"), "{e}");

        let e = error("as_of = \"2025-01-02\"\n[openai.\"gpt-*-mini\"]\ninput = 1\noutput = 2\n");
        assert!(e.contains("may only end a name"), "{e}");
    }

    #[test]
    fn resolve_reads_the_first_file_that_exists() {
        // Not resolve_default: with LONGHAND_HOME unset it would also look
        // in this machine's ~/.config, and tests never read the real
        // environment.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let absent = dir.path().join("absent.toml");
        let resolve = || resolve_in([absent.clone(), path.clone()]);
        // No file: the shipped table.
        assert_eq!(resolve().unwrap(), Prices::shipped());
        std::fs::write(
            &path,
            "as_of = \"2026-01-01\"\n[openai.\"mine\"]\ninput = 1\noutput = 1\n",
        )
        .unwrap();
        let prices = resolve().unwrap();
        assert_eq!(
            prices.freeze_for("openai", "mine").unwrap().source,
            path.display().to_string()
        );
        assert!(prices.freeze_for("openai", "gpt-4o").is_some());
        // A broken file is an error, not a silent fallback.
        std::fs::write(
            &path,
            "as_of = \"2026-01-01\"\n[openai.\"mine\"]\ninput = -1\noutput = 1\n",
        )
        .unwrap();
        let e = resolve().unwrap_err().to_string();
        assert!(
            e.contains(&path.display().to_string()) && e.contains("negative"),
            "{e}"
        );
    }
}
