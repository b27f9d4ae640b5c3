package webhook

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

func TestValidateSpec(t *testing.T) {
	cases := []struct {
		name    string
		spec    sunkv1.SlurmClusterSpec
		wantErr string
		warn    bool
	}{
		{name: "empty is fine", spec: sunkv1.SlurmClusterSpec{Image: "x"}},
		{name: "good lua", spec: sunkv1.SlurmClusterSpec{JobSubmitLua: "function slurm_job_submit(j, p, u)\n  if j.comment == nil then j.comment = 'x' end\n  return slurm.SUCCESS\nend\nfunction slurm_job_modify(j, jr, p, u) return slurm.SUCCESS end\n"}},
		{name: "bad lua", spec: sunkv1.SlurmClusterSpec{JobSubmitLua: "function slurm_job_submit(\n  return\n"}, wantErr: "spec.jobSubmitLua"},
		{name: "lua 5.3 integer division is not 5.1", spec: sunkv1.SlurmClusterSpec{JobSubmitLua: "x = 7 // 2\n"}, wantErr: "does not parse"},
		{name: "lua without the hook warns", spec: sunkv1.SlurmClusterSpec{JobSubmitLua: "x = 1\n"}, warn: true},
		{name: "bad extra conf", spec: sunkv1.SlurmClusterSpec{Controller: sunkv1.ControllerSpec{ExtraConf: "SlurmdTimeout=3\nthis is not conf"}}, wantErr: "spec.controller.extraConf"},
		{name: "bad cgroup conf", spec: sunkv1.SlurmClusterSpec{CgroupConf: "=x"}, wantErr: "spec.cgroupConf"},
		{name: "qos preemption without accounting", spec: sunkv1.SlurmClusterSpec{Preemption: sunkv1.PreemptionSpec{Type: sunkv1.PreemptionQOS}}, wantErr: "spec.preemption.type"},
		{name: "qos preemption with accounting", spec: sunkv1.SlurmClusterSpec{Preemption: sunkv1.PreemptionSpec{Type: sunkv1.PreemptionQOS}, Accounting: sunkv1.AccountingSpec{Mode: sunkv1.AccountingManaged}}},
		{name: "partition_prio needs no accounting", spec: sunkv1.SlurmClusterSpec{Preemption: sunkv1.PreemptionSpec{Type: sunkv1.PreemptionPartitionPrio}}},
		{name: "script without shebang", spec: sunkv1.SlurmClusterSpec{Epilog: []sunkv1.Script{{Name: "a", Inline: ptr.To("#!/bin/sh\n")}, {Name: "b", Inline: ptr.To("echo")}}}, wantErr: "spec.epilog[1].inline"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs, warnings := ValidateSpec(&c.spec, field.NewPath("spec"))
			got := errs.ToAggregate()
			switch {
			case c.wantErr == "" && got != nil:
				t.Fatalf("unexpected error: %v", got)
			case c.wantErr != "" && (got == nil || !strings.Contains(got.Error(), c.wantErr)):
				t.Fatalf("error %v, want one naming %q", got, c.wantErr)
			}
			if (len(warnings) > 0) != c.warn {
				t.Fatalf("warnings %v, want some: %v", warnings, c.warn)
			}
		})
	}
}
