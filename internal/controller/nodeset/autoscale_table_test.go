package nodeset

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/slurmconn"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
	"sunk.dev/sunk/pkg/wellknown"
)

// listCounter is a fake slurmrestd that counts whole node lists (GET /nodes/ without
// update_time) apart from the lists with update_time.
type listCounter struct {
	*slurmfake.Fake
	mu          sync.Mutex
	whole, incr int
}

func (l *listCounter) ListNodes(ctx context.Context, since time.Time) (*slurm.NodeList, error) {
	l.mu.Lock()
	if since.IsZero() {
		l.whole++
	} else {
		l.incr++
	}
	l.mu.Unlock()
	return l.Fake.ListNodes(ctx, since)
}

func (l *listCounter) lists() (whole, incr int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.whole, l.incr
}

// An autoscaled NodeSet reads the cluster's one node table, as the rest of the reconcile does,
// not a whole node list of its own at every reconcile: without node watchers that table costs
// one whole list once, then one list with update_time per read, answered "not modified" while
// nothing changed. Its steady state thus does not grow with the node count.
func TestAutoscaleReadsTheSharedNodeTable(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = sunkv1.AddToScheme(scheme)
	sc := &sunkv1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "slurm"}}
	names := clusternames.For(sc, "")
	names.TLS = false // plain HTTP to the fake: no CA to read
	ns := &sunkv1.NodeSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cpu"},
		Spec: sunkv1.NodeSetSpec{ClusterRef: "slurm", Mode: sunkv1.NodeSetReplicas, Replicas: ptr.To(int32(0)),
			Autoscaling: &sunkv1.NodeSetAutoscaling{MaxReplicas: 2}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(ns,
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: names.RestAPI}, Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.1"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: names.JWTSecret}, Data: map[string][]byte{wellknown.SecretJWTKey: []byte("key")}},
	).Build()

	sl := &listCounter{Fake: slurmfake.New()}
	comment := wellknown.ParkedPrefix + current
	for _, name := range []string{"cpu-0", "cpu-1"} {
		sl.AddNode(slurm.Node{Name: name, State: []string{"FUTURE", "DYNAMIC_FUTURE"}, Features: []string{"cpu"}, Comment: comment})
	}
	pool := slurmconn.New(slurmconn.Options{Reader: c, Factory: func(string, slurmconn.Keys, *http.Client) (slurm.Client, error) { return sl, nil }})
	t.Cleanup(func() { pool.Forget(slurmconn.Key(names)) })
	r := &Reconciler{Client: c, Scheme: scheme, Slurm: pool}

	const reconciles = 5
	for i := range reconciles {
		w := &world{ns: ns.DeepCopy(), sc: sc, names: names, hash: current, order: replicasOrder(ns.Name)}
		st := newStatus(w.ns)
		if err := r.autoscale(ctx, w, st); err != nil {
			t.Fatal(err)
		}
		if w.autoscaleErr != nil {
			t.Fatalf("reconcile %d: %v", i, w.autoscaleErr)
		}
		if !w.slurmNodesRead || len(w.slurmNodes) != 2 || st.counts.Parked != 2 {
			t.Fatalf("reconcile %d: read %v %d nodes, %d parked; want the 2 parked records", i, w.slurmNodesRead, len(w.slurmNodes), st.counts.Parked)
		}
		// The members step reads no table of its own: the autoscaler's is this reconcile's.
		r.readSlurm(ctx, w)
		if w.slurmErr != nil {
			t.Fatal(w.slurmErr)
		}
	}
	if whole, incr := sl.lists(); whole != 1 || incr != reconciles-1 {
		t.Errorf("%d reconciles made %d whole node lists and %d with update_time; want 1 whole list, then %d with update_time",
			reconciles, whole, incr, reconciles-1)
	}

	// Fail closed: a table that cannot be read changes nothing and says why.
	sl.SetError("ListNodes", slurm.ErrUnavailable)
	w := &world{ns: ns.DeepCopy(), sc: sc, names: names, hash: current, order: replicasOrder(ns.Name)}
	if err := r.autoscale(ctx, w, newStatus(w.ns)); err != nil {
		t.Fatal(err)
	}
	if w.autoscaleErr == nil || w.slurmNodesRead {
		t.Errorf("an unreadable table: autoscaleErr %v, read %v; want an error and no table", w.autoscaleErr, w.slurmNodesRead)
	}
}

// unpark removes a parked record only when a fresh read of it still says parked and unwanted:
// the table it starts from may be the node watchers' cache, a poll behind Slurm. A record a
// pod took up since (registered, no longer FUTURE) stays; so does one parked again with the
// current template (and counts); one gone already is not removed twice.
func TestUnparkReadsTheRecordBeforeRemovingIt(t *testing.T) {
	ctx := context.Background()
	ns := &sunkv1.NodeSet{ObjectMeta: metav1.ObjectMeta{Name: "cpu"},
		Spec: sunkv1.NodeSetSpec{Autoscaling: &sunkv1.NodeSetAutoscaling{MaxReplicas: 4}}}
	older := wellknown.ParkedPrefix + "old"
	parked := func(name, comment string) slurm.Node {
		return slurm.Node{Name: name, State: []string{"FUTURE", "DYNAMIC_FUTURE"}, Features: []string{"cpu"}, Comment: comment}
	}
	// The table, a poll old: four records parked by pods of an older template.
	table := []slurm.Node{parked("cpu-0", older), parked("cpu-1", older), parked("cpu-2", older), parked("cpu-3", older)}
	// Slurm now.
	sl := slurmfake.New()
	sl.AddNode(parked("cpu-0", older)) // as the table says: removed
	sl.AddNode(slurm.Node{Name: "cpu-1", State: []string{"IDLE", "DYNAMIC_NORM"}, Features: []string{"cpu"}, Comment: older})
	sl.AddNode(parked("cpu-2", wellknown.ParkedPrefix+current)) // parked again, current template
	// cpu-3: removed meanwhile.

	r := &Reconciler{}
	w := &world{ns: ns, order: replicasOrder("cpu"), hash: current}
	st := newStatus(ns)
	records := memberRecords(ns, table)
	if err := r.unpark(ctx, w, sl, records, map[string]time.Time{}, st); err != nil {
		t.Fatal(err)
	}
	if got := sl.Calls("DeleteNode"); got != 1 {
		t.Errorf("DeleteNode called %d times, want once (cpu-0)", got)
	}
	list, _ := sl.ListNodes(ctx, time.Time{})
	var left []string
	for _, n := range list.Nodes {
		left = append(left, n.Name)
	}
	if want := []string{"cpu-1", "cpu-2"}; !slices.Equal(left, want) || st.counts.Parked != 1 {
		t.Errorf("records after unpark %v (parked %d), want %v (1)", left, st.counts.Parked, want)
	}
	// The autoscaler goes on with what it read: cpu-1 registered, cpu-0 and cpu-3 gone.
	if n := records["cpu-1"]; n == nil || n.BaseState() != "IDLE" {
		t.Errorf("cpu-1's record after unpark: %+v, want the fresh IDLE one", n)
	}
	if records["cpu-0"] != nil || records["cpu-3"] != nil {
		t.Errorf("records still hold removed nodes: cpu-0 %v, cpu-3 %v", records["cpu-0"] != nil, records["cpu-3"] != nil)
	}
}
