//! The report as JUnit XML, valid against the Jenkins xUnit plugin's strict `junit-10.xsd`:
//! a `time` on every testcase, properties on test suites only, the failure's expected and
//! actual values in its text, and no attribute that schema does not declare.

use quick_junit::{NonSuccessKind, Property, TestCase, TestCaseStatus, TestSuite, XmlString};
use quick_xml::events::{BytesStart, Event};

use crate::harness::report::{Outcome, Report, covers};

/// The attributes `junit-10.xsd` allows on `<testsuites>` (quick-junit also writes `skipped`).
const ROOT_ATTRS: &[&[u8]] = &[b"name", b"time", b"tests", b"failures", b"errors"];

fn us(t: u64) -> std::time::Duration {
    std::time::Duration::from_micros(t)
}

impl Report {
    /// The report as JUnit XML: one test suite per run; skips and expected failures as
    /// `<skipped/>` with their reason; failures with the reason as message and the expected
    /// and actual values as text; the covered items in each testcase's `system-out`.
    pub fn to_junit(&self) -> Result<String, String> {
        let mut report = quick_junit::Report::new("mlx5-conformance");
        let stamp = chrono::DateTime::parse_from_rfc3339(&self.meta.timestamp).ok();
        let mut total = 0;
        for run in &self.runs {
            let mut suite = TestSuite::new(run.label());
            if let Some(t) = stamp {
                suite.set_timestamp(t);
            }
            let meta = run.origin.as_ref().unwrap_or(&self.meta);
            suite.extra.insert(XmlString::new("hostname"), XmlString::new(&meta.host));
            for (k, v) in [("suite.version", &meta.version), ("suite.commit", &meta.commit)] {
                suite.add_property(Property::new(k, v.as_str()));
            }
            for (k, v) in &run.facts {
                suite.add_property(Property::new(k.as_str(), v.as_str()));
            }
            let run_time: u64 = run.cases.iter().map(|c| c.time_us).sum();
            total += run_time;
            suite.set_time(us(run_time));
            for c in &run.cases {
                let mut status = match c.outcome {
                    Outcome::Pass => TestCaseStatus::success(),
                    Outcome::Fail => TestCaseStatus::non_success(NonSuccessKind::Failure),
                    Outcome::Skip | Outcome::Xfail => TestCaseStatus::skipped(),
                };
                if c.outcome != Outcome::Pass {
                    status.set_message(c.detail.as_str());
                }
                if c.outcome == Outcome::Fail {
                    let na = || "(not recorded)".to_string();
                    status.set_description(format!(
                        "expected: {}\nactual: {}",
                        c.expected.clone().unwrap_or_else(na),
                        c.actual.clone().unwrap_or_else(na)
                    ));
                }
                let mut case = TestCase::new(c.name.as_str(), status);
                case.set_classname(run.label());
                case.set_time(us(c.time_us));
                if !c.covers.is_empty() {
                    case.set_system_out(format!("covers {} (docs/behaviour.md)", covers(&c.covers)));
                }
                suite.add_test_case(case);
            }
            report.add_test_suite(suite);
        }
        report.set_time(us(total));
        let xml = report.to_string().map_err(|e| e.to_string())?;
        strict_root(&xml)
    }
}

/// `xml` with only the root attributes `junit-10.xsd` declares.
fn strict_root(xml: &str) -> Result<String, String> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut writer = quick_xml::Writer::new(Vec::new());
    loop {
        let ev = reader.read_event().map_err(|e| e.to_string())?;
        let ev = match ev {
            Event::Eof => break,
            Event::Start(e) if e.name().as_ref() == b"testsuites" => {
                let mut root = BytesStart::new("testsuites");
                for a in e.attributes() {
                    let a = a.map_err(|e| e.to_string())?;
                    if ROOT_ATTRS.contains(&a.key.as_ref()) {
                        root.push_attribute(a);
                    }
                }
                Event::Start(root)
            }
            ev => ev,
        };
        writer.write_event(ev).map_err(|e| e.to_string())?;
    }
    String::from_utf8(writer.into_inner()).map_err(|e| e.to_string())
}
