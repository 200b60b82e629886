//go:build !linux

package main

// stopWithGoRun watches go run's death on Linux only (PR_SET_PDEATHSIG).
func stopWithGoRun() {}
