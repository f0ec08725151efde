//! Reading the JVMs' log files: readiness is decided by lines that appear after a
//! recorded offset, because a restarted broker appends to the same files.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// Current length of a file, 0 when it does not exist yet.
pub(crate) fn len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// Everything written to `path` after byte `offset` (lossy UTF-8; empty if unreadable).
pub(crate) fn read_since(path: &Path, offset: u64) -> String {
    let mut buf = Vec::new();
    if let Ok(mut file) = File::open(path) {
        if file.seek(SeekFrom::Start(offset)).is_ok() {
            // A log that cannot be read simply has not shown the line yet.
            let _ = file.read_to_end(&mut buf);
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// The last `lines` lines of a file, each prefixed with the file name.
pub(crate) fn tail(path: &Path, lines: usize) -> String {
    // Logs can be large; the last 64 KiB is plenty for 30 lines.
    let start = len(path).saturating_sub(64 * 1024);
    let text = read_since(path, start);
    let all: Vec<&str> = text.lines().collect();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut out = String::new();
    for line in &all[all.len().saturating_sub(lines)..] {
        out.push_str(&name);
        out.push_str(" | ");
        out.push_str(line);
        out.push('\n');
    }
    if out.is_empty() {
        out = format!("{name} | <empty or missing>\n");
    }
    out
}
