// Package score keeps the host's arithmetic on plugin scores finite.
//
// A provider may answer any finite score (sdk/host refuses only NaN and
// the infinities), so a score near float64's top that the host scales,
// boosts or shifts can overflow. An infinite score then breaks every
// answer that carries it: encoding/json refuses it, so a recall could not
// be answered at all.
package score

import "math"

// Bound answers s held to the finite range: an overflow saturates at the
// largest float64 of its sign. NaN, which only a score that was already
// not a number gives, is left for the ranking to place last as before.
func Bound(s float64) float64 {
	switch {
	case s > math.MaxFloat64:
		return math.MaxFloat64
	case s < -math.MaxFloat64:
		return -math.MaxFloat64
	}
	return s
}
