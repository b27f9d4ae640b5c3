package slurm

import "testing"

func TestNodeBusy(t *testing.T) {
	for _, c := range []struct {
		state []string
		alloc int
		busy  bool
	}{
		{[]string{"IDLE"}, 0, false},
		{[]string{"IDLE", "DRAIN"}, 0, false},
		{[]string{"DOWN", "NOT_RESPONDING"}, 0, false},
		{[]string{"FUTURE"}, 0, false},
		{[]string{"IDLE", "COMPLETING"}, 0, true},
		{[]string{"IDLE"}, 2, true},
		{[]string{"ALLOCATED"}, 4, true},
		{[]string{"MIXED", "DRAIN"}, 1, true},
		{[]string{"UNKNOWN"}, 0, true},
		{[]string{"SOMETHING_NEW"}, 0, true},
		{nil, 0, true},
	} {
		n := &Node{State: c.state, AllocCPUs: c.alloc}
		if got := n.Busy(); got != c.busy {
			t.Errorf("%v alloc %d: Busy() = %v, want %v", c.state, c.alloc, got, c.busy)
		}
	}
}
