// Package validation decides whether a SlurmCluster or NodeSet spec is one sunk can run,
// naming the field when it is not: the rules CEL cannot express, Slurm config values read as
// Slurm's parser reads them (known keys only, none that sunk keeps), scripts, and a
// job_submit.lua run in a sandbox process. Its callers are the admission webhook
// (internal/webhook) and the controllers, which re-check every spec before they render
// anything, so that a spec never reaches Slurm without the webhook either; docs/validation.md
// is the rules' description.
package validation

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	kvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/slurm"
)

// ValidateSpec checks what CEL cannot, with the operator's Options, and returns the
// warnings admission passes on with an admitted spec. The controller runs it too, so that a
// cluster without the webhook still never hands slurmctld a broken or unsafe configuration.
func (o Options) ValidateSpec(spec *sunkv1.SlurmClusterSpec, path *field.Path) (field.ErrorList, []string) {
	var errs field.ErrorList
	var warnings []string
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
			if msgs := kvalidation.IsDNS1123Label(ns); len(msgs) > 0 {
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
		if msgs := kvalidation.IsDNS1123Subdomain(s.Name); len(msgs) > 0 {
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
func ValidateSpec(spec *sunkv1.SlurmClusterSpec, path *field.Path) (field.ErrorList, []string) {
	return Options{}.ValidateSpec(spec, path)
}

// validateSchedulerPolicy checks what the CRD's schema cannot: a namespace belongs to one
// tenant only (else which policy applies would depend on the order), partitions are the
// cluster's, "*" stands alone, and a default account is one the tenant may charge.
func validateSchedulerPolicy(spec *sunkv1.SlurmClusterSpec, path *field.Path) (field.ErrorList, []string) {
	var errs field.ErrorList
	var warnings []string
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

// validateLogin: a sidecar may not take the name of a login pod's own container (the pod would
// be refused), and root's authorized keys without permitRootLogin are a warning: they stay
// unused, which an admin upgrading from when root logged in by default should hear about.
func validateLogin(l *sunkv1.LoginSpec, p *field.Path) (field.ErrorList, []string) {
	var errs field.ErrorList
	var warnings []string
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
