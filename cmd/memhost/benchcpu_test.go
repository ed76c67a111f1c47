package main

import (
	"testing"
	"time"
)

func TestStatCPU(t *testing.T) {
	for _, tc := range []struct {
		name, stat string
		want       time.Duration
	}{
		{"plain", "4242 (memhost) S 1 4242 4242 0 -1 4194560 900 0 0 0 150 25 0 0 20 0 9 0 100 0 0", 175 * clockTick},
		// A name with spaces and a parenthesis must not shift the fields.
		{"odd name", "7 (a) b (c) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 1 0 0", 7 * clockTick},
		{"truncated", "7 (a) R 1 7", 0},
		{"no name", "garbage", 0},
	} {
		if got := statCPU([]byte(tc.stat)); got != tc.want {
			t.Errorf("%s: statCPU = %v, want %v", tc.name, got, tc.want)
		}
	}
}
