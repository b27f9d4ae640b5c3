package syncer

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// A new cluster that Slurm has not answered yet gets the condition and no Warning; one that was
// read and no longer is gets the Warning.
func TestSlurmUnreadableWarnsOnlyAfterARead(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := sunkv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	sc := &sunkv1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(sc).WithStatusSubresource(sc).Build()
	rec := events.NewFakeRecorder(10)
	c := &Clusters{Client: cl, APIReader: cl, Recorder: rec}
	key := types.NamespacedName{Namespace: "ns", Name: "c"}
	ctx := context.Background()
	down := errors.New("no node list from Slurm yet")

	c.reportHealth(ctx, key, "slurmrestd", down)
	if n := len(rec.Events); n != 0 {
		t.Fatalf("first report of a new cluster: %d events (%s), want none", n, <-rec.Events)
	}
	c.reportHealth(ctx, key, "slurmrestd", nil)
	c.reportHealth(ctx, key, "slurmrestd", errors.New("HTTP 504"))
	select {
	case e := <-rec.Events:
		if want := "Warning " + sunkv1.ReasonSlurmUnreadable; len(e) < len(want) || e[:len(want)] != want {
			t.Fatalf("event %q, want %s", e, want)
		}
	default:
		t.Fatal("no Warning once a read cluster became unreadable")
	}
}
