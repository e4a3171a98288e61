//! Files the commands write for people (report pages, man pages, exported summaries): each goes to
//! a temporary file beside its name, renamed over it once complete, so a full disk or an
//! interruption never leaves half a file under that name, and an earlier version stays whole.
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Writes `path` with what `fill` writes. The file is 0644, readable by whoever may read the
/// folder (man(1) of another user, a web server), not a temporary file's 0600.
pub fn write_whole(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    let mut out = BufWriter::new(tmp);
    fill(&mut out)?;
    let tmp = out.into_inner().map_err(io::IntoInnerError::into_error)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}
