package kube

import (
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
)

func TestQuietConflict(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "sunk.dev", Resource: "slurmclusters"}, "c", errors.New("modified"))
	other := errors.New("boom")
	poll := ctrl.Result{RequeueAfter: time.Second}
	for _, c := range []struct {
		in      error
		want    ctrl.Result
		wantErr error
	}{
		{conflict, ctrl.Result{Requeue: true}, nil},
		{other, poll, other},
		{nil, poll, nil},
	} {
		got, err := QuietConflict(poll, c.in)
		if got != c.want || !errors.Is(err, c.wantErr) {
			t.Errorf("QuietConflict(%v) = %+v, %v; want %+v, %v", c.in, got, err, c.want, c.wantErr)
		}
	}
}
