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
        let kind = if e.kind() == io::ErrorKind::NotFound {
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
