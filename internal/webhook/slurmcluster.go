// Package webhook holds sunk's admission checks, the rules CEL cannot express: Slurm config
// values read as Slurm's parser reads them (known keys only, none that sunk keeps), scripts,
// and a job_submit.lua run in a sandbox process. The controllers run the same functions before
// they render anything; docs/validation.md is the rules' description.
package webhook

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/slurm"
)

// +kubebuilder:webhook:path=/validate-sunk-dev-v1alpha1-slurmcluster,mutating=false,failurePolicy=fail,sideEffects=None,groups=sunk.dev,resources=slurmclusters,verbs=create;update,versions=v1alpha1,name=vslurmcluster.sunk.dev,admissionReviewVersions=v1

// SetupSlurmClusterWebhook registers the SlurmCluster check with the manager's webhook server.
func SetupSlurmClusterWebhook(mgr ctrl.Manager, opts Options) error {
	return ctrl.NewWebhookManagedBy(mgr, &sunkv1.SlurmCluster{}).WithValidator(validator[*sunkv1.SlurmCluster](func(ctx context.Context, old, sc *sunkv1.SlurmCluster) (admission.Warnings, error) {
		errs, warnings := opts.ValidateSpec(&sc.Spec, field.NewPath("spec"))
		errs = append(errs, validateConfigMapScripts(ctx, mgr.GetAPIReader(), sc, field.NewPath("spec"))...)
		errs = append(errs, opts.Authors.checkCluster(ctx, old, sc)...)
		if len(errs) > 0 {
			return warnings, apierrors.NewInvalid(sunkv1.GroupVersion.WithKind("SlurmCluster").GroupKind(), sc.Name, errs)
		}
		auditUnsafe(ctx, sc)
		return warnings, nil
	})).WithDefaulter(versionDefaulter{}).Complete()
}

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

// ValidateSpec checks what CEL cannot, with the operator's Options. The controller runs it
// too, so that a cluster without the webhook still never hands slurmctld a broken or unsafe
// configuration.
func (o Options) ValidateSpec(spec *sunkv1.SlurmClusterSpec, path *field.Path) (field.ErrorList, admission.Warnings) {
	var errs field.ErrorList
	var warnings admission.Warnings
	if spec.JobSubmitLua != "" {
		if err := ValidateJobSubmitLua(spec.JobSubmitLua); err != nil {
			errs = append(errs, field.Invalid(path.Child("jobSubmitLua"), "(script)", err.Error()))
		}
	}
	unsafe, e0 := o.unsafeKeys(spec.Controller.UnsafeConfKeys, path.Child("controller", "unsafeConfKeys"))
	errs = append(errs, e0...)
	e, w := slurmConf.validate(spec.Controller.ExtraConf, path.Child("controller", "extraConf"), unsafe)
	errs, warnings = append(errs, e...), append(warnings, w...)
	e, w = cgroupConf.validate(spec.CgroupConf, path.Child("cgroupConf"), nil)
	errs, warnings = append(errs, e...), append(warnings, w...)
	for i, part := range spec.Partitions {
		pp := path.Child("partitions").Index(i)
		for j, ns := range part.NodeSets {
			if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
				errs = append(errs, field.Invalid(pp.Child("nodeSets").Index(j), ns, "must be a NodeSet name: "+strings.Join(msgs, "; ")))
			}
		}
		if part.ExtraConf != "" {
			denied := deniedPartitionParams
			if part.PriorityTier != nil {
				denied = maps.Clone(denied)
				denied["prioritytier"] = "spec.partitions[].priorityTier is set"
			}
			errs = append(errs, validateParams(part.ExtraConf, pp.Child("extraConf"), partitionParams, denied, "PartitionName")...)
		}
	}
	if ext := spec.Accounting.External; ext != nil {
		errs = append(errs, validateExternalDatabase(ext, path.Child("accounting", "external"))...)
	}
	for i, s := range append(append([]sunkv1.Script{}, spec.Prolog...), spec.Epilog...) {
		kind, idx := "prolog", i
		if i >= len(spec.Prolog) {
			kind, idx = "epilog", i-len(spec.Prolog)
		}
		if s.Inline != nil {
			if err := ValidateScript(*s.Inline); err != nil {
				errs = append(errs, field.Invalid(path.Child(kind).Index(idx).Child("inline"), "(script)", err.Error()))
			}
		}
	}
	for i, s := range spec.ImagePullSecrets {
		if msgs := validation.IsDNS1123Subdomain(s.Name); len(msgs) > 0 {
			errs = append(errs, field.Invalid(path.Child("imagePullSecrets").Index(i).Child("name"), s.Name, "must be a Secret's name: "+strings.Join(msgs, "; ")))
		}
	}
	errs = append(errs, validateServices(spec.Login.Services, path.Child("login", "services"))...)
	e, w = validateLogin(&spec.Login, path.Child("login"))
	errs, warnings = append(errs, e...), append(warnings, w...)
	e, w = validateSchedulerPolicy(spec, path.Child("schedulerPolicy"))
	errs, warnings = append(errs, e...), append(warnings, w...)
	e, w = validateTopology(spec, path.Child("topology"))
	errs, warnings = append(errs, e...), append(warnings, w...)
	errs = append(errs, validateSlurmVersion(spec, path)...)
	if v := spec.RestAPI.Version; v != "" && !slices.Contains(slurm.Versions(), v) {
		errs = append(errs, field.NotSupported(path.Child("restApi", "version"), v, slurm.Versions()))
	}
	if spec.Preemption.Type == sunkv1.PreemptionQOS &&
		spec.Accounting.Mode != sunkv1.AccountingManaged && spec.Accounting.Mode != sunkv1.AccountingExternal {
		errs = append(errs, field.Invalid(path.Child("preemption", "type"), spec.Preemption.Type,
			"qos preemption needs accounting (spec.accounting.mode Managed or External): QOS live in slurmdbd"))
	}
	return errs, warnings
}

// ValidateSpec is Options{}.ValidateSpec: no SlurmCluster may take over a key sunk keeps.
func ValidateSpec(spec *sunkv1.SlurmClusterSpec, path *field.Path) (field.ErrorList, admission.Warnings) {
	return Options{}.ValidateSpec(spec, path)
}

// validateSchedulerPolicy checks what the CRD's schema cannot: a namespace belongs to one
// tenant only (else which policy applies would depend on the order), partitions are the
// cluster's, "*" stands alone, and a default account is one the tenant may charge.
func validateSchedulerPolicy(spec *sunkv1.SlurmClusterSpec, path *field.Path) (field.ErrorList, admission.Warnings) {
	var errs field.ErrorList
	var warnings admission.Warnings
	var partitions []string
	for _, p := range spec.EffectivePartitions() {
		partitions = append(partitions, p.Name)
	}
	owner := map[string]string{} // namespace → tenant
	for i, t := range spec.SchedulerPolicy.Tenants {
		tp := path.Child("tenants").Index(i)
		for j, ns := range t.Namespaces {
			if other, taken := owner[ns]; taken {
				errs = append(errs, field.Invalid(tp.Child("namespaces").Index(j), ns, "already in tenant "+other+": a namespace may belong to one tenant only"))
				continue
			}
			owner[ns] = t.Name
		}
		for j, p := range t.Partitions {
			if p != sunkv1.AllowsAny && !slices.Contains(partitions, p) {
				errs = append(errs, field.NotSupported(tp.Child("partitions").Index(j), p, append([]string{sunkv1.AllowsAny}, partitions...)))
			}
		}
		for _, l := range []struct {
			name   string
			values []string
		}{{"partitions", t.Partitions}, {"accounts", t.Accounts}, {"qos", t.QOS}, {"reservations", t.Reservations}} {
			if len(l.values) > 1 && slices.Contains(l.values, sunkv1.AllowsAny) {
				errs = append(errs, field.Invalid(tp.Child(l.name), l.values, `"*" allows any value: list it alone`))
			}
		}
		if t.DefaultAccount != "" && !slices.Contains(t.Accounts, t.DefaultAccount) && !slices.Contains(t.Accounts, sunkv1.AllowsAny) {
			errs = append(errs, field.Invalid(tp.Child("defaultAccount"), t.DefaultAccount, "must be one of accounts (the accounts the tenant's pods may charge)"))
		}
		if t.Preempt && (spec.Preemption.Type == "" || spec.Preemption.Type == sunkv1.PreemptionNone) {
			warnings = append(warnings, fmt.Sprintf("%s: preempt has no effect while spec.preemption.type is none", tp.Child("preempt")))
		}
	}
	return errs, warnings
}

// validateServices checks the run scripts of s6 services: s6 executes them directly, like
// slurmd its prolog.
func validateServices(services []sunkv1.S6Service, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, s := range services {
		if err := ValidateScript(s.Run); err != nil {
			errs = append(errs, field.Invalid(p.Index(i).Child("run"), "(script)", err.Error()))
		}
	}
	return errs
}

// validateLogin: a sidecar may not take the name of a login pod's own container (the pod would
// be refused), and root's authorized keys without permitRootLogin are a warning: they stay
// unused, which an admin upgrading from when root logged in by default should hear about.
func validateLogin(l *sunkv1.LoginSpec, p *field.Path) (field.ErrorList, admission.Warnings) {
	var errs field.ErrorList
	var warnings admission.Warnings
	for i, c := range l.Sidecars {
		if c.Name == "login" || c.Name == "sackd" {
			errs = append(errs, field.Invalid(p.Child("sidecars").Index(i).Child("name"), c.Name, "the name of a login pod's own container"))
		}
	}
	if l.SSH.AuthorizedKeysSecretRef != nil && !l.SSH.PermitRootLogin {
		warnings = append(warnings, fmt.Sprintf("%s: root may not log in without %s, so the Secret's authorized_keys are not installed (its host keys are)",
			p.Child("ssh", "authorizedKeysSecretRef"), p.Child("ssh", "permitRootLogin")))
	}
	return errs, warnings
}

// ValidateScript checks a prolog or epilog as slurmd will run it: executed directly, so it
// needs a #! line, and it holds no NUL (a shell stops reading there).
func ValidateScript(src string) error {
	if !strings.HasPrefix(src, "#!") {
		return fmt.Errorf("must start with a #! line: slurmd executes the file directly")
	}
	if strings.ContainsRune(src, 0) {
		return fmt.Errorf("contains a NUL byte")
	}
	return nil
}

var (
	dbHostPattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.:-]*[A-Za-z0-9])?$`)
	dbUserPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,79}$`)
	dbNamePattern = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)
)

// validateExternalDatabase keeps the values that reach slurmdbd.conf to what a host name, a
// MySQL user and a database name can be, so that none can add a line or a key.
func validateExternalDatabase(ext *sunkv1.ExternalDatabase, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(ext.Host) > 253 || !dbHostPattern.MatchString(ext.Host) {
		errs = append(errs, field.Invalid(p.Child("host"), ext.Host, "must be a host name or an IP address"))
	}
	if !dbUserPattern.MatchString(ext.User) {
		errs = append(errs, field.Invalid(p.Child("user"), ext.User, "must be a MySQL user name: letters, digits, _ . -"))
	}
	if ext.Database != "" && !dbNamePattern.MatchString(ext.Database) {
		errs = append(errs, field.Invalid(p.Child("database"), ext.Database, "must be a database name: letters, digits, _"))
	}
	return errs
}
