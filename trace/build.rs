//! The suite's git commit, for trace headers and reports: `MLX5_CONFORMANCE_COMMIT` if set,
//! else `git rev-parse HEAD` when this crate is part of a git checkout, else "unknown" (a
//! release tarball). The suite's reports name the same commit (`mlx5_trace::COMMIT`).

use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).current_dir(dir).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=MLX5_CONFORMANCE_COMMIT");
    let dir = std::env::var("CARGO_MANIFEST_DIR").map(std::path::PathBuf::from).unwrap_or_default();
    let commit = match std::env::var("MLX5_CONFORMANCE_COMMIT") {
        Ok(c) if !c.is_empty() => c,
        // Only if this crate's own files are tracked: a tarball unpacked inside another
        // checkout is not that checkout's commit.
        _ => match git(&dir, &["ls-files", "--error-unmatch", "build.rs"]) {
            Some(_) => git(&dir, &["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into()),
            None => "unknown".into(),
        },
    };
    println!("cargo:rustc-env=MLX5_CONFORMANCE_COMMIT={commit}");
    // Build again when HEAD moves; only files that exist, or cargo would rerun every build.
    let mut watch = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(r) = git(&dir, &["symbolic-ref", "-q", "HEAD"]) {
        watch.push(r);
    }
    for w in watch {
        let path = git(&dir, &["rev-parse", "--path-format=absolute", "--git-path", &w]);
        if let Some(p) = path.filter(|p| Path::new(p).exists()) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
}
