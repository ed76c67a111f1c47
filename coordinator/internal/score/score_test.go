package score

import (
	"math"
	"testing"
)

func TestBoundSaturates(t *testing.T) {
	huge := 1.7e308
	for _, c := range []struct{ in, want float64 }{
		{1.5, 1.5},
		{-2, -2},
		{0, 0},
		{huge * 2, math.MaxFloat64},
		{-huge * 2, -math.MaxFloat64},
	} {
		if got := Bound(c.in); got != c.want {
			t.Errorf("Bound(%g) = %g, want %g", c.in, got, c.want)
		}
	}
}
