//! The process's allocator: mimalloc, on small pages, told to give memory it
//! no longer uses back to the system at once.
//!
//! Both settings are made before mimalloc starts (it reads its options when
//! the process loads, and asks for huge pages on the memory it maps then),
//! and each yields to its `MIMALLOC_*` variable when the environment sets
//! one.

// glibc's malloc spent almost half of a restart's replay of a million-lock
// log in _int_malloc, malloc_consolidate and free (perf; the performance
// history in CHANGELOG.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` and `mi_option_allow_thp` of mimalloc v3's
/// `mi_option_e`, which libmimalloc-sys does not name. The tests below check
/// both numbers against what the options do.
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
const ALLOW_THP: libmimalloc_sys::mi_option_t = 43;

// A constructor of priority 100 runs before mimalloc's own (default priority
// under gcc, 101 under clang), so mimalloc starts with these options.
#[used]
#[link_section = ".init_array.00100"]
static CONFIGURE_BEFORE_MIMALLOC_STARTS: extern "C" fn() = configure;

/// Runs before `main` and before anything has allocated: it must not
/// allocate itself (`getenv`, not `std::env`), or mimalloc would start
/// first.
extern "C" fn configure() {
    // By default mimalloc v3 purges a freed page a second after it emptied,
    // and only when the thread that owns it next allocates or frees. A node
    // that stops leading then keeps much of what its leader's work used: in
    // a 30-minute soak a deposed leader stayed about 10 MiB (15 %) above
    // what it held as a follower before. A purge is an `madvise` of a whole
    // emptied page, which the lock path rarely frees.
    set_unless_in_environment(c"MIMALLOC_PURGE_DELAY", PURGE_DELAY, 0);
    // mimalloc asks for transparent huge pages on its arenas, so on a kernel
    // set to `madvise` (Debian's default) or `always` a node's heap sits in
    // 2 MiB pages that count resident in full however little of them is in
    // use, and khugepaged folds sparse runs into more of them as the process
    // runs. In two 10-minute soaks of the same load, nodes held 54–66 MiB
    // with huge pages (12–18 MiB of it in them when looked at) and moved by
    // up to 10 MiB between samples, and 36–44 MiB without them
    // (docs/performance.md). A lock server's heap is tens of MiB, too small
    // for fewer TLB misses to pay; Redis and MongoDB advise the same. With
    // the option off, mimalloc also sets `PR_SET_THP_DISABLE` for the process
    // as it starts.
    set_unless_in_environment(c"MIMALLOC_ALLOW_THP", ALLOW_THP, 0);
}

fn set_unless_in_environment(
    variable: &std::ffi::CStr,
    option: libmimalloc_sys::mi_option_t,
    value: std::os::raw::c_long,
) {
    // SAFETY: getenv reads the environment, which nothing writes this early
    // (no other thread exists yet); mi_option_set stores one integer in
    // mimalloc's static option table and touches no memory it manages.
    unsafe {
        if libc::getenv(variable.as_ptr()).is_null() {
            libmimalloc_sys::mi_option_set(option, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // This test binary has the allocator and its constructor too.

    #[test]
    fn freed_pages_are_purged_at_once_unless_the_environment_decides() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        // SAFETY: reads one integer option.
        assert_eq!(unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY) }, 0);
    }

    /// mimalloc reads `MIMALLOC_<NAME>` into the option of that name: a
    /// process started with distinct values shows which number each has.
    #[test]
    fn the_option_numbers_are_the_options_named() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "--ignored",
                "allocator::tests::options_as_read",
                "--nocapture",
            ])
            .env("MIMALLOC_PURGE_DELAY", "1234")
            .env("MIMALLOC_ALLOW_THP", "5")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("options 1234 5"), "{text}");
    }

    /// The child of the test above: prints what it reads, and asserts
    /// nothing itself.
    #[test]
    #[ignore = "run by the_option_numbers_are_the_options_named, in a child with the variables set"]
    fn options_as_read() {
        // SAFETY: reads two integer options.
        let (delay, thp) = unsafe {
            (
                libmimalloc_sys::mi_option_get(PURGE_DELAY),
                libmimalloc_sys::mi_option_get(ALLOW_THP),
            )
        };
        println!("options {delay} {thp}");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn huge_pages_are_off_from_the_start_unless_the_environment_decides() {
        if std::env::var_os("MIMALLOC_ALLOW_THP").is_some() {
            return;
        }
        // SAFETY: reads one integer option.
        assert_eq!(unsafe { libmimalloc_sys::mi_option_get(ALLOW_THP) }, 0);
        // Only mimalloc sets this flag, and only when the option it read as
        // it started was off: the number is the option, and it was set in
        // time.
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        assert!(status.contains("THP_enabled:\t0"), "{status}");
    }
}
