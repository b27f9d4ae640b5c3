package webhook

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// validator is an admission.Validator that checks created and updated objects with one
// function, given the object before an update (the zero value, nil, at a creation); deletions
// always pass.
type validator[T runtime.Object] func(ctx context.Context, old, o T) (admission.Warnings, error)

func (v validator[T]) ValidateCreate(ctx context.Context, o T) (admission.Warnings, error) {
	var none T
	return v(ctx, none, o)
}

// ValidateUpdate checks an update that changes the spec. One that leaves it as it is (the
// operator adding or removing its finalizer, labels, annotations) or that of an object being
// deleted passes: its spec was admitted before, and rules that have become stricter since
// must not keep the operator from removing its finalizer. The controller still renders
// nothing from a spec that fails them.
func (v validator[T]) ValidateUpdate(ctx context.Context, old, o T) (admission.Warnings, error) {
	if m, err := meta.Accessor(o); err == nil && m.GetDeletionTimestamp() != nil {
		return nil, nil
	}
	if sameSpec(old, o) {
		return nil, nil
	}
	return v(ctx, old, o)
}

// sameSpec says whether an update leaves the spec of a SlurmCluster or NodeSet as it was.
func sameSpec(old, o runtime.Object) bool {
	switch o := o.(type) {
	case *sunkv1.SlurmCluster:
		old, ok := old.(*sunkv1.SlurmCluster)
		return ok && equality.Semantic.DeepEqual(old.Spec, o.Spec)
	case *sunkv1.NodeSet:
		old, ok := old.(*sunkv1.NodeSet)
		return ok && equality.Semantic.DeepEqual(old.Spec, o.Spec)
	}
	return false
}

func (v validator[T]) ValidateDelete(context.Context, T) (admission.Warnings, error) { return nil, nil }
