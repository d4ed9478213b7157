//! The body of a lock file (`locks/<id>`): who holds the lock, since when, and whether it is
//! exclusive. Sealed like a snapshot; see docs/FORMAT.md, "Locks".

use crate::FormatError;
use crate::codec::{Reader, Writer};

const MAGIC: [u8; 4] = *b"ALCK";
/// The newest version read.
const VERSION: u16 = 2;
/// The version written: 1, which every arca with locks reads (versions from 2026-11-22 to
/// 2026-11-28 took a version 2 lock for stale, and a prune of theirs deleted the packs of a
/// live backup). The process space rides in the command field, after a NUL.
const WRITTEN: u16 = 1;

/// The decrypted body of a lock file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    /// When the lock was taken or last refreshed, nanoseconds since the Unix epoch.
    pub time_ns: i64,
    /// Exclusive (forget, prune, repair) or shared (backup, restore, check).
    pub exclusive: bool,
    /// Process id of the holder on its host.
    pub pid: u32,
    /// Host name of the holder.
    pub hostname: String,
    /// User name of the holder.
    pub username: String,
    /// What the holder is doing (`backup`, `prune`, ...).
    pub command: String,
    /// The holder's process-id space: its machine's boot id and its pid namespace
    /// (`BOOT_ID pid:[INODE]`), empty when unknown (version 1). Only a lock of this very
    /// space can be judged by whether its process exists: two machines, or containers,
    /// may share a host name and not their process ids.
    pub process_space: String,
}

impl LockInfo {
    /// Encodes the body (before sealing).
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        let mut w = Writer::with_capacity(64);
        w.magic(&MAGIC, WRITTEN);
        w.i64(self.time_ns);
        w.u8(u8::from(self.exclusive));
        w.u32(self.pid);
        w.var_bytes(self.hostname.as_bytes())?;
        w.var_bytes(self.username.as_bytes())?;
        let mut command = self.command.clone();
        if !self.process_space.is_empty() {
            command.push('\0');
            command.push_str(&self.process_space);
        }
        w.var_bytes(command.as_bytes())?;
        Ok(w.finish())
    }

    /// Decodes a body.
    pub fn decode(b: &[u8]) -> Result<Self, FormatError> {
        let mut r = Reader::new(b, "lock");
        let version = r.magic(&MAGIC, VERSION)?;
        let time_ns = r.i64()?;
        let exclusive = match r.u8()? {
            0 => false,
            1 => true,
            v => {
                return Err(FormatError::Corrupt {
                    what: "lock",
                    detail: format!("exclusive flag {v}"),
                });
            }
        };
        let pid = r.u32()?;
        let text = |r: &mut Reader<'_>| -> Result<String, FormatError> {
            Ok(String::from_utf8_lossy(r.var_bytes()?).into_owned())
        };
        let hostname = text(&mut r)?;
        let username = text(&mut r)?;
        let mut command = text(&mut r)?;
        let process_space = if version >= 2 {
            text(&mut r)?
        } else {
            match command.split_once('\0') {
                Some((c, space)) => {
                    let space = space.to_string();
                    command = c.to_string();
                    space
                }
                None => String::new(),
            }
        };
        r.finish()?;
        Ok(Self {
            time_ns,
            exclusive,
            pid,
            hostname,
            username,
            command,
            process_space,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip(time_ns in any::<i64>(), exclusive in any::<bool>(), pid in any::<u32>(),
                      hostname in ".{0,40}", username in ".{0,20}", command in "[a-z]{0,10}",
                      process_space in ".{0,60}") {
            let l = LockInfo { time_ns, exclusive, pid, hostname, username, command, process_space };
            let bytes = l.encode().unwrap();
            prop_assert_eq!(LockInfo::decode(&bytes).unwrap(), l);
            for cut in 0..bytes.len() {
                prop_assert!(LockInfo::decode(&bytes[..cut]).is_err());
            }
        }
    }

    /// Locks are written as version 1, laid out as arca read them from the start (a reader
    /// of that version alone refuses anything else, or trailing bytes), the process space
    /// after a NUL in the command.
    #[test]
    fn written_as_version_1_that_the_first_readers_read() {
        let l = LockInfo {
            time_ns: 5,
            exclusive: true,
            pid: 9,
            hostname: "h".into(),
            username: "u".into(),
            command: "prune".into(),
            process_space: "boot pid:[1]".into(),
        };
        let b = l.encode().unwrap();
        let mut r = Reader::new(&b, "lock");
        assert_eq!(r.magic(&MAGIC, 1).unwrap(), 1);
        assert_eq!(
            (r.i64().unwrap(), r.u8().unwrap(), r.u32().unwrap()),
            (5, 1, 9)
        );
        assert_eq!(r.var_bytes().unwrap(), b"h");
        assert_eq!(r.var_bytes().unwrap(), b"u");
        assert_eq!(r.var_bytes().unwrap(), b"prune\0boot pid:[1]");
        r.finish().unwrap();
        assert_eq!(LockInfo::decode(&b).unwrap(), l);
    }

    /// A version 2 lock (arca wrote them on 2026-11-29, before going back to version 1)
    /// still reads, its space too.
    #[test]
    fn version_2_reads() {
        let mut w = Writer::with_capacity(64);
        w.magic(&MAGIC, 2);
        w.i64(5);
        w.u8(0);
        w.u32(9);
        for f in [&b"h"[..], b"u", b"backup", b"boot pid:[2]"] {
            w.var_bytes(f).unwrap();
        }
        let back = LockInfo::decode(&w.finish()).unwrap();
        assert_eq!(back.process_space, "boot pid:[2]");
        assert_eq!(back.command, "backup");
    }

    /// A version 1 lock without a process space still reads, with the space unknown.
    #[test]
    fn version_1_reads_without_a_process_space() {
        let l = LockInfo {
            time_ns: 5,
            exclusive: false,
            pid: 9,
            hostname: "h".into(),
            username: "u".into(),
            command: "backup".into(),
            process_space: "boot pid:[1]".into(),
        };
        let b = LockInfo {
            process_space: String::new(),
            ..l
        }
        .encode()
        .unwrap();
        let back = LockInfo::decode(&b).unwrap();
        assert_eq!(back.process_space, "");
        assert_eq!((back.pid, back.command.as_str()), (9, "backup"));
    }

    #[test]
    fn bad_flag_is_an_error() {
        let l = LockInfo {
            time_ns: 1,
            exclusive: true,
            pid: 7,
            hostname: "h".into(),
            username: "u".into(),
            command: "prune".into(),
            process_space: String::new(),
        };
        let mut b = l.encode().unwrap();
        b[14] = 9;
        assert!(LockInfo::decode(&b).is_err());
    }
}
