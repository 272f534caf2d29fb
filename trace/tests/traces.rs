//! The committed traces replay on their profiles without a divergence; a trace replayed on a
//! profile with other caps diverges at the call the caps decide; broken traces are errors.

use std::path::PathBuf;

use mlx5_dv::prelude::*;
use mlx5_dv::{MkeyInitAttr, MkeyInitFlags};
use mlx5_sim::Simulator;
use mlx5_trace::{Recorder, Replayed, replay};

fn traces(profile: &str) -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../traces/sim").join(profile);
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_committed_trace_replays_on_its_profile() {
    for profile in ["cx6dx", "cx7"] {
        let files = traces(profile);
        assert!(files.len() > 100, "{profile}: {} traces", files.len());
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            let mut sim = Simulator::with_profile(profile).unwrap();
            match replay(&text, &mut sim) {
                Ok(Replayed::Matches) => {}
                other => panic!("{}: {other:?}\n(run `make traces` if the change is meant)", f.display()),
            }
        }
    }
}

#[test]
fn a_trace_diverges_where_the_other_profile_decides() {
    let f = traces("cx6dx").into_iter().find(|p| p.ends_with("mkey.update_tag_follows_kernel.jsonl")).unwrap();
    let text = std::fs::read_to_string(f).unwrap();
    let first_update_tag = text.lines().skip(1).position(|l| l.contains("UPDATE_TAG")).unwrap();
    let mut sim = Simulator::with_profile("cx6dx-no-update-tag").unwrap();
    let Ok(Replayed::Diverges(d)) = replay(&text, &mut sim) else { panic!("no divergence") };
    assert_eq!(d.index, first_update_tag);
    assert_eq!(d.function, "mlx5dv_create_mkey");
    let why = d.explain();
    assert!(why.contains("errno 95 EOPNOTSUPP") && why.contains("succeeded when recorded"), "{why}");
}

#[test]
fn a_program_records_in_one_line_and_replays_elsewhere() {
    let mut b = Recorder::wrap(Simulator::with_profile("cx6dx").unwrap());
    let ctx = b.open_device("mlx5_0", Some(&mlx5_dv::ContextAttr::devx())).unwrap();
    let pd = b.alloc_pd(ctx).unwrap();
    let m = b.create_mkey(&MkeyInitAttr { pd, create_flags: MkeyInitFlags::INDIRECT, max_entries: 5 }).unwrap();
    assert_eq!(m.max_entries, 8);
    let buf = b.alloc_buf(4096).unwrap();
    b.write_buf(&buf, 100, &[7; 300]).unwrap();
    b.read_buf(&buf, 0, 512).unwrap();
    let text = b.layer.trace(&b.layer.header(&b.inner, Some("demo")));
    assert!(text.contains(r#""$buf":0"#) && text.contains("07*300"), "{text}");
    assert_eq!(replay(&text, &mut Simulator::with_profile("cx6dx").unwrap()), Ok(Replayed::Matches));
    assert_eq!(replay(&text, &mut Simulator::with_profile("cx7").unwrap()), Ok(Replayed::Matches));
}

#[test]
fn broken_traces_are_errors_not_panics() {
    let mut sim = Simulator::with_profile("cx6dx").unwrap();
    let header =
        r#"{"trace":"mlx5sim-trace","version":2,"backend":"sim","profile":null,"case":null,"facts":{},"suite":"x"}"#;
    for text in [
        "",
        "{}",
        r#"{"trace":"other","version":2,"backend":"sim","profile":null,"case":null,"facts":{},"suite":"x"}"#,
        &format!("{header}\nnot json"),
        &format!("{header}\n{{\"i\":0,\"call\":{{\"call\":\"no_such_call\"}},\"reply\":null}}"),
        &format!(
            "{header}\n{{\"i\":0,\"call\":{{\"call\":\"free_buf\",\"buf\":{{\"handle\":1,\"addr\":{{\"$buf\":9,\"off\":0}},\"len\":1}}}},\"reply\":null}}"
        ),
        &format!(
            "{header}\n{{\"i\":0,\"call\":{{\"call\":\"write_buf\",\"buf\":{{\"handle\":1,\"addr\":1,\"len\":1}},\"offset\":0,\"data\":\"$hex:zz\"}},\"reply\":null}}"
        ),
        &format!(
            "{header}\n{{\"i\":0,\"call\":{{\"call\":\"write_buf\",\"buf\":{{\"handle\":1,\"addr\":1,\"len\":1}},\"offset\":0,\"data\":\"$hex:00*99999999999\"}},\"reply\":null}}"
        ),
    ] {
        assert!(replay(text, &mut sim).is_err(), "{text}");
    }
}

/// The lines of a committed trace of cx6dx.
fn lines_of(case: &str) -> Vec<String> {
    let f = traces("cx6dx").into_iter().find(|p| p.ends_with(format!("{case}.jsonl"))).unwrap();
    std::fs::read_to_string(f).unwrap().lines().map(String::from).collect()
}

fn replay_lines(lines: &[String]) -> Replayed {
    replay(&(lines.join("\n") + "\n"), &mut Simulator::with_profile("cx6dx").unwrap()).unwrap()
}

#[test]
fn a_poll_is_replayed_as_a_wait_for_its_completions() {
    let mut lines = lines_of("atomics.cmp_swap_swaps_on_a_match_only");
    let at = lines.iter().position(|l| l.contains(r#""reply":"poll_cq","result":{"Ok":[{"#)).unwrap();
    // A card's empty polls before the completion came: the simulator had it at once.
    let mut empty: serde_json::Value = serde_json::from_str(&lines[at]).unwrap();
    empty["reply"]["result"]["Ok"] = serde_json::json!([]);
    lines.insert(at, empty.to_string());
    lines.insert(at, empty.to_string());
    assert_eq!(replay_lines(&lines), Replayed::Matches);
    // Completions that differ still diverge, at the poll that returned them.
    let mut other: serde_json::Value = serde_json::from_str(&lines[at + 2]).unwrap();
    other["reply"]["result"]["Ok"][0]["wr_id"] = serde_json::json!(0xdead);
    lines[at + 2] = other.to_string();
    match replay_lines(&lines) {
        Replayed::Diverges(d) => {
            assert_eq!((d.function, d.index), ("ibv_poll_cq", other["i"].as_u64().unwrap() as usize));
            assert_ne!(d.now["result"]["Ok"][0]["wr_id"], 0xdead, "{d:?}");
        }
        r => panic!("{r:?}"),
    }
}

#[test]
fn a_recorded_error_without_a_command_status_compares_by_errno() {
    let mut lines = lines_of("crypto.login_wrong_credential");
    let at = lines.iter().position(|l| l.contains(r#""cmd":{"status""#)).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&lines[at]).unwrap();
    v["reply"]["result"]["Err"]["cmd"] = serde_json::Value::Null;
    lines[at] = v.to_string();
    assert_eq!(replay_lines(&lines), Replayed::Matches, "as a card through rdma-core records it");
    v["reply"]["result"]["Err"]["errno"] = serde_json::json!(95);
    lines[at] = v.to_string();
    assert!(matches!(replay_lines(&lines), Replayed::Diverges(_)), "another errno");
}

#[test]
fn a_poll_on_the_simulator_does_not_wait_for_a_completion_that_never_comes() {
    let mut lines = lines_of("atomics.cmp_swap_swaps_on_a_match_only");
    let at = lines.iter().position(|l| l.contains(r#""reply":"poll_cq","result":{"Ok":[{"#)).unwrap();
    lines.insert(at + 1, lines[at].clone());
    let start = std::time::Instant::now();
    match replay_lines(&lines) {
        Replayed::Diverges(d) => assert_eq!(d.now["result"]["Ok"], serde_json::json!([]), "{d:?}"),
        r => panic!("{r:?}"),
    }
    assert!(
        start.elapsed() < std::time::Duration::from_secs(1),
        "a simulator is not waited for: {:?}",
        start.elapsed()
    );
}
