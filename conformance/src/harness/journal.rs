//! The run's journal: JSON lines appended and synced to disk as the run goes (where and when,
//! each run's facts, each finished case), so a run that dies with the card leaves every
//! finished case on disk. [`read`] turns a journal back into a report.

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::harness::meta::Meta;
use crate::harness::report::{CaseReport, Report, RunReport};
use crate::harness::run::Sink;

/// One line of a journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Entry {
    /// First line: where and when.
    Meta(Meta),
    /// A run starts (its facts; no cases yet).
    Run(Box<RunReport>),
    /// A case of the last run finished.
    Case(CaseReport),
}

/// The journal kept beside the report `output`: `output.partial.jsonl`.
pub fn path_for(output: &Path) -> PathBuf {
    let mut name = output.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".partial.jsonl");
    output.with_file_name(name)
}

/// A journal being written.
pub struct Journal {
    file: File,
    path: PathBuf,
    error: Option<io::Error>,
}

impl Journal {
    /// Create (or truncate) the journal at `path` and write its first line.
    pub fn create(path: &Path, meta: &Meta) -> io::Result<Self> {
        let file = OpenOptions::new().create(true).write(true).truncate(true).open(path)?;
        let mut j = Journal { file, path: path.to_path_buf(), error: None };
        j.append(&Entry::Meta(meta.clone()))?;
        Ok(j)
    }

    /// Append one line and sync it to disk.
    pub fn append(&mut self, e: &Entry) -> io::Result<()> {
        let mut line = serde_json::to_string(e).map_err(io::Error::other)?;
        line.push('\n');
        self.file.write_all(line.as_bytes())?;
        self.file.sync_data()
    }

    /// The first error a [`Sink`] call met, if any.
    pub fn error(&self) -> Option<&io::Error> {
        self.error.as_ref()
    }

    /// Where the journal is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn keep(&mut self, e: Entry) {
        if self.error.is_none()
            && let Err(err) = self.append(&e)
        {
            self.error = Some(err);
        }
    }
}

impl Sink for Journal {
    fn run_started(&mut self, run: &RunReport, _total: usize) {
        self.keep(Entry::Run(Box::new(run.clone())));
    }

    fn case_done(&mut self, _run: &RunReport, _index: usize, _total: usize, case: &CaseReport) {
        self.keep(Entry::Case(case.clone()));
    }
}

/// The report a journal records. A last line cut short by a crash is ignored.
pub fn read(text: &str) -> Result<Report, String> {
    let mut report = Report::default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    for (i, line) in lines.iter().enumerate() {
        let entry: Entry = match serde_json::from_str(line) {
            Ok(e) => e,
            Err(_) if i + 1 == lines.len() && i > 0 => break,
            Err(e) => return Err(format!("line {}: {e}", i + 1)),
        };
        match entry {
            Entry::Meta(m) => report.meta = m,
            Entry::Run(run) => report.runs.push(*run),
            Entry::Case(c) => match report.runs.last_mut() {
                Some(run) => run.cases.push(c),
                None => return Err(format!("line {}: a case before any run", i + 1)),
            },
        }
    }
    if lines.is_empty() {
        return Err("an empty journal".into());
    }
    report.runs.iter_mut().for_each(RunReport::recount);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::report::Outcome;

    #[test]
    fn a_journal_cut_short_reads_back_with_every_whole_line() -> Result<(), Box<dyn std::error::Error>> {
        let dir = std::env::temp_dir().join(format!("mlx5-journal-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let path = path_for(&dir.join("r.json"));
        assert!(path.ends_with("r.json.partial.jsonl"));
        let mut j = Journal::create(&path, &Meta::now())?;
        let run = RunReport::new("sim".into(), Some("cx7".into()), Default::default(), None, vec![]);
        j.run_started(&run, 2);
        let case = crate::suite()[0];
        j.case_done(&run, 0, 2, &CaseReport::new(&case, Outcome::Pass, String::new()));
        assert!(j.error().is_none());
        let mut text = std::fs::read_to_string(&path)?;
        text.push_str("{\"case\":{\"name\":\"cut");
        let r = read(&text)?;
        assert_eq!(r.runs.len(), 1);
        assert_eq!(r.runs[0].cases.len(), 1);
        assert_eq!(r.runs[0].summary.passed, 1);
        assert!(read("").is_err() && read("{\"case\":{}}\n{}").is_err());
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }
}
