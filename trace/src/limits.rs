//! What replay accepts of a trace. A trace is input: every allocation its text controls is
//! bounded here, and replay refuses a trace past a bound with an error naming it, before the
//! allocation is made.
//!
//! Why a bound is needed where the text is short: a `$hex:` run (`00*20000000`) is a few bytes
//! of text for millions of bytes, and each decoded byte costs about 64 bytes on its way into a
//! [`mlx5_dv::Call`] (a JSON number, then serde's buffered copy); a call's `len` or `out_len`
//! asks the backend for a reply of that size, which costs as much again to compare; and an
//! `alloc_buf` asks the backend for host memory.

use mlx5_dv::Call;

/// Bounds on what one replay decodes, asks back and allocates. [`Limits::default`] is what
/// [`crate::replay`] holds every trace to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of the trace's text.
    pub trace_bytes: usize,
    /// Bytes of one line of it.
    pub line_bytes: usize,
    /// Bytes one call's byte arrays hold once decoded, and bytes one call may ask back
    /// (`read_buf`'s `len`, a command's `out_len`).
    pub call_bytes: usize,
    /// Decoded and asked-back bytes, summed over the trace.
    pub total_bytes: usize,
    /// Bytes the trace's `alloc_buf` and `alloc_dmabuf` calls ask for, summed (freeing gives
    /// nothing back: the bound is on what a trace may ask, not on what it holds).
    pub buffers: u64,
}

/// The largest trace the suite records is 4.3 MB, its longest line 4.3 MB (a post with tens
/// of thousands of scatter entries), its largest byte array or read 16.3 KiB, its arrays and
/// reads 142 KiB in all, its buffers 137 KiB in all. Each bound is well above these and
/// keeps one replay's own memory in the low hundreds of megabytes.
impl Default for Limits {
    fn default() -> Self {
        Limits {
            trace_bytes: 64 << 20,
            line_bytes: 16 << 20,
            call_bytes: 1 << 20,
            total_bytes: 16 << 20,
            buffers: 256 << 20,
        }
    }
}

/// What a replay has used of its [`Limits`] so far.
#[derive(Debug)]
pub(crate) struct Budget {
    limits: Limits,
    bytes: usize,
    buffers: u64,
}

impl Budget {
    pub(crate) fn new(limits: Limits) -> Self {
        Budget { limits, bytes: 0, buffers: 0 }
    }

    /// Bytes the next call's byte arrays may decode to.
    pub(crate) fn decodable(&self) -> usize {
        self.limits.call_bytes.min(self.limits.total_bytes.saturating_sub(self.bytes))
    }

    /// Take `n` decoded bytes; the caller decoded at most [`Budget::decodable`].
    pub(crate) fn decoded(&mut self, n: usize) {
        self.bytes = self.bytes.saturating_add(n);
    }

    /// The error for `what` past [`Budget::decodable`]: past the call's bound, or the rest
    /// of the trace's.
    pub(crate) fn refuse(&self, what: &str) -> String {
        let (call, total) = (self.limits.call_bytes, self.limits.total_bytes);
        let left = self.decodable();
        if left == call {
            format!("{what} more than the {call} bytes replay takes for one call")
        } else {
            format!("{what} more than the {left} bytes left of the {total} replay takes for a whole trace")
        }
    }

    /// Take what `call` asks of the backend, before it is made; `Err` says which bound it
    /// passes.
    pub(crate) fn ask(&mut self, call: &Call) -> Result<(), String> {
        match *call {
            Call::ReadBuf { len: n, .. }
            | Call::DevxGeneralCmd { out_len: n, .. }
            | Call::DevxObjCreate { out_len: n, .. }
            | Call::DevxObjQuery { out_len: n, .. }
            | Call::DevxObjModify { out_len: n, .. }
            | Call::DevxCreateEq { out_len: n, .. } => {
                if n > self.decodable() {
                    return Err(self.refuse(&format!("it asks for {n} bytes back,")));
                }
                self.bytes += n;
            }
            Call::AllocBuf { len } | Call::AllocDmabuf { len } => {
                let len = u64::try_from(len).unwrap_or(u64::MAX);
                let total = self.buffers.saturating_add(len);
                if total > self.limits.buffers {
                    return Err(format!(
                        "it asks for a buffer of {len} bytes, {total} in all; replay allocates at most {} bytes of \
                         buffers for a trace",
                        self.limits.buffers
                    ));
                }
                self.buffers = total;
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use mlx5_dv::prelude::*;
    use mlx5_sim::Simulator;

    use super::*;
    use crate::{Recorder, Replayed, replay, replay_within};

    const HEADER: &str =
        r#"{"trace":"mlx5sim-trace","version":2,"backend":"sim","profile":null,"case":null,"facts":{},"suite":"x"}"#;

    fn sim() -> Simulator {
        Simulator::with_profile("cx6dx").unwrap()
    }

    /// A trace of a 4 KiB buffer read back whole, then a second buffer.
    fn buffers_trace() -> String {
        let mut b = Recorder::wrap(sim());
        let buf = b.alloc_buf(4096).unwrap();
        b.read_buf(&buf, 0, 4096).unwrap();
        b.alloc_buf(8192).unwrap();
        b.layer.trace(&b.layer.header(&b.inner, None))
    }

    #[test]
    fn a_few_bytes_of_text_for_megabytes_of_call_are_refused_before_decoding() {
        // The fuzzer's find: this run of 20 million zeros became 2 GB on its way into a call.
        let line = concat!(
            r#"{"i":0,"call":{"call":"devx_create_eq","ctx":1,"input":"$hex:0301,00*20060800,01","#,
            r#""out_len":16},"reply":null}"#
        );
        let e = replay(&format!("{HEADER}\n{line}"), &mut sim()).unwrap_err();
        assert_eq!(e, "call #0: its byte arrays decode to more than the 1048576 bytes replay takes for one call");
    }

    #[test]
    fn calls_past_the_trace_total_are_refused() {
        let mut b = Recorder::wrap(sim());
        let buf = b.alloc_buf(4096).unwrap();
        b.write_buf(&buf, 0, &[0; 600]).unwrap();
        b.write_buf(&buf, 0, &[0; 600]).unwrap();
        let text = b.layer.trace(&b.layer.header(&b.inner, None));
        let limits = Limits { call_bytes: 1000, total_bytes: 1000, ..Limits::default() };
        let e = replay_within(&text, &mut sim(), &limits).unwrap_err();
        assert_eq!(
            e,
            "call #2: its byte arrays decode to more than the 400 bytes left of the 1000 replay takes for a whole trace"
        );
    }

    #[test]
    fn a_read_back_or_a_buffer_past_its_limit_is_refused_before_it_is_made() {
        let text = buffers_trace();
        assert_eq!(replay(&text, &mut sim()), Ok(Replayed::Matches));
        let small = Limits { call_bytes: 4095, ..Limits::default() };
        let e = replay_within(&text, &mut sim(), &small).unwrap_err();
        assert_eq!(e, "call #1: it asks for 4096 bytes back, more than the 4095 bytes replay takes for one call");
        let few = Limits { buffers: 12287, ..Limits::default() };
        let e = replay_within(&text, &mut sim(), &few).unwrap_err();
        assert!(e.starts_with("call #2: it asks for a buffer of 8192 bytes, 12288 in all"), "{e}");
    }

    #[test]
    fn a_poll_of_any_max_is_replayed() {
        // The C ABI polls an armed CQ for its completion channel with the largest max, and
        // its traces replay; the simulator reserves room for the ring's completions at most.
        let mut b = Budget::new(Limits { call_bytes: 0, total_bytes: 0, ..Limits::default() });
        let mut s = sim();
        let ctx = s.open_ibv_device("mlx5_0").unwrap();
        let cq = s.create_cq(ctx, 16).unwrap();
        assert_eq!(b.ask(&Call::PollCq { cq, max: usize::MAX }), Ok(()));
    }

    #[test]
    fn a_trace_or_a_line_past_its_size_is_refused() {
        let text = buffers_trace();
        let e = replay_within(&text, &mut sim(), &Limits { trace_bytes: text.len() - 1, ..Limits::default() });
        assert_eq!(e, Err(format!("a trace of {} bytes; replay reads at most {}", text.len(), text.len() - 1)));
        let e = replay_within(&text, &mut sim(), &Limits { line_bytes: 100, ..Limits::default() }).unwrap_err();
        assert!(e.starts_with("line 2: ") && e.ends_with("bytes; replay reads lines of at most 100"), "{e}");
    }

    #[test]
    fn a_reply_past_the_call_bound_or_the_total_is_refused() {
        let mut b = Budget::new(Limits { call_bytes: 100, total_bytes: 150, ..Limits::default() });
        let handle = mlx5_dv::BufHandle::new(mlx5_dv::BackendId::NONE, 1);
        let read = |len| Call::ReadBuf { buf: mlx5_dv::Buf { handle, addr: 0, len: 0 }, offset: 0, len };
        let e = b.ask(&read(101)).unwrap_err();
        assert_eq!(e, "it asks for 101 bytes back, more than the 100 bytes replay takes for one call");
        assert_eq!(b.ask(&read(100)), Ok(()));
        let e = b.ask(&read(51)).unwrap_err();
        assert_eq!(
            e,
            "it asks for 51 bytes back, more than the 50 bytes left of the 150 replay takes for a whole trace"
        );
        assert_eq!(b.decodable(), 50);
        b.decoded(50);
        assert_eq!(b.decodable(), 0);
    }

    #[test]
    fn buffers_count_what_was_asked_in_all() {
        let mut b = Budget::new(Limits { buffers: 8192, ..Limits::default() });
        assert_eq!(b.ask(&Call::AllocBuf { len: 4096 }), Ok(()));
        assert_eq!(b.ask(&Call::AllocDmabuf { len: 4096 }), Ok(()));
        let e = b.ask(&Call::AllocBuf { len: 1 }).unwrap_err();
        assert!(e.contains("8193 in all") && e.contains("at most 8192 bytes of buffers"), "{e}");
    }
}
