package composite

import "testing"

func TestForeachSummary(t *testing.T) {
	cases := []struct {
		name string
		st   foreachState
		ran  int64
		want string
	}{
		{"all ran", foreachState{total: 5, next: 5}, 5, "foreach of 5 iterations"},
		{"a restart kept some", foreachState{total: 5, next: 5, keep: true}, 2, "foreach of 5 iterations (3 kept from earlier runs)"},
		{"failed early, never launched", foreachState{total: 10, next: 4}, 4, "foreach of 10 iterations (6 not launched)"},
		{"restart failed early", foreachState{total: 10, next: 6, keep: true}, 2,
			"foreach of 10 iterations (4 kept from earlier runs, 4 not launched)"},
	}
	for _, c := range cases {
		if got := foreachSummary(c.st, c.ran); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
