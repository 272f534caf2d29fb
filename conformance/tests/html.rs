//! The HTML report as a browser shows it: the page rendered by headless Chromium (Debian's
//! `chromium`, which `make test` installs), and the DOM checked after the page's script ran.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use mlx5_conformance::harness::run::NoSink;
use mlx5_conformance::{
    Case, Check, Divergence, Divergences, Env, Report, Runner, Target, Verdict, run_case_within, suite,
};
use mlx5_dv::Backend;
use mlx5_sim::{Profile, ShippedProfiles};
use wait_timeout::ChildExt;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mlx5-html-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The DOM of `page` (with `fragment`) after its script ran, from headless Chromium.
fn dom(page: &Path, fragment: &str) -> String {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "chromium".into());
    let profile = page.with_extension("chromium-profile");
    let spawned = Command::new(&chromium)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        .args(["--disable-component-update", "--disable-sync", "--no-first-run"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}{fragment}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let mut child = spawned.unwrap_or_else(|e| {
        panic!(
            "cannot run `{chromium}` ({e}): the HTML report is tested in headless Chromium. Install it with \
             `sudo apt-get install -y chromium` (`make test` does so when run as root), or point CHROMIUM at one."
        )
    });
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut s).map(|_| s)
    });
    let status = child.wait_timeout(Duration::from_secs(120)).unwrap();
    if status.is_none() {
        let _ = child.kill();
        panic!("chromium did not finish within 120 s");
    }
    assert!(status.unwrap().success(), "chromium failed");
    reader.join().unwrap().unwrap()
}

fn fails(_: &mut dyn Backend, _: &Env) -> Check {
    Err(Verdict::fail("errno", 95, 22))
}

/// Two runs with every outcome: cx6lx (passes, skips), a failure and an expected failure on
/// it only; cx7 without those two cases.
fn two_runs(d: &Path) -> (PathBuf, PathBuf) {
    let mut cases: Vec<Case> = suite().into_iter().filter(|c| c.name.starts_with("mkey.")).collect();
    let base = cases.clone();
    cases.push(Case { name: "test.fails", covers: &[7], needs: &[], run: fails });
    cases.push(Case { name: "test.known_to_fail", covers: &[], needs: &[], run: fails });
    let table = Divergences {
        list: vec![Divergence {
            backend: "sim".into(),
            profile: None,
            case: "test.known_to_fail".into(),
            reason: "firmware answers EINVAL".into(),
        }],
    };
    let runner = Runner { timeout: Duration::from_secs(30), fail_fast: false, divergences: Some(&table) };
    let run = |p: &str, cases: &[Case]| {
        let t = Target::sim(Profile::builtin(p).unwrap());
        Report::new(vec![runner.run_target(&t, cases, &run_case_within, &mut NoSink)])
    };
    let (a, b) = (d.join("a.json"), d.join("b.json"));
    std::fs::write(&a, run("cx6lx", &cases).to_json().unwrap()).unwrap();
    std::fs::write(&b, run("cx7", &base).to_json().unwrap()).unwrap();
    (a, b)
}

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

#[test]
fn merged_reports_render_as_one_matrix_with_a_colour_per_outcome_and_cell_details() {
    let d = dir("merge");
    let (a, b) = two_runs(&d);
    let page = d.join("report.html");
    let out = Command::new(env!("CARGO_BIN_EXE_mlx5-conformance"))
        .args(["report", "merge", a.to_str().unwrap(), b.to_str().unwrap(), "--format", "html", "--output"])
        .arg(&page)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "a failure in the merged runs: {}", String::from_utf8_lossy(&out.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    // One colour per outcome, in the page's own style sheet.
    let colour = |class: &str| {
        let rule = &html[html.find(&format!(".{class} {{")).unwrap_or_else(|| panic!("no .{class} rule"))..];
        rule[rule.find("background:").unwrap() + 11..rule.find(';').unwrap()].trim().to_string()
    };
    let colours: Vec<String> = ["o-pass", "o-fail", "o-skip", "o-xfail"].iter().map(|c| colour(c)).collect();
    let mut distinct = colours.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 4, "{colours:?}");

    let dom = dom(&page, "#run=0&case=test.fails");
    assert!(dom.contains("<body data-ready=\"yes\">"), "the script ran to its end");
    // The matrix: one row per case, one column per run; every outcome has cells.
    assert!(dom.contains("<th>sim/cx6lx</th>") && dom.contains("<th>sim/cx7</th>"));
    let mkey = suite().iter().filter(|c| c.name.starts_with("mkey.")).count();
    assert_eq!(count(&dom, "<td class=\"case\">"), mkey + 2);
    for class in ["o-pass", "o-skip"] {
        assert!(count(&dom, &format!("<td class=\"cell {class}\"")) > 0, "{class}");
    }
    assert!(dom.contains("<td class=\"cell o-fail open\" data-run=\"0\" data-case=\"test.fails\""), "the open cell");
    assert_eq!(count(&dom, "<td class=\"cell o-xfail\" data-run=\"0\" data-case=\"test.known_to_fail\""), 1);
    assert_eq!(count(&dom, "<td class=\"cell o-none\""), 2, "cx7 ran neither test case");
    assert_eq!(count(&dom, "<tr data-case=\"test.fails\" class=\"differs\">"), 1, "differences stand out");
    // The opened cell's detail.
    let detail = &dom[dom.find("<div id=\"detail\">").unwrap()..];
    assert!(detail.starts_with("<div id=\"detail\"><h3>test.fails on sim/cx6lx</h3>"), "{}", &detail[..200]);
    assert!(detail.contains("<pre id=\"detail-reason\">errno: expected 95, got 22</pre>"));
    assert!(detail.contains("<pre id=\"detail-expected\">95</pre>"));
    assert!(detail.contains("<pre id=\"detail-actual\">22</pre>"));
    assert!(detail.contains("<pre id=\"detail-covers\">§12.7 (docs/behaviour.md)</pre>"));
    // The summary and the facts on top.
    let r: Report = serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
    assert!(dom.contains(&format!("<td>{}</td>", r.runs[0].summary.line())), "the run's summary");
    assert!(dom.contains("<tr id=\"total\"><th>total</th>"));
    assert!(dom.contains("<td>fw_ver</td>") && dom.contains("<td>kernel.devx</td>"), "the facts");
    assert!(dom.contains(&format!("from {}", r.meta.host)), "each merged run's origin");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn run_all_profiles_as_html_has_a_column_per_profile() {
    let d = dir("all");
    let page = d.join("all.html");
    let out = Command::new(env!("CARGO_BIN_EXE_mlx5-conformance"))
        .args(["run", "--profile", "all", "--format", "html", "--output"])
        .arg(&page)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bf3 = Profile::builtin_names().iter().position(|p| *p == "bf3").unwrap();
    let dom = dom(&page, &format!("#run={bf3}&case=mkey.max_entries_rounding"));
    for p in Profile::builtin_names() {
        assert!(dom.contains(&format!("<th>sim/{p}</th>")), "{p}");
    }
    assert_eq!(count(&dom, "<td class=\"cell "), Profile::builtin_names().len() * suite().len());
    assert!(dom.contains("<h3>mkey.max_entries_rounding on sim/bf3</h3>"));
    assert!(dom.contains(&format!("commit {}", mlx5_conformance::harness::meta::COMMIT)));
    std::fs::remove_dir_all(&d).unwrap();
}
