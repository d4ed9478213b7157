//! Allocator settings for every command (in `arca_repo::alloc`, shared with the benchmarks'
//! programs), and the message for a thread the system would not start.

pub use arca_repo::alloc::{address_space_limit, return_large_buffers};

/// The message for a thread the system would not start.
pub fn thread_refused(cause: impl std::fmt::Display) -> String {
    format!(
        "cannot start a thread: {cause} (the system refused it: check the memory and \
         address-space limits, `ulimit -v` and `ulimit -u`)"
    )
}
