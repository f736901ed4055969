//! PostgreSQL values to and from the WIT `db-value` / `parameter-value` of
//! `spin:postgres@4.0.0`, with the same type mapping as Spin (`factor-outbound-pg`):
//! bool, int2/4/8, float4/8, text/varchar/bpchar, bytea, date, time, timestamp, uuid,
//! jsonb, numeric, int4[]/int8[]/text[]/numeric[] and interval. Range types are not
//! supported by edgehost (read as `unsupported`, refused as parameters).

use std::error::Error as StdError;

use bytes::{BufMut, BytesMut};
use tokio_postgres::Row;
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};

use crate::bindings::spin::postgres4_0_0::postgres::{
    DbDataType, DbValue, Interval, ParameterValue,
};

type BoxError = Box<dyn StdError + Sync + Send>;

/// A bound parameter.
pub type Param = Box<dyn ToSql + Sync + Send>;

/// The WIT data type of a column.
pub fn data_type(ty: &Type) -> DbDataType {
    match *ty {
        Type::BOOL => DbDataType::Boolean,
        Type::BYTEA => DbDataType::Binary,
        Type::FLOAT4 => DbDataType::Floating32,
        Type::FLOAT8 => DbDataType::Floating64,
        Type::INT2 => DbDataType::Int16,
        Type::INT4 => DbDataType::Int32,
        Type::INT8 => DbDataType::Int64,
        Type::TEXT | Type::VARCHAR | Type::BPCHAR => DbDataType::Str,
        Type::TIMESTAMP | Type::TIMESTAMPTZ => DbDataType::Datetime,
        Type::DATE => DbDataType::Date,
        Type::TIME => DbDataType::Time,
        Type::UUID => DbDataType::Uuid,
        Type::JSONB => DbDataType::Jsonb,
        Type::NUMERIC => DbDataType::Decimal,
        Type::INT4_ARRAY => DbDataType::ArrayInt32,
        Type::INT8_ARRAY => DbDataType::ArrayInt64,
        Type::NUMERIC_ARRAY => DbDataType::ArrayDecimal,
        Type::TEXT_ARRAY | Type::VARCHAR_ARRAY | Type::BPCHAR_ARRAY => DbDataType::ArrayStr,
        Type::INTERVAL => DbDataType::Interval,
        _ => DbDataType::Other(ty.name().to_owned()),
    }
}

fn get<'a, T: FromSql<'a>>(
    row: &'a Row,
    i: usize,
    wrap: impl FnOnce(T) -> Result<DbValue, BoxError>,
) -> Result<DbValue, BoxError> {
    match row.try_get::<_, Option<T>>(i)? {
        Some(v) => wrap(v),
        None => Ok(DbValue::DbNull),
    }
}

/// Column `i` of `row` as a WIT value. As in Spin, `timestamptz` columns are decoded as
/// `timestamp` and so fail: read them as `timestamp` (`col AT TIME ZONE 'UTC'`).
pub fn db_value(row: &Row, i: usize) -> Result<DbValue, BoxError> {
    use chrono::{Datelike, NaiveDate, NaiveDateTime, NaiveTime, Timelike};
    let ty = row.columns()[i].type_().clone();
    match ty {
        Type::BOOL => get(row, i, |v| Ok(DbValue::Boolean(v))),
        Type::BYTEA => get(row, i, |v| Ok(DbValue::Binary(v))),
        Type::FLOAT4 => get(row, i, |v| Ok(DbValue::Floating32(v))),
        Type::FLOAT8 => get(row, i, |v| Ok(DbValue::Floating64(v))),
        Type::INT2 => get(row, i, |v| Ok(DbValue::Int16(v))),
        Type::INT4 => get(row, i, |v| Ok(DbValue::Int32(v))),
        Type::INT8 => get(row, i, |v| Ok(DbValue::Int64(v))),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR => get(row, i, |v| Ok(DbValue::Str(v))),
        Type::TIMESTAMP | Type::TIMESTAMPTZ => get(row, i, |v: NaiveDateTime| {
            Ok(DbValue::Datetime((
                v.year(),
                u8::try_from(v.month())?,
                u8::try_from(v.day())?,
                u8::try_from(v.hour())?,
                u8::try_from(v.minute())?,
                u8::try_from(v.second())?,
                v.nanosecond(),
            )))
        }),
        Type::DATE => get(row, i, |v: NaiveDate| {
            Ok(DbValue::Date((
                v.year(),
                u8::try_from(v.month())?,
                u8::try_from(v.day())?,
            )))
        }),
        Type::TIME => get(row, i, |v: NaiveTime| {
            Ok(DbValue::Time((
                u8::try_from(v.hour())?,
                u8::try_from(v.minute())?,
                u8::try_from(v.second())?,
                v.nanosecond(),
            )))
        }),
        Type::UUID => get(row, i, |v: uuid::Uuid| Ok(DbValue::Uuid(v.to_string()))),
        // Re-serialised, as Spin does: compact JSON, whatever the server's spacing.
        Type::JSONB => get(row, i, |v: serde_json::Value| {
            Ok(DbValue::Jsonb(serde_json::to_vec(&v)?))
        }),
        Type::NUMERIC => get(row, i, |v: Numeric| Ok(DbValue::Decimal(v.0))),
        Type::INT4_ARRAY => get(row, i, |v| Ok(DbValue::ArrayInt32(v))),
        Type::INT8_ARRAY => get(row, i, |v| Ok(DbValue::ArrayInt64(v))),
        Type::NUMERIC_ARRAY => get(row, i, |v: Vec<Option<Numeric>>| {
            Ok(DbValue::ArrayDecimal(
                v.into_iter().map(|n| n.map(|n| n.0)).collect(),
            ))
        }),
        Type::TEXT_ARRAY | Type::VARCHAR_ARRAY | Type::BPCHAR_ARRAY => {
            get(row, i, |v| Ok(DbValue::ArrayStr(v)))
        }
        Type::INTERVAL => get(row, i, |v: Interval| Ok(DbValue::Interval(v))),
        _ => get(row, i, |v: Raw| Ok(DbValue::Unsupported(v.0))),
    }
}

/// Roughly how much host memory a value takes (bounds a query's result).
pub fn size_of(v: &DbValue) -> usize {
    std::mem::size_of::<DbValue>()
        + match v {
            DbValue::Str(s) | DbValue::Uuid(s) | DbValue::Decimal(s) => s.len(),
            DbValue::Binary(b) | DbValue::Jsonb(b) | DbValue::Unsupported(b) => b.len(),
            DbValue::ArrayInt32(a) => a.len() * 8,
            DbValue::ArrayInt64(a) => a.len() * 16,
            DbValue::ArrayStr(a) | DbValue::ArrayDecimal(a) => a
                .iter()
                .map(|s| 24 + s.as_ref().map_or(0, String::len))
                .sum(),
            _ => 0,
        }
}

/// A guest's parameter as a value tokio-postgres can bind. A parameter's type must match
/// what the statement expects (`int64` for `bigint`, `str` for `text`, ...), as on Spin.
pub fn param(value: ParameterValue) -> Result<Param, String> {
    use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Utc};
    let date = |(y, m, d): (i32, u8, u8)| {
        NaiveDate::from_ymd_opt(y, m.into(), d.into())
            .ok_or_else(|| format!("invalid date y={y}, m={m}, d={d}"))
    };
    let time = |(h, m, s, ns): (u8, u8, u8, u32)| {
        NaiveTime::from_hms_nano_opt(h.into(), m.into(), s.into(), ns)
            .ok_or_else(|| format!("invalid time {h}:{m}:{s}:{ns}"))
    };
    Ok(match value {
        ParameterValue::Boolean(v) => Box::new(v),
        ParameterValue::Int8(v) => Box::new(v),
        ParameterValue::Int16(v) => Box::new(v),
        ParameterValue::Int32(v) => Box::new(v),
        ParameterValue::Int64(v) => Box::new(v),
        ParameterValue::Floating32(v) => Box::new(v),
        ParameterValue::Floating64(v) => Box::new(v),
        ParameterValue::Str(v) => Box::new(v),
        ParameterValue::Binary(v) => Box::new(v),
        ParameterValue::Date(v) => Box::new(date(v)?),
        ParameterValue::Time(v) => Box::new(time(v)?),
        ParameterValue::Datetime((y, mo, d, h, mi, s, ns)) => {
            Box::new(NaiveDateTime::new(date((y, mo, d))?, time((h, mi, s, ns))?))
        }
        ParameterValue::Timestamp(secs) => Box::new(
            DateTime::<Utc>::from_timestamp(secs, 0)
                .ok_or_else(|| format!("invalid epoch timestamp {secs}"))?,
        ),
        ParameterValue::Uuid(v) => {
            Box::new(uuid::Uuid::parse_str(&v).map_err(|_| format!("invalid UUID {v}"))?)
        }
        ParameterValue::Jsonb(v) => Box::new(
            serde_json::from_slice::<serde_json::Value>(&v)
                .map_err(|_| format!("invalid JSON {}", String::from_utf8_lossy(&v)))?,
        ),
        ParameterValue::Decimal(v) => Box::new(Numeric::parse(&v)?),
        ParameterValue::ArrayInt32(v) => Box::new(v),
        ParameterValue::ArrayInt64(v) => Box::new(v),
        ParameterValue::ArrayStr(v) => Box::new(v),
        ParameterValue::ArrayDecimal(v) => Box::new(
            v.iter()
                .map(|d| d.as_deref().map(Numeric::parse).transpose())
                .collect::<Result<Vec<_>, _>>()?,
        ),
        ParameterValue::Interval(v) => Box::new(v),
        ParameterValue::RangeInt32(_)
        | ParameterValue::RangeInt64(_)
        | ParameterValue::RangeDecimal(_) => {
            return Err("edgehost does not support range parameters".into());
        }
        ParameterValue::DbNull => Box::new(Null),
    })
}

/// SQL NULL for a parameter of any type (tokio-postgres would check an `Option`'s type).
#[derive(Debug)]
struct Null;

impl ToSql for Null {
    fn to_sql(&self, _: &Type, _: &mut BytesMut) -> Result<IsNull, BoxError> {
        Ok(IsNull::Yes)
    }
    fn accepts(_: &Type) -> bool {
        true
    }
    to_sql_checked!();
}

/// Any value, as the raw bytes of its binary representation.
struct Raw(Vec<u8>);

impl<'a> FromSql<'a> for Raw {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Raw, BoxError> {
        Ok(Raw(raw.to_vec()))
    }
    fn accepts(_: &Type) -> bool {
        true
    }
}

impl<'a> FromSql<'a> for Interval {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Interval, BoxError> {
        let raw: [u8; 16] = raw.try_into().map_err(|_| "interval: expected 16 bytes")?;
        let (micros, rest) = raw.split_at(8);
        let (days, months) = rest.split_at(4);
        Ok(Interval {
            micros: i64::from_be_bytes(micros.try_into()?),
            days: i32::from_be_bytes(days.try_into()?),
            months: i32::from_be_bytes(months.try_into()?),
        })
    }
    fn accepts(ty: &Type) -> bool {
        *ty == Type::INTERVAL
    }
}

impl ToSql for Interval {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        out.put_i64(self.micros);
        out.put_i32(self.days);
        out.put_i32(self.months);
        Ok(IsNull::No)
    }
    fn accepts(ty: &Type) -> bool {
        *ty == Type::INTERVAL
    }
    to_sql_checked!();
}

/// A `numeric` as its decimal text (`"-12.50"`: the digits after the point are the
/// column's scale), as Spin hands it to guests.
#[derive(Debug, Clone, PartialEq)]
pub struct Numeric(String);

const NUMERIC_POS: u16 = 0x0000;
const NUMERIC_NEG: u16 = 0x4000;
const NUMERIC_NAN: u16 = 0xC000;
/// Longest decimal text accepted as a parameter.
const MAX_NUMERIC_TEXT: usize = 1000;

impl Numeric {
    /// Parses `[+-]digits[.digits]`; the digits after the point set the scale.
    pub fn parse(text: &str) -> Result<Numeric, String> {
        let invalid = || format!("invalid decimal {text}");
        let body = text.strip_prefix(['-', '+']).unwrap_or(text);
        let (int, frac) = body.split_once('.').unwrap_or((body, ""));
        let digits_only = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if text.len() > MAX_NUMERIC_TEXT
            || (int.is_empty() && frac.is_empty())
            || !digits_only(int)
            || !digits_only(frac)
        {
            return Err(invalid());
        }
        Ok(Numeric(text.to_string()))
    }

    /// The binary `numeric` wire form: base-10000 digit groups around the point.
    fn encode(&self) -> Vec<u8> {
        let text = self.0.as_str();
        let negative = text.starts_with('-');
        let body = text.trim_start_matches(['-', '+']);
        let (int, frac) = body.split_once('.').unwrap_or((body, ""));
        let int = int.trim_start_matches('0');
        // Whole groups: pad the integer part on the left, the fraction on the right.
        let int_pad = (4 - int.len() % 4) % 4;
        let frac_pad = (4 - frac.len() % 4) % 4;
        let int_digits = format!("{}{int}", "0".repeat(int_pad));
        let frac_digits = format!("{frac}{}", "0".repeat(frac_pad));
        let group = |s: &str| -> Vec<i16> {
            s.as_bytes()
                .chunks(4)
                .map(|c| c.iter().fold(0i16, |n, d| n * 10 + i16::from(d - b'0')))
                .collect()
        };
        let mut groups = group(&int_digits);
        let mut weight = groups.len() as i32 - 1;
        groups.extend(group(&frac_digits));
        // Leading zero groups move the weight; trailing ones are implied by the scale.
        while groups.first() == Some(&0) {
            groups.remove(0);
            weight -= 1;
        }
        while groups.last() == Some(&0) {
            groups.pop();
        }
        let sign = if negative && !groups.is_empty() {
            NUMERIC_NEG
        } else {
            NUMERIC_POS
        };
        if groups.is_empty() {
            weight = 0;
        }
        let mut out = Vec::with_capacity(8 + groups.len() * 2);
        out.extend((groups.len() as i16).to_be_bytes());
        out.extend((weight as i16).to_be_bytes());
        out.extend(sign.to_be_bytes());
        out.extend((frac.len() as u16).to_be_bytes());
        for g in groups {
            out.extend(g.to_be_bytes());
        }
        out
    }

    fn decode(raw: &[u8]) -> Result<Numeric, BoxError> {
        let word = |i: usize| -> Result<[u8; 2], BoxError> {
            raw.get(i * 2..i * 2 + 2)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| "numeric: truncated".into())
        };
        let ndigits = usize::try_from(i16::from_be_bytes(word(0)?))?;
        let weight = i32::from(i16::from_be_bytes(word(1)?));
        let sign = u16::from_be_bytes(word(2)?);
        let dscale = usize::from(u16::from_be_bytes(word(3)?));
        match sign {
            NUMERIC_NAN => return Ok(Numeric("NaN".into())),
            0xD000 => return Ok(Numeric("Infinity".into())),
            0xF000 => return Ok(Numeric("-Infinity".into())),
            _ => {}
        }
        let groups = (0..ndigits)
            .map(|i| Ok(i16::from_be_bytes(word(4 + i)?)))
            .collect::<Result<Vec<i16>, BoxError>>()?;
        // Group `i` is worth 10000^(weight - i).
        let group_at = |i: i32| usize::try_from(i).ok().and_then(|i| groups.get(i)).copied();
        let mut text = String::new();
        if sign == NUMERIC_NEG {
            text.push('-');
        }
        if weight < 0 {
            text.push('0');
        } else {
            for i in 0..=weight {
                let g = group_at(i).unwrap_or(0);
                if i == 0 {
                    text.push_str(&g.to_string());
                } else {
                    text.push_str(&format!("{g:04}"));
                }
            }
        }
        if dscale > 0 {
            let mut frac = String::new();
            let mut i = weight + 1;
            while frac.len() < dscale {
                frac.push_str(&format!("{:04}", group_at(i).unwrap_or(0)));
                i += 1;
            }
            frac.truncate(dscale);
            text.push('.');
            text.push_str(&frac);
        }
        Ok(Numeric(text))
    }
}

impl<'a> FromSql<'a> for Numeric {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Numeric, BoxError> {
        Numeric::decode(raw)
    }
    fn accepts(ty: &Type) -> bool {
        *ty == Type::NUMERIC
    }
}

impl ToSql for Numeric {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        out.extend_from_slice(&self.encode());
        Ok(IsNull::No)
    }
    fn accepts(ty: &Type) -> bool {
        *ty == Type::NUMERIC
    }
    to_sql_checked!();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(text: &str) -> String {
        let n = Numeric::parse(text).unwrap();
        Numeric::decode(&n.encode()).unwrap().0
    }

    #[test]
    fn numerics_round_trip_through_the_wire_form() {
        for (text, back) in [
            ("0", "0"),
            ("12.50", "12.50"),
            ("-12.5", "-12.5"),
            ("10000", "10000"),
            ("123456789.000123", "123456789.000123"),
            ("0.0001", "0.0001"),
            ("-0.00000001", "-0.00000001"),
            ("007", "7"),
            ("+3.14159", "3.14159"),
            (
                "99999999999999999999999999999999",
                "99999999999999999999999999999999",
            ),
            ("-0", "0"),
            (".5", "0.5"),
        ] {
            assert_eq!(round_trip(text), back, "{text}");
        }
        // 12.50 on the wire: one group before the point, one after, scale 2.
        assert_eq!(
            Numeric::parse("12.50").unwrap().encode(),
            [0, 2, 0, 0, 0, 0, 0, 2, 0, 12, 0x13, 0x88]
        );
        for bad in ["", "-", ".", "1e5", "NaN", "1.2.3", "12a", " 1"] {
            assert!(Numeric::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn parameters_are_checked_before_binding() {
        assert!(param(ParameterValue::Uuid("not-a-uuid".into())).is_err());
        assert!(param(ParameterValue::Jsonb(b"{".to_vec())).is_err());
        assert!(param(ParameterValue::Date((2024, 2, 30))).is_err());
        assert!(param(ParameterValue::Decimal("1e3".into())).is_err());
        assert!(param(ParameterValue::RangeInt32((None, None))).is_err());
        assert!(param(ParameterValue::Timestamp(1_700_000_000)).is_ok());
    }
}
