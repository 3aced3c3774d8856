package composite

import (
	"slices"
	"testing"
)

// TestEvenSlicesSplitsIntoFewestEvenSlices: every iteration lands in
// exactly one slice, in order, in the fewest slices of at most the limit,
// whose sizes differ by at most one.
func TestEvenSlicesSplitsIntoFewestEvenSlices(t *testing.T) {
	for _, n := range []int{1, 99, 100, 101, 199, 200, 201, 250, 399, 400} {
		iters := make([]int64, n)
		for i := range iters {
			iters[i] = int64(i + 1)
		}
		parts := evenSlices(iters, 100)
		if want := (n + 99) / 100; len(parts) != want {
			t.Fatalf("%d iterations: %d slices, want %d", n, len(parts), want)
		}
		lo, hi := n, 0
		var joined []int64
		for _, p := range parts {
			lo, hi = min(lo, len(p)), max(hi, len(p))
			joined = append(joined, p...)
		}
		if hi > 100 || hi-lo > 1 {
			t.Errorf("%d iterations: slices of %d to %d", n, lo, hi)
		}
		if !slices.Equal(joined, iters) {
			t.Errorf("%d iterations: slices joined are %v", n, joined)
		}
	}
}
