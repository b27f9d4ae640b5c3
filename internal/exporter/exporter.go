// Package exporter is sunk's Slurm exporter: a prometheus.Collector that reports the state of
// every Slurm cluster it is given (nodes by state and partition, CPUs, memory and GPUs per node
// and partition, jobs by state and partition, pending reasons, slurmctld's scheduler and
// backfill statistics) from one snapshot per cluster and interval.
//
// A scrape never reaches Slurm. Refresh, run every Interval by Run, reads each cluster once:
// its nodes (from a node cache someone else polls, such as the syncer's Informer, or from an
// Informer of the exporter's own: one small 304 answer when nothing changed), its jobs (an
// Informer: a 304 when nothing changed), its partitions and GET /diag/. It turns the answers
// into metrics right away; Collect only replays them. So N scrapes cost Slurm what one
// interval costs, whatever N is.
//
// A failed read changes nothing it read before: slurm_up turns 0 at once, the failure is
// counted, and the values of the last good read are served until they are older than
// StaleAfter, then dropped (Prometheus marks dropped series stale). A cluster that leaves the
// target list takes every series with it. Names and labels follow docs/monitoring.md, where
// every metric is described.
package exporter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sunk.dev/sunk/pkg/slurm"
)

// NodeSource is a node cache polled by someone else; *slurm.Informer[string, slurm.Node]
// is one.
type NodeSource interface {
	List() []slurm.Node
	LastError() error
	LastSuccess() time.Time
}

// PodInfo is what Kubernetes knows of a Slurm node: its compute pod's NodeSet and the
// Kubernetes node the pod runs on.
type PodInfo struct {
	NodeSet  string
	KubeNode string
}

// Target is one Slurm cluster to export.
type Target struct {
	// Name is the `cluster` label: the SlurmCluster's namespace/name.
	Name string
	// Slurm is the cluster's one REST client (slurmconn.Pool's in sunk-syncer).
	Slurm slurm.Client
	// Nodes is a node cache polled by someone else, which then costs the exporter no
	// request; nil: the exporter polls an Informer of its own through Slurm.
	Nodes NodeSource
	// Pods maps Slurm node names to their compute pods, read once per refresh (nil: no
	// Kubernetes join; an error leaves the join empty for that refresh).
	Pods func(ctx context.Context) (map[string]PodInfo, error)
}

// Options configure an Exporter.
type Options struct {
	// Interval between refreshes (default DefaultInterval).
	Interval time.Duration
	// StaleAfter: values of a read older than this are no longer served (default 3 intervals).
	StaleAfter time.Duration
	// Timeout of one refresh of one cluster (default Interval).
	Timeout time.Duration
	// UserSeries adds per-user and per-account job series (one series per user or account
	// and state: mind the cardinality).
	UserSeries bool
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// DefaultInterval is Options.Interval's default.
const DefaultInterval = 30 * time.Second

// Parts of a snapshot, the `part` label of the exporter's own metrics.
const (
	PartNodes      = "nodes"
	PartJobs       = "jobs"
	PartPartitions = "partitions"
	PartDiag       = "diag"
)

var parts = []string{PartNodes, PartJobs, PartPartitions, PartDiag}

// Exporter exports the Slurm clusters its targets function returns. The zero value is not
// usable; use New.
type Exporter struct {
	opts    Options
	targets func() []Target

	refreshMu sync.Mutex // one refresh at a time
	mu        sync.Mutex
	clusters  map[string]*cluster
}

// cluster is what the exporter keeps of one target between refreshes.
type cluster struct {
	client slurm.Client
	nodes  *slurm.Informer[string, slurm.Node] // own node Informer, when the target has no Nodes
	jobs   *slurm.Informer[uint32, slurm.Job]

	refreshed bool // a refresh has completed: until then the cluster has no series
	up        bool
	duration  time.Duration
	errors    map[string]float64   // by part
	success   map[string]time.Time // last good read, by part
	metrics   map[string][]prometheus.Metric
}

// New returns an Exporter of the clusters targets lists; it is called once per refresh.
func New(targets func() []Target, opts Options) *Exporter {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.StaleAfter <= 0 {
		opts.StaleAfter = 3 * opts.Interval
	}
	if opts.Timeout <= 0 {
		opts.Timeout = opts.Interval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Exporter{opts: opts, targets: targets, clusters: map[string]*cluster{}}
}

// Run refreshes at once and then every Interval until ctx ends; it returns nil then.
func (e *Exporter) Run(ctx context.Context) error {
	t := time.NewTicker(e.opts.Interval)
	defer t.Stop()
	for {
		e.Refresh(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Refresh reads every target once, in parallel, and replaces the snapshot. Clusters no longer
// among the targets are forgotten with their series.
func (e *Exporter) Refresh(ctx context.Context) {
	e.refreshMu.Lock()
	defer e.refreshMu.Unlock()
	targets := e.targets()
	want := make(map[string]bool, len(targets))
	var wg sync.WaitGroup
	for _, t := range targets {
		if want[t.Name] || t.Slurm == nil {
			continue
		}
		want[t.Name] = true
		c := e.clusterFor(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
			defer cancel()
			e.refresh(cctx, t, c)
		}()
	}
	wg.Wait()
	e.mu.Lock()
	for name := range e.clusters {
		if !want[name] {
			delete(e.clusters, name)
		}
	}
	e.mu.Unlock()
}

// clusterFor returns the kept state of t, made anew when t is new or its client changed
// (the informers list through the client).
func (e *Exporter) clusterFor(t Target) *cluster {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.clusters[t.Name]
	if c == nil || c.client != t.Slurm {
		old := c
		c = &cluster{client: t.Slurm, errors: map[string]float64{}, success: map[string]time.Time{},
			metrics: map[string][]prometheus.Metric{},
			jobs:    slurm.NewJobInformer(t.Slurm, slurm.InformerOptions{Interval: e.opts.Interval})}
		if old != nil { // a new client (endpoint or key changed) is the same cluster
			c.errors, c.success, c.metrics = old.errors, old.success, old.metrics
			c.refreshed, c.up, c.duration = old.refreshed, old.up, old.duration
		}
		e.clusters[t.Name] = c
	}
	if t.Nodes == nil && c.nodes == nil {
		c.nodes = slurm.NewNodeInformer(t.Slurm, slurm.InformerOptions{Interval: e.opts.Interval})
	}
	return c
}

// refresh reads one cluster and stores what it read. Only this refresh (under refreshMu)
// touches c's informers; the snapshot fields are written under e.mu.
func (e *Exporter) refresh(ctx context.Context, t Target, c *cluster) {
	start := e.opts.Now()
	errs := map[string]error{}
	var nodes []slurm.Node
	src := t.Nodes
	if src == nil {
		_, errs[PartNodes] = c.nodes.Poll(ctx)
		src = c.nodes
	} else if err := src.LastError(); err != nil {
		errs[PartNodes] = err
	} else if age := start.Sub(src.LastSuccess()); age > e.opts.StaleAfter {
		errs[PartNodes] = fmt.Errorf("the node cache was last read %s ago", age.Round(time.Second))
	}
	if errs[PartNodes] == nil {
		nodes = src.List()
	}
	_, errs[PartJobs] = c.jobs.Poll(ctx)
	partitions, perr := t.Slurm.ListPartitions(ctx)
	errs[PartPartitions] = perr
	diag, derr := t.Slurm.Diag(ctx)
	errs[PartDiag] = derr
	var pods map[string]PodInfo
	if t.Pods != nil && errs[PartNodes] == nil {
		pods, _ = t.Pods(ctx) // no join is better than no nodes
	}

	built := map[string][]prometheus.Metric{}
	if errs[PartNodes] == nil {
		built[PartNodes] = nodeMetrics(t.Name, nodes, pods)
	}
	if errs[PartJobs] == nil {
		built[PartJobs] = jobMetrics(t.Name, c.jobs.List(), e.opts.UserSeries)
	}
	if errs[PartPartitions] == nil {
		built[PartPartitions] = partitionMetrics(t.Name, partitions)
	}
	if errs[PartDiag] == nil {
		built[PartDiag] = diagMetrics(t.Name, diag)
	}
	end := e.opts.Now()

	e.mu.Lock()
	defer e.mu.Unlock()
	c.refreshed, c.up, c.duration = true, true, end.Sub(start)
	for _, p := range parts {
		if errs[p] != nil {
			c.up = false
			c.errors[p]++
			continue
		}
		c.success[p] = end
		c.metrics[p] = built[p]
	}
}

// Err reports the last refresh's failure of cluster (nil when it read everything; an
// error when the cluster is unknown).
func (e *Exporter) Err(cluster string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.clusters[cluster]
	if !ok {
		return fmt.Errorf("exporter: no cluster %q", cluster)
	}
	if !c.up {
		return errors.New("exporter: the last refresh failed to read some of Slurm's state")
	}
	return nil
}

// Describe sends every descriptor the exporter may collect.
func (e *Exporter) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

// Collect sends the snapshot: nothing here reads Slurm.
func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.opts.Now()
	for name, c := range e.clusters {
		if !c.refreshed {
			continue // a scrape during the first refresh: no slurm_up 0 before any read
		}
		cl := label(name)
		ch <- gauge(descUp, boolf(c.up), cl)
		ch <- gauge(descCollectDuration, c.duration.Seconds(), cl)
		for _, p := range parts {
			ch <- prometheus.MustNewConstMetric(descCollectErrors, prometheus.CounterValue, c.errors[p], cl, p)
			at, ok := c.success[p]
			if !ok {
				continue
			}
			ch <- gauge(descLastSuccess, unix(at), cl, p)
			if now.Sub(at) > e.opts.StaleAfter {
				continue
			}
			for _, m := range c.metrics[p] {
				ch <- m
			}
		}
	}
}

var _ prometheus.Collector = (*Exporter)(nil)
