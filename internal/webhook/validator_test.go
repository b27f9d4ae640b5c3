package webhook

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/validation"
)

// An update that leaves a spec as it was, or of an object being deleted, passes even when the
// spec fails today's rules: the operator must still be able to remove its finalizer.
func TestValidateUpdateOnlyChangedSpecs(t *testing.T) {
	v := validator[*sunkv1.SlurmCluster](func(_ context.Context, _, sc *sunkv1.SlurmCluster) (admission.Warnings, error) {
		errs, w := validation.ValidateSpec(&sc.Spec, field.NewPath("spec"))
		return w, errs.ToAggregate()
	})
	bad := &sunkv1.SlurmCluster{Spec: sunkv1.SlurmClusterSpec{Controller: sunkv1.ControllerSpec{ExtraConf: "AuthType=auth/none"}}}
	finalizerGone := bad.DeepCopy()
	finalizerGone.Finalizers = nil
	if _, err := v.ValidateUpdate(context.Background(), bad, finalizerGone); err != nil {
		t.Errorf("a metadata-only update: %v", err)
	}
	deleting := bad.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	deleting.Spec.Controller.ExtraConf += "\nMinJobAge=1"
	if _, err := v.ValidateUpdate(context.Background(), bad, deleting); err != nil {
		t.Errorf("an update of an object being deleted: %v", err)
	}
	changed := bad.DeepCopy()
	changed.Spec.Controller.ExtraConf += "\nMinJobAge=1"
	if _, err := v.ValidateUpdate(context.Background(), bad, changed); err == nil {
		t.Error("a spec change passed unchecked")
	}
}
