package plugin

import (
	"slices"
	"testing"
)

// A scheduling cycle and a duplicate pass decide about the same two jobs of one pod in either
// order; the pod keeps exactly one of them, the one it is (or is being) bound to.
func TestDuplicatesAndBindingAgree(t *testing.T) {
	t.Run("cycle first: the job it binds to is kept", func(t *testing.T) {
		p := &Plugin{lc: newLifecycle()}
		if !p.claimForBinding(21) {
			t.Fatal("claimForBinding(21) = false on a job nobody cancels")
		}
		keep, cancel := p.markDuplicates([]uint32{21, 51}, nil)
		if keep != 21 || !slices.Equal(cancel, []uint32{51}) {
			t.Fatalf("keep %d, cancel %v; want keep 21, cancel [51]", keep, cancel)
		}
	})
	t.Run("duplicate pass first: the cycle does not bind to the cancelled job", func(t *testing.T) {
		p := &Plugin{lc: newLifecycle()}
		keep, cancel := p.markDuplicates([]uint32{21, 51}, nil)
		if keep != 51 || !slices.Equal(cancel, []uint32{21}) {
			t.Fatalf("keep %d, cancel %v; want the newest kept", keep, cancel)
		}
		if p.claimForBinding(21) {
			t.Fatal("claimForBinding(21) = true for a job being cancelled")
		}
		if !p.claimForBinding(51) {
			t.Fatal("claimForBinding(51) = false for the kept job")
		}
		// The next pass, with the pod bound to 51, cancels nothing more.
		keep, cancel = p.markDuplicates([]uint32{21, 51}, map[uint32]bool{51: true})
		if keep != 51 || len(cancel) != 0 {
			t.Fatalf("second pass: keep %d, cancel %v; want keep 51, nothing new", keep, cancel)
		}
	})
	t.Run("a bound job wins over a claimed one", func(t *testing.T) {
		p := &Plugin{lc: newLifecycle()}
		p.claimForBinding(51)
		keep, cancel := p.markDuplicates([]uint32{21, 51}, map[uint32]bool{21: true})
		if keep != 21 || !slices.Equal(cancel, []uint32{51}) {
			t.Fatalf("keep %d, cancel %v; want keep 21 (bound)", keep, cancel)
		}
	})
}
