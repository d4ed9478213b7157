//! `--stdin`: one file read from a stream, in folders made for it.

use std::path::Path;

use arca_format::{Node, NodeKind, Timespec};

use super::{Fatal, Walker};
use crate::assemble::{Msg, Slot};
use crate::reader::{FileReader, Halt};
use crate::sources::join;

impl Walker<'_, '_, '_> {
    /// Backs up what `reader` yields as one file `/NAME` (`--stdin`), owned by the current
    /// user, mode 0644, dated now, read on this thread. A `NAME` of several names (`db/x.sql`)
    /// puts the file in folders made for it (0755, the same owner and time), as restic does.
    pub(crate) fn run_stdin<R: std::io::Read>(
        &mut self,
        name: &[u8],
        reader: R,
    ) -> Result<(), Fatal> {
        let (uid, gid) = arca_repo::host::ids();
        let ns = arca_repo::host::now_ns();
        let now = Timespec {
            sec: ns.div_euclid(1_000_000_000),
            nsec: ns.rem_euclid(1_000_000_000) as u32,
        };
        let path = join(Path::new("/"), name);
        let mut parts: Vec<&[u8]> = name.split(|&b| b == b'/').collect();
        let file_name = parts.pop().unwrap_or(name);
        let mut node = Node {
            name: file_name.to_vec(),
            kind: Some(NodeKind::File),
            mode: 0o644,
            uid,
            gid,
            user: arca_repo::host::username().into_bytes(),
            group: arca_repo::host::groupname().into_bytes(),
            mtime: now,
            atime: now,
            ctime: now,
            nlink: 1,
            ..Node::default()
        };
        let folder = Node {
            kind: Some(NodeKind::Dir),
            mode: 0o755,
            ..node.clone()
        };
        let mut file_reader = FileReader::new(self.ctx);
        let read = file_reader.chunk(&path, crate::reader::Plain(reader));
        let mut slots = vec![];
        match read {
            Ok(Some((content, total))) => {
                node.content = content;
                node.size = total;
                self.summary.files_new += 1;
                self.summary.total_files_processed += 1;
                self.summary.total_bytes_processed += total;
                slots.push(Slot::Ready(node));
            }
            Ok(None) => {}
            Err(Halt) => {
                return Err(match self.ctx.cancelled() {
                    true => Fatal::Cancelled,
                    false => Fatal::Stopped,
                });
            }
        }
        crate::pipeline::add_summary(&mut self.summary, &file_reader.summary);
        let (mut id, mut parent) = (0, None);
        for d in parts {
            let dir = Node {
                name: d.to_vec(),
                ..folder.clone()
            };
            self.send(Msg::Dir {
                id,
                parent,
                old: None,
                slots: vec![Slot::Dir(dir)],
            })?;
            parent = Some((id, 0));
            id = self.new_dir();
        }
        self.send(Msg::Dir {
            id,
            parent,
            old: None,
            slots,
        })
    }
}
