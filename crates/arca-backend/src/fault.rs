//! A fault-injecting decorator: fails or corrupts chosen calls (the Nth, a percentage, or
//! all matching ones) so that tests can drive every failure path without real broken disks.

use std::io;
use std::sync::Mutex;

use crate::{Backend, BackendError, BackendHints, FileInfo, FileType, Result};

/// Operation classes a rule can match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `create` (matched with file type [`FileType::Config`]).
    Create,
    /// `list`.
    List,
    /// `read` and `read_range`.
    Read,
    /// `write`.
    Write,
    /// `delete`.
    Delete,
    /// `stat`.
    Stat,
}

/// When a rule fires, counting only the calls it matches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Trigger {
    /// On the Nth matching call (1-based) only.
    Nth(u64),
    /// On every matching call from the Nth on.
    From(u64),
    /// On about `percent` % of matching calls, chosen by a deterministic generator.
    Percent {
        /// Probability in percent.
        percent: f64,
        /// Generator seed.
        seed: u64,
    },
    /// On every matching call.
    Always,
}

/// What happens when a rule fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The call fails with this I/O error kind (no side effect).
    Fail(io::ErrorKind),
    /// The call fails as if the disk were full (ENOSPC).
    NoSpace,
    /// Reads return data with one byte flipped; writes store data with one byte flipped.
    Corrupt,
    /// Reads return data missing its last byte; writes store all but the last byte.
    Truncate,
    /// The call waits this long, then goes through unharmed (a stalled request).
    Delay(std::time::Duration),
}

/// One injection rule.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// Operation matched, any if `None`.
    pub op: Option<Op>,
    /// File type matched, any if `None`.
    pub file_type: Option<FileType>,
    /// When it fires.
    pub trigger: Trigger,
    /// What it does.
    pub fault: Fault,
}

#[derive(Debug)]
struct State {
    rules: Vec<(Rule, u64, u64)>,
    fired: u64,
}

/// Wraps a backend and injects faults according to its rules.
#[derive(Debug)]
pub struct FaultBackend<B> {
    inner: B,
    state: Mutex<State>,
}

impl<B: Backend> FaultBackend<B> {
    /// Wraps `inner` with no rules.
    pub fn new(inner: B) -> Self {
        Self {
            inner,
            state: Mutex::new(State {
                rules: vec![],
                fired: 0,
            }),
        }
    }

    /// Adds a rule.
    pub fn add(&self, rule: Rule) {
        let seed = match rule.trigger {
            Trigger::Percent { seed, .. } => seed | 1,
            _ => 1,
        };
        self.lock().rules.push((rule, 0, seed));
    }

    /// Removes every rule.
    pub fn clear(&self) {
        self.lock().rules.clear();
    }

    /// How many faults were injected so far.
    pub fn fired(&self) -> u64 {
        self.lock().fired
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &B {
        &self.inner
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn check(&self, op: Op, t: FileType) -> Option<Fault> {
        let mut st = self.lock();
        let mut hit = None;
        for (rule, count, rng) in st.rules.iter_mut() {
            if rule.op.is_some_and(|o| o != op) || rule.file_type.is_some_and(|f| f != t) {
                continue;
            }
            *count += 1;
            let fire = match rule.trigger {
                Trigger::Nth(n) => *count == n,
                Trigger::From(n) => *count >= n,
                Trigger::Always => true,
                Trigger::Percent { percent, .. } => {
                    // xorshift64*
                    *rng ^= *rng >> 12;
                    *rng ^= *rng << 25;
                    *rng ^= *rng >> 27;
                    let v = rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11;
                    (v as f64 / (1u64 << 53) as f64) * 100.0 < percent
                }
            };
            if fire && hit.is_none() {
                hit = Some(rule.fault);
            }
        }
        if hit.is_some() {
            st.fired += 1;
        }
        drop(st);
        if let Some(Fault::Delay(d)) = hit {
            // A stalled request: it waits, then goes through unharmed.
            std::thread::sleep(d);
            return None;
        }
        hit
    }

    fn fail(&self, op: &'static str, t: FileType, name: &str, f: Fault) -> BackendError {
        let loc = match op {
            "create repository" => self.inner.location(),
            _ => format!("{}/{}", self.inner.location(), t.path(name)),
        };
        match f {
            Fault::NoSpace => BackendError::io(op, loc, io::Error::from_raw_os_error(libc::ENOSPC)),
            Fault::Fail(kind) => BackendError::io(op, loc, io::Error::new(kind, "injected fault")),
            _ => BackendError::io(op, loc, io::Error::other("injected fault")),
        }
    }
}

fn mangle(mut data: Vec<u8>, f: Fault) -> Vec<u8> {
    match f {
        Fault::Corrupt if !data.is_empty() => {
            let i = data.len() / 2;
            data[i] ^= 0x40;
        }
        Fault::Truncate => {
            data.pop();
        }
        _ => {}
    }
    data
}

impl<B: Backend> Backend for FaultBackend<B> {
    fn location(&self) -> String {
        self.inner.location()
    }
    fn create(&self) -> Result<()> {
        match self.check(Op::Create, FileType::Config) {
            Some(f) => Err(self.fail("create repository", FileType::Config, "", f)),
            None => self.inner.create(),
        }
    }
    fn list(&self, t: FileType) -> Result<Vec<FileInfo>> {
        match self.check(Op::List, t) {
            Some(f) => Err(self.fail("list", t, "", f)),
            None => self.inner.list(t),
        }
    }
    fn hints(&self) -> BackendHints {
        self.inner.hints()
    }
    fn note_tree_packs(&self, names: &[String]) {
        self.inner.note_tree_packs(names)
    }
    fn warm(&self, types: &[FileType]) {
        self.inner.warm(types)
    }
    fn local_folder(&self) -> Option<std::path::PathBuf> {
        self.inner.local_folder()
    }
    fn root_kind(&self) -> crate::RootKind {
        self.inner.root_kind()
    }
    fn prefetch(&self, t: FileType, name: &str, offset: u64, len: u64) {
        self.inner.prefetch(t, name, offset, len)
    }
    fn read(&self, t: FileType, name: &str) -> Result<Vec<u8>> {
        match self.check(Op::Read, t) {
            Some(f @ (Fault::Corrupt | Fault::Truncate)) => {
                Ok(mangle(self.inner.read(t, name)?, f))
            }
            Some(f) => Err(self.fail("read", t, name, f)),
            None => self.inner.read(t, name),
        }
    }
    fn read_range(&self, t: FileType, name: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        match self.check(Op::Read, t) {
            Some(f @ (Fault::Corrupt | Fault::Truncate)) => {
                Ok(mangle(self.inner.read_range(t, name, offset, len)?, f))
            }
            Some(f) => Err(self.fail("read", t, name, f)),
            None => self.inner.read_range(t, name, offset, len),
        }
    }
    fn write(&self, t: FileType, name: &str, data: &[u8]) -> Result<()> {
        match self.check(Op::Write, t) {
            Some(f @ (Fault::Corrupt | Fault::Truncate)) => {
                self.inner.write(t, name, &mangle(data.to_vec(), f))
            }
            Some(f) => Err(self.fail("write", t, name, f)),
            None => self.inner.write(t, name, data),
        }
    }
    fn delete(&self, t: FileType, name: &str) -> Result<()> {
        match self.check(Op::Delete, t) {
            Some(f) => Err(self.fail("delete", t, name, f)),
            None => self.inner.delete(t, name),
        }
    }
    fn remove(&self, t: FileType, name: &str) -> Result<()> {
        match self.check(Op::Delete, t) {
            Some(f) => Err(self.fail("delete", t, name, f)),
            None => self.inner.remove(t, name),
        }
    }
    fn stat(&self, t: FileType, name: &str) -> Result<FileInfo> {
        match self.check(Op::Stat, t) {
            Some(f) => Err(self.fail("stat", t, name, f)),
            None => self.inner.stat(t, name),
        }
    }
    fn remove_stale_temp(&self, older_than: std::time::Duration, remove: bool) -> Result<u64> {
        self.inner.remove_stale_temp(older_than, remove)
    }
    fn sync_removals(&self) -> Result<()> {
        self.inner.sync_removals()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ErrorKind, MemoryBackend};

    #[test]
    fn rules_fire_as_configured() {
        let b = FaultBackend::new(MemoryBackend::new());
        let id = "ab".repeat(32);
        b.write(FileType::Pack, &id, b"0123456789").unwrap();
        b.add(Rule {
            op: Some(Op::Read),
            file_type: Some(FileType::Pack),
            trigger: Trigger::Nth(2),
            fault: Fault::Corrupt,
        });
        assert_eq!(b.read(FileType::Pack, &id).unwrap(), b"0123456789");
        assert_ne!(b.read(FileType::Pack, &id).unwrap(), b"0123456789");
        assert_eq!(b.read(FileType::Pack, &id).unwrap(), b"0123456789");
        b.clear();
        b.add(Rule {
            op: Some(Op::Write),
            file_type: None,
            trigger: Trigger::Always,
            fault: Fault::NoSpace,
        });
        let e = b.write(FileType::Index, &id, b"x").unwrap_err();
        assert_eq!(e.kind, ErrorKind::NoSpace);
        assert!(
            b.inner().read(FileType::Index, &id).is_err(),
            "failed write must not store"
        );
        b.clear();
        b.add(Rule {
            op: None,
            file_type: None,
            trigger: Trigger::Percent {
                percent: 30.0,
                seed: 7,
            },
            fault: Fault::Fail(io::ErrorKind::TimedOut),
        });
        let fails = (0..1000)
            .filter(|_| b.stat(FileType::Pack, &id).is_err())
            .count();
        assert!((200..400).contains(&fails), "{fails}");
        assert_eq!(b.fired(), 1 + 1 + fails as u64);
        b.clear();
        b.add(Rule {
            op: Some(Op::Read),
            file_type: None,
            trigger: Trigger::Nth(1),
            fault: Fault::Delay(std::time::Duration::from_millis(50)),
        });
        let t0 = std::time::Instant::now();
        assert_eq!(b.read(FileType::Pack, &id).unwrap(), b"0123456789");
        assert!(t0.elapsed() >= std::time::Duration::from_millis(50));
    }
}
