//! The page that opens the interface in a browser without putting the access token in any
//! process's arguments (which every local user can read in `ps` or `/proc/PID/cmdline`): a
//! small HTML file, readable by its owner only, that sends the browser on to the address with
//! the token. The browser is given the file's `file://` address instead; the file goes when
//! the server stops. Jupyter does the same (`use_redirect_file`).

use std::fs::{DirBuilder, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::UiError;

/// The redirect page on disk, in a folder of its own (mode 0700) under `$XDG_RUNTIME_DIR`
/// (else the system's temporary folder); the file (mode 0600) and the folder are removed when
/// this is dropped.
#[derive(Debug)]
pub struct OpenPage {
    dir: PathBuf,
    file: PathBuf,
}

/// The file's name in its folder.
const FILE_NAME: &str = "open.html";

impl OpenPage {
    /// Writes the page sending the browser to `url`, under `$XDG_RUNTIME_DIR` when it is an
    /// absolute folder, else under the system's temporary folder.
    pub fn create(url: &str) -> Result<OpenPage, UiError> {
        let base = std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|d| d.is_absolute() && d.is_dir())
            .unwrap_or_else(std::env::temp_dir);
        // A relative TMPDIR made a `file://` address whose first folder read as a host name.
        let base = std::path::absolute(&base).unwrap_or(base);
        Self::create_in(&base, url)
    }

    /// Writes the page sending the browser to `url` in a new private folder of `base`.
    pub fn create_in(base: &Path, url: &str) -> Result<OpenPage, UiError> {
        let err = |path: &Path, source: std::io::Error| UiError::OpenPage {
            path: path.to_path_buf(),
            source,
        };
        // A new folder of a random name: nobody else can have prepared it, or open it.
        let mut attempt = 0;
        let dir = loop {
            let hex = crate::net::random_hex();
            let dir = base.join(format!("arca-ui-{}", &hex[..16]));
            match DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => break dir,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 8 => {
                    attempt += 1;
                }
                Err(e) => return Err(err(&dir, e)),
            }
        };
        let page = OpenPage {
            file: dir.join(FILE_NAME),
            dir,
        };
        // The umask can only remove bits; make the folder's mode exactly 0700 all the same.
        std::fs::set_permissions(&page.dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| err(&page.dir, e))?;
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&page.file)
            .map_err(|e| err(&page.file, e))?;
        f.write_all(redirect_html(url).as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(|e| err(&page.file, e))?;
        Ok(page)
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.file
    }

    /// The file's `file://` address, for the browser.
    pub fn file_url(&self) -> String {
        use std::os::unix::ffi::OsStrExt;
        format!(
            "file://{}",
            crate::html::url_bytes(self.file.as_os_str().as_bytes())
        )
    }
}

impl Drop for OpenPage {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// A page that goes on to `url` at once (and offers it as a link).
fn redirect_html(url: &str) -> String {
    let url = crate::html::esc(url);
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"referrer\" content=\"no-referrer\">\
         <meta http-equiv=\"refresh\" content=\"0;url={url}\">\
         <title>arca ui</title></head><body>\
         <p>Opening arca ui&hellip; If nothing happens, <a href=\"{url}\">follow this link</a>.</p>\
         </body></html>\n"
    )
}
