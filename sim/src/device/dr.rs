//! Software steering (`mlx5dv_dr`) as a device applies it: the tables, matchers and rules the
//! library put in its flow tables, and what happens to a frame that goes through them.
//!
//! A frame enters the root tables of its direction (every level-0 table of the device's
//! domains of that type): their matchers are tried by priority, then by age, and a frame
//! takes the actions of the oldest rule of the first matcher that matches. Actions change the
//! frame (VLAN push and pop, header rewrites, tunnel encapsulation and decapsulation), count
//! and tag it, and end in a destination: a QP or TIR, another table, a drop, the table type's default (nothing on receive, the wire
//! on transmit), copies to several destinations, or a sampler. A frame no rule of a non-root
//! table matches takes the default too. A frame no root rule matches is the caller's: on
//! receive it meets the verbs flow rules, on transmit it goes out as it is.

use std::collections::BTreeMap;

use super::fte_match;

mod rewrite;
pub use rewrite::{ModifyOp, parse_modify};

/// `MLX5DV_DR_DOMAIN_TYPE_NIC_RX`.
pub const NIC_RX: u32 = 0;
/// `MLX5DV_DR_DOMAIN_TYPE_NIC_TX`.
pub const NIC_TX: u32 = 1;

/// Tables a frame may pass through before the device gives up on it (a rule may send it to a
/// table of its own level or below; hardware bounds such loops, the bound is unverified).
const MAX_HOPS: usize = 16;

/// What a rule does to a frame, resolved to the device's own numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DrAct {
    /// Nothing more happens to the frame.
    Drop,
    /// The table type's default: nothing on receive, the wire on transmit.
    DefaultMiss,
    /// Deliver to this QP (or receive WQ).
    Qp(u32),
    /// Deliver to the RQ of this TIR.
    Tir(u32),
    /// Go on in this table (the device's table id).
    Table(u32),
    /// Count on this flow counter.
    Counter(u32),
    /// Tag the frame (the completion's flow tag).
    Tag(u32),
    /// Rewrite header fields.
    Modify(Vec<ModifyOp>),
    /// Push this VLAN header (TPID, then TCI).
    PushVlan(u32),
    /// Pop the outer VLAN header.
    PopVlan,
    /// Put these outer headers in front (L2 to L2 tunnel).
    Encap(Vec<u8>),
    /// Strip an L2 tunnel's outer headers.
    Decap,
    /// A copy of the frame through each list of actions.
    Array(Vec<Vec<DrAct>>),
    /// One frame in `ratio` also goes through `sample`; every frame goes on to `next`.
    Sampler {
        /// The sampler's identity (its counter of frames seen).
        key: u64,
        /// One in this many frames is sampled.
        ratio: u32,
        /// The table every frame goes on to.
        next: u32,
        /// What a sampled copy goes through.
        sample: Vec<DrAct>,
    },
}

#[derive(Debug, Clone)]
struct Table {
    ty: u32,
    level: u32,
}

#[derive(Debug, Clone)]
struct Matcher {
    table: u32,
    priority: u16,
    criteria: u8,
    mask: Vec<u8>,
}

#[derive(Debug, Clone)]
struct Rule {
    matcher: u32,
    value: Vec<u8>,
    actions: Vec<DrAct>,
}

/// Where a frame ends up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrDest {
    /// A QP or receive WQ, by number.
    Qp(u32),
    /// A TIR, by number.
    Tir(u32),
}

/// What steering made of one frame.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DrOutcome {
    /// Frames delivered, with their flow tags.
    pub delivered: Vec<(DrDest, Vec<u8>, Option<u32>)>,
    /// Flow counters counted, with the length of the frame each counted.
    pub counted: Vec<(u32, u64)>,
    /// Frames that go out on the wire (transmit only).
    pub wire: Vec<Vec<u8>>,
}

/// The steering state of one device.
#[derive(Debug, Clone, Default)]
pub struct Dr {
    tables: BTreeMap<u32, Table>,
    matchers: BTreeMap<u32, Matcher>,
    rules: BTreeMap<u32, Rule>,
    sampled: BTreeMap<u64, u64>,
    next: u32,
}

/// A frame on its way: its bytes and its tag so far.
#[derive(Debug, Clone)]
struct Pkt {
    bytes: Vec<u8>,
    tag: Option<u32>,
}

impl Dr {
    fn id(&mut self) -> u32 {
        self.next = self.next.wrapping_add(1).max(1);
        self.next
    }

    /// A table of domain type `ty` at `level`; its id.
    pub fn add_table(&mut self, ty: u32, level: u32) -> u32 {
        let id = self.id();
        self.tables.insert(id, Table { ty, level });
        id
    }

    /// A matcher of table `table`; its id.
    pub fn add_matcher(&mut self, table: u32, priority: u16, criteria: u8, mask: Vec<u8>) -> u32 {
        let id = self.id();
        self.matchers.insert(id, Matcher { table, priority, criteria, mask });
        id
    }

    /// Whether matcher `matcher` has a rule whose value equals `value` under its mask.
    pub fn has_duplicate(&self, matcher: u32, value: &[u8]) -> bool {
        let Some(m) = self.matchers.get(&matcher) else { return false };
        let masked =
            |v: &[u8]| -> Vec<u8> { (0..m.mask.len()).map(|i| v.get(i).copied().unwrap_or(0) & m.mask[i]).collect() };
        let want = masked(value);
        self.rules.values().any(|r| r.matcher == matcher && masked(&r.value) == want)
    }

    /// A rule of matcher `matcher`; its id.
    pub fn add_rule(&mut self, matcher: u32, value: Vec<u8>, actions: Vec<DrAct>) -> u32 {
        let id = self.id();
        self.rules.insert(id, Rule { matcher, value, actions });
        id
    }

    /// Remove table, matcher or rule `id` (whichever it is).
    pub fn remove(&mut self, id: u32) {
        self.tables.remove(&id);
        self.matchers.remove(&id);
        self.rules.remove(&id);
    }

    /// Whether rule `id` is there.
    pub fn has_rule(&self, id: u32) -> bool {
        self.rules.contains_key(&id)
    }

    /// Forget sampler `key`'s count.
    pub fn forget_sampler(&mut self, key: u64) {
        self.sampled.remove(&key);
    }

    /// The rules of matcher `matcher`, by id.
    pub fn rule_count(&self, matcher: u32) -> usize {
        self.rules.values().filter(|r| r.matcher == matcher).count()
    }

    /// Steer `frame` of direction `ty` ([`NIC_RX`] or [`NIC_TX`]): `None` when no root rule
    /// matches it.
    pub fn process(&mut self, ty: u32, frame: &[u8]) -> Option<DrOutcome> {
        let roots: Vec<u32> =
            self.tables.iter().filter(|(_, t)| t.ty == ty && t.level == 0).map(|(id, _)| *id).collect();
        if roots.is_empty() {
            return None;
        }
        let (rule, _) = self.lookup(&roots, frame)?;
        let mut out = DrOutcome::default();
        let pkt = Pkt { bytes: frame.to_vec(), tag: None };
        self.apply(ty, rule, pkt, &mut out, 0);
        Some(out)
    }

    /// The first matching rule among the matchers of `tables`, and its matcher.
    fn lookup(&self, tables: &[u32], frame: &[u8]) -> Option<(Vec<DrAct>, u32)> {
        let mut ms: Vec<(&u32, &Matcher)> = self.matchers.iter().filter(|(_, m)| tables.contains(&m.table)).collect();
        ms.sort_by_key(|(id, m)| (m.priority, **id));
        ms.into_iter().find_map(|(mid, m)| {
            self.rules
                .values()
                .find(|r| r.matcher == *mid && fte_match::matches(m.criteria, &m.mask, &r.value, frame))
                .map(|r| (r.actions.clone(), *mid))
        })
    }

    /// The end of a frame that takes the default of its table type.
    fn default_miss(ty: u32, pkt: Pkt, out: &mut DrOutcome) {
        if ty == NIC_TX {
            out.wire.push(pkt.bytes);
        }
    }

    /// Go on in table `table`.
    fn goto(&mut self, ty: u32, table: u32, pkt: Pkt, out: &mut DrOutcome, hops: usize) {
        if hops >= MAX_HOPS || !self.tables.contains_key(&table) {
            return;
        }
        match self.lookup(&[table], &pkt.bytes) {
            Some((acts, _)) => self.apply(ty, acts, pkt, out, hops + 1),
            None => Self::default_miss(ty, pkt, out),
        }
    }

    fn apply(&mut self, ty: u32, acts: Vec<DrAct>, mut pkt: Pkt, out: &mut DrOutcome, hops: usize) {
        let mut end = None;
        for a in acts {
            match a {
                DrAct::Counter(id) => out.counted.push((id, pkt.bytes.len() as u64)),
                // Only counters follow the action that ends a rule (libmlx5's action order).
                _ if end.is_some() => {}
                DrAct::Tag(t) => pkt.tag = Some(t),
                DrAct::Modify(ops) => rewrite::modify(&mut pkt.bytes, &ops),
                DrAct::PushVlan(h) => rewrite::push_vlan(&mut pkt.bytes, h),
                DrAct::PopVlan => rewrite::pop_vlan(&mut pkt.bytes),
                DrAct::Encap(outer) => rewrite::encap(&mut pkt.bytes, &outer),
                DrAct::Decap => rewrite::decap(&mut pkt.bytes),
                other => end = Some(other),
            }
        }
        match end {
            None | Some(DrAct::DefaultMiss) => Self::default_miss(ty, pkt, out),
            Some(DrAct::Qp(q)) => out.delivered.push((DrDest::Qp(q), pkt.bytes, pkt.tag)),
            Some(DrAct::Tir(t)) => out.delivered.push((DrDest::Tir(t), pkt.bytes, pkt.tag)),
            Some(DrAct::Table(t)) => self.goto(ty, t, pkt, out, hops),
            Some(DrAct::Array(lists)) => {
                for l in lists {
                    self.apply(ty, l, pkt.clone(), out, hops + 1);
                }
            }
            Some(DrAct::Sampler { key, ratio, next, sample }) => {
                let seen = self.sampled.entry(key).or_insert(0);
                let pick = seen.is_multiple_of(u64::from(ratio.max(1)));
                *seen += 1;
                if pick {
                    self.apply(ty, sample, pkt.clone(), out, hops + 1);
                }
                self.goto(ty, next, pkt, out, hops);
            }
            Some(_) => {}
        }
    }

    /// The steering state as text lines (`mlx5dv_dump_dr_*`'s purpose, in a format of the
    /// simulator's own): one line per table of `tables`, matcher and rule.
    pub fn dump(&self, tables: &[u32]) -> String {
        let mut s = String::new();
        for t in tables {
            let Some(tb) = self.tables.get(t) else { continue };
            s += &format!("table,{t:#x},type,{},level,{}\n", tb.ty, tb.level);
            for (mid, m) in self.matchers.iter().filter(|(_, m)| m.table == *t) {
                let mask: String = m.mask.iter().map(|b| format!("{b:02x}")).collect();
                s += &format!(
                    "matcher,{mid:#x},table,{t:#x},priority,{},criteria,{:#x},mask,{mask}\n",
                    m.priority, m.criteria
                );
                for (rid, r) in self.rules.iter().filter(|(_, r)| r.matcher == *mid) {
                    let value: String = r.value.iter().map(|b| format!("{b:02x}")).collect();
                    s += &format!("rule,{rid:#x},matcher,{mid:#x},value,{value},actions,{:?}\n", r.actions);
                }
            }
        }
        s
    }
}

#[cfg(test)]
mod tests;
