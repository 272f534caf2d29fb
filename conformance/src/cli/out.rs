//! Writing what the CLI prints without ever panicking: a report on standard output that
//! cannot be written is an error message and a non-zero exit, and a closed pipe (`| head`)
//! ends the program quietly with 141, as a shell reports a process killed by SIGPIPE.

use std::io::{ErrorKind, Write};
use std::path::Path;
use std::process::ExitCode;

/// Exit status for usage errors (unknown profile, unwritable output).
pub const USAGE: u8 = 2;
/// Exit status when `--require-device` finds no device.
pub const NO_DEVICE: u8 = 3;
/// Exit status when standard output is a closed pipe: 128 + SIGPIPE.
pub const BROKEN_PIPE: u8 = 141;

/// A message on standard error; if even that cannot be written, nothing.
pub fn warn(msg: impl std::fmt::Display) {
    let _ = writeln!(std::io::stderr(), "mlx5-conformance: {msg}");
}

/// [`warn`] and exit with `code`.
pub fn fail(code: u8, msg: impl std::fmt::Display) -> ExitCode {
    warn(msg);
    ExitCode::from(code)
}

/// Write `text` to standard output.
pub fn stdout(text: &str) -> Result<(), ExitCode> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Err(ExitCode::from(BROKEN_PIPE)),
        Err(e) => Err(fail(USAGE, format!("cannot write to standard output: {e}"))),
    }
}

/// Write `text` to `path` (through a temporary file, so a reader never sees half a report).
pub fn file(path: &Path, text: &str) -> Result<(), ExitCode> {
    let mut tmp = path.as_os_str().to_os_string();
    tmp.push(".tmp");
    let write = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path));
    write.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        fail(USAGE, format!("cannot write {}: {e}", path.display()))
    })
}

/// Write `text` to `path`, or to standard output.
pub fn emit(path: Option<&Path>, text: &str) -> Result<(), ExitCode> {
    match path {
        Some(p) => file(p, text),
        None => stdout(text),
    }
}
