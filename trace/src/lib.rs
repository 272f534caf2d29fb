//! # mlx5-trace: a run's calls, recorded and replayed
//!
//! Traces: every [`Call`] of a run with its [`Reply`], as JSON lines that mean the same thing on
//! another backend, and their replay. The format is described in `traces/README.md`.
//!
//! Values that differ between backends are written symbolically: an address inside a buffer
//! the run allocated is `{"$buf": i, "off": o}` (buffer `i` in allocation order), a memory key
//! is `{"$key": i, "tag": t}` (the `i`-th key index replies produced, `t` its 8-bit tag counted
//! from the tag it first had: a kernel's key variants come from a device-wide counter), a
//! QP number is `{"$qp": i}`. Byte arrays are hex, runs of one byte as `hh*count`.
//!
//! ## Layout
//!
//! - [`Recorder`]: the layer that records any backend (the suite's `run --record`, the
//!   model's shrunk failures, the C ABI's `MLX5SIM_TRACE`);
//! - [`replay`] and [`replay_within`]: a trace's calls on a backend, to the first divergence,
//!   held to [`Limits`];
//! - this module: the header, the lines, the symbols and the hex.
//!
//! The crate depends on the API's types and JSON alone, so that what records a trace (the C
//! ABI's shared library) links nothing of the suite. `mlx5_conformance::trace` is this crate.
#![deny(missing_docs)]

use mlx5_dv::{Call, Reply};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

mod limits;
mod record;
mod replay;

pub use limits::Limits;
pub use record::{Recorder, TraceSlot, text as record_text};
pub use replay::{Divergence, Replayed, replay, replay_within};

/// The format's name, in every header.
pub const FORMAT: &str = "mlx5sim-trace";
/// The format's version. Version 2 writes a key's tag relative to the tag it was made with
/// (version 1 wrote the tag itself).
pub const VERSION: u32 = 2;
/// The suite's git commit, captured at build time: `MLX5_CONFORMANCE_COMMIT` if set, else
/// "unknown" outside a git checkout.
pub const COMMIT: &str = env!("MLX5_CONFORMANCE_COMMIT");

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

impl Header {
    /// The header of a trace of `backend` on `profile`, for `case`, by this build.
    pub fn new(
        backend: String,
        profile: Option<String>,
        case: Option<String>,
        facts: std::collections::BTreeMap<String, String>,
    ) -> Self {
        Header {
            trace: FORMAT.into(),
            version: VERSION,
            backend,
            profile,
            case,
            facts,
            suite: format!("{} {COMMIT}", env!("CARGO_PKG_VERSION")),
        }
    }
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
    /// Key indexes in the order replies produced them, each with the tag it first had.
    keys: Vec<(u32, u8)>,
    qps: Vec<u32>,
    fds: Vec<i64>,
}

const ADDR_FIELDS: [&str; 3] = ["addr", "raddr", "remote_addr"];
const KEY_FIELDS: [&str; 3] = ["lkey", "rkey", "invalidate_rkey"];
const QP_FIELDS: [&str; 4] = ["qp_num", "dest_qp_num", "src_qp", "remote_qpn"];
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
                if !self.keys.iter().any(|(i, _)| *i == index) {
                    self.keys.push((index, (k & 0xff) as u8));
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
    /// this run has no value for, or says the byte arrays decode to more than `room` bytes.
    /// `room` loses each byte a `$hex:` string decodes to.
    pub fn resolve(&self, value: &Value, room: &mut usize) -> Result<Value, String> {
        self.resolve_in(value, room).map_err(|e| match e {
            Unresolved::Bad(why) => why,
            Unresolved::PastRoom => "the byte arrays decode to more bytes than there is room for".into(),
        })
    }

    pub(crate) fn resolve_in(&self, value: &Value, room: &mut usize) -> Result<Value, Unresolved> {
        match value {
            Value::Object(m) => {
                if let Some(i) = num(m, "$buf") {
                    let (a, _) = self.bufs.get(i as usize).ok_or(format!("buffer #{i} was not allocated"))?;
                    return Ok(json!(a.wrapping_add(num(m, "off").unwrap_or(0))));
                }
                if let Some(i) = num(m, "$key") {
                    let (k, first) = self.keys.get(i as usize).ok_or(format!("key #{i} was not made"))?;
                    let tag = first.wrapping_add((num(m, "tag").unwrap_or(0) & 0xff) as u8);
                    return Ok(json!(k << 8 | u32::from(tag)));
                }
                if let Some(i) = num(m, "$fd") {
                    return Ok(json!(self.fds.get(i as usize).ok_or(format!("fd #{i} was not opened"))?));
                }
                if let Some(i) = num(m, "$qp") {
                    return Ok(json!(self.qps.get(i as usize).ok_or(format!("QP #{i} was not created"))?));
                }
                m.iter()
                    .map(|(k, v)| Ok((k.clone(), self.resolve_in(v, room)?)))
                    .collect::<Result<Map<_, _>, Unresolved>>()
                    .map(Value::Object)
            }
            Value::Array(a) => {
                a.iter().map(|v| self.resolve_in(v, room)).collect::<Result<Vec<_>, _>>().map(Value::Array)
            }
            Value::String(s) if s.starts_with(HEX) => unhex(s, room).map(|b| json!(b)),
            v => Ok(v.clone()),
        }
    }

    fn addr_symbol(&self, n: u64) -> Option<Value> {
        let (i, (a, _)) = self.bufs.iter().enumerate().find(|(_, (a, l))| n >= *a && n - a <= *l)?;
        Some(json!({"$buf": i, "off": n - a}))
    }

    fn key_symbol(&self, n: u64) -> Option<Value> {
        let i = self.keys.iter().position(|(k, _)| u64::from(*k) == n >> 8)?;
        Some(json!({"$key": i, "tag": (n as u8).wrapping_sub(self.keys[i].1)}))
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

/// Why a symbolic value has no concrete one.
#[derive(Debug, PartialEq)]
pub(crate) enum Unresolved {
    /// A symbol without its value, or a `$hex:` string that is not hex.
    Bad(String),
    /// The byte arrays decode to more bytes than the room left.
    PastRoom,
}

impl From<String> for Unresolved {
    fn from(why: String) -> Self {
        Unresolved::Bad(why)
    }
}

/// The bytes of a `$hex:` string, each taken from `room` before it is made.
fn unhex(s: &str, room: &mut usize) -> Result<Vec<u8>, Unresolved> {
    let mut out = Vec::new();
    for part in s[HEX.len()..].split(',').filter(|p| !p.is_empty()) {
        let bad = |why: &str| Unresolved::Bad(format!("bad hex `{part}`: {why}"));
        // Bytes, not chars: text that is not ASCII is not hex, and is never split inside a char.
        let (digits, run) = match part.split_once('*') {
            Some((b, n)) => (b.as_bytes(), Some(n.parse::<usize>().map_err(|e| bad(&e.to_string()))?)),
            None => (part.as_bytes(), None),
        };
        if digits.len() % 2 != 0 || (run.is_some() && digits.len() != 2) {
            return Err(bad(if run.is_some() { "a run repeats one byte" } else { "an odd number of digits" }));
        }
        let n = run.unwrap_or(digits.len() / 2);
        *room = room.checked_sub(n).ok_or(Unresolved::PastRoom)?;
        let mut bytes = digits.chunks_exact(2).map(|d| {
            let digit = |c: u8| char::from(c).to_digit(16);
            digit(d[0]).zip(digit(d[1])).map(|(h, l)| (h << 4 | l) as u8).ok_or_else(|| bad("not hex digits"))
        });
        match run {
            Some(n) => {
                let byte = bytes.next().unwrap_or(Ok(0))?;
                out.extend(std::iter::repeat_n(byte, n));
            }
            None => {
                for b in bytes {
                    out.push(b?);
                }
            }
        }
    }
    Ok(out)
}

/// A reply as replay compares it: an error by its errno and command status alone (the
/// reason text and the syndrome are the backend's own).
pub fn comparable(reply: &Value) -> Value {
    let mut r = reply.clone();
    if let Some(Value::Object(err)) = result_of_mut(&mut r).and_then(|x| x.get_mut("Err")) {
        err.remove("reason");
        err.remove("op");
        if let Some(Value::Object(cmd)) = err.get_mut("cmd") {
            cmd.remove("syndrome");
        }
    }
    r
}

/// A reply's result: `result`, or for a call of a nested family (`Call::Dr`) the family
/// reply's own `result` inside it.
pub fn result_of(reply: &Value) -> Option<&Value> {
    let r = reply.get("result")?;
    if reply.get("reply").and_then(Value::as_str) == Some("dr") { r.get("result") } else { Some(r) }
}

fn result_of_mut(reply: &mut Value) -> Option<&mut Value> {
    let nested = reply.get("reply").and_then(Value::as_str) == Some("dr");
    let r = reply.get_mut("result")?;
    if nested { r.get_mut("result") } else { Some(r) }
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
    fn a_nested_familys_failures_compare_by_errno() {
        let card = json!({"reply": "dr", "result": {"dr": "table_create", "result": {"Err": {"cmd": null, "errno": 95, "op": "DrTableCreate", "reason": "libmlx5 returned NULL"}}}});
        let sim = json!({"reply": "dr", "result": {"dr": "table_create", "result": {"Err": {"cmd": null, "errno": 95, "op": "DrTableCreate", "reason": "tables above the root need software steering"}}}});
        let other = json!({"reply": "dr", "result": {"dr": "table_create", "result": {"Err": {"cmd": null, "errno": 22, "op": "DrTableCreate", "reason": "x"}}}});
        assert_eq!(comparable(&card), comparable(&sim));
        assert_ne!(comparable(&card), comparable(&other));
        assert_eq!(result_of(&card).and_then(|r| r.pointer("/Err/errno")), Some(&json!(95)));
    }

    #[test]
    fn hex_round_trips_runs_and_plain_bytes() {
        for b in [vec![0u8; 4096], (0..=255).collect::<Vec<u8>>(), [vec![1, 2, 3], vec![9; 20], vec![4; 3]].concat()] {
            let v = hex(b.clone());
            let s = v.as_str().unwrap_or_default().to_string();
            assert_eq!(unhex(&s, &mut { usize::MAX }), Ok(b), "{s}");
        }
        assert_eq!(hex(vec![0; 4096]), json!("$hex:00*4096"));
    }

    #[test]
    fn hex_that_is_not_hex_is_an_error() {
        // Four bytes of text whose second char is three bytes long: once a slice inside it.
        for s in ["$hex:a\u{20ac}", "$hex:\u{e9}\u{e9}", "$hex:0", "$hex:zz", "$hex:0*4", "$hex:0000*4", "$hex:00*x"] {
            assert!(matches!(unhex(s, &mut { usize::MAX }), Err(Unresolved::Bad(_))), "{s}");
        }
    }

    #[test]
    fn hex_decodes_no_byte_past_its_room() {
        let mut room = 10;
        assert_eq!(unhex("$hex:0102,00*8", &mut room), Ok([vec![1, 2], vec![0; 8]].concat()));
        assert_eq!(room, 0);
        // Past the room before a byte of the run is made: a few bytes of text for 2^60 bytes.
        let mut room = 1 << 20;
        assert_eq!(unhex("$hex:01,00*1152921504606846976", &mut room), Err(Unresolved::PastRoom));
        assert_eq!(unhex("$hex:00*1048576,00", &mut (1 << 20)), Err(Unresolved::PastRoom));
    }

    #[test]
    fn addresses_keys_and_qps_become_symbols_and_back() {
        let mut s = Symbols::default();
        s.learn(&json!({"handle": 1, "addr": 0x10000, "len": 4096}));
        s.learn(&json!({"handle": 2, "lkey": 0x1234_5601u32, "rkey": 0x1234_5601u32, "qp_num": 0x101}));
        let call = json!({"sge": {"addr": 0x10040, "lkey": 0x1234_56aa_u32}, "dest_qp_num": 0x101, "addr2": 7, "remote_qpn": 0x101});
        let sym = s.symbolize(&call);
        assert_eq!(
            sym,
            json!({"sge": {"addr": {"$buf": 0, "off": 64}, "lkey": {"$key": 0, "tag": 0xa9}}, "dest_qp_num": {"$qp": 0}, "addr2": 7, "remote_qpn": {"$qp": 0}})
        );
        assert_eq!(s.resolve(&sym, &mut 0), Ok(call));
        assert!(Symbols::default().resolve(&sym, &mut 0).is_err(), "a symbol without its value");
    }

    #[test]
    fn a_tag_is_counted_from_the_keys_first_one() {
        // Recorded where the device's variant counter stood at 0xff, replayed where it stands
        // at 0x03: the key's first tag and the tag it was changed to map across.
        let mut rec = Symbols::default();
        rec.learn(&json!({"handle": 1, "lkey": 0x0000_07ffu32}));
        let sym = rec.symbolize(&json!({"lkey": 0x0000_0702u32}));
        assert_eq!(sym, json!({"lkey": {"$key": 0, "tag": 3}}));
        let mut now = Symbols::default();
        now.learn(&json!({"handle": 1, "lkey": 0x0000_2203u32}));
        assert_eq!(now.resolve(&sym, &mut 0), Ok(json!({"lkey": 0x0000_2206u32})));
        assert_eq!(now.symbolize(&json!({"lkey": 0x0000_2203u32})), json!({"lkey": {"$key": 0, "tag": 0}}));
    }
}
