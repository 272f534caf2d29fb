//! Replay: run a trace's calls on a backend and find the first reply that differs.

use mlx5_dv::errno::display;
use mlx5_dv::{Backend, Call, ControlAction};
use serde_json::Value;

use crate::limits::{Budget, Limits};
use crate::replay::waits::{Waited, Waits};
use crate::{Header, Line, Symbols, Unresolved, comparable, control_result, reply_value};

mod waits;

/// The first call whose reply differs from the recorded one.
#[derive(Debug, Clone, PartialEq)]
pub struct Divergence {
    /// The call's index in the trace.
    pub index: usize,
    /// The C function.
    pub function: &'static str,
    /// The call, symbolic.
    pub call: Value,
    /// The recorded reply.
    pub recorded: Value,
    /// The reply now.
    pub now: Value,
}

impl Divergence {
    /// What differs, in the API's terms: errno by number and name, or success against
    /// failure, or the values.
    pub fn explain(&self) -> String {
        let f = self.function;
        match (outcome(&self.recorded), outcome(&self.now)) {
            (Err(a), Err(b)) => format!(
                "call #{}: {f} failed with errno {a} {} when recorded, errno {b} {} now",
                self.index,
                display(a),
                display(b)
            ),
            (Ok(()), Err(b)) => {
                format!("call #{}: {f} succeeded when recorded, fails now with errno {b} {}", self.index, display(b))
            }
            (Err(a), Ok(())) => {
                format!("call #{}: {f} failed with errno {a} {} when recorded, succeeds now", self.index, display(a))
            }
            (Ok(()), Ok(())) => format!(
                "call #{}: {f} returned {} when recorded, {} now",
                self.index,
                crate::result_of(&self.recorded).unwrap_or(&Value::Null),
                crate::result_of(&self.now).unwrap_or(&Value::Null)
            ),
        }
    }
}

fn outcome(reply: &Value) -> Result<(), i32> {
    match crate::result_of(reply).and_then(|r| r.get("Err")) {
        Some(e) => Err(e.get("errno").and_then(Value::as_i64).unwrap_or(0) as i32),
        None => Ok(()),
    }
}

/// `now` matches `recorded` as [`comparable`] sees them, a failure's command status counting
/// only where the recording has one (a card through rdma-core never sees it).
fn same(now: &Value, recorded: &Value) -> bool {
    let mut now = comparable(now);
    let recorded = comparable(recorded);
    let nested = recorded.get("reply").and_then(Value::as_str) == Some("dr");
    let at = if nested { "/result/result/Err/cmd" } else { "/result/Err/cmd" };
    if recorded.pointer(at) == Some(&Value::Null)
        && let Some(cmd) = now.pointer_mut(at)
    {
        *cmd = Value::Null;
    }
    now == recorded
}

/// What a replay found.
#[derive(Debug, Clone, PartialEq)]
pub enum Replayed {
    /// Every reply matched.
    Matches,
    /// The first reply that differs.
    Diverges(Divergence),
    /// The trace injects faults or moves ports at this call, and the backend has no
    /// simulator control: the rest cannot be replayed.
    NeedsSimControl(usize),
}

/// Replay the trace `text` on `backend`; `Err` for a trace that cannot be read, or one past
/// the default [`Limits`].
pub fn replay(text: &str, backend: &mut dyn Backend) -> Result<Replayed, String> {
    replay_within(text, backend, &Limits::default())
}

/// Replay the trace `text` on `backend`, holding it to `limits`: `Err` for a trace that
/// cannot be read, or at the first call past a limit, before that call is made.
pub fn replay_within(text: &str, backend: &mut dyn Backend, limits: &Limits) -> Result<Replayed, String> {
    if text.len() > limits.trace_bytes {
        return Err(format!("a trace of {} bytes; replay reads at most {}", text.len(), limits.trace_bytes));
    }
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let (_, first) = lines.next().ok_or("an empty trace")?;
    let header: Header = serde_json::from_str(first).map_err(|e| format!("line 1 is not a trace header: {e}"))?;
    // Version 1 wrote keys' tags as they were, which this version would misread.
    if header.trace != crate::FORMAT || header.version != crate::VERSION {
        return Err(format!("{} version {} is not a trace this program reads", header.trace, header.version));
    }
    let mut symbols = Symbols::default();
    let mut budget = Budget::new(*limits);
    let mut issuer = mlx5_dv::BackendId::NONE;
    let mut waits = Waits::default();
    for (n, l) in lines {
        if l.len() > limits.line_bytes {
            return Err(format!(
                "line {}: {} bytes; replay reads lines of at most {}",
                n + 1,
                l.len(),
                limits.line_bytes
            ));
        }
        let line: Line = serde_json::from_str(l).map_err(|e| format!("line {}: {e}", n + 1))?;
        let room = budget.decodable();
        let mut left = room;
        let concrete = symbols.resolve_in(&line.call, &mut left).map_err(|e| match e {
            Unresolved::Bad(why) => format!("call #{}: {why}", line.i),
            Unresolved::PastRoom => format!("call #{}: {}", line.i, budget.refuse("its byte arrays decode to")),
        })?;
        budget.decoded(room - left);
        if concrete.get("control").is_some() {
            let action: ControlAction =
                serde_json::from_value(concrete).map_err(|e| format!("call #{}: {e}", line.i))?;
            let Some(c) = backend.sim_control() else { return Ok(Replayed::NeedsSimControl(line.i)) };
            let now = serde_json::json!({"control": control_result(&action.apply(c))});
            if now != line.reply {
                let d =
                    Divergence { index: line.i, function: "SimControl", call: line.call, recorded: line.reply, now };
                return Ok(Replayed::Diverges(d));
            }
            continue;
        }
        let call: Call = mlx5_dv::adopting(issuer, || serde_json::from_value(concrete))
            .map_err(|e| format!("call #{}: not a call: {e}", line.i))?;
        budget.ask(&call).map_err(|e| format!("call #{}: {e}", line.i))?;
        match waits.poll(&call, &line.reply, backend, &mut symbols) {
            Waited::NotAWait => {}
            Waited::Matches => continue,
            Waited::Differs(now) => {
                let function = call.op().c_name();
                return Ok(Replayed::Diverges(Divergence {
                    index: line.i,
                    function,
                    call: line.call,
                    recorded: line.reply,
                    now,
                }));
            }
        }
        let typed = call.apply(backend);
        if issuer == mlx5_dv::BackendId::NONE {
            issuer = typed.issuer().unwrap_or(issuer);
        }
        let reply = reply_value(&typed);
        symbols.learn(&reply);
        let now = symbols.symbolize(&reply);
        if !same(&now, &line.reply) {
            let function = call.op().c_name();
            return Ok(Replayed::Diverges(Divergence {
                index: line.i,
                function,
                call: line.call,
                recorded: line.reply,
                now,
            }));
        }
    }
    Ok(Replayed::Matches)
}
