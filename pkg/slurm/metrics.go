package slurm

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts and times slurmrestd requests by cluster (Config.Cluster), endpoint
// ("GET /nodes/") and outcome. A process that serves several clusters calls Forget when one
// goes, so that its series do not outlive it.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// Outcomes of a request, the `outcome` label.
const (
	OutcomeOK           = "ok"
	OutcomeNotModified  = "not_modified"
	OutcomeNotFound     = "not_found"
	OutcomeUnauthorized = "unauthorized"
	OutcomeUnavailable  = "unavailable"
	OutcomeDecodeError  = "decode_error"
	OutcomeSlurmError   = "slurm_error"
	OutcomeCanceled     = "canceled"
	OutcomeUnsupported  = "unsupported"
	// OutcomeRetried: an answer that stands for "changed, ask again" (Slurm 24.11's HTTP 500
	// "Unable to query partitions" to an incremental node list), not an error.
	OutcomeRetried = "retried"
)

// NewMetrics creates the metrics and registers them on reg (when not nil).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sunk", Subsystem: "slurm_rest", Name: "requests_total",
			Help: "slurmrestd requests by cluster, endpoint and outcome.",
		}, []string{"cluster", "endpoint", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "sunk", Subsystem: "slurm_rest", Name: "request_duration_seconds",
			Help:    "slurmrestd request latency, including decoding, by cluster, endpoint and outcome.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"cluster", "endpoint", "outcome"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.latency} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *Metrics) observe(cluster, endpoint, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(cluster, endpoint, outcome).Inc()
	m.latency.WithLabelValues(cluster, endpoint, outcome).Observe(d.Seconds())
}

// Forget deletes every series of cluster.
func (m *Metrics) Forget(cluster string) {
	if m == nil {
		return
	}
	m.requests.DeletePartialMatch(prometheus.Labels{"cluster": cluster})
	m.latency.DeletePartialMatch(prometheus.Labels{"cluster": cluster})
}

func outcome(err error, status int) string {
	switch {
	case err == nil && status == http.StatusNotModified:
		return OutcomeNotModified
	case err == nil:
		return OutcomeOK
	case isPartitionsNoChange(err):
		return OutcomeRetried
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return OutcomeCanceled
	case errors.Is(err, ErrNotFound):
		return OutcomeNotFound
	case errors.Is(err, ErrUnauthorized):
		return OutcomeUnauthorized
	case errors.Is(err, ErrUnavailable):
		return OutcomeUnavailable
	case errors.Is(err, ErrDecode):
		return OutcomeDecodeError
	case errors.Is(err, ErrUnsupported), errors.Is(err, ErrVersionNotServed):
		return OutcomeUnsupported
	}
	return OutcomeSlurmError
}
