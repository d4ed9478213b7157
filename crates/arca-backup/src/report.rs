//! Warnings of a backup, collected from every stage and handed to the caller's observer as
//! they happen.

use std::io;
use std::path::Path;
use std::sync::Mutex;

use crate::{Observer, Warning, WarningKind};

/// Collects warnings from any thread.
pub(crate) struct Reporter<'a> {
    observer: &'a dyn Observer,
    list: Mutex<Vec<Warning>>,
}

impl<'a> Reporter<'a> {
    pub(crate) fn new(observer: &'a dyn Observer) -> Self {
        Self {
            observer,
            list: Mutex::new(vec![]),
        }
    }

    /// A regular file met by the walk (see [`crate::Observer::file`]).
    pub(crate) fn file(&self, path: &Path, change: crate::FileChange) {
        self.observer.file(path, change);
    }

    pub(crate) fn warn(&self, path: &Path, kind: WarningKind, message: String) {
        let w = Warning {
            path: path.to_path_buf(),
            kind,
            message,
        };
        self.observer.warning(&w);
        self.list.lock().unwrap_or_else(|p| p.into_inner()).push(w);
    }

    /// An I/O failure on `path` while doing `what`: a vanished entry or an unreadable one.
    pub(crate) fn warn_io(&self, path: &Path, what: &str, e: &io::Error) {
        // A read that says "not found" is no vanished file: some /sys files open and then
        // refuse reads so (the file is still there).
        let kind = if e.kind() == io::ErrorKind::NotFound && what != "read" {
            WarningKind::Vanished
        } else {
            WarningKind::Unreadable
        };
        let msg = match kind {
            WarningKind::Vanished => format!(
                "{}: vanished during backup, skipped",
                arca_format::text::shown(path)
            ),
            _ => format!(
                "{}: cannot {what}: {e}; skipped",
                arca_format::text::shown(path)
            ),
        };
        self.warn(path, kind, msg);
    }

    pub(crate) fn into_list(self) -> Vec<Warning> {
        self.list.into_inner().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Quiet;
    impl Observer for Quiet {
        fn warning(&self, _: &Warning) {}
    }

    #[test]
    fn only_a_failed_look_or_open_is_a_vanished_entry() {
        let r = Reporter::new(&Quiet);
        let gone = || io::Error::from(io::ErrorKind::NotFound);
        r.warn_io(Path::new("/x/a"), "open", &gone());
        // Some /sys files open, then refuse reads with ENOENT: they are still there.
        r.warn_io(Path::new("/x/b"), "read", &gone());
        let list = r.into_list();
        assert_eq!(list[0].kind, WarningKind::Vanished);
        assert!(list[0].message.contains("vanished"), "{}", list[0].message);
        assert_eq!(list[1].kind, WarningKind::Unreadable);
        assert!(
            list[1].message.starts_with("/x/b: cannot read: "),
            "{}",
            list[1].message
        );
    }
}
