//! The target's directories a scanning thread keeps open, so that it looks at and opens
//! entries by name inside them instead of walking every entry's full path again.

use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;

use arca_fs::{DirHandle, Stat};

use crate::plan::Plan;

/// Directories a thread keeps open: neighbouring entries mostly share one, and files read in
/// disk order come from a few at a time. Fewer under a low limit of open files (2 at
/// `ulimit -n` 128 or less).
fn kept() -> usize {
    static KEPT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *KEPT.get_or_init(|| {
        usize::try_from(arca_fs::open_files_allowed() / 64)
            .unwrap_or(8)
            .clamp(2, 8)
    })
}

/// A few open directories of the plan, the most recently used last.
pub(crate) struct DirCache<'p> {
    plan: &'p Plan,
    /// Directories the target has as a symlink that the restore follows (sorted; see
    /// [`crate::scan::followed_links`]): opened through it.
    follow: &'p [u32],
    open: Vec<(u32, DirHandle)>,
}

fn is_absent(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR)
}

impl<'p> DirCache<'p> {
    pub fn new(plan: &'p Plan, follow: &'p [u32]) -> Self {
        Self {
            plan,
            follow,
            open: Vec::with_capacity(kept()),
        }
    }

    /// Opens directory `d` by its path.
    fn open_path(&self, d: u32) -> io::Result<DirHandle> {
        let path = &self.plan.dirs[d as usize].path;
        if self.follow.binary_search(&d).is_ok() {
            DirHandle::open_following(path)
        } else {
            DirHandle::open(path)
        }
    }

    /// Directory `d` of the plan, opened if it is not at hand: by name inside its parent
    /// when the parent is at hand or a few levels up are, otherwise by its full path.
    fn dir(&mut self, d: u32) -> io::Result<&DirHandle> {
        if let Some(k) = self.open.iter().rposition(|(x, _)| *x == d) {
            if k + 1 != self.open.len() {
                let h = self.open.remove(k);
                self.open.push(h);
            }
        } else {
            // Ancestors to open on the way down from one at hand (or from none).
            let mut chain = vec![d];
            let mut above = None;
            while chain.len() < kept() / 2 {
                let Some(&top) = chain.last() else { break };
                if top == 0 {
                    break;
                }
                let parent = self.plan.dirs[top as usize].parent;
                if self.open.iter().any(|(x, _)| *x == parent) {
                    above = Some(parent);
                    break;
                }
                chain.push(parent);
            }
            let mut at = above;
            if above.is_none() {
                // Nothing at hand within reach: the topmost is opened by its path.
                let top = chain.pop().unwrap_or(d);
                let h = self.open_path(top)?;
                self.keep(top, h);
                at = Some(top);
            }
            for &sub in chain.iter().rev() {
                let parent = at.unwrap_or(0);
                let name = self.plan.dirs[sub as usize]
                    .path
                    .file_name()
                    .map_or(&[][..], |n| n.as_bytes());
                let h = match self.open.iter().rposition(|(x, _)| *x == parent) {
                    Some(_) if self.follow.binary_search(&sub).is_ok() => self.open_path(sub)?,
                    Some(k) => self.open[k].1.open_dir(name)?,
                    None => self.open_path(sub)?,
                };
                self.keep(sub, h);
                at = Some(sub);
            }
        }
        match self.open.last() {
            Some((x, h)) if *x == d => Ok(h),
            _ => Err(io::Error::other("directory handle not kept")),
        }
    }

    /// Keeps `h` as the most recently used, dropping the least recently used beyond KEPT.
    fn keep(&mut self, d: u32, h: DirHandle) {
        if self.open.len() >= kept() {
            self.open.remove(0);
        }
        self.open.push((d, h));
    }

    /// lstat of `name` in directory `d`: `None` when nothing is there, or the directory is
    /// not (or is not a directory).
    pub fn stat(&mut self, d: u32, name: &[u8]) -> io::Result<Option<Stat>> {
        match self.dir(d) {
            Ok(h) => h.stat(name),
            Err(e) if is_absent(&e) || e.raw_os_error() == Some(libc::ELOOP) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// lstat of entry `e`.
    pub fn stat_entry(&mut self, e: u32) -> io::Result<Option<Stat>> {
        let ep = &self.plan.entries[e as usize];
        self.stat(ep.parent, &ep.name)
    }

    /// Opens entry `e` for reading (not moving its access time, never through a symlink).
    pub fn open_entry(&mut self, e: u32) -> io::Result<File> {
        let ep = &self.plan.entries[e as usize];
        self.dir(ep.parent)?.open_noatime(&ep.name)
    }

    /// Whether entry `name` of directory `d`, at `path`, carries exactly `node`'s xattrs
    /// ([`arca_fs::xattrs_match`]), listed by name in the directory where the kernel can.
    pub fn xattrs_match(
        &mut self,
        d: u32,
        name: &[u8],
        path: &std::path::Path,
        node: &arca_format::Node,
        opts: arca_fs::MetadataOptions,
    ) -> bool {
        if !opts.xattrs {
            return true;
        }
        match self.dir(d) {
            Ok(h) => arca_fs::xattrs_match_at(h, name, path, node, opts),
            Err(_) => arca_fs::xattrs_match(path, node, opts),
        }
    }

    /// The target of symlink entry `e`, putting the link's access time back to `atime`
    /// (what it was before the read) after.
    pub fn read_link_keeping_atime(&mut self, e: u32, atime: (i64, i64)) -> io::Result<Vec<u8>> {
        let ep = &self.plan.entries[e as usize];
        self.dir(ep.parent)?
            .read_link_keeping_atime(&ep.name, atime)
    }
}
