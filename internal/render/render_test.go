package render

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	goldenfile "sunk.dev/sunk/internal/golden"
	"sunk.dev/sunk/pkg/wellknown"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func golden(t *testing.T, name, got string) {
	t.Helper()
	goldenfile.Check(t, filepath.Join("testdata", name), got, *update, "go test ./internal/render -update")
}

func minimal() *sunkv1.SlurmCluster {
	return &sunkv1.SlurmCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-cluster", Namespace: "slurm"},
		Spec:       sunkv1.SlurmClusterSpec{Image: "sunk.dev/slurm:24.11-local"},
	}
}

func full() *sunkv1.SlurmCluster {
	sc := minimal()
	sc.Spec.ClusterName = "research"
	sc.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
	sc.Spec.Controller = sunkv1.ControllerSpec{
		Backup:       true,
		NodeWatcher:  true,
		StateStorage: sunkv1.StorageSpec{Size: ptr.To(resource.MustParse("5Gi")), StorageClassName: ptr.To("shared")},
		ExtraConf:    "SlurmdTimeout=300\nSchedulerParameters=bf_continue\n\nNodeName=static-1 CPUs=4 State=CLOUD",
	}
	sc.Spec.Accounting = sunkv1.AccountingSpec{Mode: sunkv1.AccountingManaged}
	sc.Spec.Partitions = []sunkv1.PartitionSpec{
		{Name: "cpu", NodeSets: []string{"cpu-a", "cpu-b"}},
		{Name: "gpu", NodeSets: []string{"gpu"}, Default: true, MaxTime: "1-00:00:00", ExtraConf: "OverSubscribe=NO"},
		{Name: "urgent", PriorityTier: ptr.To(int32(10))},
		{Name: "any"},
	}
	sc.Spec.Preemption = sunkv1.PreemptionSpec{Type: sunkv1.PreemptionPartitionPrio, Mode: sunkv1.PreemptionRequeue, ExemptTime: "10"}
	sc.Spec.JobSubmitLua = "function slurm_job_submit(job_desc, part_list, submit_uid)\n  return slurm.SUCCESS\nend\n"
	sc.Spec.CgroupConf = "ConstrainRAMSpace=no\nAllowedRAMSpace=95"
	sc.Spec.Login = sunkv1.LoginSpec{
		Replicas:            ptr.To(int32(2)),
		SSH:                 sunkv1.SSHSpec{AuthorizedKeysSecretRef: &corev1.LocalObjectReference{Name: "keys"}, ServiceType: corev1.ServiceTypeNodePort},
		SSSDConfigSecretRef: &corev1.LocalObjectReference{Name: "sssd"},
		Services: []sunkv1.S6Service{
			{Name: "motd", Type: sunkv1.S6Oneshot, Run: "#!/bin/sh\necho hi > /etc/motd\n"},
			{Name: "exporter", Run: "#!/bin/sh\nexec sleep infinity\n"},
		},
		Sidecars: []corev1.Container{{Name: "log-shipper", Image: "busybox"}},
	}
	sc.Spec.SharedVolumes = []sunkv1.SharedVolume{{Name: "home", ClaimName: "home", MountPath: "/home"}}
	return sc
}

func fullInputs(sc *sunkv1.SlurmCluster) ConfigInputs {
	return ConfigInputs{
		Names:  clusternames.For(sc, ""),
		Prolog: []ResolvedScript{{Name: "check-gpus", Text: "#!/bin/sh\nexit 0\n"}, {Name: "marker", Text: "#!/bin/sh\ntouch /tmp/m\n"}},
		Epilog: []ResolvedScript{{Name: "cleanup", Text: "#!/bin/sh\nrm -f /tmp/m\n"}},
		// Two NodeSets name their type, one twice; a third has untyped GPUs.
		GPUs: true, GPUTypes: []string{"h100", "a100", "h100", ""},
		// As a 26.05 cluster renders it.
		QuiesceTimeout: true,
		// A NodeSet enables containers for jobs.
		Containers: true,
	}
}

func files(c *Config) string {
	var b strings.Builder
	for _, m := range []map[string]string{c.Files, c.Scripts} {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			b.WriteString("=== " + k + "\n" + m[k])
		}
	}
	return b.String()
}

func TestRenderConfigGolden(t *testing.T) {
	for name, sc := range map[string]*sunkv1.SlurmCluster{"minimal": minimal(), "full": full()} {
		in := ConfigInputs{Names: clusternames.For(sc, "")}
		if name == "full" {
			in = fullInputs(sc)
		}
		c, err := RenderConfig(sc, in)
		if err != nil {
			t.Fatal(err)
		}
		golden(t, name+".conf.golden", files(c))
		// GPUDevices is what the controller reports once slurmctld runs c (NodeSets with GPUs
		// wait for it): it must say exactly whether gres.conf has the Include.
		if hasInclude := strings.Contains(c.Files["gres.conf"], "Include "+GresNodeConfPath); c.GPUDevices != hasInclude {
			t.Errorf("%s: GPUDevices %v, but gres.conf has the Include: %v", name, c.GPUDevices, hasInclude)
		}
	}
}

func TestObjectsGolden(t *testing.T) {
	for name, sc := range map[string]*sunkv1.SlurmCluster{"minimal": minimal(), "full": full()} {
		n := clusternames.For(sc, "")
		c, err := RenderConfig(sc, ConfigInputs{Names: n})
		if err != nil {
			t.Fatal(err)
		}
		objs := []any{ControllerService(n), ControllerStatefulSet(sc, n, c), RestAPIService(n), RestAPIDeployment(sc, n, c),
			LoginService(sc, n), LoginHostsService(n), LoginStatefulSet(sc, n, c), S6ServicesConfigMap(n, n.LoginServices, wellknown.ComponentLogin, sc.Spec.Login.Services)}
		if sc.Spec.Controller.NodeWatcher {
			objs = append(objs, NodeWatchService(n))
		}
		for _, b := range ControlPlaneDisruptionBudgets(n) {
			objs = append(objs, b)
		}
		if sc.Spec.Controller.Backup {
			objs = append(objs, SharedStateClaim(sc, n))
			for _, s := range ControllerPodServices(sc, n) {
				objs = append(objs, s)
			}
		}
		if sc.Spec.Accounting.Mode == sunkv1.AccountingManaged {
			objs = append(objs, AccountingService(n), AccountingStatefulSet(sc, n, c, "h"), DatabaseService(n), DatabaseStatefulSet(sc, n),
				SlurmdbdConf(sc, n, "secret-password"))
		}
		var b strings.Builder
		for _, o := range objs {
			y, err := yaml.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString("---\n")
			b.Write(y)
		}
		golden(t, name+".objects.golden", b.String())
	}
}

func TestExtraConfReplacesDefaultsAndHashes(t *testing.T) {
	sc := minimal()
	n := clusternames.For(sc, "")
	base, _ := RenderConfig(sc, ConfigInputs{Names: n})

	sc.Spec.Controller.ExtraConf = "slurmdtimeout=120"
	c, _ := RenderConfig(sc, ConfigInputs{Names: n})
	conf := c.Files["slurm.conf"]
	if strings.Contains(conf, "SlurmdTimeout=300") || !strings.Contains(conf, "slurmdtimeout=120") {
		t.Errorf("the extra line must replace the default, case-insensitively:\n%s", conf)
	}
	if c.Hash == base.Hash || c.RestartHash != base.RestartHash {
		t.Errorf("a reconfigurable change must change Hash only: %v", [4]string{base.Hash, c.Hash, base.RestartHash, c.RestartHash})
	}

	sc.Spec.Controller.ExtraConf = "SlurmctldPort=7000"
	c, _ = RenderConfig(sc, ConfigInputs{Names: n})
	if c.RestartHash == base.RestartHash {
		t.Error("a port change must change RestartHash")
	}

	sc.Spec.Controller.ExtraConf = ""
	sc.Spec.Partitions = []sunkv1.PartitionSpec{{Name: "a"}, {Name: "b"}}
	c, _ = RenderConfig(sc, ConfigInputs{Names: n})
	if c.RestartHash != base.RestartHash || c.Hash == base.Hash {
		t.Error("adding partitions is a reconfigure, not a restart")
	}
	if got := HashInSlurmConf(c.Files["slurm.conf"]); got != c.Hash {
		t.Errorf("HashInSlurmConf = %q, want %q", got, c.Hash)
	}
	if !strings.Contains(c.Files["slurm.conf"], "PartitionName=a Nodes=ALL Default=YES") {
		t.Errorf("the first partition is the default when none is marked:\n%s", c.Files["slurm.conf"])
	}
}

// TestProductionDefaults: every default sunk chooses is in slurm.conf once, reaches
// slurmctld by reconfigure (not a restart), and an extraConf line replaces it by key, the
// whole SchedulerParameters list included.
func TestProductionDefaults(t *testing.T) {
	sc := minimal()
	n := clusternames.For(sc, "")
	base, err := RenderConfig(sc, ConfigInputs{Names: n})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(base.Files["slurm.conf"], "\n")
	count := func(key string) int {
		c := 0
		for _, l := range lines {
			if slices.Contains(confKeys(l), strings.ToLower(key)) {
				c++
			}
		}
		return c
	}
	for _, d := range productionDefaults {
		key, _, _ := strings.Cut(d, "=")
		if count(key) != 1 || !slices.Contains(lines, d) {
			t.Errorf("%s: want the line %q once in slurm.conf", key, d)
		}
		if restartKeys[strings.ToLower(key)] {
			t.Errorf("%s: a production default must be reconfigurable, not restart-only", key)
		}
	}
	for _, want := range []string{"batch_sched_delay=0", "bf_continue", "sched_interval=10", "max_rpc_cnt=150"} {
		if !strings.Contains(base.Files["slurm.conf"], want) {
			t.Errorf("SchedulerParameters lacks %s", want)
		}
	}

	sc.Spec.Controller.ExtraConf = "SchedulerParameters=bf_interval=60\nMinJobAge=600"
	c, err := RenderConfig(sc, ConfigInputs{Names: n})
	if err != nil {
		t.Fatal(err)
	}
	lines = strings.Split(c.Files["slurm.conf"], "\n")
	if count("SchedulerParameters") != 1 || !slices.Contains(lines, "SchedulerParameters=bf_interval=60") ||
		count("MinJobAge") != 1 || !slices.Contains(lines, "MinJobAge=600") {
		t.Errorf("the admin's lines must replace sunk's:\n%s", c.Files["slurm.conf"])
	}
	if c.RestartHash != base.RestartHash {
		t.Error("overriding a production default must not restart slurmctld")
	}
}

// TestRestAPISize: slurmrestd gets sunk's thread and connection defaults, and the spec's
// values when set, as the options Slurm 24.11's slurmrestd reads (-t, --max-connections).
func TestRestAPISize(t *testing.T) {
	sc := minimal()
	n := clusternames.For(sc, "")
	c, err := RenderConfig(sc, ConfigInputs{Names: n})
	if err != nil {
		t.Fatal(err)
	}
	args := func() []string { return RestAPIDeployment(sc, n, c).Spec.Template.Spec.Containers[0].Args }
	if got, want := args(), []string{"slurmrestd", "-s", "openapi/slurmctld", "-t", "32", "--max-connections", "256"}; !slices.Equal(got, want) {
		t.Errorf("default args %q, want %q", got, want)
	}
	sc.Spec.RestAPI.Threads, sc.Spec.RestAPI.MaxConnections = ptr.To(int32(64)), ptr.To(int32(512))
	if got, want := args(), []string{"slurmrestd", "-s", "openapi/slurmctld", "-t", "64", "--max-connections", "512"}; !slices.Equal(got, want) {
		t.Errorf("args %q, want %q", got, want)
	}
}

// TestSlurmTestBedHasProductionDefaults: the standalone Slurm of the integration tests
// (hack/env-slurm.sh writes its own slurm.conf) runs with the defaults sunk renders, so that
// what the tests measure (job start latency, node list changes) is what a sunk cluster does.
func TestSlurmTestBedHasProductionDefaults(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("..", "..", "hack", "env-slurm.sh"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(script), "\n")
	for _, d := range productionDefaults {
		if !slices.Contains(lines, d) {
			t.Errorf("hack/env-slurm.sh's slurm.conf lacks the line %q", d)
		}
	}
}

func TestStoragePassword(t *testing.T) {
	for p, want := range map[string]string{"abc": "abc", "a b": `"a b"`, "a#b": `a\#b`, `a\b`: `a\\b`, `ab\`: `ab\\`, "a #b": `"a \#b"`} {
		if got := quoteStoragePassword(p); got != want {
			t.Errorf("quoteStoragePassword(%q) = %s, want %s", p, got, want)
		}
	}
	for _, bad := range []string{`a"b`, "a\nStorageHost=evil", "a\rb", "a\x00b"} {
		if CheckStoragePassword(bad) == nil {
			t.Errorf("password %q accepted", bad)
		}
	}
	if err := CheckStoragePassword("s3cr3t-_.!@ #x"); err != nil {
		t.Error(err)
	}
}

// TestNonComputePodsHardened: no pod but the compute pods holds a ServiceAccount token, runs
// without the runtime's seccomp profile, or keeps a capability it does not list (issue 21).
// The login container is the one Slurm container that may gain privileges (users' su, sudo).
func TestNonComputePodsHardened(t *testing.T) {
	sc := full()
	n := clusternames.For(sc, "")
	c, err := RenderConfig(sc, ConfigInputs{Names: n})
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string][]corev1.Capability{
		"slurmctld":  daemonCapabilities,
		"slurmdbd":   daemonCapabilities,
		"mariadb":    daemonCapabilities,
		"slurmrestd": append(append([]corev1.Capability{}, daemonCapabilities...), "KILL"),
		"login": {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "NET_BIND_SERVICE",
			"SETGID", "SETUID", "SYS_CHROOT"},
		"sackd": append(append([]corev1.Capability{}, daemonCapabilities...), "KILL"),
	}
	seen := map[string]bool{}
	for _, pod := range []corev1.PodTemplateSpec{ControllerStatefulSet(sc, n, c).Spec.Template, RestAPIDeployment(sc, n, c).Spec.Template,
		AccountingStatefulSet(sc, n, c, "h").Spec.Template, DatabaseStatefulSet(sc, n).Spec.Template, LoginStatefulSet(sc, n, c).Spec.Template} {
		spec := pod.Spec
		component := pod.Labels[wellknown.LabelComponent]
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			t.Errorf("%s: the ServiceAccount token is mounted", component)
		}
		if spec.SecurityContext == nil || spec.SecurityContext.SeccompProfile == nil || spec.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: pod seccomp profile is not RuntimeDefault: %+v", component, spec.SecurityContext)
		}
		for _, ctr := range spec.Containers {
			want, ours := allowed[ctr.Name]
			if !ours {
				continue // a sidecar of the spec's
			}
			seen[ctr.Name] = true
			sec := ctr.SecurityContext
			if sec == nil || sec.Capabilities == nil || !slices.Equal(sec.Capabilities.Drop, []corev1.Capability{"ALL"}) {
				t.Errorf("%s: container %s does not drop every capability: %+v", component, ctr.Name, sec)
				continue
			}
			if !slices.Equal(sec.Capabilities.Add, want) {
				t.Errorf("%s: container %s adds %v, want %v", component, ctr.Name, sec.Capabilities.Add, want)
			}
			if sec.Privileged != nil && *sec.Privileged {
				t.Errorf("%s: container %s is privileged", component, ctr.Name)
			}
			if escalates := sec.AllowPrivilegeEscalation == nil || *sec.AllowPrivilegeEscalation; escalates != (ctr.Name == "login") {
				t.Errorf("%s: container %s allowPrivilegeEscalation %v", component, ctr.Name, sec.AllowPrivilegeEscalation)
			}
		}
	}
	for name := range allowed {
		if !seen[name] {
			t.Errorf("no pod has the container %s", name)
		}
	}
}

// TestSlurmctldParameters: conmgr_quiesce_timeout only for a slurmctld that has it (26.05), and
// longer than the 29 s a backup's REQUEST_CONTROL handler holds its quiesce up.
func TestSlurmctldParameters(t *testing.T) {
	for _, tc := range []struct {
		in   ConfigInputs
		want string
	}{
		{ConfigInputs{}, "SlurmctldParameters=enable_configless"},
		{ConfigInputs{QuiesceTimeout: true}, "SlurmctldParameters=enable_configless,conmgr_quiesce_timeout=60"},
	} {
		if got := slurmctldParameters(tc.in); got != tc.want {
			t.Errorf("slurmctldParameters(QuiesceTimeout=%v) = %q, want %q", tc.in.QuiesceTimeout, got, tc.want)
		}
	}
	// src/slurmctld/slurmctld.h CONTROL_TIMEOUT: the handler waits CONTROL_TIMEOUT-1 seconds.
	const controlTimeout = 30
	if QuiesceTimeout <= controlTimeout {
		t.Errorf("QuiesceTimeout %d must exceed Slurm's CONTROL_TIMEOUT %d", QuiesceTimeout, controlTimeout)
	}
}
