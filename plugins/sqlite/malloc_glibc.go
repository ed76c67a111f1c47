//go:build linux && cgo

package sqlite

/*
#include <malloc.h>

// M_TRIM_THRESHOLD is glibc's; where the C library lacks it (musl) there
// is nothing to set.
static void memhost_set_trim_threshold(int bytes) {
#ifdef M_TRIM_THRESHOLD
	mallopt(M_TRIM_THRESHOLD, bytes);
#endif
}
*/
import "C"

// trimThreshold is how much free memory at the top of a C heap the
// allocator keeps rather than gives back to the OS. SQLite runs on
// whichever thread Go lends it, so its allocations spread over glibc's
// per-thread arenas, and glibc's default (128 KiB, adapting only to
// allocations past its mmap threshold) handed each arena's top back after
// a write's buffers were freed, to fault it in again on the next write: a
// tenth of the plugin's CPU per turn went to that churn (sysmalloc's page
// faults and madvise). A few MiB per arena is kept instead, bounded by
// what the arena once held.
const trimThreshold = 8 << 20

func init() {
	C.memhost_set_trim_threshold(trimThreshold)
}
