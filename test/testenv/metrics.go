package testenv

import (
	"io"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// SumMetric sums the values of a metric family's series in reg (counters and gauges), those
// with label k=v when k is set; 0 when there are none.
func SumMetric(reg prometheus.Gatherer, name, k, v string) float64 {
	sum := 0.0
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := k == ""
			for _, lp := range m.GetLabel() {
				match = match || (lp.GetName() == k && lp.GetValue() == v)
			}
			if match {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// CountingBody is a response body that adds every byte read from it to N: what a benchmark's
// transport wraps slurmrestd's answers in to count the bytes a client reads.
type CountingBody struct {
	io.ReadCloser
	N *atomic.Int64
}

func (c CountingBody) Read(p []byte) (int, error) {
	k, err := c.ReadCloser.Read(p)
	c.N.Add(int64(k))
	return k, err
}
