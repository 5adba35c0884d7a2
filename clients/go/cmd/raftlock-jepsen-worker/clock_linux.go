package main

import (
	"fmt"
	"syscall"
	"unsafe"
)

// clockMonotonic is CLOCK_MONOTONIC's id (linux/time.h).
const clockMonotonic = 1

// monotonicNs reads CLOCK_MONOTONIC, the clock the harness's --clock-base
// is on. Go's own monotonic readings count from the process's start, so
// they cannot be compared with the harness's; they are tied to this one
// reading instead.
func monotonicNs() (uint64, error) {
	var ts syscall.Timespec
	_, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0)
	if errno != 0 {
		return 0, fmt.Errorf("clock_gettime(CLOCK_MONOTONIC): %v", errno)
	}
	return uint64(ts.Sec)*1_000_000_000 + uint64(ts.Nsec), nil
}
