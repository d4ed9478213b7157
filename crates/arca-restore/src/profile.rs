//! Where the time goes: every thread of every stage splits its life into working, waiting for
//! input and waiting to hand its output on, and posts what it is doing on a board that the
//! watchdog reads when nothing moves.

use std::sync::Mutex;
use std::time::Instant;

pub use arca_repo::profile::{Clock, StageProfile, stage};

/// What each thread is doing right now, and since when.
#[derive(Debug, Default)]
pub(crate) struct Board {
    slots: Mutex<Vec<(String, String, Instant)>>,
}

impl Board {
    /// Adds a slot for a thread named `who`.
    pub fn join(&self, who: String) -> Post<'_> {
        let mut s = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        s.push((who, "starting".into(), Instant::now()));
        Post {
            board: self,
            slot: s.len() - 1,
        }
    }
    /// One line per thread: who, what, for how long.
    pub fn render(&self) -> Vec<String> {
        let s = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        s.iter()
            .map(|(who, what, since)| {
                format!("{who}: {what} (for {:.1} s)", since.elapsed().as_secs_f64())
            })
            .collect()
    }
}

/// One thread's place on the board.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Post<'b> {
    board: &'b Board,
    slot: usize,
}

impl Post<'_> {
    /// Posts what the thread does now.
    pub fn post(&self, what: impl Into<String>) {
        let mut s = self.board.slots.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = s.get_mut(self.slot) {
            e.1 = what.into();
            e.2 = Instant::now();
        }
    }
}
