//! Unix socket listeners for `bind_addr` settings: one rule for "this
//! address is a path", and a bind that replaces only a stale socket.

use std::io::ErrorKind;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

/// Why a Unix socket path cannot be listened on.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("{0} exists and is not a socket: refusing to replace it")]
    NotASocket(PathBuf),
    #[error("{0} is a socket another process is listening on")]
    InUse(PathBuf),
    #[error("cannot remove the stale socket {0}: {1}")]
    Remove(PathBuf, std::io::Error),
    #[error("cannot listen on {0}: {1}")]
    Bind(PathBuf, std::io::Error),
}

/// Whether a `bind_addr` names a Unix socket path (absolute, or relative
/// starting with `.`) rather than an `ip:port`.
pub fn is_socket_path(bind_addr: &str) -> bool {
    bind_addr.starts_with('/') || bind_addr.starts_with('.')
}

/// Binds a Unix socket at `path`. A socket file left there by a previous
/// run (nobody accepts connections on it) is replaced; any other file, or
/// a socket in use, is an error. The listener is non-blocking, ready for
/// `tokio::net::UnixListener::from_std`.
pub fn bind_unix_socket(path: &Path) -> Result<UnixListener, SocketError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            if UnixStream::connect(path).is_ok() {
                return Err(SocketError::InUse(path.into()));
            }
            std::fs::remove_file(path).map_err(|e| SocketError::Remove(path.into(), e))?;
        }
        Ok(_) => return Err(SocketError::NotASocket(path.into())),
        Err(e) if e.kind() == ErrorKind::NotFound => (),
        Err(e) => return Err(SocketError::Bind(path.into(), e)),
    }
    let l = UnixListener::bind(path).map_err(|e| SocketError::Bind(path.into(), e))?;
    l.set_nonblocking(true)
        .map_err(|e| SocketError::Bind(path.into(), e))?;
    Ok(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_rule() {
        assert!(is_socket_path("/run/garage/web.sock"));
        assert!(is_socket_path("./web.sock"));
        assert!(!is_socket_path("127.0.0.1:3902"));
        assert!(!is_socket_path("[::1]:3902"));
    }

    #[test]
    fn replaces_only_a_stale_socket() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("s.sock");
        // A listening socket is in use.
        let live = bind_unix_socket(&sock).unwrap();
        assert!(matches!(
            bind_unix_socket(&sock),
            Err(SocketError::InUse(_))
        ));
        // Once closed, its file is stale and gets replaced.
        drop(live);
        let again = bind_unix_socket(&sock).unwrap();
        UnixStream::connect(&sock).unwrap();
        drop(again);
        // A regular file is never deleted.
        let file = dir.path().join("data.txt");
        std::fs::write(&file, b"keep me").unwrap();
        assert!(matches!(
            bind_unix_socket(&file),
            Err(SocketError::NotASocket(_))
        ));
        assert_eq!(std::fs::read(&file).unwrap(), b"keep me");
    }
}
