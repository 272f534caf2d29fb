//! Faults on the network: rules a networked port applies to the datagrams it sends, to see
//! the reliable transport recover from loss, duplication, reordering, delay and corruption.
//!
//! A rule ([`NetFault`]) matches a datagram by the BTH at the start of its UDP payload
//! (destination QP, opcode, PSN; a filter left `None` matches any), lets `skip` matching
//! datagrams through, then acts on the next `times` ones: always, or with a probability drawn
//! from a seeded generator ([`NetFault::random`]), so a run is the same every time. A port's
//! rules are tried in the order they were added; the first that acts takes the datagram.
//! What is held back (a delayed datagram, one held for reordering) leaves from the port later:
//! a delayed one at the first [`FaultState::due`] after its delay, a reordered one right
//! after the port's next datagram.

pub use mlx5_dv::net_fault::{NetAction, NetFault};

use crate::packet::Headers;

/// Whether rule `f` matches a datagram with these headers (`None`: headers that do not
/// decode, which only a rule without filters matches).
fn matches(f: &NetFault, h: Option<&Headers>) -> bool {
    let Some(h) = h else { return f.dest_qp.is_none() && f.opcode.is_none() && f.psn.is_none() };
    f.dest_qp.is_none_or(|q| q == h.bth.dest_qp)
        && f.opcode.is_none_or(|o| o == h.bth.opcode)
        && f.psn.is_none_or(|p| p == h.bth.psn)
}

/// A rule of a fault list ([`parse_rules`]): the device whose port it is for (`None`: every
/// networked port) and the rule.
pub type DeviceRule = (Option<usize>, NetFault);

/// Parse a list of network fault rules, as `MLX5SIM_NET_FAULTS` gives them: rules separated
/// by `;`, each an action then `key=value` items, separated by `,`:
///
/// - actions: `drop`, `duplicate`, `reorder`, `delay` (with `ns=`), `corrupt` (with `offset=`
///   and `xor=`);
/// - filters: `qp=`, `opcode=`, `psn=`; counts: `skip=`, `times=` (a number or `always`);
///   the random mode: `p=` (a probability) and `seed=` (default 0), acting without end
///   unless `times=` says otherwise; `dev=`: only device `dev`'s port.
///
/// Numbers are decimal or `0x` hexadecimal. Example: `drop,p=0.05,seed=7;corrupt,opcode=0x06,
/// offset=40,xor=0x5a`. An error names the rule and what is wrong with it.
pub fn parse_rules(text: &str) -> Result<Vec<DeviceRule>, String> {
    text.split(';')
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(|r| parse_rule(r).map_err(|e| format!("'{r}': {e}")))
        .collect()
}

fn number(key: &str, v: &str) -> Result<u64, String> {
    let parsed = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    };
    parsed.map_err(|_| format!("{key}={v}: not a number"))
}

fn narrow<T: TryFrom<u64>>(key: &str, v: &str) -> Result<T, String> {
    T::try_from(number(key, v)?).map_err(|_| format!("{key}={v}: too large"))
}

fn parse_rule(rule: &str) -> Result<DeviceRule, String> {
    let mut items = rule.split(',').map(str::trim);
    let action = items.next().unwrap_or_default();
    let (mut ns, mut offset, mut xor) = (None, None, None);
    let (mut dev, mut times, mut p, mut seed) = (None, None, None, None);
    let mut f = NetFault::new(NetAction::Drop);
    for item in items {
        let Some((key, v)) = item.split_once('=') else { return Err(format!("'{item}': not key=value")) };
        let (key, v) = (key.trim(), v.trim());
        match key {
            "qp" => f.dest_qp = Some(narrow(key, v)?),
            "opcode" => f.opcode = Some(narrow(key, v)?),
            "psn" => f.psn = Some(narrow(key, v)?),
            "skip" => f.skip = narrow(key, v)?,
            "times" if v == "always" => times = Some(u32::MAX),
            "times" => times = Some(narrow(key, v)?),
            "p" => p = Some(v.parse::<f64>().map_err(|_| format!("p={v}: not a probability"))?),
            "seed" => seed = Some(number(key, v)?),
            "dev" => dev = Some(narrow(key, v)?),
            "ns" => ns = Some(number(key, v)?),
            "offset" => offset = Some(narrow(key, v)?),
            "xor" => xor = Some(narrow(key, v)?),
            _ => return Err(format!("unknown key '{key}'")),
        }
    }
    let need = |key: &str| format!("{action} needs {key}=");
    f.action = match action {
        "drop" => NetAction::Drop,
        "duplicate" => NetAction::Duplicate,
        "reorder" => NetAction::Reorder,
        "delay" => NetAction::Delay { ns: ns.ok_or_else(|| need("ns"))? },
        "corrupt" => {
            NetAction::Corrupt { offset: offset.ok_or_else(|| need("offset"))?, xor: xor.ok_or_else(|| need("xor"))? }
        }
        other => return Err(format!("unknown action '{other}' (drop, duplicate, reorder, delay, corrupt)")),
    };
    match (p, seed) {
        (Some(p), seed) => f = f.random(p, seed.unwrap_or(0)),
        (None, Some(_)) => return Err("seed= without p=".into()),
        (None, None) => {}
    }
    if let Some(t) = times {
        f.times = t;
    }
    if ns.is_some() && action != "delay" {
        return Err("ns= is for delay only".into());
    }
    if (offset.is_some() || xor.is_some()) && action != "corrupt" {
        return Err("offset= and xor= are for corrupt only".into());
    }
    f.check()?;
    Ok((dev, f))
}

/// SplitMix64 (Steele, Lea and Flood 2014): small, and its sequence depends on the seed only.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A draw in 0..PPM.
    fn ppm(&mut self) -> u32 {
        // Below 2^20 after the shift, so the remainder fits.
        ((self.next() >> 44) % u64::from(mlx5_dv::net_fault::PPM)) as u32
    }
}

/// A rule and its counts.
#[derive(Debug, Clone)]
struct Rule {
    fault: NetFault,
    seen: u32,
    acted: u32,
    rng: SplitMix64,
}

/// A datagram leaving the port: its UDP source port, its destination and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// The UDP source port.
    pub sport: u16,
    /// The destination address (port 4791).
    pub to: std::net::Ipv4Addr,
    /// The UDP payload.
    pub bytes: Vec<u8>,
}

/// A port's fault rules and what they hold back.
#[derive(Debug, Default)]
pub struct FaultState {
    rules: Vec<Rule>,
    /// Held for reordering: it leaves after the next datagram.
    held: Option<Outgoing>,
    /// Delayed: each leaves at its time (the transport's clock, ns).
    delayed: Vec<(u64, Outgoing)>,
}

impl FaultState {
    /// Add a rule after the others.
    pub fn add(&mut self, fault: NetFault) {
        let seed = fault.random.map_or(0, |(_, s)| s);
        self.rules.push(Rule { fault, seen: 0, acted: 0, rng: SplitMix64(seed) });
    }

    /// Remove every rule; what is held back still leaves.
    pub fn clear(&mut self) {
        self.rules.clear();
    }

    /// How many times each rule acted, in the order they were added.
    pub fn acted(&self) -> Vec<u32> {
        self.rules.iter().map(|r| r.acted).collect()
    }

    /// Whether no rule is set and nothing is held back (the fast path).
    pub fn is_idle(&self) -> bool {
        self.rules.is_empty() && self.held.is_none() && self.delayed.is_empty()
    }

    /// The action the first rule that acts on a datagram with these headers takes, if any.
    fn decide(&mut self, h: Option<&Headers>) -> Option<NetAction> {
        for r in &mut self.rules {
            let spent = r.fault.times != u32::MAX && r.acted >= r.fault.times;
            if spent || !matches(&r.fault, h) {
                continue;
            }
            r.seen = r.seen.saturating_add(1);
            if r.seen <= r.fault.skip {
                continue;
            }
            if let Some((ppm, _)) = r.fault.random
                && r.rng.ppm() >= ppm
            {
                continue;
            }
            r.acted = r.acted.saturating_add(1);
            return Some(r.fault.action);
        }
        None
    }

    /// What leaves the port, in order, when it sends `out` at `at` (the transport's clock).
    pub fn send(&mut self, out: Outgoing, at: u64) -> Vec<Outgoing> {
        if self.rules.is_empty() && self.held.is_none() {
            return vec![out];
        }
        let headers = Headers::decode(&out.bytes).map(|(h, _)| h);
        let mut now = Vec::new();
        match self.decide(headers.as_ref()) {
            None => now.push(out),
            Some(NetAction::Drop) => {}
            Some(NetAction::Duplicate) => {
                now.push(out.clone());
                now.push(out);
            }
            Some(NetAction::Reorder) => {
                // One held at a time: an earlier one leaves now, ahead of this one.
                now.extend(self.held.replace(out));
                return now;
            }
            Some(NetAction::Delay { ns }) => {
                self.delayed.push((at.saturating_add(ns), out));
                return now;
            }
            Some(NetAction::Corrupt { offset, xor }) => {
                let mut out = out;
                let at = offset.min(out.bytes.len().saturating_sub(1));
                if let Some(b) = out.bytes.get_mut(at) {
                    *b ^= xor;
                }
                now.push(out);
            }
        }
        // A datagram went out (or was dropped, which a link cannot tell from one sent): the
        // held one follows it.
        now.extend(self.held.take());
        now
    }

    /// When the next delayed datagram is due, if one is.
    pub fn next_due(&self) -> Option<u64> {
        self.delayed.iter().map(|(t, _)| *t).min()
    }

    /// The delayed datagrams whose time has come at `now`, in the order they were sent.
    pub fn due(&mut self, now: u64) -> Vec<Outgoing> {
        if self.delayed.is_empty() {
            return Vec::new();
        }
        let (due, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut self.delayed).into_iter().partition(|(t, _)| *t <= now);
        self.delayed = wait;
        due.into_iter().map(|(_, o)| o).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Bth, opcode};

    #[test]
    fn a_datagram_that_does_not_decode_meets_only_rules_without_filters() {
        let any = NetFault::new(NetAction::Drop);
        assert!(matches(&any, None));
        for filtered in [any.qp(5), any.opcode(4), any.psn(9), any.opcode(4).psn(9)] {
            assert!(!matches(&filtered, None), "{filtered:?}");
        }
    }

    #[test]
    fn the_generator_is_splitmix64() {
        // The published sequence of SplitMix64 from seed 0.
        let mut g = SplitMix64(0);
        assert_eq!(
            [g.next(), g.next(), g.next()],
            [0xe220_a839_7b1d_cdaf, 0x6e78_9e6a_a1b9_65f4, 0x06c4_5d18_8009_454f]
        );
        // A draw in parts per million is the top 20 bits modulo a million (both under it here).
        let mut g = SplitMix64(0);
        assert_eq!([g.ppm(), g.ppm()], [0xe_220a, 0x6_e789]);
    }

    fn datagram(op: u8, qp: u32, psn: u32) -> Outgoing {
        let h = Headers { bth: Bth { opcode: op, dest_qp: qp, psn, ..Bth::default() }, ..Headers::default() };
        let mut bytes = Vec::new();
        h.encode(&mut bytes);
        bytes.extend_from_slice(&[0; 4]);
        Outgoing { sport: 0xc000, to: std::net::Ipv4Addr::LOCALHOST, bytes }
    }

    fn psns(v: &[Outgoing]) -> Vec<u32> {
        v.iter().filter_map(|o| Headers::decode(&o.bytes)).map(|(h, _)| h.bth.psn).collect()
    }

    #[test]
    fn rules_match_skip_and_count() {
        let mut s = FaultState::default();
        s.add(NetFault::new(NetAction::Drop).qp(7).opcode(opcode::SEND_ONLY).skip(1).times(2));
        let sent: Vec<_> = (0..5).flat_map(|psn| s.send(datagram(opcode::SEND_ONLY, 7, psn), 0)).collect();
        assert_eq!(psns(&sent), [0, 3, 4], "the first let through, the next two dropped");
        assert_eq!(psns(&s.send(datagram(opcode::SEND_ONLY, 8, 9), 0)), [9], "another QP");
        assert_eq!(s.acted(), [2]);
    }

    #[test]
    fn duplicate_reorder_corrupt_and_delay() {
        let mut s = FaultState::default();
        s.add(NetFault::new(NetAction::Duplicate).psn(1));
        s.add(NetFault::new(NetAction::Reorder).psn(2));
        s.add(NetFault::new(NetAction::Corrupt { offset: 12, xor: 0xff }).psn(4));
        s.add(NetFault::new(NetAction::Delay { ns: 5 }).psn(5));
        let sent: Vec<_> = (1..6).flat_map(|psn| s.send(datagram(opcode::SEND_ONLY, 1, psn), 10)).collect();
        assert_eq!(psns(&sent), [1, 1, 3, 2, 4]);
        assert_eq!(sent.get(4).and_then(|o| o.bytes.get(12)), Some(&0xff));
        assert_eq!(s.next_due(), Some(15));
        assert!(psns(&s.due(14)).is_empty(), "not before its time");
        assert_eq!(psns(&s.due(15)), [5]);
        assert!(!s.is_idle(), "the rules stay");
        s.clear();
        assert!(s.is_idle());
    }

    #[test]
    fn the_random_mode_repeats_with_its_seed() {
        let run = |seed| {
            let mut s = FaultState::default();
            s.add(NetFault::new(NetAction::Drop).random(0.25, seed));
            (0..400)
                .flat_map(|psn| s.send(datagram(opcode::SEND_ONLY, 1, psn), 10))
                .map(|o| o.bytes)
                .collect::<Vec<_>>()
        };
        let (a, b, c) = (run(1), run(1), run(2));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!((260..340).contains(&a.len()), "about three quarters kept: {}", a.len());
        assert!(NetFault::new(NetAction::Drop).random(1.5, 0).check().is_err());
        assert!(NetFault::new(NetAction::Corrupt { offset: 0, xor: 0 }).check().is_err());
    }

    #[test]
    fn fault_lists_parse_with_clear_errors() -> Result<(), String> {
        let rules = parse_rules("drop,qp=0x12,opcode=6,psn=5,skip=1,times=2; delay,ns=200000,dev=1;")?;
        let drop = NetFault::new(NetAction::Drop).qp(0x12).opcode(6).psn(5).skip(1).times(2);
        assert_eq!(rules, [(None, drop), (Some(1), NetFault::new(NetAction::Delay { ns: 200_000 }))]);
        let rules = parse_rules("duplicate,times=always;reorder;corrupt,offset=40,xor=0x5a;drop,p=0.05,seed=7")?;
        let corrupt = NetFault::new(NetAction::Corrupt { offset: 40, xor: 0x5a });
        let random = NetFault::new(NetAction::Drop).random(0.05, 7);
        let want = [NetFault::new(NetAction::Duplicate).always(), NetFault::new(NetAction::Reorder), corrupt, random];
        assert_eq!(rules, want.map(|f| (None, f)));
        assert_eq!(parse_rules(" ")?, []);
        for (bad, why) in [
            ("lose", "unknown action 'lose'"),
            ("drop,qp", "'qp': not key=value"),
            ("drop,qp=x", "qp=x: not a number"),
            ("drop,opcode=256", "opcode=256: too large"),
            ("delay", "delay needs ns="),
            ("corrupt,offset=3", "corrupt needs xor="),
            ("corrupt,offset=3,xor=0", "flips no bit"),
            ("drop,p=2", "not between 0 and 1"),
            ("drop,ns=5", "ns= is for delay only"),
            ("reorder,xor=1", "offset= and xor= are for corrupt only"),
            ("drop,colour=red", "unknown key 'colour'"),
            ("drop,seed=3", "seed= without p="),
        ] {
            let e = parse_rules(&format!("reorder;{bad}")).err().unwrap_or_default();
            assert!(e.starts_with(&format!("'{bad}': ")) && e.contains(why), "{bad}: {e}");
        }
        Ok(())
    }
}
