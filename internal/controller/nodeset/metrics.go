package nodeset

import (
	"github.com/prometheus/client_golang/prometheus"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// Metrics are the autoscaler's figures per NodeSet (labels cluster = namespace/clusterRef,
// nodeset): what it read from Slurm's queue and what it decided, so that a dashboard shows
// why a NodeSet has its size and a KEDA or HPA user has a demand to scale something else on.
// A nil *Metrics records nothing.
type Metrics struct {
	pending, wanted, parked, busy, idle *prometheus.GaugeVec
	decisions                           *prometheus.CounterVec
}

// NewMetrics registers the NodeSet controller's metrics with reg (none when reg is nil).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "sunk", Subsystem: "nodeset", Name: name, Help: help}, []string{"cluster", "nodeset"})
	}
	m := &Metrics{
		pending: gauge("autoscaler_pending_nodes", "Nodes that pending jobs the NodeSet could run ask of it (split among the cluster's autoscaled NodeSets)."),
		busy:    gauge("autoscaler_busy_nodes", "Nodes of the NodeSet that run jobs (Slurm's ALLOCATED, MIXED or COMPLETING)."),
		idle:    gauge("autoscaler_idle_nodes", "Nodes of the NodeSet with a pod and no job, which go once idle for idleAfter."),
		wanted:  gauge("autoscaler_replicas", "The replicas the autoscaler last decided (spec.replicas)."),
		parked:  gauge("parked_nodes", "Slurm records of the NodeSet parked in state FUTURE without a pod."),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "sunk", Subsystem: "nodeset", Name: "autoscaler_decisions_total",
			Help: "Changes of spec.replicas by the autoscaler, by direction (up, down)."}, []string{"cluster", "nodeset", "direction"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.pending, m.wanted, m.parked, m.busy, m.idle, m.decisions} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func clusterLabel(ns *sunkv1.NodeSet) string { return ns.Namespace + "/" + ns.Spec.ClusterRef }

// reading is what one autoscale of a NodeSet read and decided, in nodes.
type reading struct{ pending, replicas, parked, busy, idle int32 }

// observe records one autoscale reading and its decision.
func (m *Metrics) observe(ns *sunkv1.NodeSet, r reading) {
	if m == nil {
		return
	}
	c := clusterLabel(ns)
	m.pending.WithLabelValues(c, ns.Name).Set(float64(r.pending))
	m.parked.WithLabelValues(c, ns.Name).Set(float64(r.parked))
	m.wanted.WithLabelValues(c, ns.Name).Set(float64(r.replicas))
	m.busy.WithLabelValues(c, ns.Name).Set(float64(r.busy))
	m.idle.WithLabelValues(c, ns.Name).Set(float64(r.idle))
}

func (m *Metrics) decided(ns *sunkv1.NodeSet, up bool) {
	if m == nil {
		return
	}
	dir := "down"
	if up {
		dir = "up"
	}
	m.decisions.WithLabelValues(clusterLabel(ns), ns.Name, dir).Inc()
}

// forget drops a NodeSet's series: it no longer autoscales, or is being deleted.
func (m *Metrics) forget(ns *sunkv1.NodeSet) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"cluster": clusterLabel(ns), "nodeset": ns.Name}
	m.pending.DeletePartialMatch(l)
	m.wanted.DeletePartialMatch(l)
	m.parked.DeletePartialMatch(l)
	m.busy.DeletePartialMatch(l)
	m.idle.DeletePartialMatch(l)
	m.decisions.DeletePartialMatch(l)
}
