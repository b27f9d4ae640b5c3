package nodeset

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
)

// A Ready pod whose Slurm node does not exist is retired only once every read for
// unregisteredGrace said so (a slurmd whose record slurmctld lost stays Ready for ever); a read
// that finds the node, or fails, starts the wait again. A pod that is not Ready goes at once.
func TestRetireTrustsALongAbsenceOfAReadyPodsNode(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	ready := corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	newPod := func(status corev1.PodStatus) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "compute-3", UID: "u1"},
			Spec: corev1.PodSpec{NodeName: "k8s-node"}, Status: status}
	}
	retire := func(r *Reconciler, sl slurm.Client, p *corev1.Pod) (gone bool, o *outcome) {
		t.Helper()
		o = &outcome{}
		w := &world{ns: &sunkv1.NodeSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "compute"}}, sl: sl}
		if err := r.retire(context.Background(), w, &member{name: p.Name, pod: p}, "sunk: scale-in", o); err != nil {
			t.Fatal(err)
		}
		err := r.Get(context.Background(), client.ObjectKeyFromObject(p), &corev1.Pod{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return apierrors.IsNotFound(err), o
	}

	p := newPod(corev1.PodStatus{})
	r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(p).Build()}
	if gone, _ := retire(r, slurmfake.New(), p); !gone {
		t.Fatal("a pod that is not Ready and has no Slurm node: kept, want deleted at once")
	}

	p = newPod(ready)
	r = &Reconciler{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(p).Build()}
	sl := slurmfake.New()
	if gone, o := retire(r, sl, p); gone || len(o.waiting) != 1 {
		t.Fatalf("a Ready pod without a Slurm node, first read: gone %v, waiting %v; want kept, waiting", gone, o.waiting)
	}
	backdate := func(d time.Duration) {
		v, ok := r.unregistered.Load(p.UID)
		if !ok {
			t.Fatal("no first read recorded")
		}
		r.unregistered.Store(p.UID, v.(time.Time).Add(-d))
	}
	backdate(unregisteredGrace - time.Minute)
	if gone, _ := retire(r, sl, p); gone {
		t.Fatalf("deleted %s after the first read that found no node, want %s", unregisteredGrace-time.Minute, unregisteredGrace)
	}
	// The node is found meanwhile (registered, running a job): the wait starts again.
	sl.AddNode(slurm.Node{Name: "compute-3", State: []string{"ALLOCATED"}})
	if gone, o := retire(r, sl, p); gone || len(o.waitingForJobs) != 1 {
		t.Fatalf("a Ready pod whose Slurm node runs a job: gone %v, waiting for jobs %v; want kept, waiting", gone, o.waitingForJobs)
	}
	if _, ok := r.unregistered.Load(p.UID); ok {
		t.Fatal("a read that found the node did not reset the wait")
	}
	sl = slurmfake.New()
	if gone, _ := retire(r, sl, p); gone {
		t.Fatal("deleted on the first read after one that found the node")
	}
	backdate(unregisteredGrace)
	if gone, _ := retire(r, sl, p); !gone {
		t.Fatalf("a Ready pod whose Slurm node every read for %s did not find: kept, want deleted", unregisteredGrace)
	}
	if _, ok := r.unregistered.Load(p.UID); ok {
		t.Fatal("the deleted pod's wait is still kept")
	}
}
