//go:build !linux

package main

import "errors"

// monotonicNs: the harness runs on Linux only (iptables, SIGSTOP of its
// client processes), and its clock base is Linux's CLOCK_MONOTONIC.
func monotonicNs() (uint64, error) {
	return 0, errors.New("the harness's clock (CLOCK_MONOTONIC) is read on Linux only")
}
