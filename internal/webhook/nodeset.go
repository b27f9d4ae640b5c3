package webhook

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/slurmconf"
	"sunk.dev/sunk/pkg/wellknown"
)

// +kubebuilder:webhook:path=/validate-sunk-dev-v1alpha1-nodeset,mutating=false,failurePolicy=fail,sideEffects=None,groups=sunk.dev,resources=nodesets,verbs=create;update,versions=v1alpha1,name=vnodeset.sunk.dev,admissionReviewVersions=v1

// SetupNodeSetWebhook registers the NodeSet check with the manager's webhook server: it rejects
// NodeSets whose node line or environment would break or take over their slurmd.
func SetupNodeSetWebhook(mgr ctrl.Manager, opts Options) error {
	return ctrl.NewWebhookManagedBy(mgr, &sunkv1.NodeSet{}).WithValidator(validator[*sunkv1.NodeSet](opts.validateNodeSet)).Complete()
}

func (o Options) validateNodeSet(ctx context.Context, old, ns *sunkv1.NodeSet) (admission.Warnings, error) {
	errs := ValidateNodeSetSpec(&ns.Spec, field.NewPath("spec"))
	errs = append(errs, o.Authors.checkNodeSet(ctx, old, ns)...)
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(sunkv1.GroupVersion.WithKind("NodeSet").GroupKind(), ns.Name, errs)
	}
	return nodeSetWarnings(&ns.Spec), nil
}

// nodeSetWarnings are admitted specs that make Slurm and Kubernetes disagree on the node's size.
func nodeSetWarnings(spec *sunkv1.NodeSetSpec) admission.Warnings {
	var w admission.Warnings
	res := spec.Resources
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		_, lim := res.Limits[r]
		_, req := res.Requests[r]
		if !lim && !req {
			w = append(w, fmt.Sprintf("spec.resources sets no %s: slurmd registers all of the machine's %s, which Kubernetes may also give to other pods", r, r))
		}
	}
	_, lim := res.Limits[wellknown.ResourceGPU]
	_, req := res.Requests[wellknown.ResourceGPU]
	if lim || req {
		params, _ := slurmconf.Parse(spec.ExtraConf) // admitted: ValidateNodeSetSpec read it already
		if _, ok := params.Value("Gres"); ok {
			w = append(w, "spec.extraConf sets Gres: sunk renders no GPU device lines (File=) for it, and slurmd drops GPUs without a device file")
		}
	}
	return w
}

// nodeParamsSunkSets are node-line parameters the NodeSet controller owns: the node's name and
// port make it the pod, and its features say which NodeSet and partitions it is in.
var nodeParamsSunkSets = map[string]string{
	"feature":  "features come from spec.features and the NodeSet's name",
	"features": "features come from spec.features and the NodeSet's name",
	"port":     "slurmd's port is the pod's",
	"nodeaddr": "the address is the pod's", "nodehostname": "the host name is the pod's",
}

// slurmdEnvSunkSets are environment variables of the slurmd container that sunk sets or its
// entrypoint reads: where slurmd gets its configuration and its node line (SLURM_CONF is the
// config file every Slurm program reads). Names with slurmdEnvSunkPrefix are sunk's too.
var slurmdEnvSunkSets = set("SLURM_CONF_SERVER", "SLURMD_CONF", "SLURM_CONF")

// maxEnvName bounds an environment variable's name (Kubernetes sets none).
const maxEnvName = 256

// slurmdEnvSunkPrefix starts the environment variables of sunk's image (sunk-entrypoint).
const slurmdEnvSunkPrefix = "SUNK_"

// ValidateNodeSetSpec checks what CEL cannot; like ValidateSpec it reads the node line the way
// Slurm does, so "Features =x" is Features.
func ValidateNodeSetSpec(spec *sunkv1.NodeSetSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.ExtraConf != "" {
		errs = append(errs, validateParams(spec.ExtraConf, path.Child("extraConf"), nodeParams, nodeParamsSunkSets, "NodeName")...)
	}
	for i, e := range spec.Env {
		p := path.Child("env").Index(i).Child("name")
		if len(e.Name) > maxEnvName {
			errs = append(errs, field.TooLong(p, "", maxEnvName))
		} else if msgs := validation.IsEnvVarName(e.Name); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p, e.Name, strings.Join(msgs, "; ")))
		} else if name := strings.ToUpper(e.Name); slurmdEnvSunkSets[name] || strings.HasPrefix(name, slurmdEnvSunkPrefix) {
			errs = append(errs, field.Forbidden(p, e.Name+" is set by sunk: it tells slurmd where its configuration and node line come from"))
		}
	}
	errs = append(errs, validateServices(spec.Services, path.Child("services"))...)
	return errs
}
