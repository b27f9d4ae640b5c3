// Package webhook holds sunk's admission checks: the rules CEL cannot express, above all
// that a job_submit.lua parses (an invalid script crashes slurmctld).
package webhook

import (
	"context"
	"fmt"
	"strings"

	lua "github.com/yuin/gopher-lua/parse"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// +kubebuilder:webhook:path=/validate-sunk-dev-v1alpha1-slurmcluster,mutating=false,failurePolicy=fail,sideEffects=None,groups=sunk.dev,resources=slurmclusters,verbs=create;update,versions=v1alpha1,name=vslurmcluster.sunk.dev,admissionReviewVersions=v1

// SlurmClusterValidator rejects SlurmClusters that would break slurmctld.
type SlurmClusterValidator struct{}

// SetupSlurmClusterWebhook registers the validator with the manager's webhook server.
func SetupSlurmClusterWebhook(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &sunkv1.SlurmCluster{}).WithValidator(SlurmClusterValidator{}).Complete()
}

func (SlurmClusterValidator) ValidateCreate(_ context.Context, sc *sunkv1.SlurmCluster) (admission.Warnings, error) {
	return validate(sc)
}

func (SlurmClusterValidator) ValidateUpdate(_ context.Context, _, sc *sunkv1.SlurmCluster) (admission.Warnings, error) {
	return validate(sc)
}

func (SlurmClusterValidator) ValidateDelete(context.Context, *sunkv1.SlurmCluster) (admission.Warnings, error) {
	return nil, nil
}

func validate(sc *sunkv1.SlurmCluster) (admission.Warnings, error) {
	errs, warnings := ValidateSpec(&sc.Spec, field.NewPath("spec"))
	if len(errs) > 0 {
		return warnings, apierrors.NewInvalid(sunkv1.GroupVersion.WithKind("SlurmCluster").GroupKind(), sc.Name, errs)
	}
	return warnings, nil
}

// ValidateSpec checks what CEL cannot. The controller runs it too, so that a cluster
// without the webhook still never hands slurmctld a broken script.
func ValidateSpec(spec *sunkv1.SlurmClusterSpec, path *field.Path) (field.ErrorList, admission.Warnings) {
	var errs field.ErrorList
	var warnings admission.Warnings
	if spec.JobSubmitLua != "" {
		p := path.Child("jobSubmitLua")
		if err := ValidateJobSubmitLua(spec.JobSubmitLua); err != nil {
			errs = append(errs, field.Invalid(p, "(script)", err.Error()))
		} else if !strings.Contains(spec.JobSubmitLua, "slurm_job_submit") {
			warnings = append(warnings, p.String()+": defines no slurm_job_submit function, so Slurm rejects every job submission")
		}
	}
	errs = append(errs, validateConfLines(spec.Controller.ExtraConf, path.Child("controller", "extraConf"))...)
	errs = append(errs, validateConfLines(spec.CgroupConf, path.Child("cgroupConf"))...)
	for i, s := range append(append([]sunkv1.Script{}, spec.Prolog...), spec.Epilog...) {
		kind, idx := "prolog", i
		if i >= len(spec.Prolog) {
			kind, idx = "epilog", i-len(spec.Prolog)
		}
		if s.Inline != nil && !strings.HasPrefix(*s.Inline, "#!") {
			errs = append(errs, field.Invalid(path.Child(kind).Index(idx).Child("inline"), "(script)",
				"must start with a #! line: slurmd executes the file directly"))
		}
	}
	if spec.Preemption.Type == sunkv1.PreemptionQOS &&
		spec.Accounting.Mode != sunkv1.AccountingManaged && spec.Accounting.Mode != sunkv1.AccountingExternal {
		errs = append(errs, field.Invalid(path.Child("preemption", "type"), spec.Preemption.Type,
			"qos preemption needs accounting (spec.accounting.mode Managed or External): QOS live in slurmdbd"))
	}
	return errs, warnings
}

// ValidateJobSubmitLua parses a job_submit.lua with a Lua 5.1 parser: Debian's Slurm links
// liblua5.1, so this accepts exactly the syntax slurmctld accepts.
func ValidateJobSubmitLua(src string) error {
	if _, err := lua.Parse(strings.NewReader(src), "job_submit.lua"); err != nil {
		return fmt.Errorf("job_submit.lua does not parse: %s", strings.TrimSpace(err.Error()))
	}
	return nil
}

// validateConfLines accepts "Key=Value ..." lines and comments, the grammar of slurm.conf
// and cgroup.conf.
func validateConfLines(text string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, _, ok := strings.Cut(l, "=")
		if !ok || strings.TrimSpace(k) == "" || strings.ContainsAny(strings.TrimSpace(k), " \t") {
			errs = append(errs, field.Invalid(p, l, fmt.Sprintf("line %d is not Key=Value", i+1)))
		}
	}
	return errs
}
