package slurm

import "time"

// NewJobInformerAt is NewJobInformer on a clock of the test's.
func NewJobInformerAt(c Client, opts InformerOptions, now func() time.Time) *Informer[uint32, Job] {
	l := newJobLister(c, opts)
	l.now = now
	return newJobInformer(l, opts)
}
