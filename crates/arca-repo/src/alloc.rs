//! Allocator settings for every program built on this library (the CLI, the benchmarks):
//! pack-, read- and chunk-sized buffers go back to the system when freed.

/// Buffers at least this large are mapped on their own and unmapped when freed.
///
/// glibc raises its threshold after the first large free (up to 32 MiB), after which chunk
/// buffers (1 MiB on average, 4 MiB at most) are carved from per-thread arenas and, freed
/// by another thread, stay resident: a first backup of the 1 GiB `small` set peaked at
/// 135-155 MiB, 10-30 MiB more than with the threshold fixed (and the backup's buffer pools
/// sized so that it allocates few fresh buffers), in the same time. A restore's listing reads
/// (up to 2 MiB each, freed once decrypted) stayed resident the same way: a no-op restore of
/// 100,000 files peaked at 75 MiB with glibc's default and at 58-63 MiB with this threshold,
/// in the same time. Index files (about 1.7 MB each, decoded by reader threads and freed by
/// the thread building the index) left about 2 MB in each reader's arena, 0.9 B per blob of
/// a 10-million-blob index.
const MMAP_THRESHOLD: i32 = 1 << 20;

/// Fixes the allocator's mmap threshold. Call before any thread is started: `mallopt`
/// changes process-wide settings without synchronisation.
pub fn return_large_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt takes two integers and only changes a tuning parameter of the
        // allocator; no other thread exists yet (see above). A refusal (return 0) leaves the
        // default, which is only slower to give memory back.
        #[allow(unsafe_code)]
        let _ = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) };
        // Under an address-space limit (`ulimit -v`), each of glibc's per-thread arenas
        // reserves 64 MiB of it, and up to eight per core would leave none for the buffers:
        // a backup of a few files failed to allocate below 1.6 GiB. Two arenas suffice there.
        if address_space_limit().is_some() {
            // SAFETY: as above.
            #[allow(unsafe_code)]
            let _ = unsafe { libc::mallopt(libc::M_ARENA_MAX, 2) };
        }
    }
}

/// The address-space limit (`ulimit -v`) in bytes, if one is set.
pub fn address_space_limit() -> Option<u64> {
    use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit};
    match getrlimit(Resource::RLIMIT_AS) {
        Ok((soft, _)) if soft != RLIM_INFINITY => Some(soft),
        _ => None,
    }
}
