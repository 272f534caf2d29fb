//! Polls replayed as waits: how many empty polls come before a completion (or an
//! asynchronous event) is the device's timing, not its behaviour. A card through rdma-core
//! completes work after the doorbell, the simulator often before the next call; a trace of one
//! replayed on the other must match the completions and events, not the empty polls between.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use mlx5_dv::{Backend, Call};
use serde_json::{Value, json};

use crate::{Symbols, comparable, reply_value};

/// How long a replayed poll waits for the completions its recording returned.
const WAIT: Duration = Duration::from_secs(1);
/// How long the polls of one replay wait in all: a trace is input, and its polls may ask
/// for completions that never come.
const WAIT_IN_ALL: Duration = Duration::from_secs(5);

/// Completions the backend returned to polls the recording saw return fewer, by CQ: what a
/// later poll of the recording returned.
#[derive(Default)]
pub(crate) struct Waits {
    early: HashMap<String, VecDeque<Value>>,
    waited: Duration,
    /// Whether the backend runs on its own time (a card): a simulator in the process moves
    /// only when called, so a replay on it polls again a few times and never sleeps.
    card: Option<bool>,
}

/// How many times a poll is made again on a simulator before its completions count as
/// missing.
const SIM_TRIES: u32 = 8;

/// What [`Waits::poll`] made of a call.
pub(crate) enum Waited {
    /// Not a successful `poll_cq`: replay it as any call.
    NotAWait,
    /// The completions match.
    Matches,
    /// The reply to report as the divergence.
    Differs(Value),
}

/// The items a wait's reply holds (completions, or the event if there was one); `None` for
/// a failure.
fn items(reply: &Value) -> Option<Vec<Value>> {
    match reply.get("result")?.get("Ok")? {
        Value::Array(wcs) => Some(wcs.clone()),
        Value::Null => Some(vec![]),
        event => Some(vec![event.clone()]),
    }
}

impl Waits {
    /// Replay `call` if it is a wait whose recorded reply is a success: `poll_cq`, or
    /// `get_async_event` (an event or none). The call is made (a poll moves the simulator's
    /// work on) and what it returns is kept; the recorded items are taken from what was kept,
    /// calling again until as many came or, on a card, [`WAIT`] passed ([`WAIT_IN_ALL`] over
    /// the replay).
    pub(crate) fn poll(
        &mut self,
        call: &Call,
        recorded: &Value,
        backend: &mut dyn Backend,
        symbols: &mut Symbols,
    ) -> Waited {
        let (key, max, name) = match call {
            Call::PollCq { cq, max } => (serde_json::to_string(cq).unwrap_or_default(), *max, "poll_cq"),
            Call::GetAsyncEvent { ctx } => (format!("events of {ctx:?}"), 1, "get_async_event"),
            _ => return Waited::NotAWait,
        };
        let Some(want) = items(recorded) else { return Waited::NotAWait };
        // No more than the call asked for: the recorded reply is input, its length unchecked.
        let wanted = want.len().min(max);
        let early = self.early.entry(key).or_default();
        let card = *self.card.get_or_insert_with(|| !backend.caps().sim_control);
        let mut tries = 0;
        let start = Instant::now();
        let deadline = start + WAIT.min(WAIT_IN_ALL.saturating_sub(self.waited));
        let mut first = true;
        while first || early.len() < wanted {
            first = false;
            let reply = reply_value(&call.apply(backend));
            symbols.learn(&reply);
            let now = symbols.symbolize(&reply);
            match items(&now) {
                None => return Waited::Differs(now),
                Some(got) if got.is_empty() && early.len() < wanted => {
                    tries += 1;
                    if !card && tries >= SIM_TRIES || Instant::now() >= deadline {
                        break;
                    }
                    if card {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                Some(got) => early.extend(got),
            }
        }
        self.waited += start.elapsed();
        let got: Vec<Value> = early.drain(..wanted.min(early.len())).collect();
        let result = match call {
            Call::PollCq { .. } => Value::Array(got),
            _ => got.into_iter().next().unwrap_or(Value::Null),
        };
        let now = json!({"reply": name, "result": {"Ok": result}});
        if comparable(&now) == comparable(recorded) { Waited::Matches } else { Waited::Differs(now) }
    }
}
