//! The JUnit report against the rules of the Jenkins xUnit plugin's `junit-10.xsd` (the
//! strictest common JUnit schema), restated here: which elements may hold which, which
//! attributes each may carry and must carry, and the time format. Plus what CI dashboards
//! need beyond the schema: a `time` on every testcase, expected and actual in a failure.

use std::time::Duration;

use mlx5_conformance::harness::run::NoSink;
use mlx5_conformance::{
    Case, Check, Divergence, Divergences, Env, Report, Runner, Target, Verdict, run_case_within, suite,
};
use mlx5_dv::Backend;
use mlx5_sim::{Profile, ShippedProfiles};
use quick_xml::events::Event;

/// An element of the parsed document.
#[derive(Debug, Default)]
struct Node {
    name: String,
    attrs: Vec<(String, String)>,
    text: String,
    children: Vec<Node>,
}

impl Node {
    fn attr(&self, k: &str) -> Option<&str> {
        self.attrs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
    }
}

fn parse(xml: &str) -> Node {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut stack = vec![Node::default()];
    let open = |e: &quick_xml::events::BytesStart| Node {
        name: String::from_utf8(e.name().as_ref().to_vec()).unwrap(),
        attrs: e
            .attributes()
            .map(|a| {
                let a = a.unwrap();
                (
                    String::from_utf8(a.key.as_ref().to_vec()).unwrap(),
                    a.normalized_value(quick_xml::XmlVersion::Implicit1_0).unwrap().into_owned(),
                )
            })
            .collect(),
        ..Node::default()
    };
    loop {
        match reader.read_event().unwrap() {
            Event::Eof => break,
            Event::Start(e) => stack.push(open(&e)),
            Event::Empty(e) => stack.last_mut().unwrap().children.push(open(&e)),
            Event::End(_) => {
                let n = stack.pop().unwrap();
                stack.last_mut().unwrap().children.push(n);
            }
            Event::Text(t) => stack.last_mut().unwrap().text.push_str(&t.xml10_content().unwrap()),
            Event::GeneralRef(r) => {
                let name = String::from_utf8(r.to_vec()).unwrap();
                let ch = match name.as_str() {
                    "lt" => "<",
                    "gt" => ">",
                    "amp" => "&",
                    "quot" => "\"",
                    "apos" => "'",
                    other => panic!("entity {other}"),
                };
                stack.last_mut().unwrap().text.push_str(ch);
            }
            Event::CData(t) => stack.last_mut().unwrap().text.push_str(&String::from_utf8_lossy(&t)),
            Event::Decl(_) | Event::Comment(_) => {}
            other => panic!("unexpected XML event {other:?}"),
        }
    }
    let mut doc = stack.pop().unwrap();
    assert_eq!(doc.children.len(), 1, "one root element");
    doc.children.remove(0)
}

/// One element's rule in junit-10.xsd: attributes it must have, attributes it may have,
/// elements it may contain, and whether it holds text.
struct Rule {
    name: &'static str,
    required: &'static [&'static str],
    optional: &'static [&'static str],
    children: &'static [&'static str],
    text: bool,
}

const STATUS: &[&str] = &["type", "message"];
const RULES: &[Rule] = &[
    Rule {
        name: "testsuites",
        required: &[],
        optional: &["name", "time", "tests", "failures", "errors"],
        children: &["testsuite"],
        text: false,
    },
    Rule {
        name: "testsuite",
        required: &["name", "tests", "failures", "errors"],
        optional: &["group", "time", "skipped", "timestamp", "hostname", "id", "package", "file", "log", "url"],
        children: &["testsuite", "properties", "testcase", "system-out", "system-err"],
        text: false,
    },
    Rule { name: "properties", required: &[], optional: &[], children: &["property"], text: false },
    Rule { name: "property", required: &["name", "value"], optional: &[], children: &[], text: false },
    Rule {
        name: "testcase",
        required: &["name"],
        optional: &["time", "classname", "group"],
        children: &[
            "skipped",
            "error",
            "failure",
            "rerunFailure",
            "rerunError",
            "flakyFailure",
            "flakyError",
            "system-out",
            "system-err",
        ],
        text: false,
    },
    Rule { name: "failure", required: &[], optional: STATUS, children: &[], text: true },
    Rule { name: "error", required: &[], optional: STATUS, children: &[], text: true },
    Rule { name: "skipped", required: &[], optional: STATUS, children: &[], text: true },
    Rule { name: "system-out", required: &[], optional: &[], children: &[], text: true },
    Rule { name: "system-err", required: &[], optional: &[], children: &[], text: true },
];

/// The schema's SUREFIRE_TIME: digits (grouped by commas in threes), then an optional
/// fraction: `(([0-9]{0,3},)*[0-9]{3}|[0-9]{0,3})*(\.[0-9]*)?`.
fn surefire_time(t: &str) -> bool {
    // A stricter subset: plain digits, or digits grouped by commas in threes.
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    let digits = |g: &str| g.chars().all(|c| c.is_ascii_digit());
    let groups: Vec<&str> = int.split(',').collect();
    let int_ok = digits(int)
        || (groups.iter().all(|g| digits(g))
            && (1..=3).contains(&groups[0].len())
            && groups[1..].iter().all(|g| g.len() == 3));
    int_ok && digits(frac) && !t.is_empty()
}

fn validate(n: &Node, path: &str) {
    let path = format!("{path}/{}", n.name);
    let rule = RULES.iter().find(|r| r.name == n.name).unwrap_or_else(|| panic!("{path}: no such element"));
    for req in rule.required {
        assert!(n.attr(req).is_some(), "{path}: required attribute {req} missing");
    }
    for (k, _) in &n.attrs {
        assert!(rule.required.contains(&k.as_str()) || rule.optional.contains(&k.as_str()), "{path}: attribute {k}");
    }
    if matches!(n.name.as_str(), "testsuites" | "testsuite")
        && let Some(t) = n.attr("time")
    {
        assert!(surefire_time(t), "{path}: time {t}");
    }
    assert!(rule.text || n.text.trim().is_empty(), "{path}: text {:?}", n.text);
    for c in &n.children {
        assert!(rule.children.contains(&c.name.as_str()), "{path}: child {}", c.name);
        validate(c, &path);
    }
}

fn fails(_: &mut dyn Backend, _: &Env) -> Check {
    Err(Verdict::fail("errno", 95, 22))
}

/// A report with every outcome: passes and skips from cx6lx, a failure, an expected failure.
fn every_outcome() -> Report {
    let mut cases = suite();
    cases.push(Case { name: "test.fails", covers: &[7], needs: &[], run: fails });
    cases.push(Case { name: "test.known_to_fail", covers: &[], needs: &[], run: fails });
    let table = Divergences {
        list: vec![Divergence {
            backend: "sim".into(),
            profile: None,
            case: "test.known_to_fail".into(),
            reason: "a test entry".into(),
        }],
    };
    let runner = Runner { timeout: Duration::from_secs(30), fail_fast: false, divergences: Some(&table) };
    let runs = ["cx6lx", "cx7"]
        .iter()
        .map(|p| {
            let t = Target::sim(Profile::builtin(p).unwrap());
            runner.run_target(&t, &cases, &run_case_within, &mut NoSink)
        })
        .collect();
    Report::new(runs)
}

#[test]
fn junit_follows_junit_10_xsd() {
    let report = every_outcome();
    let s = report.summary();
    assert!(s.passed > 0 && s.failed == 2 && s.skipped > 0 && s.xfailed == 2, "{s:?}");
    let root = parse(&report.to_junit().unwrap());
    assert_eq!(root.name, "testsuites");
    validate(&root, "");
    assert_eq!(root.attr("failures"), Some("2"));
    let tests: usize = root.attr("tests").unwrap().parse().unwrap();
    assert_eq!(tests, s.passed + s.failed + s.skipped + s.xfailed);
}

#[test]
fn every_testcase_has_a_time_and_failures_carry_expected_and_actual() {
    let root = parse(&every_outcome().to_junit().unwrap());
    let mut failures = 0;
    for suite in &root.children {
        assert!(
            suite.attr("hostname").is_some() && suite.attr("timestamp").is_some(),
            "{}",
            suite.attr("name").unwrap()
        );
        let props = suite.children.iter().find(|c| c.name == "properties").expect("facts as suite properties");
        assert!(props.children.iter().any(|p| p.attr("name") == Some("suite.commit")));
        for case in suite.children.iter().filter(|c| c.name == "testcase") {
            let time = case.attr("time").unwrap_or_else(|| panic!("{:?}: no time", case.attr("name")));
            assert!(surefire_time(time), "{time}");
            if let Some(f) = case.children.iter().find(|c| c.name == "failure") {
                failures += 1;
                assert_eq!(f.attr("message"), Some("errno: expected 95, got 22"));
                assert_eq!(f.text.trim(), "expected: 95\nactual: 22");
            }
            if case.attr("name") == Some("test.known_to_fail") {
                let sk = case.children.iter().find(|c| c.name == "skipped").expect("an xfail is skipped");
                assert!(sk.attr("message").unwrap().contains("a test entry"));
            }
            if case.attr("name") == Some("test.fails") {
                let out = case.children.iter().find(|c| c.name == "system-out").expect("covers in system-out");
                assert!(out.text.contains("§12.7"), "{}", out.text);
            }
        }
    }
    assert_eq!(failures, 2);
}

#[test]
fn the_rules_reject_what_the_schema_rejects() {
    for bad in [
        r#"<testsuites skipped="1"/>"#,
        r#"<testsuites><testsuite name="a" tests="0" failures="0"/></testsuites>"#,
        r#"<testsuites><testsuite name="a" tests="1" failures="0" errors="0"><testcase name="x"><properties/></testcase></testsuite></testsuites>"#,
        r#"<testsuites><testsuite name="a" tests="1" failures="0" errors="0" time="1s"/></testsuites>"#,
        r#"<testsuites><testsuite name="a" tests="1" failures="0" errors="0" disabled="0"/></testsuites>"#,
    ] {
        let root = parse(bad);
        assert!(std::panic::catch_unwind(|| validate(&root, "")).is_err(), "accepted: {bad}");
    }
    for t in ["0.000", "12", "1,234.5", ".5"] {
        assert!(surefire_time(t), "{t}");
    }
}
