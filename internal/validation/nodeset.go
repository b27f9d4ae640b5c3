package validation

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	kvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/slurmconf"
	"sunk.dev/sunk/pkg/wellknown"
)

// NodeSetWarnings are what a valid spec (one ValidateNodeSetSpec passes) does that makes Slurm
// and Kubernetes disagree on the node's size: admission passes them on.
func NodeSetWarnings(spec *sunkv1.NodeSetSpec) []string {
	var w []string
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
		} else if msgs := kvalidation.IsEnvVarName(e.Name); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p, e.Name, strings.Join(msgs, "; ")))
		} else if name := strings.ToUpper(e.Name); slurmdEnvSunkSets[name] || strings.HasPrefix(name, slurmdEnvSunkPrefix) {
			errs = append(errs, field.Forbidden(p, e.Name+" is set by sunk: it tells slurmd where its configuration and node line come from"))
		}
	}
	errs = append(errs, validateServices(spec.Services, path.Child("services"))...)
	return errs
}
