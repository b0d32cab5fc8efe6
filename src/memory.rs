//! glibc malloc settings for `kuota serve`, a long-running server: few arenas, and freed
//! memory handed back to the system now and then.
//!
//! Why: kuota parses and drops JSON on every thread of its runtime. glibc gives each
//! contending thread an arena of its own (up to eight per core) and keeps what is freed
//! in each, so the resident size grows well past what is live. Two arenas and a periodic
//! `malloc_trim` keep it close to the live size (docs/controller.md, "Memory"). Other
//! platforms' allocators are left alone.

use std::time::Duration;

/// How often freed memory is handed back.
const TRIM_EVERY: Duration = Duration::from_secs(10);

/// Caps glibc's arenas; call before the runtime starts its threads.
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; no thread allocates yet.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// Hands freed memory back to the system every [`TRIM_EVERY`], until the runtime ends.
pub fn spawn_trimmer() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    tokio::spawn(async {
        let mut tick = tokio::time::interval(TRIM_EVERY);
        loop {
            tick.tick().await;
            // SAFETY: malloc_trim only returns free pages; it is thread-safe.
            unsafe {
                libc::malloc_trim(0);
            }
        }
    });
}
