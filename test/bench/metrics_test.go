package main

import (
	"os"
	"strings"
	"testing"
)

// The bench reads the operator's memory from /proc/PID/status: this
// process's own figures must come back, in bytes, and a field the kernel
// does not report must be an error that names it.
func TestStatusBytesReadsThisProcesssMemory(t *testing.T) {
	pid := os.Getpid()
	peak, err := peakRSS(pid)
	if err != nil || peak < 1<<20 {
		t.Fatalf("peak RSS %d, %v; want at least a MiB", peak, err)
	}
	file, err := fileRSS(pid)
	if err != nil || file == 0 || file > peak {
		t.Errorf("RssFile %d, %v; want some, and no more than the peak %d", file, err, peak)
	}
	if _, err := statusBytes(pid, "VmNothing"); err == nil || !strings.Contains(err.Error(), "VmNothing") {
		t.Errorf("an unknown field: %v", err)
	}
}
