//! Which IP addresses a guest may reach without a grant naming them.
//!
//! One table, [`TABLE`], holds every address block the host treats as off
//! limits: the rows of the IANA IPv4 and IPv6 Special-Purpose Address
//! Registries (as of 2025), multicast, the IPv6 forms that carry an IPv4
//! address, and the cloud metadata endpoints. An address is judged by the
//! most specific row containing it, so `169.254.169.254` is "cloud metadata"
//! rather than "link-local". An IPv6 address no row names is still refused
//! unless it lies in global unicast `2000::/3` ([`NOT_GLOBAL_UNICAST`]): the
//! registry lists what is special inside the unicast space, and everything
//! outside it is unassigned, reserved or special by construction.
//!
//! Every row is a refusal, including the few the registry marks "globally
//! reachable" (anycast service addresses, AS112, AMT): a tool has no business
//! with them, and an operator who disagrees grants the address by name. Only
//! three rows embed an IPv4 address and are judged by it instead — IPv4-mapped
//! `::ffff:0:0/96`, well-known NAT64 `64:ff9b::/96` and 6to4 `2002::/16` —
//! because they are how ordinary public IPv4 hosts are reached over IPv6.
//! Other IPv4-carrying forms (IPv4-compatible `::/96`, IPv4-translated
//! `::ffff:0:0:0/96`, local-use NAT64 `64:ff9b:1::/48`, Teredo) are refused
//! outright: nothing legitimate needs them, and judging them by the embedded
//! address would only widen what an attacker can spell.
//!
//! This module only classifies; [`super::net`] decides what a classification
//! means for a request (a grant naming the address literally may reach it).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What a row means for an address inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Refused unless a grant names the address.
    Deny,
    /// Refused like [`Kind::Deny`]; also what `localhost` grants reach, and
    /// the only destination a secret may travel to over plain HTTP.
    Loopback,
    /// The address carries an IPv4 address; judge that one instead.
    Embeds(Embedding),
}

/// Where an IPv6 address carries an IPv4 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Embedding {
    /// The last 32 bits (IPv4-mapped, NAT64).
    Low32,
    /// Bits 16..48 (6to4).
    SixToFour,
}

/// One block of special addresses.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Row {
    /// The first address of the block.
    pub(crate) prefix: IpAddr,
    /// Prefix length in bits.
    pub(crate) len: u8,
    /// Why the block is special, for receipts: a lowercase class word first
    /// ("loopback", "private-use", "cloud metadata"...), then the source.
    pub(crate) reason: &'static str,
    pub(crate) kind: Kind,
}

impl Row {
    /// Whether `ip` lies in this block.
    pub(crate) fn contains(&self, ip: IpAddr) -> bool {
        match (self.prefix, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => prefix_eq(
                u128::from(net.to_bits()),
                u128::from(ip.to_bits()),
                32,
                self.len,
            ),
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                prefix_eq(net.to_bits(), ip.to_bits(), 128, self.len)
            }
            _ => false,
        }
    }

    /// The last address of the block.
    #[cfg(test)]
    pub(crate) fn last(&self) -> IpAddr {
        match self.prefix {
            IpAddr::V4(net) => {
                let host = u32::MAX.checked_shr(u32::from(self.len)).unwrap_or(0);
                IpAddr::V4(Ipv4Addr::from_bits(net.to_bits() | host))
            }
            IpAddr::V6(net) => {
                let host = u128::MAX.checked_shr(u32::from(self.len)).unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from_bits(net.to_bits() | host))
            }
        }
    }
}

/// Whether the top `len` of `bits` address bits agree.
fn prefix_eq(a: u128, b: u128, bits: u32, len: u8) -> bool {
    let shift = bits - u32::from(len).min(bits);
    a.checked_shr(shift).unwrap_or(0) == b.checked_shr(shift).unwrap_or(0)
}

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8, reason: &'static str, kind: Kind) -> Row {
    Row {
        prefix: IpAddr::V4(Ipv4Addr::new(a, b, c, d)),
        len,
        reason,
        kind,
    }
}

const fn v6(s: [u16; 8], len: u8, reason: &'static str, kind: Kind) -> Row {
    Row {
        prefix: IpAddr::V6(Ipv6Addr::new(
            s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7],
        )),
        len,
        reason,
        kind,
    }
}

use Kind::{Deny, Embeds, Loopback};

/// The special address blocks. Order does not matter: the most specific
/// row containing an address decides.
pub(crate) static TABLE: &[Row] = &[
    // IANA IPv4 Special-Purpose Address Registry.
    v4(0, 0, 0, 0, 8, "this network (RFC 791)", Deny),
    v4(
        0,
        0,
        0,
        0,
        32,
        "unspecified: this host on this network (RFC 1122)",
        Deny,
    ),
    v4(10, 0, 0, 0, 8, "private-use (RFC 1918)", Deny),
    v4(
        100,
        64,
        0,
        0,
        10,
        "shared address space, carrier-grade NAT (RFC 6598)",
        Deny,
    ),
    v4(127, 0, 0, 0, 8, "loopback (RFC 1122)", Loopback),
    v4(169, 254, 0, 0, 16, "link-local (RFC 3927)", Deny),
    v4(172, 16, 0, 0, 12, "private-use (RFC 1918)", Deny),
    v4(
        192,
        0,
        0,
        0,
        24,
        "IETF protocol assignments (RFC 6890)",
        Deny,
    ),
    v4(
        192,
        0,
        0,
        0,
        29,
        "IPv4 service continuity prefix (RFC 7335)",
        Deny,
    ),
    v4(192, 0, 0, 8, 32, "IPv4 dummy address (RFC 7600)", Deny),
    v4(
        192,
        0,
        0,
        9,
        32,
        "port control protocol anycast (RFC 7723)",
        Deny,
    ),
    v4(192, 0, 0, 10, 32, "TURN anycast (RFC 8155)", Deny),
    v4(192, 0, 0, 170, 32, "NAT64/DNS64 discovery (RFC 8880)", Deny),
    v4(192, 0, 0, 171, 32, "NAT64/DNS64 discovery (RFC 8880)", Deny),
    v4(
        192,
        0,
        2,
        0,
        24,
        "documentation, TEST-NET-1 (RFC 5737)",
        Deny,
    ),
    v4(192, 31, 196, 0, 24, "AS112-v4 (RFC 7535)", Deny),
    v4(192, 52, 193, 0, 24, "AMT (RFC 7450)", Deny),
    v4(
        192,
        88,
        99,
        0,
        24,
        "deprecated 6to4 relay anycast (RFC 7526)",
        Deny,
    ),
    v4(192, 88, 99, 2, 32, "6a44 relay anycast (RFC 6751)", Deny),
    v4(192, 168, 0, 0, 16, "private-use (RFC 1918)", Deny),
    v4(
        192,
        175,
        48,
        0,
        24,
        "direct delegation AS112 service (RFC 7534)",
        Deny,
    ),
    v4(198, 18, 0, 0, 15, "benchmarking (RFC 2544)", Deny),
    v4(
        198,
        51,
        100,
        0,
        24,
        "documentation, TEST-NET-2 (RFC 5737)",
        Deny,
    ),
    v4(
        203,
        0,
        113,
        0,
        24,
        "documentation, TEST-NET-3 (RFC 5737)",
        Deny,
    ),
    v4(240, 0, 0, 0, 4, "reserved (RFC 1112)", Deny),
    v4(255, 255, 255, 255, 32, "limited broadcast (RFC 919)", Deny),
    // IPv4 multicast (IANA IPv4 Multicast Address Space Registry).
    v4(224, 0, 0, 0, 4, "multicast (RFC 5771)", Deny),
    // Cloud metadata services: credentials for the machine the host runs on.
    v4(
        169,
        254,
        169,
        254,
        32,
        "cloud metadata (AWS, Azure, GCP, Oracle)",
        Deny,
    ),
    v4(
        100,
        100,
        100,
        200,
        32,
        "cloud metadata (Alibaba Cloud)",
        Deny,
    ),
    v4(
        168,
        63,
        129,
        16,
        32,
        "cloud metadata (Azure WireServer)",
        Deny,
    ),
    // IANA IPv6 Special-Purpose Address Registry.
    v6(
        [0, 0, 0, 0, 0, 0, 0, 0],
        128,
        "unspecified (RFC 4291)",
        Deny,
    ),
    v6(
        [0, 0, 0, 0, 0, 0, 0, 1],
        128,
        "loopback (RFC 4291)",
        Loopback,
    ),
    v6(
        [0, 0, 0, 0, 0, 0xffff, 0, 0],
        96,
        "IPv4-mapped (RFC 4291)",
        Embeds(Embedding::Low32),
    ),
    v6(
        [0x64, 0xff9b, 0, 0, 0, 0, 0, 0],
        96,
        "well-known NAT64 (RFC 6052)",
        Embeds(Embedding::Low32),
    ),
    v6(
        [0x64, 0xff9b, 1, 0, 0, 0, 0, 0],
        48,
        "local-use NAT64 (RFC 8215)",
        Deny,
    ),
    v6(
        [0x100, 0, 0, 0, 0, 0, 0, 0],
        64,
        "discard-only (RFC 6666)",
        Deny,
    ),
    v6(
        [0x100, 0, 0, 1, 0, 0, 0, 0],
        64,
        "dummy IPv6 prefix (RFC 9780)",
        Deny,
    ),
    v6(
        [0x2001, 0, 0, 0, 0, 0, 0, 0],
        23,
        "IETF protocol assignments (RFC 2928)",
        Deny,
    ),
    v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32, "Teredo (RFC 4380)", Deny),
    v6(
        [0x2001, 1, 0, 0, 0, 0, 0, 1],
        128,
        "port control protocol anycast (RFC 7723)",
        Deny,
    ),
    v6(
        [0x2001, 1, 0, 0, 0, 0, 0, 2],
        128,
        "TURN anycast (RFC 8155)",
        Deny,
    ),
    v6(
        [0x2001, 1, 0, 0, 0, 0, 0, 3],
        128,
        "DNS-SD service registration protocol anycast (RFC 9665)",
        Deny,
    ),
    v6(
        [0x2001, 2, 0, 0, 0, 0, 0, 0],
        48,
        "benchmarking (RFC 5180)",
        Deny,
    ),
    v6([0x2001, 3, 0, 0, 0, 0, 0, 0], 32, "AMT (RFC 7450)", Deny),
    v6(
        [0x2001, 4, 0x112, 0, 0, 0, 0, 0],
        48,
        "AS112-v6 (RFC 7535)",
        Deny,
    ),
    v6(
        [0x2001, 0x10, 0, 0, 0, 0, 0, 0],
        28,
        "deprecated ORCHID (RFC 4843)",
        Deny,
    ),
    v6(
        [0x2001, 0x20, 0, 0, 0, 0, 0, 0],
        28,
        "ORCHIDv2 (RFC 7343)",
        Deny,
    ),
    v6(
        [0x2001, 0x30, 0, 0, 0, 0, 0, 0],
        28,
        "drone remote ID entity tags (RFC 9374)",
        Deny,
    ),
    v6(
        [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0],
        32,
        "documentation (RFC 3849)",
        Deny,
    ),
    v6(
        [0x2002, 0, 0, 0, 0, 0, 0, 0],
        16,
        "6to4 (RFC 3056)",
        Embeds(Embedding::SixToFour),
    ),
    v6(
        [0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0],
        48,
        "direct delegation AS112 service (RFC 7534)",
        Deny,
    ),
    v6(
        [0x3fff, 0, 0, 0, 0, 0, 0, 0],
        20,
        "documentation (RFC 9637)",
        Deny,
    ),
    v6(
        [0x5f00, 0, 0, 0, 0, 0, 0, 0],
        16,
        "segment routing SIDs (RFC 9602)",
        Deny,
    ),
    v6(
        [0xfc00, 0, 0, 0, 0, 0, 0, 0],
        7,
        "private: unique-local (RFC 4193)",
        Deny,
    ),
    v6(
        [0xfe80, 0, 0, 0, 0, 0, 0, 0],
        10,
        "link-local unicast (RFC 4291)",
        Deny,
    ),
    // Outside the registry, named for a clearer reason than the catch-all.
    v6(
        [0, 0, 0, 0, 0, 0, 0, 0],
        96,
        "deprecated IPv4-compatible (RFC 4291)",
        Deny,
    ),
    v6(
        [0, 0, 0, 0, 0xffff, 0, 0, 0],
        96,
        "IPv4-translated (RFC 2765)",
        Deny,
    ),
    v6(
        [0xfec0, 0, 0, 0, 0, 0, 0, 0],
        10,
        "deprecated site-local (RFC 3879)",
        Deny,
    ),
    v6(
        [0xff00, 0, 0, 0, 0, 0, 0, 0],
        8,
        "multicast (RFC 4291)",
        Deny,
    ),
    v6(
        [0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254],
        128,
        "cloud metadata (AWS)",
        Deny,
    ),
];

/// The verdict for an IPv6 address outside `2000::/3` that no row of
/// [`TABLE`] names. Its `prefix`/`len` are only descriptive.
pub(crate) static NOT_GLOBAL_UNICAST: Row = v6(
    [0, 0, 0, 0, 0, 0, 0, 0],
    0,
    "not global unicast: outside 2000::/3 (RFC 4291)",
    Deny,
);

/// Global unicast, `2000::/3`.
const GLOBAL_UNICAST: Row = v6([0x2000, 0, 0, 0, 0, 0, 0, 0], 3, "global unicast", Deny);

/// The row that decides `ip`: the most specific [`TABLE`] row containing
/// it, else [`NOT_GLOBAL_UNICAST`] for IPv6 outside `2000::/3`, else none.
pub(crate) fn lookup(ip: IpAddr) -> Option<&'static Row> {
    let row = TABLE
        .iter()
        .filter(|row| row.contains(ip))
        .max_by_key(|row| row.len);
    match (row, ip) {
        (Some(row), _) => Some(row),
        (None, IpAddr::V6(_)) if !GLOBAL_UNICAST.contains(ip) => Some(&NOT_GLOBAL_UNICAST),
        (None, _) => None,
    }
}

/// Why an address is off limits without a grant naming it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Special {
    /// The row that refuses it.
    pub(crate) row: &'static Row,
    /// The address that row judged: `ip` itself, or the IPv4 address it
    /// carries.
    pub(crate) judged: IpAddr,
    /// The embedding row, when the verdict is about a carried address.
    pub(crate) via: Option<&'static Row>,
}

impl Special {
    pub(crate) fn is_loopback(&self) -> bool {
        self.row.kind == Kind::Loopback
    }
}

impl fmt::Display for Special {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.row.reason)?;
        if let Some(via) = self.via {
            write!(f, ", as {} inside {}", self.judged, via.reason)?;
        }
        Ok(())
    }
}

/// Why `ip` is off limits without a grant naming it, or `None` for an
/// ordinary public address.
pub(crate) fn special(ip: IpAddr) -> Option<Special> {
    let row = lookup(ip)?;
    let Kind::Embeds(embedding) = row.kind else {
        return Some(Special {
            row,
            judged: ip,
            via: None,
        });
    };
    let IpAddr::V6(v6) = ip else {
        // Only IPv6 rows embed; a v4 row marked so would be a table bug,
        // and refusing is the safe reading of it.
        return Some(Special {
            row,
            judged: ip,
            via: None,
        });
    };
    let v4 = embedded(v6, embedding);
    let inner = lookup(IpAddr::V4(v4))?;
    Some(Special {
        row: inner,
        judged: IpAddr::V4(v4),
        via: Some(row),
    })
}

/// The IPv4 address `v6` carries at `embedding`.
pub(crate) fn embedded(v6: Ipv6Addr, embedding: Embedding) -> Ipv4Addr {
    let o = v6.octets();
    match embedding {
        Embedding::Low32 => Ipv4Addr::new(o[12], o[13], o[14], o[15]),
        Embedding::SixToFour => Ipv4Addr::new(o[2], o[3], o[4], o[5]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn step(ip: IpAddr, up: bool) -> Option<IpAddr> {
        match ip {
            IpAddr::V4(a) => {
                let b = a.to_bits();
                let n = if up {
                    b.checked_add(1)
                } else {
                    b.checked_sub(1)
                };
                n.map(|n| IpAddr::V4(Ipv4Addr::from_bits(n)))
            }
            IpAddr::V6(a) => {
                let b = a.to_bits();
                let n = if up {
                    b.checked_add(1)
                } else {
                    b.checked_sub(1)
                };
                n.map(|n| IpAddr::V6(Ipv6Addr::from_bits(n)))
            }
        }
    }

    /// A row is a sub-block of `outer` (strictly more specific).
    fn inside(row: &Row, outer: &Row) -> bool {
        row.len > outer.len && outer.contains(row.prefix)
    }

    #[test]
    fn rows_are_well_formed() {
        for row in TABLE {
            let bits = if row.prefix.is_ipv4() { 32 } else { 128 };
            assert!(u32::from(row.len) <= bits, "{row:?}");
            // The prefix is the block's first address: no host bits set.
            let first = match row.prefix {
                IpAddr::V4(a) => {
                    a.to_bits() & !u32::MAX.checked_shr(u32::from(row.len)).unwrap_or(0)
                        == a.to_bits()
                }
                IpAddr::V6(a) => {
                    a.to_bits() & !u128::MAX.checked_shr(u32::from(row.len)).unwrap_or(0)
                        == a.to_bits()
                }
            };
            assert!(first, "host bits set in {row:?}");
            let dupes = TABLE
                .iter()
                .filter(|r| r.prefix == row.prefix && r.len == row.len)
                .count();
            assert_eq!(dupes, 1, "duplicate row {row:?}");
            if let Kind::Embeds(_) = row.kind {
                assert!(row.prefix.is_ipv6(), "{row:?}");
            }
        }
    }

    /// Each row's first and last address are decided by that row (or by a
    /// more specific row nested in it), and the addresses just outside are
    /// not decided by it.
    #[test]
    fn every_row_covers_exactly_its_block() {
        for row in TABLE {
            for edge in [row.prefix, row.last()] {
                let got = lookup(edge).unwrap_or_else(|| panic!("{edge} of {row:?} is public"));
                assert!(
                    std::ptr::eq(got, row) || inside(got, row),
                    "{edge} of {row:?} decided by {got:?}"
                );
                if std::ptr::eq(got, row) && !matches!(row.kind, Kind::Embeds(_)) {
                    let verdict = special(edge).unwrap_or_else(|| panic!("{edge} allowed"));
                    assert_eq!(verdict.row, row, "{edge}");
                    assert!(verdict.to_string().contains(row.reason));
                }
            }
            for (edge, up) in [(row.prefix, false), (row.last(), true)] {
                let Some(outside) = step(edge, up) else {
                    continue;
                };
                assert!(!row.contains(outside), "{outside} in {row:?}");
                if let Some(got) = lookup(outside) {
                    assert!(!std::ptr::eq(got, row), "{outside} decided by {row:?}");
                }
            }
        }
    }

    /// Rows that embed an IPv4 address pass it on: a public one is public,
    /// a special one is refused with the inner reason and says where it was.
    #[test]
    fn embedded_addresses_are_judged_by_the_ipv4_they_carry() {
        let embeds: Vec<&Row> = TABLE
            .iter()
            .filter(|r| matches!(r.kind, Kind::Embeds(_)))
            .collect();
        assert_eq!(embeds.len(), 3, "only mapped, NAT64 and 6to4 embed");
        for row in embeds {
            let Kind::Embeds(how) = row.kind else {
                continue;
            };
            let IpAddr::V6(net) = row.prefix else {
                panic!("{row:?}")
            };
            for (v4, want) in [
                (Ipv4Addr::new(8, 8, 8, 8), None),
                (Ipv4Addr::new(127, 0, 0, 1), Some("loopback")),
                (Ipv4Addr::new(10, 1, 2, 3), Some("private-use")),
                (Ipv4Addr::new(169, 254, 169, 254), Some("cloud metadata")),
                (Ipv4Addr::new(0, 0, 0, 0), Some("unspecified")),
                (Ipv4Addr::new(255, 255, 255, 255), Some("limited broadcast")),
            ] {
                let bits = u128::from(v4.to_bits());
                let addr = match how {
                    Embedding::Low32 => net.to_bits() | bits,
                    Embedding::SixToFour => net.to_bits() | (bits << 80),
                };
                let addr = Ipv6Addr::from_bits(addr);
                assert_eq!(embedded(addr, how), v4);
                let addr = IpAddr::V6(addr);
                let verdict = special(addr);
                match want {
                    None => assert_eq!(verdict, None, "{addr}"),
                    Some(class) => {
                        let v = verdict.unwrap_or_else(|| panic!("{addr} allowed"));
                        assert!(v.row.reason.starts_with(class), "{addr}: {v}");
                        assert_eq!(v.via, Some(row), "{addr}");
                        assert_eq!(v.judged, IpAddr::V4(v4));
                        assert!(v.to_string().contains(row.reason), "{v}");
                        assert_eq!(v.is_loopback(), class == "loopback");
                    }
                }
            }
        }
    }

    #[test]
    fn outside_global_unicast_is_refused() {
        for a in [
            "::2",
            "1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            "4000::",
            "e000::1",
            "fbff::1",
            "1::1",
        ] {
            let v = special(ip(a)).unwrap_or_else(|| panic!("{a} allowed"));
            assert!(
                std::ptr::eq(v.row, &NOT_GLOBAL_UNICAST) || v.row.len > 0,
                "{a}"
            );
        }
        assert_eq!(lookup(ip("4000::")), Some(&NOT_GLOBAL_UNICAST));
        assert_eq!(lookup(ip("1fff::")), Some(&NOT_GLOBAL_UNICAST));
        // The edges of 2000::/3 are ordinary unicast.
        for a in [
            "2000::",
            "3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            "2606:4700::1111",
        ] {
            assert_eq!(special(ip(a)), None, "{a}");
        }
    }

    /// The forms the hostile-tool battery got through, and the classes the
    /// previous if-chain knew, with the words receipts use.
    #[test]
    fn known_addresses_are_classified() {
        for (a, class) in [
            ("::7f00:1", "deprecated IPv4-compatible"),
            ("::8.8.8.8", "deprecated IPv4-compatible"),
            ("::ffff:0:127.0.0.1", "IPv4-translated"),
            ("::ffff:0:8.8.8.8", "IPv4-translated"),
            ("64:ff9b:1::a00:1", "local-use NAT64"),
            ("64:ff9b:1:ffff::8.8.8.8", "local-use NAT64"),
            ("127.0.0.1", "loopback"),
            ("10.1.2.3", "private-use"),
            ("172.16.0.1", "private-use"),
            ("192.168.1.1", "private-use"),
            ("169.254.169.254", "cloud metadata"),
            ("100.100.100.200", "cloud metadata"),
            ("168.63.129.16", "cloud metadata"),
            ("169.254.1.1", "link-local"),
            ("100.64.0.1", "shared address space"),
            ("0.0.0.0", "unspecified"),
            ("0.1.2.3", "this network"),
            ("224.0.0.1", "multicast"),
            ("239.255.255.250", "multicast"),
            ("240.0.0.1", "reserved"),
            ("255.255.255.255", "limited broadcast"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:10.0.0.1", "private-use"),
            ("64:ff9b::a00:1", "private-use"),
            ("64:ff9b::7f00:1", "loopback"),
            ("2002:7f00:1::", "loopback"),
            ("2002:a9fe:a9fe::1", "cloud metadata"),
            ("fd00:ec2::254", "cloud metadata"),
            ("fc00::1", "private"),
            ("fd12:3456::1", "private"),
            ("fe80::1", "link-local"),
            ("fec0::1", "deprecated site-local"),
            ("ff02::1", "multicast"),
            ("2001:db8::1", "documentation"),
            ("3fff::1", "documentation"),
            ("2001::1", "Teredo"),
            ("100::1", "discard-only"),
            ("5f00::1", "segment routing"),
        ] {
            let v = special(ip(a)).unwrap_or_else(|| panic!("{a} allowed"));
            assert!(v.to_string().starts_with(class), "{a}: {v}");
        }
        for a in [
            "1.1.1.1",
            "93.184.216.34",
            "2606:4700::1111",
            "::ffff:1.1.1.1",
            "64:ff9b::101:101",
            "2002:101:101::",
            "168.63.129.15",
            "100.128.0.1",
        ] {
            assert_eq!(special(ip(a)), None, "{a}");
        }
        assert!(special(ip("127.0.0.1")).is_some_and(|s| s.is_loopback()));
        assert!(special(ip("::1")).is_some_and(|s| s.is_loopback()));
        assert!(special(ip("::ffff:127.0.0.1")).is_some_and(|s| s.is_loopback()));
        // IPv4-compatible loopback is refused, but it is not loopback: a
        // secret never goes to it over plain http.
        assert!(special(ip("::127.0.0.1")).is_some_and(|s| !s.is_loopback()));
    }
}
