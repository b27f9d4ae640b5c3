package syncer

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Directions of a sync, the `direction` label.
const (
	DirectionToSlurm = "k8s_to_slurm"
	DirectionToKube  = "slurm_to_k8s"
)

// Metrics of the syncer. A nil *Metrics records nothing. REST request counts and errors
// come from pkg/slurm's own metrics (sunk_slurm_rest_requests_total).
type Metrics struct {
	latency  *prometheus.HistogramVec
	drift    *prometheus.CounterVec
	errors   *prometheus.CounterVec
	readable *prometheus.GaugeVec
	held     *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them on reg (when not nil).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "sunk", Subsystem: "syncer", Name: "sync_latency_seconds",
			Help: "Time from observing a change on one side to the correction applied on the other, by direction.",
			// Fine between 0.5 s and 2.5 s, where the one- and two-second goals lie.
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, .75, 1, 1.5, 2, 2.5, 5, 10, 30},
		}, []string{"cluster", "direction"}),
		drift: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sunk", Subsystem: "syncer", Name: "drift_corrected_total",
			Help: "Corrections applied: drain, resume, remove (Slurm side), mirror (Kubernetes side).",
		}, []string{"cluster", "direction", "action"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sunk", Subsystem: "syncer", Name: "errors_total",
			Help: "Failed corrections by kind: slurm_write, kube_write.",
		}, []string{"cluster", "kind"}),
		readable: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "sunk", Subsystem: "syncer", Name: "slurm_state_readable",
			Help: "1 when the cluster's Slurm node state is readable and fresh; 0 while the syncer fails closed and changes nothing.",
		}, []string{"cluster"}),
		held: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sunk", Subsystem: "syncer", Name: "drains_held_total",
			Help: "Drains the drain budget held back, by cause: counted once each time a node is held.",
		}, []string{"cluster", "cause"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.latency, m.drift, m.errors, m.readable, m.held} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func clusterLabel(ns, name string) string { return ns + "/" + name }

func (m *Metrics) corrected(ns, cluster, direction, action string, since time.Time) {
	if m == nil {
		return
	}
	m.drift.WithLabelValues(clusterLabel(ns, cluster), direction, action).Inc()
	if !since.IsZero() {
		m.latency.WithLabelValues(clusterLabel(ns, cluster), direction).Observe(time.Since(since).Seconds())
	}
}

// The kinds of sunk_syncer_errors_total.
const (
	errKubeWrite  = "kube_write"
	errSlurmWrite = "slurm_write"
)

// begin makes a cluster's counters exist at zero, for every kind and cause they count, when its
// syncer starts: a counter that has never counted has no series, and a dashboard panel over it
// would read "no data" where it means "no errors".
func (m *Metrics) begin(ns, cluster string) {
	if m == nil {
		return
	}
	for _, kind := range []string{errKubeWrite, errSlurmWrite} {
		m.errors.WithLabelValues(clusterLabel(ns, cluster), kind)
	}
	for _, kind := range allCauseKinds {
		m.held.WithLabelValues(clusterLabel(ns, cluster), kind)
	}
}

func (m *Metrics) syncError(ns, cluster, kind string) {
	if m != nil {
		m.errors.WithLabelValues(clusterLabel(ns, cluster), kind).Inc()
	}
}

func (m *Metrics) setReadable(ns, cluster string, ok bool) {
	if m == nil {
		return
	}
	v := 0.0
	if ok {
		v = 1
	}
	m.readable.WithLabelValues(clusterLabel(ns, cluster)).Set(v)
}

// drainHeld counts a held drain by the kind of its cause: a label per free-text cordon reason
// would make a series per reason ever written.
func (m *Metrics) drainHeld(ns, cluster, cause string) {
	if m != nil {
		m.held.WithLabelValues(clusterLabel(ns, cluster), causeKind(cause)).Inc()
	}
}

// Forget deletes every series of a cluster, once it is gone.
func (m *Metrics) Forget(ns, cluster string) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"cluster": clusterLabel(ns, cluster)}
	m.latency.DeletePartialMatch(l)
	m.drift.DeletePartialMatch(l)
	m.errors.DeletePartialMatch(l)
	m.readable.DeletePartialMatch(l)
	m.held.DeletePartialMatch(l)
}
