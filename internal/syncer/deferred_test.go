package syncer

import (
	"context"
	"testing"

	"k8s.io/client-go/util/workqueue"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
)

// TestSkippedSyncIsRequeued: a sync skipped while Slurm is unreadable is not lost, whether or
// not the health watch saw the unreadable spell: the next healthy check queues it again.
func TestSkippedSyncIsRequeued(t *testing.T) {
	f := slurmfake.New()
	f.AddNode(slurm.Node{Name: "a", State: []string{"IDLE"}})
	s := &Syncer{
		cfg:      Config{PollInterval: DefaultPollInterval, StaleAfter: DefaultPollInterval * 10},
		nodes:    slurm.NewNodeInformer(f, slurm.InformerOptions{}),
		queue:    workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		deferred: map[string]struct{}{},
		seen:     map[string]observed{},
	}
	defer s.queue.ShutDown()
	ctx := context.Background()
	// Never listed: unreadable. Both kinds of key are skipped and remembered.
	if err := s.sync(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.syncNode(ctx, "k8s-node"); err != nil {
		t.Fatal(err)
	}
	if s.queue.Len() != 0 {
		t.Fatalf("queue %d, want 0 while unreadable", s.queue.Len())
	}
	if _, err := s.nodes.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.slurmUnreadable(); err != nil {
		t.Fatalf("after a good list: %v", err)
	}
	s.requeueDeferred()
	got := map[string]bool{}
	for s.queue.Len() > 0 {
		k, _ := s.queue.Get()
		got[k] = true
		s.queue.Done(k)
	}
	if !got["a"] || !got[nodeKeyPrefix+"k8s-node"] || len(got) != 2 {
		t.Fatalf("requeued %v, want a and %sk8s-node", got, nodeKeyPrefix)
	}
	s.requeueDeferred()
	if s.queue.Len() != 0 {
		t.Fatalf("a second healthy check requeued %d keys again", s.queue.Len())
	}
}
