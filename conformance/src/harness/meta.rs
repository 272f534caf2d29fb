//! Where and when a report was made: the suite's version and commit, the host, the time.

use serde::{Deserialize, Serialize};

/// The suite's git commit, captured at build time ("unknown" outside a git checkout); trace
/// headers name the same one.
pub const COMMIT: &str = mlx5_trace::COMMIT;
/// The suite's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Where and when a report was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Meta {
    /// `mlx5-conformance`.
    pub suite: String,
    /// The suite's version.
    pub version: String,
    /// The suite's git commit, or "unknown".
    pub commit: String,
    /// The host that ran it.
    pub host: String,
    /// When the report was made, UTC, RFC 3339.
    pub timestamp: String,
}

impl Default for Meta {
    fn default() -> Self {
        let unknown = || "unknown".to_string();
        Meta {
            suite: "mlx5-conformance".into(),
            version: unknown(),
            commit: unknown(),
            host: unknown(),
            timestamp: unknown(),
        }
    }
}

impl Meta {
    /// This build, this host, now.
    pub fn now() -> Self {
        let host = gethostname::gethostname().to_string_lossy().into_owned();
        Meta {
            version: VERSION.into(),
            commit: COMMIT.into(),
            host: if host.is_empty() { "unknown".into() } else { host },
            timestamp: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            ..Meta::default()
        }
    }

    /// `mlx5-conformance 0.1.0, commit 0123456789ab`.
    pub fn build_line(&self) -> String {
        let commit: String = self.commit.chars().take(12).collect();
        format!("{} {}, commit {commit}", self.suite, self.version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_names_a_commit_a_host_and_a_utc_time() -> Result<(), Box<dyn std::error::Error>> {
        let m = Meta::now();
        assert_eq!(m.version, env!("CARGO_PKG_VERSION"));
        assert!(m.commit == "unknown" || (m.commit.len() >= 40 && m.commit.chars().all(|c| c.is_ascii_hexdigit())));
        assert!(!m.host.is_empty());
        let t = chrono::DateTime::parse_from_rfc3339(&m.timestamp)?;
        assert_eq!(t.offset().local_minus_utc(), 0);
        assert!(m.timestamp.ends_with('Z'), "{}", m.timestamp);
        Ok(())
    }
}
