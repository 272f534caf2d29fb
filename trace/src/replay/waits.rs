//! Polls replayed as waits: how many empty polls come before a completion is the device's
//! timing, not its behaviour. A card through rdma-core completes work after the doorbell, the
//! simulator often before the next call; a trace of one replayed on the other must match the
//! completions, not the empty polls between them.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use mlx5_dv::{Backend, Call};
use serde_json::{Value, json};

use crate::{Symbols, comparable, reply_value};

/// How long a replayed poll waits for the completions its recording returned.
const WAIT: Duration = Duration::from_secs(1);

/// Completions the backend returned to polls the recording saw return fewer, by CQ: what a
/// later poll of the recording returned.
#[derive(Default)]
pub(crate) struct Waits {
    early: HashMap<String, VecDeque<Value>>,
}

/// What [`Waits::poll`] made of a call.
pub(crate) enum Waited {
    /// Not a successful `poll_cq`: replay it as any call.
    NotAWait,
    /// The completions match.
    Matches,
    /// The reply to report as the divergence.
    Differs(Value),
}

impl Waits {
    /// Replay `call` if it is a poll whose recorded reply is a success. The poll is made (a
    /// poll moves the simulator's work on) and what it returns is kept; the recorded
    /// completions are taken from what was kept, polling `backend` again until as many came
    /// or [`WAIT`] passed.
    pub(crate) fn poll(
        &mut self,
        call: &Call,
        recorded: &Value,
        backend: &mut dyn Backend,
        symbols: &mut Symbols,
    ) -> Waited {
        let Call::PollCq { cq, max } = call else { return Waited::NotAWait };
        let Some(want) = recorded.get("result").and_then(|r| r.get("Ok")).and_then(Value::as_array) else {
            return Waited::NotAWait;
        };
        // No more than the call asked for: the recorded reply is input, its length unchecked.
        let wanted = want.len().min(*max);
        let early = self.early.entry(serde_json::to_string(cq).unwrap_or_default()).or_default();
        let deadline = Instant::now() + WAIT;
        let mut first = true;
        while first || early.len() < wanted {
            first = false;
            let reply = reply_value(&Call::PollCq { cq: *cq, max: *max }.apply(backend));
            symbols.learn(&reply);
            let now = symbols.symbolize(&reply);
            match now.get("result").and_then(|r| r.get("Ok")).and_then(Value::as_array) {
                None => return Waited::Differs(now),
                Some(wcs) if wcs.is_empty() && early.len() < wanted => {
                    if Instant::now() >= deadline {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                Some(wcs) => early.extend(wcs.iter().cloned()),
            }
        }
        let got: Vec<Value> = early.drain(..wanted.min(early.len())).collect();
        let now = json!({"reply": "poll_cq", "result": {"Ok": got}});
        if comparable(&now) == comparable(recorded) { Waited::Matches } else { Waited::Differs(now) }
    }
}
