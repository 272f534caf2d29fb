//! The report as one self-contained HTML page (inline CSS and script, nothing fetched): the
//! summary and facts on top, a matrix of cases × runs with one colour per outcome, each cell
//! opening its detail. Several runs (sim profiles, hw cards) share one matrix.

use crate::harness::report::Report;

const PAGE: &str = include_str!("report.html");

fn escape_html(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

impl Report {
    /// The report as an HTML page; the report's JSON is embedded for the page's script.
    pub fn to_html(&self) -> Result<String, String> {
        // `<` only occurs inside JSON strings, where `\u003c` means the same: no `</script>`.
        let json = serde_json::to_string(self).map_err(|e| e.to_string())?.replace('<', "\\u003c");
        let title = format!("mlx5-conformance report: {}", self.summary().line());
        Ok(PAGE.replace("__TITLE__", &escape_html(&title)).replace("__REPORT_JSON__", &json))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::report::{CaseReport, Outcome, RunReport};

    #[test]
    fn the_page_fetches_nothing_and_embeds_the_report_safely() -> Result<(), Box<dyn std::error::Error>> {
        let mut c = CaseReport::new(&crate::suite()[0], Outcome::Fail, "</script><b>x".into());
        c.expected = Some("<a>".into());
        let report =
            Report::new(vec![RunReport::new("sim".into(), Some("cx7".into()), Default::default(), None, vec![c])]);
        let page = report.to_html()?;
        assert_eq!(page.matches("</script>").count(), 2, "only the page's own script elements end");
        for remote in ["http://", "https://", "src=", "href=", "@import"] {
            assert!(!page.contains(remote), "{remote}");
        }
        let start = page.find("id=\"report\">").ok_or("no report element")? + "id=\"report\">".len();
        let end = start + page[start..].find("</script>").ok_or("no end of the script")?;
        let back: Report = serde_json::from_str(&page[start..end])?;
        assert_eq!(back, report);
        Ok(())
    }
}
