//! The process's allocator: mimalloc, told to give memory it no longer uses
//! back to the system at once.

// glibc's malloc spent almost half of a restart's replay of a million-lock
// log in _int_malloc, malloc_consolidate and free (perf; the performance
// history in CHANGELOG.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` of mimalloc v3's `mi_option_e`, which
/// libmimalloc-sys does not name (it names its neighbours 14 and 16). The
/// test below checks the number against the option's default.
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// By default mimalloc v3 purges a freed page a second after it emptied,
/// and only when the thread that owns it next allocates or frees. A node
/// that stops leading then keeps much of what its leader's work used: in a
/// 30-minute soak a deposed leader stayed about 10 MiB (15 %) above what it
/// held as a follower before. Purged at once, each node stays within a few
/// MiB of itself across leader changes (docs/performance.md). A purge is an
/// `madvise` of a whole emptied page, which the lock path rarely frees.
/// `MIMALLOC_PURGE_DELAY` in the environment still decides, when set.
pub fn return_freed_memory_at_once() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one process-wide integer option, which mimalloc
        // reads at each purge decision; no memory is touched.
        unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, 0) }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_option_set_is_the_purge_delay() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        // SAFETY: reads one integer option.
        let default = unsafe { libmimalloc_sys::mi_option_get(super::PURGE_DELAY) };
        // v3's default purge delay, in milliseconds (src/options.c); a
        // different number means the enum moved and 15 is another option.
        assert_eq!(default, 1000, "option 15 is not mimalloc's purge delay");
        super::return_freed_memory_at_once();
        // SAFETY: as above.
        assert_eq!(
            unsafe { libmimalloc_sys::mi_option_get(super::PURGE_DELAY) },
            0
        );
    }
}
