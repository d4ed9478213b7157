//! Repository maintenance. [`check`] verifies the structure (every snapshot's trees and blobs
//! are indexed, every indexed pack exists with the right size) and, with `read_data`,
//! decrypts and verifies every blob, naming the packs, snapshots and files affected.

pub mod check;

pub use check::{Affected, CheckOptions, CheckReport, DamagedPack, check};
