package webhook

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/validation"
)

// +kubebuilder:webhook:path=/validate-sunk-dev-v1alpha1-nodeset,mutating=false,failurePolicy=fail,sideEffects=None,groups=sunk.dev,resources=nodesets,verbs=create;update,versions=v1alpha1,name=vnodeset.sunk.dev,admissionReviewVersions=v1

// SetupNodeSetWebhook registers the NodeSet check with the manager's webhook server: it rejects
// NodeSets whose node line or environment would break or take over their slurmd.
func SetupNodeSetWebhook(mgr ctrl.Manager, opts Options) error {
	return ctrl.NewWebhookManagedBy(mgr, &sunkv1.NodeSet{}).WithValidator(validator[*sunkv1.NodeSet](opts.validateNodeSet)).Complete()
}

func (o Options) validateNodeSet(ctx context.Context, old, ns *sunkv1.NodeSet) (admission.Warnings, error) {
	errs := validation.ValidateNodeSetSpec(&ns.Spec, field.NewPath("spec"))
	errs = append(errs, o.Authors.checkNodeSet(ctx, old, ns)...)
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(sunkv1.GroupVersion.WithKind("NodeSet").GroupKind(), ns.Name, errs)
	}
	return validation.NodeSetWarnings(&ns.Spec), nil
}
