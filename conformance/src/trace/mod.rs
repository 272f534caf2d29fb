//! Traces: every [`Call`] of a run with its [`Reply`], as JSON lines that mean the same thing on
//! another backend, and their replay. The format is described in `traces/README.md`.
//!
//! Values that differ between backends are written symbolically: an address inside a buffer
//! the run allocated is `{"$buf": i, "off": o}` (buffer `i` in allocation order), a memory key
//! is `{"$key": i, "tag": t}` (the `i`-th key index replies produced, with its 8-bit tag), a
//! QP number is `{"$qp": i}`. Byte arrays are hex, runs of one byte as `hh*count`.

use mlx5_dv::{Call, Reply};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

mod record;
mod replay;

pub use record::{Recorder, TraceSlot, text as record_text};
pub use replay::{Divergence, Replayed, replay};

/// The format's name, in every header.
pub const FORMAT: &str = "mlx5sim-trace";
/// The format's version.
pub const VERSION: u32 = 1;

/// The first line of a trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// [`FORMAT`].
    pub trace: String,
    /// [`VERSION`].
    pub version: u32,
    /// `sim` or `hw`.
    pub backend: String,
    /// The simulator profile, if any.
    pub profile: Option<String>,
    /// The case the trace is of, if any.
    pub case: Option<String>,
    /// What the backend reports of itself (device, firmware, kernel, rdma-core release).
    pub facts: std::collections::BTreeMap<String, String>,
    /// The suite's version and commit.
    pub suite: String,
}

/// One call and its reply, symbolic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Line {
    /// The call's index in the trace, from 0.
    pub i: usize,
    /// The call.
    pub call: Value,
    /// Its reply.
    pub reply: Value,
}

/// The values a run produced, in order: what symbolic names refer to.
#[derive(Debug, Clone, Default)]
pub struct Symbols {
    bufs: Vec<(u64, u64)>,
    keys: Vec<u32>,
    qps: Vec<u32>,
    fds: Vec<i64>,
}

const ADDR_FIELDS: [&str; 3] = ["addr", "raddr", "remote_addr"];
const KEY_FIELDS: [&str; 3] = ["lkey", "rkey", "invalidate_rkey"];
const QP_FIELDS: [&str; 2] = ["qp_num", "dest_qp_num"];
const FD_FIELD: &str = "fd";
/// Byte arrays shorter than this stay plain arrays.
const MIN_HEX: usize = 16;

impl Symbols {
    /// Learn the buffers, keys and QP numbers a reply introduces.
    pub fn learn(&mut self, reply: &Value) {
        walk(reply, &mut |m| {
            if let (Some(a), Some(l), true) = (num(m, "addr"), num(m, "len"), m.contains_key("handle"))
                && !self.bufs.contains(&(a, l))
            {
                self.bufs.push((a, l));
            }
            for k in ["lkey", "rkey"].iter().filter_map(|f| num(m, f)) {
                let index = (k >> 8) as u32;
                if !self.keys.contains(&index) {
                    self.keys.push(index);
                }
            }
            if let Some(fd) = m.get(FD_FIELD).and_then(Value::as_i64)
                && !self.fds.contains(&fd)
            {
                self.fds.push(fd);
            }
            if let (Some(q), true) = (num(m, "qp_num"), m.contains_key("handle"))
                && !self.qps.contains(&(q as u32))
            {
                self.qps.push(q as u32);
            }
        });
    }

    /// `value` with addresses, keys and QP numbers written symbolically, bytes as hex.
    pub fn symbolize(&self, value: &Value) -> Value {
        match value {
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, v)| {
                        let fd = v.as_i64().filter(|_| k == FD_FIELD);
                        let s = match v.as_u64() {
                            _ if fd.is_some() => {
                                fd.and_then(|f| self.fds.iter().position(|x| *x == f)).map(|i| json!({"$fd": i}))
                            }
                            Some(n) if ADDR_FIELDS.contains(&k.as_str()) => self.addr_symbol(n),
                            Some(n) if KEY_FIELDS.contains(&k.as_str()) => self.key_symbol(n),
                            Some(n) if QP_FIELDS.contains(&k.as_str()) => self.qp_symbol(n),
                            _ => None,
                        };
                        (k.clone(), s.unwrap_or_else(|| self.symbolize(v)))
                    })
                    .collect(),
            ),
            Value::Array(a) => {
                bytes_of(a).map_or_else(|| Value::Array(a.iter().map(|v| self.symbolize(v)).collect()), hex)
            }
            v => v.clone(),
        }
    }

    /// The concrete value of a symbolic one, with this run's values; `Err` names a symbol
    /// this run has no value for.
    pub fn resolve(&self, value: &Value) -> Result<Value, String> {
        match value {
            Value::Object(m) => {
                if let Some(i) = num(m, "$buf") {
                    let (a, _) = self.bufs.get(i as usize).ok_or(format!("buffer #{i} was not allocated"))?;
                    return Ok(json!(a.wrapping_add(num(m, "off").unwrap_or(0))));
                }
                if let Some(i) = num(m, "$key") {
                    let k = self.keys.get(i as usize).ok_or(format!("key #{i} was not made"))?;
                    return Ok(json!(k << 8 | (num(m, "tag").unwrap_or(0) as u32 & 0xff)));
                }
                if let Some(i) = num(m, "$fd") {
                    return Ok(json!(self.fds.get(i as usize).ok_or(format!("fd #{i} was not opened"))?));
                }
                if let Some(i) = num(m, "$qp") {
                    return Ok(json!(self.qps.get(i as usize).ok_or(format!("QP #{i} was not created"))?));
                }
                m.iter()
                    .map(|(k, v)| Ok((k.clone(), self.resolve(v)?)))
                    .collect::<Result<Map<_, _>, String>>()
                    .map(Value::Object)
            }
            Value::Array(a) => a.iter().map(|v| self.resolve(v)).collect::<Result<Vec<_>, _>>().map(Value::Array),
            Value::String(s) if s.starts_with(HEX) => unhex(s).map(|b| json!(b)),
            v => Ok(v.clone()),
        }
    }

    fn addr_symbol(&self, n: u64) -> Option<Value> {
        let (i, (a, _)) = self.bufs.iter().enumerate().find(|(_, (a, l))| n >= *a && n - a <= *l)?;
        Some(json!({"$buf": i, "off": n - a}))
    }

    fn key_symbol(&self, n: u64) -> Option<Value> {
        let i = self.keys.iter().position(|k| u64::from(*k) == n >> 8)?;
        Some(json!({"$key": i, "tag": n & 0xff}))
    }

    fn qp_symbol(&self, n: u64) -> Option<Value> {
        Some(json!({"$qp": self.qps.iter().position(|q| u64::from(*q) == n)?}))
    }
}

fn num(m: &Map<String, Value>, k: &str) -> Option<u64> {
    m.get(k).and_then(Value::as_u64)
}

fn walk(v: &Value, f: &mut impl FnMut(&Map<String, Value>)) {
    match v {
        Value::Object(m) => {
            f(m);
            m.values().for_each(|x| walk(x, f));
        }
        Value::Array(a) => a.iter().for_each(|x| walk(x, f)),
        _ => {}
    }
}

const HEX: &str = "$hex:";

fn bytes_of(a: &[Value]) -> Option<Vec<u8>> {
    if a.len() < MIN_HEX {
        return None;
    }
    a.iter().map(|v| v.as_u64().and_then(|n| u8::try_from(n).ok())).collect()
}

/// `$hex:` and the bytes, comma-separated parts: plain hex, or a run of 8 or more equal
/// bytes as `hh*count`.
fn hex(b: Vec<u8>) -> Value {
    let (mut parts, mut plain) = (Vec::new(), String::new());
    let mut i = 0;
    while i < b.len() {
        let run = b[i..].iter().take_while(|x| **x == b[i]).count();
        if run >= 8 {
            if !plain.is_empty() {
                parts.push(std::mem::take(&mut plain));
            }
            parts.push(format!("{:02x}*{run}", b[i]));
            i += run;
        } else {
            plain.push_str(&format!("{:02x}", b[i]));
            i += 1;
        }
    }
    if !plain.is_empty() {
        parts.push(plain);
    }
    Value::String(format!("{HEX}{}", parts.join(",")))
}

fn unhex(s: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    for part in s[HEX.len()..].split(',').filter(|p| !p.is_empty()) {
        if let Some((b, n)) = part.split_once('*') {
            let byte = u8::from_str_radix(b, 16).map_err(|e| format!("bad run `{part}`: {e}"))?;
            let n: usize = n.parse().map_err(|e| format!("bad run `{part}`: {e}"))?;
            if n > 1 << 30 {
                return Err(format!("a run of {n} bytes"));
            }
            out.extend(std::iter::repeat_n(byte, n));
        } else {
            if part.len() % 2 != 0 {
                return Err(format!("odd hex `{part}`"));
            }
            for i in (0..part.len()).step_by(2) {
                out.push(u8::from_str_radix(&part[i..i + 2], 16).map_err(|e| format!("bad hex `{part}`: {e}"))?);
            }
        }
    }
    Ok(out)
}

/// A reply as replay compares it: an error by its errno and command status alone (the
/// reason text and the syndrome are the backend's own).
pub fn comparable(reply: &Value) -> Value {
    let mut r = reply.clone();
    if let Some(Value::Object(err)) = r.get_mut("result").and_then(|x| x.get_mut("Err")) {
        err.remove("reason");
        err.remove("op");
        if let Some(Value::Object(cmd)) = err.get_mut("cmd") {
            cmd.remove("syndrome");
        }
    }
    r
}

/// The result of a control action as a trace holds it: `null`, or the errno.
pub fn control_result(r: &mlx5_dv::Result<()>) -> Value {
    r.as_ref().map_or_else(|e| json!({"errno": e.errno()}), |()| Value::Null)
}

/// A call as JSON.
pub fn call_value(call: &Call) -> Value {
    serde_json::to_value(call).unwrap_or(Value::Null)
}

/// A reply as JSON.
pub fn reply_value(reply: &Reply) -> Value {
    serde_json::to_value(reply).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_runs_and_plain_bytes() {
        for b in [vec![0u8; 4096], (0..=255).collect::<Vec<u8>>(), [vec![1, 2, 3], vec![9; 20], vec![4; 3]].concat()] {
            let v = hex(b.clone());
            let s = v.as_str().unwrap_or_default().to_string();
            assert_eq!(unhex(&s), Ok(b), "{s}");
        }
        assert_eq!(hex(vec![0; 4096]), json!("$hex:00*4096"));
    }

    #[test]
    fn addresses_keys_and_qps_become_symbols_and_back() {
        let mut s = Symbols::default();
        s.learn(&json!({"handle": 1, "addr": 0x10000, "len": 4096}));
        s.learn(&json!({"handle": 2, "lkey": 0x1234_5601u32, "rkey": 0x1234_5601u32, "qp_num": 0x101}));
        let call = json!({"sge": {"addr": 0x10040, "lkey": 0x1234_56aa_u32}, "dest_qp_num": 0x101, "addr2": 7});
        let sym = s.symbolize(&call);
        assert_eq!(
            sym,
            json!({"sge": {"addr": {"$buf": 0, "off": 64}, "lkey": {"$key": 0, "tag": 0xaa}}, "dest_qp_num": {"$qp": 0}, "addr2": 7})
        );
        assert_eq!(s.resolve(&sym), Ok(call));
        assert!(Symbols::default().resolve(&sym).is_err(), "a symbol without its value");
    }
}
