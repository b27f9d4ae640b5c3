package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

const goodLua = "function slurm_job_submit(j, p, u) return slurm.SUCCESS end\nfunction slurm_job_modify(j, jr, p, u) return slurm.SUCCESS end\n"

// testOptions: the operator lets SlurmClusters take over SlurmctldPort only.
var testOptions = Options{AllowedUnsafeConfKeys: []string{"SlurmctldPort"}}

func TestValidateSpec(t *testing.T) {
	cases := []struct {
		name    string
		spec    sunkv1.SlurmClusterSpec
		wantErr string
		orErr   string // another refusal that is as right (which of two limits a script hits first)
		warn    bool
	}{
		{name: "empty is fine", spec: sunkv1.SlurmClusterSpec{Image: "x"}},
		{name: "a REST version sunk speaks", spec: sunkv1.SlurmClusterSpec{RestAPI: sunkv1.RestAPISpec{Version: "v0.0.45"}}},
		{name: "a REST version sunk does not speak", spec: sunkv1.SlurmClusterSpec{RestAPI: sunkv1.RestAPISpec{Version: "v0.0.40"}},
			wantErr: `spec.restApi.version: Unsupported value: "v0.0.40": supported values: "v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"`},
		{name: "good lua", spec: sunkv1.SlurmClusterSpec{JobSubmitLua: "function slurm_job_submit(j, p, u)\n  if j.comment == nil then j.comment = 'x' end\n  return slurm.SUCCESS\nend\nfunction slurm_job_modify(j, jr, p, u) return slurm.SUCCESS end\n"}},
		{name: "bad lua", spec: sunkv1.SlurmClusterSpec{JobSubmitLua: "function slurm_job_submit(\n  return\n"}, wantErr: "spec.jobSubmitLua"},
		{name: "lua 5.3 integer division is not 5.1", spec: sunkv1.SlurmClusterSpec{JobSubmitLua: "x = 7 // 2\n"}, wantErr: "does not parse"},
		{name: "lua without the hooks", spec: sunkv1.SlurmClusterSpec{JobSubmitLua: "x = 1\n"}, wantErr: "defines no function slurm_job_submit"},
		{name: "lua without slurm_job_modify", spec: sunkv1.SlurmClusterSpec{JobSubmitLua: "function slurm_job_submit(j, p, u) return slurm.SUCCESS end\n"}, wantErr: "slurm_job_modify"},
		{name: "lua whose top level fails", spec: sunkv1.SlurmClusterSpec{JobSubmitLua: goodLua + "undefined_function()\n"}, wantErr: "top-level code fails"},
		{name: "lua that loops at load", spec: sunkv1.SlurmClusterSpec{JobSubmitLua: goodLua + "while true do end\n"}, wantErr: "did not finish"},
		{name: "lua may not read files at load", spec: sunkv1.SlurmClusterSpec{JobSubmitLua: goodLua + "local f = io.open('/etc/passwd')\n"}, wantErr: "top-level code fails"},
		{name: "lua may not reach slurmctld's globals at load", spec: sunkv1.SlurmClusterSpec{JobSubmitLua: goodLua + "local g = getfenv(0)\n"}, wantErr: "jobSubmitLua:3: attempt to call a non-function object"},
		{name: "lua may not load code at load", spec: sunkv1.SlurmClusterSpec{JobSubmitLua: goodLua + "loadstring('x = 1')()\n"}, wantErr: "top-level code fails"},
		{name: "lua may not run commands at load", spec: sunkv1.SlurmClusterSpec{JobSubmitLua: goodLua + "os.execute('true')\n"}, wantErr: "top-level code fails"},
		{name: "an image pull Secret without a name", spec: sunkv1.SlurmClusterSpec{ImagePullSecrets: []corev1.LocalObjectReference{{Name: "ok"}, {}}}, wantErr: "spec.imagePullSecrets[1].name"},
		{name: "lua reads the clock at load", spec: sunkv1.SlurmClusterSpec{JobSubmitLua: goodLua + "local started = os.time()\n"}},
		{name: "lua that builds a huge string in one call", spec: sunkv1.SlurmClusterSpec{JobSubmitLua: goodLua + "local s = string.rep('x', 2^40)\n"}, wantErr: "string.rep"},
		{name: "lua that builds a huge string in one method call", spec: sunkv1.SlurmClusterSpec{JobSubmitLua: goodLua + "local s = ('xy'):rep(2^62)\n"}, wantErr: "string.rep"},
		// A script that fills memory is refused by the sandbox's heap limit or, where the
		// machine is loaded, by its CPU bound first: allocating 100 MiB took from 10 ms to 1.9 s
		// beside a running soak (the kernel's page faults count), and CI refused the doubling
		// string of an earlier version of this case for time twice. Either way it is refused
		// and the operator lives on.
		{name: "lua that fills memory at load", spec: sunkv1.SlurmClusterSpec{JobSubmitLua: goodLua + "local t = {}\nfor i = 1, 1024 do t[i] = string.rep('x', 2^20 - i) end\n"},
			wantErr: "MiB at load", orErr: "did not finish"},
		{name: "lua that backtracks at load", spec: sunkv1.SlurmClusterSpec{JobSubmitLua: goodLua + "local s = string.rep('a', 2^20)\nlocal x = s:find('.-.-.-.-.-b')\n"}, wantErr: "did not finish"},
		{name: "lua with a modest string.rep at load", spec: sunkv1.SlurmClusterSpec{JobSubmitLua: goodLua + "local sep = string.rep('-', 20)\nslurm.log_info(sep)\n"}},
		{name: "lua using slurm's table at load", spec: sunkv1.SlurmClusterSpec{JobSubmitLua: goodLua + "slurm.log_info('loaded %d', slurm.NO_VAL + 1)\nlocal x = slurm.ESLURM_INVALID_LICENSES + 1\n"}},
		{name: "unknown slurm.conf key", spec: sunkv1.SlurmClusterSpec{Controller: sunkv1.ControllerSpec{ExtraConf: "BogusKey=1"}}, wantErr: "BogusKey is not a slurm.conf key"},
		{name: "denied key", spec: sunkv1.SlurmClusterSpec{Controller: sunkv1.ControllerSpec{ExtraConf: "AuthType=auth/none"}}, wantErr: "sets AuthType, which sunk keeps"},
		{name: "denied key with spaces around =", spec: sunkv1.SlurmClusterSpec{Controller: sunkv1.ControllerSpec{ExtraConf: "SlurmUser = root"}}, wantErr: "sets SlurmUser"},
		{name: "two keys on a line", spec: sunkv1.SlurmClusterSpec{Controller: sunkv1.ControllerSpec{ExtraConf: "MinJobAge=5\nMessageTimeout=30 SelectTypeParameters=CR_CPU"}},
			wantErr: `Invalid value: "line 2": MessageTimeout=30 and SelectTypeParameters= on one line: Slurm reads one key a line`},
		{name: "two keys on a cgroup.conf line", spec: sunkv1.SlurmClusterSpec{CgroupConf: "ConstrainRAMSpace=yes ConstrainCores=yes"}, wantErr: "spec.cgroupConf: Invalid value: \"line 1\": ConstrainRAMSpace=yes and ConstrainCores="},
		{name: "denied key later on a line", spec: sunkv1.SlurmClusterSpec{Controller: sunkv1.ControllerSpec{ExtraConf: "MaxJobCount=5 authtype=auth/none"}}, wantErr: "sets authtype"},
		{name: "unsafe key later on a line", spec: sunkv1.SlurmClusterSpec{Controller: sunkv1.ControllerSpec{ExtraConf: "MaxJobCount=5 SlurmctldPort=6900", UnsafeConfKeys: []string{"slurmctldport"}}},
			wantErr: "Slurm reads one key a line", warn: true},
		{name: "denied key allowed by the escape", spec: sunkv1.SlurmClusterSpec{Controller: sunkv1.ControllerSpec{ExtraConf: "SlurmctldPort=6900", UnsafeConfKeys: []string{"slurmctldport"}}}, warn: true},
		{name: "the escape for a key the operator does not allow", spec: sunkv1.SlurmClusterSpec{Controller: sunkv1.ControllerSpec{ExtraConf: "AuthType=auth/none", UnsafeConfKeys: []string{"AuthType"}}}, wantErr: "spec.controller.unsafeConfKeys[0]: Forbidden: this operator does not let SlurmClusters take over AuthType"},
		{name: "node lines keep their parameters", spec: sunkv1.SlurmClusterSpec{Controller: sunkv1.ControllerSpec{ExtraConf: "NodeName=static-1 CPUs=4 State=CLOUD\nSchedulerParameters=bf_continue # comment"}}},
		{name: "escaped comment hiding a denied key", spec: sunkv1.SlurmClusterSpec{Controller: sunkv1.ControllerSpec{ExtraConf: `MaxJobCount=5\# AuthType=auth/none`}}, wantErr: "backslash"},
		{name: "line continuation", spec: sunkv1.SlurmClusterSpec{Controller: sunkv1.ControllerSpec{ExtraConf: "MaxJobCount=5 \\\nMinJobAge=10"}}, wantErr: "backslash"},
		{name: "program run in slurmctld's pod", spec: sunkv1.SlurmClusterSpec{Controller: sunkv1.ControllerSpec{ExtraConf: "PrologSlurmctld=/tmp/x"}}, wantErr: "sets PrologSlurmctld, which sunk keeps"},
		{name: "prolog past spec.prolog", spec: sunkv1.SlurmClusterSpec{Controller: sunkv1.ControllerSpec{ExtraConf: "prolog = /tmp/x"}}, wantErr: "set from spec.prolog"},
		{name: "partition params that sunk writes", spec: sunkv1.SlurmClusterSpec{Partitions: []sunkv1.PartitionSpec{{Name: "p", ExtraConf: "Nodes=ALL"}}}, wantErr: "spec.partitions[0].extraConf: Forbidden: Nodes"},
		{name: "partition params that sunk writes, any case", spec: sunkv1.SlurmClusterSpec{Partitions: []sunkv1.PartitionSpec{{Name: "p", ExtraConf: "OverSubscribe=NO maxtime =1"}}}, wantErr: "Forbidden: maxtime"},
		{name: "partition tier twice", spec: sunkv1.SlurmClusterSpec{Partitions: []sunkv1.PartitionSpec{{Name: "p", PriorityTier: ptr.To[int32](5), ExtraConf: "PriorityTier=7"}}}, wantErr: "Forbidden: PriorityTier"},
		{name: "partition tier in extraConf alone", spec: sunkv1.SlurmClusterSpec{Partitions: []sunkv1.PartitionSpec{{Name: "p", ExtraConf: "PriorityTier=7"}}}},
		{name: "partition params of its own", spec: sunkv1.SlurmClusterSpec{Partitions: []sunkv1.PartitionSpec{{Name: "p", ExtraConf: "OverSubscribe=NO AllowAccounts=a,b"}}}},
		{name: "carriage return", spec: sunkv1.SlurmClusterSpec{Controller: sunkv1.ControllerSpec{ExtraConf: "MaxJobCount=5\r"}}, wantErr: "control character"},
		{name: "unknown cgroup.conf key", spec: sunkv1.SlurmClusterSpec{CgroupConf: "ConstrainRAMSpace=yes\nAuthType=x"}, wantErr: "AuthType is not a cgroup.conf key"},
		{name: "partition params inject a line", spec: sunkv1.SlurmClusterSpec{Partitions: []sunkv1.PartitionSpec{{Name: "p", ExtraConf: "OverSubscribe=NO\nAuthType=auth/none"}}}, wantErr: "spec.partitions[0].extraConf"},
		{name: "partition params with a top-level key", spec: sunkv1.SlurmClusterSpec{Partitions: []sunkv1.PartitionSpec{{Name: "p", ExtraConf: "OverSubscribe=NO AuthType=auth/none"}}}, wantErr: "AuthType is not a parameter of a PartitionName line"},
		{name: "partition node set that injects", spec: sunkv1.SlurmClusterSpec{Partitions: []sunkv1.PartitionSpec{{Name: "p", NodeSets: []string{"gpu\nAuthType=auth/none"}}}}, wantErr: "spec.partitions[0].nodeSets[0]"},
		{name: "external database host that injects", spec: sunkv1.SlurmClusterSpec{Accounting: sunkv1.AccountingSpec{Mode: sunkv1.AccountingExternal, External: &sunkv1.ExternalDatabase{Host: "db\nStorageType=x", User: "slurm"}}}, wantErr: "spec.accounting.external.host"},
		{name: "external database user and name", spec: sunkv1.SlurmClusterSpec{Accounting: sunkv1.AccountingSpec{Mode: sunkv1.AccountingExternal, External: &sunkv1.ExternalDatabase{Host: "db.example", User: "a b", Database: "x;y"}}}, wantErr: "spec.accounting.external.user"},
		{name: "bad extra conf", spec: sunkv1.SlurmClusterSpec{Controller: sunkv1.ControllerSpec{ExtraConf: "SlurmdTimeout=3\nthis is not conf"}}, wantErr: "spec.controller.extraConf"},
		{name: "bad cgroup conf", spec: sunkv1.SlurmClusterSpec{CgroupConf: "=x"}, wantErr: "spec.cgroupConf"},
		{name: "qos preemption without accounting", spec: sunkv1.SlurmClusterSpec{Preemption: sunkv1.PreemptionSpec{Type: sunkv1.PreemptionQOS}}, wantErr: "spec.preemption.type"},
		{name: "qos preemption with accounting", spec: sunkv1.SlurmClusterSpec{Preemption: sunkv1.PreemptionSpec{Type: sunkv1.PreemptionQOS}, Accounting: sunkv1.AccountingSpec{Mode: sunkv1.AccountingManaged}}},
		{name: "partition_prio needs no accounting", spec: sunkv1.SlurmClusterSpec{Preemption: sunkv1.PreemptionSpec{Type: sunkv1.PreemptionPartitionPrio}}},
		{name: "scheduler policy", spec: sunkv1.SlurmClusterSpec{Partitions: []sunkv1.PartitionSpec{{Name: "batch", Default: true}, {Name: "urgent"}},
			Preemption: sunkv1.PreemptionSpec{Type: sunkv1.PreemptionPartitionPrio},
			SchedulerPolicy: sunkv1.SchedulerPolicy{Tenants: []sunkv1.SchedulerTenant{
				{Name: "serving", Namespaces: []string{"serving"}, Partitions: []string{"urgent"}, Accounts: []string{"*"}, Preempt: true},
				{Name: "research", Namespaces: []string{"ml", "hpc"}, QOS: []string{"normal", "long"}, MaxPriority: ptr.To[int64](1000)}}}}},
		{name: "scheduler policy partitions of the default spec", spec: sunkv1.SlurmClusterSpec{SchedulerPolicy: sunkv1.SchedulerPolicy{Tenants: []sunkv1.SchedulerTenant{
			{Name: "a", Namespaces: []string{"a"}, Partitions: []string{"all"}}}}}},
		{name: "scheduler policy with a namespace in two tenants", spec: sunkv1.SlurmClusterSpec{SchedulerPolicy: sunkv1.SchedulerPolicy{Tenants: []sunkv1.SchedulerTenant{
			{Name: "a", Namespaces: []string{"x", "shared"}}, {Name: "b", Namespaces: []string{"shared"}}}}},
			wantErr: `spec.schedulerPolicy.tenants[1].namespaces[0]: Invalid value: "shared": already in tenant a`},
		{name: "scheduler policy naming an unknown partition", spec: sunkv1.SlurmClusterSpec{Partitions: []sunkv1.PartitionSpec{{Name: "batch"}},
			SchedulerPolicy: sunkv1.SchedulerPolicy{Tenants: []sunkv1.SchedulerTenant{{Name: "a", Namespaces: []string{"a"}, Partitions: []string{"batch", "urgent"}}}}},
			wantErr: `spec.schedulerPolicy.tenants[0].partitions[1]: Unsupported value: "urgent"`},
		{name: "scheduler policy wildcard among names", spec: sunkv1.SlurmClusterSpec{SchedulerPolicy: sunkv1.SchedulerPolicy{Tenants: []sunkv1.SchedulerTenant{
			{Name: "a", Namespaces: []string{"a"}, QOS: []string{"*", "high"}}}}},
			wantErr: "spec.schedulerPolicy.tenants[0].qos"},
		{name: "scheduler policy default accounts", spec: sunkv1.SlurmClusterSpec{SchedulerPolicy: sunkv1.SchedulerPolicy{Tenants: []sunkv1.SchedulerTenant{
			{Name: "a", Namespaces: []string{"a"}, Accounts: []string{"team-a", "shared"}, DefaultAccount: "team-a"},
			{Name: "b", Namespaces: []string{"b"}, Accounts: []string{"*"}, DefaultAccount: "team-b"}}}}},
		{name: "scheduler policy default account the tenant may not charge", spec: sunkv1.SlurmClusterSpec{SchedulerPolicy: sunkv1.SchedulerPolicy{Tenants: []sunkv1.SchedulerTenant{
			{Name: "a", Namespaces: []string{"a"}, Accounts: []string{"shared"}, DefaultAccount: "team-a"}}}},
			wantErr: `spec.schedulerPolicy.tenants[0].defaultAccount: Invalid value: "team-a": must be one of accounts`},
		{name: "scheduler policy preempt without preemption", spec: sunkv1.SlurmClusterSpec{SchedulerPolicy: sunkv1.SchedulerPolicy{Tenants: []sunkv1.SchedulerTenant{
			{Name: "a", Namespaces: []string{"a"}, Preempt: true}}}}, warn: true},
		{name: "sidecar named like the login pod's key holder", spec: sunkv1.SlurmClusterSpec{Login: sunkv1.LoginSpec{Sidecars: []corev1.Container{{Name: "x"}, {Name: "sackd"}}}},
			wantErr: "spec.login.sidecars[1].name"},
		{name: "root's keys without root login", spec: sunkv1.SlurmClusterSpec{Login: sunkv1.LoginSpec{SSH: sunkv1.SSHSpec{
			AuthorizedKeysSecretRef: &corev1.LocalObjectReference{Name: "k"}}}}, warn: true},
		{name: "root login opted into", spec: sunkv1.SlurmClusterSpec{Login: sunkv1.LoginSpec{SSH: sunkv1.SSHSpec{
			AuthorizedKeysSecretRef: &corev1.LocalObjectReference{Name: "k"}, PermitRootLogin: true}}}},
		{name: "script without shebang", spec: sunkv1.SlurmClusterSpec{Epilog: []sunkv1.Script{{Name: "a", Inline: ptr.To("#!/bin/sh\n")}, {Name: "b", Inline: ptr.To("echo")}}}, wantErr: "spec.epilog[1].inline"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs, warnings := testOptions.ValidateSpec(&c.spec, field.NewPath("spec"))
			got := errs.ToAggregate()
			switch {
			case c.wantErr == "" && got != nil:
				t.Fatalf("unexpected error: %v", got)
			case c.wantErr != "" && (got == nil || !strings.Contains(got.Error(), c.wantErr) && (c.orErr == "" || !strings.Contains(got.Error(), c.orErr))):
				t.Fatalf("error %v, want one naming %q", got, c.wantErr)
			}
			if (len(warnings) > 0) != c.warn {
				t.Fatalf("warnings %v, want some: %v", warnings, c.warn)
			}
		})
	}
}
