package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/wellknown"
)

// stringField is one string field of a SlurmCluster that reaches a Slurm config file.
type stringField struct {
	path string
	set  func(*sunkv1.SlurmClusterSpec, string)
	// conf: the field holds config lines, where '#' starts a comment and "Key = Value" is
	// Slurm's own syntax, so neither is an error there.
	conf bool
}

var stringFields = []stringField{
	{"spec.controller.extraConf", func(s *sunkv1.SlurmClusterSpec, v string) { s.Controller.ExtraConf = v }, true},
	{"spec.cgroupConf", func(s *sunkv1.SlurmClusterSpec, v string) { s.CgroupConf = "ConstrainCores=" + v }, true},
	{"spec.partitions[0].extraConf", func(s *sunkv1.SlurmClusterSpec, v string) {
		s.Partitions = []sunkv1.PartitionSpec{{Name: "p", ExtraConf: "MaxNodes=" + v}}
	}, true},
	{"spec.partitions[0].nodeSets[0]", func(s *sunkv1.SlurmClusterSpec, v string) {
		s.Partitions = []sunkv1.PartitionSpec{{Name: "p", NodeSets: []string{v}}}
	}, false},
	{"spec.accounting.external.host", func(s *sunkv1.SlurmClusterSpec, v string) { s.Accounting.External = externalDB(v, "slurm", "") }, false},
	{"spec.accounting.external.user", func(s *sunkv1.SlurmClusterSpec, v string) { s.Accounting.External = externalDB("db", v, "") }, false},
	{"spec.accounting.external.database", func(s *sunkv1.SlurmClusterSpec, v string) { s.Accounting.External = externalDB("db", "slurm", v) }, false},
}

func externalDB(host, user, db string) *sunkv1.ExternalDatabase {
	return &sunkv1.ExternalDatabase{Host: host, User: user, Database: db}
}

// TestBadValueCorpus: every bad value in every field is refused, and the error names the field.
func TestBadValueCorpus(t *testing.T) {
	corpus := map[string]string{
		"newline injecting a key": "x\nAuthType=auth/none",
		"carriage return":         "x\rAuthType=auth/none",
		"NUL":                     "x\x00y",
		"10 KB":                   strings.Repeat("a", 10<<10),
		"unicode look-alike":      "gpu\u0391", // Greek capital alpha
		"line separator":          "x\u2028AuthType=auth/none",
		"tab and key":             "x\tAuthType=auth/none",
		"escaped comment":         "x\\# AuthType=auth/none",
		"line continuation":       "x \\\nAuthType=auth/none",
	}
	nameOnly := map[string]string{
		"comment":          "gpu#x",
		"spaced equals":    "a = b",
		"empty key":        "=x",
		"shell characters": "x;reboot",
	}
	for _, f := range stringFields {
		values := corpus
		if !f.conf {
			values = map[string]string{}
			for k, v := range corpus {
				values[k] = v
			}
			for k, v := range nameOnly {
				values[k] = v
			}
		}
		for name, v := range values {
			spec := &sunkv1.SlurmClusterSpec{}
			f.set(spec, v)
			errs, _ := ValidateSpec(spec, field.NewPath("spec"))
			if !namesField(errs, f.path) {
				t.Errorf("%s = %s (%q): %v, want an error on %s", f.path, name, trunc(v), errs, f.path)
			}
		}
	}
}

// TestDeniedKeys: each key sunk keeps is refused in controller.extraConf, in any case and
// spacing, and passes only when listed in unsafeConfKeys and allowed by the operator. (Behind
// another key on its own line it is refused either way: Slurm reads one key a line.)
func TestDeniedKeys(t *testing.T) {
	for k := range deniedSlurmConfKeys {
		for _, line := range []string{k + "=x", strings.ToUpper(k) + " = x", "MaxJobCount=5\n" + k + "=x"} {
			spec := &sunkv1.SlurmClusterSpec{Controller: sunkv1.ControllerSpec{ExtraConf: line}}
			if errs, _ := ValidateSpec(spec, field.NewPath("spec")); !namesField(errs, "spec.controller.extraConf") {
				t.Errorf("%q accepted", line)
			}
			spec.Controller.UnsafeConfKeys = []string{k}
			if errs, _ := ValidateSpec(spec, field.NewPath("spec")); !namesField(errs, "spec.controller.unsafeConfKeys[0]") {
				t.Errorf("%q with unsafeConfKeys [%s] that the operator does not allow: %v", line, k, errs)
			}
			for _, allowed := range []string{strings.ToUpper(k), AllowAllUnsafeConfKeys} {
				opts := Options{AllowedUnsafeConfKeys: []string{"MinJobAge", allowed}}
				if errs, warnings := opts.ValidateSpec(spec, field.NewPath("spec")); len(errs) > 0 || len(warnings) == 0 {
					t.Errorf("%q with unsafeConfKeys [%s] allowed by %v: errors %v, warnings %v", line, k, opts, errs, warnings)
				}
			}
		}
	}
}

func namesField(errs field.ErrorList, path string) bool {
	for _, e := range errs {
		if e.Field == path {
			return true
		}
	}
	return false
}

func trunc(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

func TestValidateNodeSetSpec(t *testing.T) {
	for name, c := range map[string]struct {
		spec sunkv1.NodeSetSpec
		want string
	}{
		"fine":                          {sunkv1.NodeSetSpec{ExtraConf: "Gres=gpu:8 TmpDisk=100000"}, ""},
		"features with spaces around =": {sunkv1.NodeSetSpec{ExtraConf: "Gres=gpu:1 Features =x"}, "spec.extraConf: Forbidden: Features"},
		"feature in lower case":         {sunkv1.NodeSetSpec{ExtraConf: "feature=x"}, "spec.extraConf: Forbidden"},
		"port":                          {sunkv1.NodeSetSpec{ExtraConf: "Port=7000"}, "spec.extraConf: Forbidden: Port"},
		"a top-level key":               {sunkv1.NodeSetSpec{ExtraConf: "Gres=gpu:1 AuthType=auth/none"}, "not a parameter of a NodeName line"},
		"a second line":                 {sunkv1.NodeSetSpec{ExtraConf: "Gres=gpu:1\nNodeName=x"}, "control character"},
		"SLURMD_CONF":                   {sunkv1.NodeSetSpec{Env: []corev1.EnvVar{{Name: "X", Value: "1"}, {Name: "SLURMD_CONF", Value: "Features=x"}}}, "spec.env[1].name"},
		"SLURM_CONF_SERVER":             {sunkv1.NodeSetSpec{Env: []corev1.EnvVar{{Name: "SLURM_CONF_SERVER", Value: "evil:6817"}}}, "spec.env[0].name"},
		"sunk's image variables":        {sunkv1.NodeSetSpec{Env: []corev1.EnvVar{{Name: "SUNK_READY_TIMEOUT", Value: "1"}}}, "spec.env[0].name"},
		"other variables":               {sunkv1.NodeSetSpec{Env: []corev1.EnvVar{{Name: "NCCL_DEBUG", Value: "INFO"}}}, ""},
		"variable name with a newline":  {sunkv1.NodeSetSpec{Env: []corev1.EnvVar{{Name: "A\nB", Value: "1"}}}, "spec.env[0].name"},
		"service without #!":            {sunkv1.NodeSetSpec{Services: []sunkv1.S6Service{{Name: "x", Run: "sleep 1"}}}, "spec.services[0].run"},
		"escaped comment":               {sunkv1.NodeSetSpec{ExtraConf: `Gres=gpu:1\# Features=x`}, "backslash"},
		"node name":                     {sunkv1.NodeSetSpec{ExtraConf: "NodeName=other"}, "not a parameter of a NodeName line"},
	} {
		errs := ValidateNodeSetSpec(&c.spec, field.NewPath("spec"))
		got := errs.ToAggregate()
		switch {
		case c.want == "" && got != nil:
			t.Errorf("%s: %v", name, got)
		case c.want != "" && (got == nil || !strings.Contains(got.Error(), c.want)):
			t.Errorf("%s: %v, want an error containing %q", name, got, c.want)
		}
	}
}

func TestNodeSetWarnings(t *testing.T) {
	sized := corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")}}
	gpus := *sized.DeepCopy()
	gpus.Limits[wellknown.ResourceGPU] = resource.MustParse("8")
	for name, c := range map[string]struct {
		spec sunkv1.NodeSetSpec
		want []string
	}{
		"no resources":         {sunkv1.NodeSetSpec{}, []string{"no cpu", "no memory"}},
		"memory request only":  {sunkv1.NodeSetSpec{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}, []string{"no cpu"}},
		"sized":                {sunkv1.NodeSetSpec{Resources: sized}, nil},
		"GPUs":                 {sunkv1.NodeSetSpec{Resources: gpus}, nil},
		"GPUs and a Gres line": {sunkv1.NodeSetSpec{Resources: gpus, ExtraConf: "TmpDisk=1 gres=gpu:8"}, []string{"extraConf sets Gres"}},
		"Gres without GPUs":    {sunkv1.NodeSetSpec{Resources: sized, ExtraConf: "Gres=nic:1"}, nil},
		// Slurm reads "Gres = gpu:8" as Gres=gpu:8, and so does the warning.
		"GPUs and a spaced Gres line": {sunkv1.NodeSetSpec{Resources: gpus, ExtraConf: "TmpDisk=1 Gres = gpu:8"}, []string{"extraConf sets Gres"}},
	} {
		got := NodeSetWarnings(&c.spec)
		if len(got) != len(c.want) {
			t.Errorf("%s: %q, want %d warnings", name, got, len(c.want))
			continue
		}
		for i, w := range c.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%s: warning %q, want %q in it", name, got[i], w)
			}
		}
	}
}
