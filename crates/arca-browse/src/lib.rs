//! Read-only views of snapshots, computed from the trees and the index: [`find`] looks for
//! entries and objects across snapshots, [`diff`] compares two snapshots, [`dump`] streams a
//! file or a folder (tar, zip) and [`stats`] measures sizes, dedup and fragmentation.

pub mod diff;
pub mod dump;
pub mod find;
pub mod stats;
