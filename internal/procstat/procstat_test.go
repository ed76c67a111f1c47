package procstat

import (
	"os"
	"runtime"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		name, stat string
		want       time.Duration
		ok         bool
	}{
		{"plain", "4242 (memhost) S 1 4242 4242 0 -1 4194560 900 0 0 0 150 25 0 0 20 0 9 0 100 0 0", 175 * ClockTick, true},
		// A name with spaces and a parenthesis must not shift the fields.
		{"odd name", "7 (a) b (c) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 1 0 0", 7 * ClockTick, true},
		{"truncated", "7 (a) R 1 7", 0, false},
		{"no name", "garbage", 0, false},
		{"not a number", "7 (a) R 1 7 7 0 -1 0 0 0 0 0 x 4 0", 0, false},
		{"negative", "7 (a) R 1 7 7 0 -1 0 0 0 0 0 -3 4 0", 0, false},
		{"overflows a duration", "7 (a) R 1 7 7 0 -1 0 0 0 0 0 9223372036854775807 4 0", 0, false},
	} {
		got, ok := parseStat([]byte(tc.stat))
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: parseStat = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseStatus(t *testing.T) {
	for _, tc := range []struct {
		name, status string
		want         int64
		ok           bool
	}{
		{"plain", "Name:\tmemhost\nVmPeak:\t  9000 kB\nVmRSS:\t    5120 kB\nThreads:\t9\n", 5120 << 10, true},
		{"last line", "Name:\tx\nVmRSS:\t12 kB", 12 << 10, true},
		{"kernel thread: no VmRSS", "Name:\tkthreadd\nThreads:\t1\n", 0, false},
		{"not a number", "VmRSS:\tlots kB\n", 0, false},
		{"negative", "VmRSS:\t-5 kB\n", 0, false},
		{"overflows", "VmRSS:\t9223372036854775807 kB\n", 0, false},
	} {
		got, ok := parseStatus([]byte(tc.status))
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: parseStatus = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// TestThisProcess reads this test's own process, which /proc always has
// on Linux (the only system these readings are for).
func TestThisProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		if _, ok := Resident(os.Getpid()); ok {
			t.Fatal("a reading answered off Linux")
		}
		return
	}
	if rss, ok := Resident(os.Getpid()); !ok || rss < 1<<20 {
		t.Errorf("Resident(self) = %d, %v; want a megabyte or more", rss, ok)
	}
	// Spend CPU until the reading shows a clock tick. Wall time is no
	// measure of it: a loaded machine may run this process for less than
	// a tick in 50 ms (a loaded make test did), so the bound is generous.
	var cpu time.Duration
	ok := true
	for end := time.Now().Add(30 * time.Second); ok && cpu <= 0 && time.Now().Before(end); {
		for spin := time.Now().Add(5 * time.Millisecond); time.Now().Before(spin); {
		}
		cpu, ok = CPU(os.Getpid())
	}
	if !ok || cpu <= 0 {
		t.Errorf("CPU(self) = %v, %v; want above 0 after spending CPU for 30 s", cpu, ok)
	}
	if _, ok := CPU(-1); ok {
		t.Error("CPU(-1) answered")
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("4242 (memhost) S 1 4242 4242 0 -1 4194560 900 0 0 0 150 25 0 0 20 0 9 0 100 0 0"))
	f.Add([]byte("7 (a) b (c) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 1 0 0"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if d, ok := parseStat(data); d < 0 || (!ok && d != 0) {
			t.Fatalf("parseStat = %v, %v", d, ok)
		}
	})
}

func FuzzParseStatus(f *testing.F) {
	f.Add([]byte("Name:\tmemhost\nVmRSS:\t    5120 kB\n"))
	f.Add([]byte("VmRSS:\t-5 kB"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if n, ok := parseStatus(data); n < 0 || (!ok && n != 0) {
			t.Fatalf("parseStatus = %v, %v", n, ok)
		}
	})
}
