// Reading a cluster's Slurm jobs: from the process's one cache of them per cluster, a job
// informer polling incrementally on the cluster's client, so that every autoscaled NodeSet of
// the cluster shares one read of the queue instead of making a full list each.

package slurmconn

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/slurm"
)

const (
	// DefaultJobPollInterval is how often a job cache polls: the NodeSet controller's requeue
	// of an autoscaled NodeSet, which reads it (so a reader sees a queue at most about one of
	// its own intervals old).
	DefaultJobPollInterval = 5 * time.Second
	// jobCacheIdlePolls: a cache nobody read for so many intervals stops (the cluster's last
	// autoscaled NodeSet went, or stopped autoscaling); the next read starts one afresh.
	jobCacheIdlePolls = 12
	// jobCacheStalePolls: a cache whose last good poll is older than so many intervals and
	// the request timeout is unreadable. A healthy one is one interval and one poll old at
	// most, and a poll's full list may take up to the timeout.
	jobCacheStalePolls = 3
)

// jobCache is a cluster's job informer and the goroutine that polls it.
type jobCache struct {
	inf   *slurm.Informer[uint32, slurm.Job]
	first chan struct{} // closed once the first poll is done, good or bad
	done  chan struct{} // closed once the cache polls no more
	stop  context.CancelFunc
	// read is when Jobs last asked (unix nanoseconds of the pool's clock).
	read atomic.Int64
}

// Jobs is the cluster's job table, from the pool's one job cache of the cluster: the first
// read starts it on the client For or ForKeys last made for the cluster (call one first, as a
// reconcile does for its other requests, so that the Secret and the Service are read once)
// and waits, within ctx, for its first list; it polls every Options.JobCache.Interval at what changed costs (see
// slurm.NewJobInformer: a job's state as of the last poll, its other fields as of the last
// full list), so that all of a cluster's readers cost slurmctld one incremental poll per
// interval. It stops when the cluster's client is rebuilt or forgotten, or nobody read it
// for jobCacheIdlePolls intervals.
//
// It fails closed: a cache whose first list has not succeeded, whose last poll failed, or
// whose last good poll is older than jobCacheStalePolls intervals plus the request timeout
// is an error naming which, never an empty or stale table. The jobs share their slices
// (State...) with the cache: read them, clone to change.
func (p *Pool) Jobs(ctx context.Context, n clusternames.Names) ([]slurm.Job, error) {
	k := Key(n)
	jc, err := p.jobCache(k)
	if err != nil {
		return nil, err
	}
	select {
	case <-jc.first:
	case <-ctx.Done():
		return nil, fmt.Errorf("slurm job cache of %s: waiting for its first list: %w", k, ctx.Err())
	}
	now := p.now()
	if !jc.inf.HasSynced() {
		if err := jc.inf.LastError(); err != nil {
			return nil, fmt.Errorf("slurm job cache of %s: no list has succeeded yet: %w", k, err)
		}
		return nil, fmt.Errorf("slurm job cache of %s: no list has succeeded yet", k)
	}
	age := now.Sub(jc.inf.LastSuccess()).Round(time.Second)
	if err := jc.inf.LastError(); err != nil {
		return nil, fmt.Errorf("slurm job cache of %s: last list failed (the last good one %s ago): %w", k, age, err)
	}
	if bound := p.jobStaleAfter(); age > bound {
		return nil, fmt.Errorf("slurm job cache of %s: last list succeeded %s ago, more than %s", k, age, bound)
	}
	return jc.inf.List(), nil
}

// jobStaleAfter bounds the age of a readable job cache.
func (p *Pool) jobStaleAfter() time.Duration {
	return jobCacheStalePolls*max(p.opts.JobCache.Interval, slurm.MinPollInterval) + p.opts.Timeout
}

// jobCache returns the job cache of the cluster's current client, started if it has none or
// its cache stopped. A client replaced since the caller's For is replaced by a newer one, whose
// cache is the right one to read.
func (p *Pool) jobCache(k types.NamespacedName) (*jobCache, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.conns[k]
	if c == nil {
		return nil, fmt.Errorf("slurm job cache of %s: the cluster has no client (For comes first)", k)
	}
	if c.jobs == nil || c.jobs.stopped() {
		c.jobs = p.startJobCache(c.client)
	}
	c.jobs.read.Store(p.now().UnixNano())
	return c.jobs, nil
}

// startJobCache starts a job cache on cl. It outlives the reconcile that started it: it stops
// with cl (conn.close), or by itself when nobody reads it.
func (p *Pool) startJobCache(cl slurm.Client) *jobCache {
	ctx, stop := context.WithCancel(context.Background())
	jc := &jobCache{inf: slurm.NewJobInformer(cl, p.opts.JobCache), first: make(chan struct{}), done: make(chan struct{}), stop: stop}
	jc.read.Store(p.now().UnixNano())
	go jc.run(ctx, p.now)
	return jc
}

// run makes the first list at once (readers wait for it), then polls until ctx ends or nobody
// read the cache for jobCacheIdlePolls intervals.
func (jc *jobCache) run(ctx context.Context, now func() time.Time) {
	defer close(jc.done)
	defer jc.stop()
	_, _ = jc.inf.Poll(ctx)
	close(jc.first)
	interval := jc.inf.Interval()
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval): // the first list was just made
		}
		_ = jc.inf.Run(ctx)
	}()
	idle := time.NewTicker(interval)
	defer idle.Stop()
	for {
		select {
		case <-polled:
			return
		case <-idle.C:
			if now().Sub(time.Unix(0, jc.read.Load())) > jobCacheIdlePolls*interval {
				jc.stop()
				<-polled
				return
			}
		}
	}
}

// stopped reports whether the cache polls no more.
func (jc *jobCache) stopped() bool {
	select {
	case <-jc.done:
		return true
	default:
		return false
	}
}
