//! The recording layer: wraps any backend and keeps every call and reply as a trace line.

use std::sync::{Arc, Mutex};

use mlx5_dv::{Backend, Call, ControlAction, Layer, Reply, Result, Wrapped};

use crate::{Header, Line, Symbols, call_value, reply_value};

/// Where a recorder puts its lines; shared with whoever writes the trace out.
pub type TraceSlot = Arc<Mutex<Vec<String>>>;

/// A [`Layer`] that records every call and reply, symbolically.
///
/// ```
/// use mlx5_trace::Recorder;
/// use mlx5_dv::prelude::*;
///
/// let mut b = Recorder::wrap(mlx5_sim::Simulator::with_profile("cx6dx").unwrap());
/// let ctx = b.open_ibv_device("mlx5_0").unwrap();
/// b.alloc_pd(ctx).unwrap();
/// let header = b.layer.header(&b.inner, None);
/// assert_eq!(b.layer.trace(&header).lines().count(), 3); // the header and two calls
/// ```
#[derive(Debug)]
pub struct Recorder {
    slot: TraceSlot,
    symbols: Symbols,
    next: usize,
}

impl Recorder {
    /// A recorder writing into `slot`, which it empties: a trace starts with its backend.
    pub fn new(slot: TraceSlot) -> Self {
        if let Ok(mut s) = slot.lock() {
            s.clear();
        }
        Recorder { slot, symbols: Symbols::default(), next: 0 }
    }

    /// `backend` with a fresh recorder around it.
    pub fn wrap<B: Backend>(backend: B) -> Wrapped<Recorder, B> {
        Wrapped::new(Recorder::new(TraceSlot::default()), backend)
    }

    /// The header of a trace of `backend`, for `case`.
    pub fn header(&self, backend: &dyn Backend, case: Option<&str>) -> Header {
        let info = backend.info();
        Header::new(info.backend, info.profile, case.map(String::from), info.facts)
    }

    /// The trace so far: `header`, then a line per call.
    pub fn trace(&self, header: &Header) -> String {
        text(header, &self.slot)
    }
}

/// A trace's text: `header`, then the lines in `slot`.
pub fn text(header: &Header, slot: &TraceSlot) -> String {
    let mut out = serde_json::to_string(header).unwrap_or_default();
    out.push('\n');
    if let Ok(lines) = slot.lock() {
        for l in lines.iter() {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

impl Recorder {
    fn push(&mut self, call: serde_json::Value, reply: serde_json::Value) {
        let line = Line { i: self.next, call, reply };
        self.next += 1;
        if let (Ok(text), Ok(mut s)) = (serde_json::to_string(&line), self.slot.lock()) {
            s.push(text);
        }
    }
}

impl Layer for Recorder {
    fn after(&mut self, call: &Call, reply: &mut Reply) {
        let call = self.symbols.symbolize(&call_value(call));
        let reply = reply_value(reply);
        self.symbols.learn(&reply);
        let reply = self.symbols.symbolize(&reply);
        self.push(call, reply);
    }

    fn control(&mut self, action: &ControlAction, result: &Result<()>) {
        let call = serde_json::to_value(action).unwrap_or_default();
        let reply = serde_json::json!({"control": crate::control_result(result)});
        self.push(call, reply);
    }
}
