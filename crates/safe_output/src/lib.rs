//! Files and directories alloclens writes where a user points it. alloclens runs as root: a file
//! written by rename must never replace a device (`-o /dev/null`), a pipe or a symbolic link
//! (`-o /dev/stdout`, a link of the user's own), and two sessions must never share one directory.
//!
//! - [`WholeFile`] / [`write_whole`]: a file written whole by rename where the name (links
//!   followed, as `open` follows them) is a regular file or nothing; written straight into a
//!   character device, a FIFO or a socket; refused for anything else.
//! - [`DirLock`]: a lock file inside a results or watch directory, held for the session.
mod dir_lock;
mod whole_file;

pub use dir_lock::{DirLock, LockError, LOCK_FILE};
pub use whole_file::{
    destination, remove_written, resolve_links, write_whole, Destination, WholeFile,
};
