package slurmcluster

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// Metrics exports every SlurmCluster's status conditions the way kube-state-metrics exports a
// Deployment's: sunk_slurmcluster_condition{cluster, type, status, reason} is 1 for each
// condition of each cluster, as the reconciler last wrote them. The state lives in conditions
// alone, and an alert on a failover or a refused configuration needs it as a series.
//
// A Collector rather than a GaugeVec: a condition's status or reason changing replaces its
// series, and a GaugeVec would have to delete the old series and set the new in two steps, so
// a scrape in between could see the cluster without the condition and reset an alert's `for`.
// Here each cluster's conditions are swapped whole under a lock.
//
// `cluster` is the SlurmCluster's namespace/name, like every sunk_* and slurm_* series: a
// label named namespace would collide with the one the Prometheus Operator gives each target
// (the operator's pod's namespace), which then renames it exported_namespace.
//
// A nil *Metrics records nothing.
type Metrics struct {
	desc *prometheus.Desc
	// The login pools (loginpools.go): per cluster and pool, the Ready pods, and for a PerUser
	// pool the members with a pod and the users leaving, from status.loginPools.
	poolUsers, poolLeaving, poolReady *prometheus.Desc

	mu       sync.Mutex
	clusters map[types.NamespacedName][]conditionLabels
	pools    map[types.NamespacedName][]sunkv1.LoginPoolStatus
}

// conditionLabels are the labels of one condition's series: the message, which changes with
// every observation, is not one.
type conditionLabels struct{ typ, status, reason string }

// NewMetrics registers the SlurmCluster controller's metrics with reg (none when reg is nil).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		desc: prometheus.NewDesc("sunk_slurmcluster_condition",
			"1 for each status condition of each SlurmCluster, with its type, status and reason, as the operator last wrote them.",
			[]string{"cluster", "type", "status", "reason"}, nil),
		poolUsers: prometheus.NewDesc("sunk_login_pool_users",
			"Members of a PerUser login pool's directory group who have a login pod.", []string{"cluster", "pool"}, nil),
		poolLeaving: prometheus.NewDesc("sunk_login_pool_leaving",
			"Users who left a PerUser login pool's group and whose pods wait out the grace period.", []string{"cluster", "pool"}, nil),
		poolReady: prometheus.NewDesc("sunk_login_pool_ready_pods",
			"Ready login pods of a login pool.", []string{"cluster", "pool"}, nil),
		clusters: map[types.NamespacedName][]conditionLabels{},
		pools:    map[types.NamespacedName][]sunkv1.LoginPoolStatus{},
	}
	if reg != nil {
		if err := reg.Register(m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.desc
	ch <- m.poolUsers
	ch <- m.poolLeaving
	ch <- m.poolReady
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, conds := range m.clusters {
		for _, c := range conds {
			ch <- prometheus.MustNewConstMetric(m.desc, prometheus.GaugeValue, 1, key.String(), c.typ, c.status, c.reason)
		}
	}
	for key, pools := range m.pools {
		for _, p := range pools {
			ch <- prometheus.MustNewConstMetric(m.poolReady, prometheus.GaugeValue, float64(p.Ready), key.String(), p.Name)
			if p.Type == sunkv1.LoginPoolGroup {
				continue // its members are the directory's to count
			}
			ch <- prometheus.MustNewConstMetric(m.poolUsers, prometheus.GaugeValue, float64(len(p.Users)), key.String(), p.Name)
			ch <- prometheus.MustNewConstMetric(m.poolLeaving, prometheus.GaugeValue, float64(len(p.Leaving)), key.String(), p.Name)
		}
	}
}

// observePools replaces a cluster's login pool series with its pools now.
func (m *Metrics) observePools(key types.NamespacedName, pools []sunkv1.LoginPoolStatus) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(pools) == 0 {
		delete(m.pools, key)
		return
	}
	m.pools[key] = pools
}

// observe replaces a cluster's series with its conditions now.
func (m *Metrics) observe(key types.NamespacedName, conditions []metav1.Condition) {
	if m == nil {
		return
	}
	labels := make([]conditionLabels, 0, len(conditions))
	seen := map[string]bool{}
	for _, c := range conditions {
		// A type twice (a status written by hand) would be one series twice, which fails the
		// whole scrape; the first is the one meta.FindStatusCondition reads.
		if seen[c.Type] {
			continue
		}
		seen[c.Type] = true
		labels = append(labels, conditionLabels{c.Type, string(c.Status), c.Reason})
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.clusters[key] = labels
}

// forget drops a deleted cluster's series.
func (m *Metrics) forget(key types.NamespacedName) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.clusters, key)
	delete(m.pools, key)
}
