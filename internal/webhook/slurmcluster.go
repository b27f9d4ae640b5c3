// Package webhook is sunk's admission for SlurmClusters and NodeSets: it registers the
// webhooks with the manager and adapts internal/validation, which judges a spec, to them. What
// only admission knows stays here: the object before an update (sameSpec), the requesting user
// (the privileged authors, authors.go), the API's view of a script's ConfigMap, and the
// default spec.slurmVersion of a new cluster.
package webhook

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// +kubebuilder:webhook:path=/validate-sunk-dev-v1alpha1-slurmcluster,mutating=false,failurePolicy=fail,sideEffects=None,groups=sunk.dev,resources=slurmclusters,verbs=create;update,versions=v1alpha1,name=vslurmcluster.sunk.dev,admissionReviewVersions=v1

// SetupSlurmClusterWebhook registers the SlurmCluster check with the manager's webhook server.
func SetupSlurmClusterWebhook(mgr ctrl.Manager, opts Options) error {
	return ctrl.NewWebhookManagedBy(mgr, &sunkv1.SlurmCluster{}).WithValidator(validator[*sunkv1.SlurmCluster](func(ctx context.Context, old, sc *sunkv1.SlurmCluster) (admission.Warnings, error) {
		errs, warnings := opts.Validation.ValidateSpec(&sc.Spec, field.NewPath("spec"))
		errs = append(errs, validateConfigMapScripts(ctx, mgr.GetAPIReader(), sc, field.NewPath("spec"))...)
		errs = append(errs, opts.Authors.checkCluster(ctx, old, sc)...)
		if len(errs) > 0 {
			return warnings, apierrors.NewInvalid(sunkv1.GroupVersion.WithKind("SlurmCluster").GroupKind(), sc.Name, errs)
		}
		auditUnsafe(ctx, sc)
		return warnings, nil
	})).WithDefaulter(versionDefaulter{}).Complete()
}

// auditUnsafe writes one log line per admitted SlurmCluster that takes over keys sunk keeps:
// who, which object, which keys. (The admission warning reaches the client; this line is
// the operator's own record.)
func auditUnsafe(ctx context.Context, sc *sunkv1.SlurmCluster) {
	if len(sc.Spec.Controller.UnsafeConfKeys) == 0 {
		return
	}
	user, op := "", ""
	if req, err := admission.RequestFromContext(ctx); err == nil {
		user, op = req.UserInfo.Username, string(req.Operation)
	}
	ctrl.Log.WithName("admission").Info("SlurmCluster takes over slurm.conf keys sunk keeps",
		"namespace", sc.Namespace, "name", sc.Name, "operation", op, "user", user, "unsafeConfKeys", sc.Spec.Controller.UnsafeConfKeys)
}
