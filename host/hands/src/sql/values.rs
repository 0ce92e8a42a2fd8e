//! Values between the guest and PostgreSQL: bound parameters out, result
//! columns in.
//!
//! Parameters are sent in binary where the value and the parameter's type
//! agree exactly (an integer for `int4`, bytes for `bytea`) and as text
//! otherwise, so the server itself parses `"2026-12-06"` for a `date` or
//! `"12.50"` for a `numeric`: no value is ever spliced into SQL. Results
//! arrive in binary and are decoded here for the types a model reads
//! (numbers, text, bytes, JSON, UUIDs, dates and times, numerics,
//! intervals, enums, domains); any other type is refused by name, with the
//! cast that reads it (`col::text`).

use std::error::Error;

use tokio_postgres::types::{Format, FromSql, IsNull, Kind, ToSql, Type, to_sql_checked};

use crate::bindings::longhand::tool::sql::Value;

/// One parameter, bound to whatever type the server inferred for it.
#[derive(Debug)]
pub(super) struct Param<'a>(pub(super) &'a Value);

type BoxError = Box<dyn Error + Sync + Send>;

impl Param<'_> {
    /// Whether this value goes in binary for `ty`.
    fn binary(&self, ty: &Type) -> bool {
        matches!(
            (self.0, ty),
            (Value::Boolean(_), &Type::BOOL)
                | (
                    Value::Integer(_),
                    &Type::INT2 | &Type::INT4 | &Type::INT8 | &Type::FLOAT4 | &Type::FLOAT8
                )
                | (Value::Real(_), &Type::FLOAT4 | &Type::FLOAT8)
                | (Value::Bytes(_), &Type::BYTEA)
        )
    }
}

impl ToSql for Param<'_> {
    fn to_sql(&self, ty: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, BoxError> {
        use bytes::BufMut;
        let narrow = |i: i64, what: &str| -> Result<i64, BoxError> {
            let fits = match *ty {
                Type::INT2 => i16::try_from(i).is_ok(),
                Type::INT4 => i32::try_from(i).is_ok(),
                _ => true,
            };
            if fits {
                Ok(i)
            } else {
                Err(format!("{i} does not fit the parameter's type {what}").into())
            }
        };
        match (self.0, self.binary(ty)) {
            (Value::Null, _) => return Ok(IsNull::Yes),
            (Value::Boolean(b), true) => out.put_u8(u8::from(*b)),
            (Value::Integer(i), true) => match *ty {
                Type::INT2 => out.put_i16(narrow(*i, "int2")? as i16),
                Type::INT4 => out.put_i32(narrow(*i, "int4")? as i32),
                Type::INT8 => out.put_i64(*i),
                Type::FLOAT4 => out.put_f32(*i as f32),
                _ => out.put_f64(*i as f64),
            },
            (Value::Real(r), true) => match *ty {
                Type::FLOAT4 => out.put_f32(*r as f32),
                _ => out.put_f64(*r),
            },
            (Value::Bytes(b), true) => out.put_slice(b),
            (Value::Bytes(_), false) => {
                return Err(format!(
                    "bytes were given for a parameter of type {}; give text, a number or a boolean",
                    ty.name()
                )
                .into());
            }
            // Text format: the server parses it for the parameter's type.
            (Value::Boolean(b), false) => out.put_slice(if *b { b"true" } else { b"false" }),
            (Value::Integer(i), false) => out.put_slice(i.to_string().as_bytes()),
            (Value::Real(r), false) => out.put_slice(r.to_string().as_bytes()),
            (Value::Text(t), _) => {
                if t.contains('\0') {
                    return Err("a text parameter contains a NUL character".into());
                }
                out.put_slice(t.as_bytes());
            }
        }
        Ok(IsNull::No)
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    fn encode_format(&self, ty: &Type) -> Format {
        if self.binary(ty) {
            Format::Binary
        } else {
            Format::Text
        }
    }

    to_sql_checked!();
}

/// A result value as the server sent it, before decoding.
pub(super) struct Raw<'a>(pub(super) Option<&'a [u8]>);

impl<'a> FromSql<'a> for Raw<'a> {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        Ok(Raw(Some(raw)))
    }

    fn from_sql_null(_: &Type) -> Result<Self, BoxError> {
        Ok(Raw(None))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// Why a column cannot be read: its type, and the cast that reads it.
#[derive(Debug)]
pub(super) struct Unreadable(pub(super) String);

/// Microseconds from 1970-01-01 to PostgreSQL's epoch, 2000-01-01.
const PG_EPOCH_DAYS: i64 = 10_957;

/// Whether this tool can decode values of `ty` (checked once per column,
/// before any row is read).
pub(super) fn readable(ty: &Type) -> Result<(), Unreadable> {
    match ty.kind() {
        Kind::Enum(_) => return Ok(()),
        Kind::Domain(base) => return readable(base),
        _ => {}
    }
    let known = [
        Type::BOOL,
        Type::CHAR,
        Type::INT2,
        Type::INT4,
        Type::INT8,
        Type::OID,
        Type::FLOAT4,
        Type::FLOAT8,
        Type::NUMERIC,
        Type::TEXT,
        Type::VARCHAR,
        Type::BPCHAR,
        Type::NAME,
        Type::UNKNOWN,
        Type::JSON,
        Type::JSONB,
        Type::XML,
        Type::BYTEA,
        Type::UUID,
        Type::DATE,
        Type::TIME,
        Type::TIMESTAMP,
        Type::TIMESTAMPTZ,
        Type::INTERVAL,
        Type::VOID,
    ];
    if known.contains(ty) || ty.name() == "citext" {
        return Ok(());
    }
    Err(Unreadable(format!(
        "type {} cannot be read by this tool; cast the column to text in the query \
         (e.g. `col::text`)",
        ty.name()
    )))
}

/// Decode one value of a column whose type passed [`readable`].
pub(super) fn decode(ty: &Type, raw: Option<&[u8]>) -> Result<Value, BoxError> {
    let Some(raw) = raw else {
        return Ok(Value::Null);
    };
    let text = |raw: &[u8]| -> Result<Value, BoxError> {
        Ok(Value::Text(std::str::from_utf8(raw)?.to_owned()))
    };
    match ty.kind() {
        Kind::Enum(_) => return text(raw),
        Kind::Domain(base) => return decode(base, Some(raw)),
        _ => {}
    }
    Ok(match *ty {
        Type::BOOL => Value::Boolean(bool::from_sql(ty, raw)?),
        Type::CHAR => Value::Integer(i64::from(i8::from_sql(ty, raw)?)),
        Type::INT2 => Value::Integer(i64::from(i16::from_sql(ty, raw)?)),
        Type::INT4 => Value::Integer(i64::from(i32::from_sql(ty, raw)?)),
        Type::INT8 => Value::Integer(i64::from_sql(ty, raw)?),
        Type::OID => Value::Integer(i64::from(u32::from_sql(ty, raw)?)),
        Type::FLOAT4 => Value::Real(f64::from(f32::from_sql(ty, raw)?)),
        Type::FLOAT8 => Value::Real(f64::from_sql(ty, raw)?),
        Type::NUMERIC => Value::Text(numeric(raw)?),
        Type::BYTEA => Value::Bytes(raw.to_vec()),
        Type::JSONB => match raw.split_first() {
            Some((1, rest)) => text(rest)?,
            _ => return Err("a jsonb value of an unknown version".into()),
        },
        Type::UUID => {
            let b: [u8; 16] = raw.try_into().map_err(|_| "a uuid is not 16 bytes")?;
            let h = hex::encode(b);
            Value::Text(format!(
                "{}-{}-{}-{}-{}",
                &h[0..8],
                &h[8..12],
                &h[12..16],
                &h[16..20],
                &h[20..32]
            ))
        }
        Type::DATE => Value::Text(date(i64::from(i32::from_sql(ty, raw)?))),
        Type::TIME => Value::Text(time_of_day(i64::from_sql(ty, raw)?)),
        Type::TIMESTAMP => Value::Text(timestamp(i64::from_sql(ty, raw)?, "")),
        Type::TIMESTAMPTZ => Value::Text(timestamp(i64::from_sql(ty, raw)?, "Z")),
        Type::INTERVAL => Value::Text(interval(raw)?),
        Type::VOID => Value::Null,
        // text, varchar, bpchar, name, unknown, json, xml, citext: UTF-8.
        _ => text(raw)?,
    })
}

/// `YYYY-MM-DD` of a day count from 2000-01-01 (proleptic Gregorian);
/// `infinity` and `-infinity` as PostgreSQL writes them.
fn date(days: i64) -> String {
    match days {
        d if d == i64::from(i32::MAX) => "infinity".into(),
        d if d == i64::from(i32::MIN) => "-infinity".into(),
        d => {
            let (y, m, day) = civil(d + PG_EPOCH_DAYS);
            if y < 1 {
                format!("{:04}-{m:02}-{day:02} BC", 1 - y)
            } else {
                format!("{y:04}-{m:02}-{day:02}")
            }
        }
    }
}

/// Year, month, day of a day count from 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// `HH:MM:SS[.ffffff]` of microseconds since midnight.
fn time_of_day(us: i64) -> String {
    let secs = us.div_euclid(1_000_000);
    let frac = us.rem_euclid(1_000_000);
    let base = format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
    if frac == 0 {
        base
    } else {
        format!("{base}.{}", format!("{frac:06}").trim_end_matches('0'))
    }
}

/// ISO 8601 of microseconds from 2000-01-01 00:00 (UTC for `timestamptz`,
/// marked `Z`).
fn timestamp(us: i64, zone: &str) -> String {
    match us {
        i64::MAX => "infinity".into(),
        i64::MIN => "-infinity".into(),
        us => {
            let days = us.div_euclid(86_400_000_000);
            let rest = us.rem_euclid(86_400_000_000);
            format!("{}T{}{zone}", date(days), time_of_day(rest))
        }
    }
}

/// An interval as PostgreSQL's ISO 8601 style writes it (`P1Y2M3DT4H5M6S`).
fn interval(raw: &[u8]) -> Result<String, BoxError> {
    if raw.len() != 16 {
        return Err("an interval is not 16 bytes".into());
    }
    let us = i64::from_be_bytes(raw[0..8].try_into()?);
    let days = i32::from_be_bytes(raw[8..12].try_into()?);
    let months = i32::from_be_bytes(raw[12..16].try_into()?);
    let mut out = String::from("P");
    let (years, months) = (months / 12, months % 12);
    for (n, unit) in [(years, 'Y'), (months, 'M'), (days, 'D')] {
        if n != 0 {
            out.push_str(&format!("{n}{unit}"));
        }
    }
    if us != 0 {
        out.push('T');
        let (h, rest) = (us / 3_600_000_000, us % 3_600_000_000);
        let (m, rest) = (rest / 60_000_000, rest % 60_000_000);
        if h != 0 {
            out.push_str(&format!("{h}H"));
        }
        if m != 0 {
            out.push_str(&format!("{m}M"));
        }
        if rest != 0 {
            let secs = rest as f64 / 1e6;
            out.push_str(&format!("{secs}S"));
        }
    }
    if out == "P" {
        out.push_str("0D");
    }
    Ok(out)
}

/// A `numeric` in its binary form (base-10000 digits) as decimal text.
fn numeric(raw: &[u8]) -> Result<String, BoxError> {
    let word = |i: usize| -> Result<i16, BoxError> {
        let b = raw.get(i * 2..i * 2 + 2).ok_or("a numeric is cut short")?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    };
    let ndigits = usize::try_from(word(0)?).map_err(|_| "a numeric has a negative length")?;
    let weight = i32::from(word(1)?);
    let sign = word(2)? as u16;
    let dscale = usize::try_from(word(3)?).map_err(|_| "a numeric has a negative scale")?;
    match sign {
        0xC000 => return Ok("NaN".into()),
        0xD000 => return Ok("Infinity".into()),
        0xF000 => return Ok("-Infinity".into()),
        _ => {}
    }
    let digits: Vec<i16> = (0..ndigits)
        .map(|i| word(4 + i))
        .collect::<Result<_, _>>()?;
    let digit = |i: i32| -> i16 {
        usize::try_from(i)
            .ok()
            .and_then(|i| digits.get(i))
            .copied()
            .unwrap_or(0)
    };
    let mut out = String::new();
    if sign == 0x4000 {
        out.push('-');
    }
    // The integer part: digit groups 0..=weight.
    if weight < 0 {
        out.push('0');
    } else {
        for i in 0..=weight {
            let d = digit(i);
            if i == 0 {
                out.push_str(&d.to_string());
            } else {
                out.push_str(&format!("{d:04}"));
            }
        }
    }
    if dscale > 0 {
        let mut frac = String::new();
        let mut i = weight + 1;
        while frac.len() < dscale {
            frac.push_str(&format!("{:04}", digit(i)));
            i += 1;
        }
        frac.truncate(dscale);
        out.push('.');
        out.push_str(&frac);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_times_read_as_postgresql_writes_them() {
        assert_eq!(date(0), "2000-01-01");
        assert_eq!(date(9471), "2025-12-06");
        assert_eq!(date(-1), "1999-12-31");
        assert_eq!(date(-730_119), "0001-01-01");
        assert_eq!(date(-730_120), "0001-12-31 BC");
        assert_eq!(date(i64::from(i32::MAX)), "infinity");
        assert_eq!(time_of_day(0), "00:00:00");
        assert_eq!(time_of_day(45_296_500_000), "12:34:56.5");
        assert_eq!(
            timestamp(9471 * 86_400_000_000 + 3_600_000_001, "Z"),
            "2025-12-06T01:00:00.000001Z"
        );
    }

    #[test]
    fn numerics_read_in_full() {
        // 12345.678: weight 1, digits [1, 2345, 6780], dscale 3.
        let mut raw = Vec::new();
        for w in [3i16, 1, 0, 3, 1, 2345, 6780] {
            raw.extend(w.to_be_bytes());
        }
        assert_eq!(numeric(&raw).unwrap(), "12345.678");
        // -0.05: weight -1, digits [500], dscale 2.
        let mut raw = Vec::new();
        for w in [1i16, -1, 0x4000, 2, 500] {
            raw.extend(w.to_be_bytes());
        }
        assert_eq!(numeric(&raw).unwrap(), "-0.05");
        // 0 with no digits.
        let mut raw = Vec::new();
        for w in [0i16, 0, 0, 0] {
            raw.extend(w.to_be_bytes());
        }
        assert_eq!(numeric(&raw).unwrap(), "0");
        assert!(numeric(&[0, 5]).is_err());
    }

    #[test]
    fn intervals_read_in_iso_8601() {
        let mut raw = Vec::new();
        raw.extend(3_723_000_000i64.to_be_bytes());
        raw.extend(3i32.to_be_bytes());
        raw.extend(14i32.to_be_bytes());
        assert_eq!(interval(&raw).unwrap(), "P1Y2M3DT1H2M3S");
        assert_eq!(interval(&[0; 16]).unwrap(), "P0D");
    }

    #[test]
    fn unreadable_types_name_the_cast() {
        let err = readable(&Type::POINT).unwrap_err();
        assert!(
            err.0.contains("point") && err.0.contains("::text"),
            "{}",
            err.0
        );
        assert!(readable(&Type::INT4_ARRAY).is_err());
        assert!(readable(&Type::NUMERIC).is_ok());
    }
}
