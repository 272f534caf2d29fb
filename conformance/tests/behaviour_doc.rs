//! `docs/behaviour.md` against the code: one heading per `spec::ITEMS` entry with the same
//! title, `Cases:` lines equal to the suite's own coverage, and `coverage --item N`.

use std::collections::BTreeSet;
use std::process::Command;

use mlx5_conformance::spec::{BEHAVIOUR_DOC, DocItem, ITEMS, Status, item_text, parse_doc};
use mlx5_conformance::suite;

fn items() -> Vec<DocItem<'static>> {
    parse_doc(BEHAVIOUR_DOC).unwrap_or_else(|e| panic!("{e}"))
}

fn cli(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mlx5-conformance")).args(args).output().expect("run the CLI")
}

#[test]
fn every_item_has_exactly_one_heading_with_its_title() {
    let doc = items();
    for (n, title) in ITEMS {
        let found: Vec<_> = doc.iter().filter(|i| i.number == *n).collect();
        assert_eq!(found.len(), 1, "item {n}: {} headings in docs/behaviour.md", found.len());
        assert_eq!(found[0].title, *title, "item {n}: the heading's title differs from spec::ITEMS");
    }
    for i in &doc {
        assert!(ITEMS.iter().any(|(n, _)| *n == i.number), "heading {} has no spec::ITEMS entry", i.number);
    }
    let numbers: Vec<u16> = doc.iter().map(|i| i.number).collect();
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "items out of order: {numbers:?}");
}

#[test]
fn cases_lines_equal_the_suite_coverage() {
    let cases = suite();
    for i in items() {
        let listed: BTreeSet<&str> = i.cases.iter().map(String::as_str).collect();
        assert_eq!(listed.len(), i.cases.len(), "item {}: a case listed twice", i.number);
        let want: BTreeSet<&str> = cases.iter().filter(|c| c.covers.contains(&i.number)).map(|c| c.name).collect();
        assert_eq!(listed, want, "item {}: Cases: in docs/behaviour.md against the suite's covers", i.number);
        let status = if want.is_empty() { Status::NotYetSimulated } else { Status::Covered };
        assert_eq!(i.status, status, "item {}: Status: against its cases", i.number);
    }
}

#[test]
fn every_item_names_an_rdma_core_source() {
    for i in items() {
        assert!(i.source.starts_with('`') && i.source.contains('/'), "item {}: Source: {:?}", i.number, i.source);
    }
}

#[test]
fn item_text_of_12_is_the_whole_item() {
    let text = item_text(12).unwrap();
    assert!(text.starts_with("### 12. max_entries rounded up to a multiple of 4 and written back\n"), "{text}");
    assert!(text.contains("multiple of 4"));
    assert!(text.contains("- Source: `providers/mlx5/verbs.c`, `_mlx5dv_create_mkey`"));
    assert!(text.contains("`mkey.max_entries_rounding`"));
    assert!(text.ends_with("- Status: covered"), "{text}");
    assert!(!text.contains("### 13."));
}

#[test]
fn item_text_of_an_unknown_item_is_an_error() {
    let after_last = ITEMS.iter().map(|(n, _)| n + 1).max().unwrap_or(1);
    for n in [0, after_last, 999] {
        let e = item_text(n).unwrap_err();
        assert!(e.contains(&n.to_string()) && e.contains("docs/behaviour.md"), "{e}");
    }
}

#[test]
fn cli_coverage_item_prints_the_item_or_exits_2() {
    let out = cli(&["coverage", "--item", "12"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), format!("{}\n", item_text(12).unwrap()));
    let out = cli(&["coverage", "--item", "999"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no checklist item 999"));
}
