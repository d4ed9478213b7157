//! Hard-link groups shared by the walk and the readers: the further names of a file being
//! read, so that a reader whose first name vanished or was replaced reads the file by another.
//!
//! A group is read under one name (its leader); the walk adds every further name it meets
//! while that read is pending. When the leader cannot be read, the reader tries those names in
//! turn; only when none works is the read failed, and the next name the walk meets leads a
//! new read (a new generation, so that the assembler never mixes the two). A name whose ctime
//! changed also leads a new read; the older one keeps its names.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

/// (device, inode) of a hard-linked file.
pub(crate) type Inode = (u64, u64);

/// A hard-linked file's key in the assembler: its inode and the generation of its read.
pub(crate) type LinkKey = (u64, u64, u32);

#[derive(Default)]
struct Group {
    /// The generation of the newest read.
    generation: u32,
    /// Each pending or finished read's further names and state, by generation: a new read
    /// (the walk met a name whose ctime changed, as removing another name changes it) must
    /// not take the names still waiting on an older one (it did: hunt 23).
    reads: HashMap<u32, Read>,
}

#[derive(Default)]
struct Read {
    /// Further names met while the read is pending, not yet tried.
    others: Vec<PathBuf>,
    state: State,
}

#[derive(Default, PartialEq)]
enum State {
    #[default]
    Pending,
    /// The content is known: further names need not be kept.
    Read,
    /// Neither the leader nor any further name could be read.
    Failed,
}

/// Every hard-link group of a backup.
#[derive(Default)]
pub(crate) struct Links {
    groups: Mutex<HashMap<Inode, Group>>,
}

impl Links {
    fn groups(&self) -> std::sync::MutexGuard<'_, HashMap<Inode, Group>> {
        self.groups.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A name that will be read for the group: starts a new generation.
    pub(crate) fn lead(&self, inode: Inode) -> LinkKey {
        let mut groups = self.groups();
        let g = groups.entry(inode).or_default();
        g.generation = g.generation.wrapping_add(1);
        g.reads.insert(g.generation, Read::default());
        (inode.0, inode.1, g.generation)
    }

    /// A further name of a group being read: waits for the newest read (`Some`), or must be
    /// read itself (`None`) because every name tried for it failed.
    pub(crate) fn follow(&self, inode: Inode, path: &std::path::Path) -> Option<LinkKey> {
        let mut groups = self.groups();
        let g = groups.get_mut(&inode)?;
        let key = (inode.0, inode.1, g.generation);
        let read = g.reads.get_mut(&g.generation)?;
        match read.state {
            State::Failed => None,
            State::Read => Some(key),
            State::Pending => {
                read.others.push(path.to_path_buf());
                Some(key)
            }
        }
    }

    /// The leader of `key` could not be read: another of its names to try, or `None` when
    /// none is left (that read is then failed).
    pub(crate) fn next_other(&self, key: LinkKey) -> Option<PathBuf> {
        let mut groups = self.groups();
        let read = groups.get_mut(&(key.0, key.1))?.reads.get_mut(&key.2)?;
        let next = read.others.pop();
        if next.is_none() {
            read.state = State::Failed;
        }
        next
    }

    /// The read of `key` succeeded.
    pub(crate) fn read(&self, key: LinkKey) {
        let mut groups = self.groups();
        if let Some(read) = groups
            .get_mut(&(key.0, key.1))
            .and_then(|g| g.reads.get_mut(&key.2))
        {
            read.state = State::Read;
            read.others = Vec::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn a_failed_leader_hands_over_to_its_other_names_then_to_a_new_read() {
        let links = Links::default();
        let key = links.lead((1, 2));
        assert_eq!(links.follow((1, 2), Path::new("b")), Some(key));
        assert_eq!(links.follow((1, 2), Path::new("c")), Some(key));
        assert_eq!(links.next_other(key), Some(PathBuf::from("c")));
        assert_eq!(links.next_other(key), Some(PathBuf::from("b")));
        assert_eq!(links.next_other(key), None);
        // Every name tried so far failed: the next one is read itself.
        assert_eq!(links.follow((1, 2), Path::new("d")), None);
        let again = links.lead((1, 2));
        assert_ne!(again, key);
        assert_eq!(links.follow((1, 2), Path::new("e")), Some(again));
        // The old generation's reader does not take the new one's names.
        assert_eq!(links.next_other(key), None);
        links.read(again);
        assert_eq!(links.follow((1, 2), Path::new("f")), Some(again));
        assert_eq!(links.follow((9, 9), Path::new("g")), None);
    }

    /// A new read started while an older one is pending (a name whose ctime changed) leaves
    /// the older read its waiting names (they were dropped: hunt 23).
    #[test]
    fn a_new_read_leaves_the_pending_one_its_names() {
        let links = Links::default();
        let first = links.lead((1, 2));
        assert_eq!(links.follow((1, 2), Path::new("y_b")), Some(first));
        let second = links.lead((1, 2));
        assert_eq!(links.next_other(first), Some(PathBuf::from("y_b")));
        assert_eq!(links.next_other(first), None);
        assert_eq!(links.follow((1, 2), Path::new("z")), Some(second));
    }
}
