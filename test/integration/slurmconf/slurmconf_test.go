//go:build integration

// Package slurmconf_test runs Slurm 24.11's own config parser (scontrol, which parses
// slurm.conf before it does anything) in the test bed (hack/env-slurm.sh) on what sunk renders
// and on values admission lets through: the reading of Slurm's parser that internal/validation
// encodes is checked against the parser itself. Each check is a throwaway scontrol process on
// files of its own; the test bed's slurmctld is not contacted.
package slurmconf_test

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/internal/validation"
	"sunk.dev/sunk/test/testenv"
)

// goodLua defines both functions Slurm requires.
const goodLua = "function slurm_job_submit(j, p, u) return slurm.SUCCESS end\nfunction slurm_job_modify(j, jr, p, u) return slurm.SUCCESS end\n"

func cluster() *sunkv1.SlurmCluster {
	return &sunkv1.SlurmCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "conf-check", Namespace: "slurm"},
		Spec: sunkv1.SlurmClusterSpec{
			Image:        "sunk.dev/slurm:24.11-local",
			Controller:   sunkv1.ControllerSpec{Backup: true, ExtraConf: "SlurmdTimeout = 200\nSchedulerParameters=bf_continue # a comment\nNodeName=static-1 CPUs=4 State=CLOUD"},
			Accounting:   sunkv1.AccountingSpec{Mode: sunkv1.AccountingManaged},
			Partitions:   []sunkv1.PartitionSpec{{Name: "cpu", NodeSets: []string{"cpu-a"}}, {Name: "gpu", NodeSets: []string{"gpu"}, Default: true, MaxTime: "1-00:00:00", ExtraConf: "OverSubscribe=NO"}, {Name: "urgent", PriorityTier: ptr.To[int32](10)}},
			Preemption:   sunkv1.PreemptionSpec{Type: sunkv1.PreemptionPartitionPrio, Mode: sunkv1.PreemptionRequeue, ExemptTime: "10"},
			JobSubmitLua: goodLua,
			CgroupConf:   "ConstrainRAMSpace=no\nAllowedRAMSpace=95",
		},
	}
}

// parse renders the cluster's files into the test bed's shared directory and runs scontrol
// on them: Slurm's verdict (its output, and an error when it refused the files).
func parse(t *testing.T, env *testenv.SlurmEnv, sc *sunkv1.SlurmCluster) (string, error) {
	t.Helper()
	cfg, err := render.RenderConfig(sc, render.ConfigInputs{Names: clusternames.For(sc, "")})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(env.SharedDir, "slurmconf-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	key := make([]byte, 1024)
	_, _ = rand.Read(key)
	files := map[string][]byte{"slurm.key": key}
	for name, text := range cfg.Files {
		files[name] = []byte(text)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return env.Exec("env", "SLURM_CONF=/shared/"+filepath.Base(dir)+"/slurm.conf", "scontrol", "show", "hostnames", "parsed")
}

// TestRenderedConfigParsesInSlurm: what sunk renders for a spec admission accepts, extraConf
// with Slurm's own syntax included, is a configuration Slurm 24.11's parser accepts.
func TestRenderedConfigParsesInSlurm(t *testing.T) {
	env := testenv.Slurm(t)
	sc := cluster()
	if errs, _ := validation.ValidateSpec(&sc.Spec, field.NewPath("spec")); len(errs) > 0 {
		t.Fatalf("the spec is not admitted: %v", errs)
	}
	out, err := parse(t, env, sc)
	if err != nil || out != "parsed" {
		t.Fatalf("Slurm refused sunk's rendering: %v\n%s", err, out)
	}
}

// TestSlurmReadsEscapedCommentAsKeys: the reason admission refuses backslashes. For Slurm "\#"
// is no comment, so what follows it is read as keys: here an unknown one, which Slurm refuses.
func TestSlurmReadsEscapedCommentAsKeys(t *testing.T) {
	env := testenv.Slurm(t)
	sc := cluster()
	sc.Spec.Controller.ExtraConf = `SchedulerParameters=bf_continue\# BogusKey=1`
	out, err := parse(t, env, sc)
	if err == nil || !strings.Contains(out, "BogusKey") {
		t.Fatalf("Slurm did not read the key after \\#: %v\n%s", err, out)
	}
	if errs, _ := validation.ValidateSpec(&sc.Spec, field.NewPath("spec")); len(errs) == 0 {
		t.Error("admission lets a backslash through")
	}
}

// TestSlurmCatchesWhatAdmissionPasses: admission checks keys, not every value's meaning. A
// value Slurm cannot read passes admission, and Slurm's own parser refuses it, saying why: the
// case for checking the rendering with Slurm itself before it is applied (docs/validation.md,
// "Not yet").
func TestSlurmCatchesWhatAdmissionPasses(t *testing.T) {
	env := testenv.Slurm(t)
	sc := cluster()
	sc.Spec.Controller.ExtraConf = "MaxJobCount=abc"
	if errs, _ := validation.ValidateSpec(&sc.Spec, field.NewPath("spec")); len(errs) > 0 {
		t.Fatalf("admission refuses it already: %v", errs)
	}
	out, err := parse(t, env, sc)
	if err == nil || !strings.Contains(out, "MaxJobCount value (abc) is not a valid number") {
		t.Fatalf("Slurm accepted MaxJobCount=abc: %v\n%s", err, out)
	}
}

// TestConfigCheckPodScript: the script of the operator's config check pod
// (render.ConfigCheckPod), run on the test bed's Slurm with its paths moved to a directory of
// its own, passes a good rendering, fails a bad one with Slurm's message as the termination
// message, and tells a stale candidate apart.
func TestConfigCheckPodScript(t *testing.T) {
	env := testenv.Slurm(t)
	run := func(sc *sunkv1.SlurmCluster, hash string) (string, error) {
		t.Helper()
		n := clusternames.For(sc, "")
		cfg, err := render.RenderConfig(sc, render.ConfigInputs{Names: n})
		if err != nil {
			t.Fatal(err)
		}
		if hash == "" {
			hash = cfg.Hash
		}
		dir, err := os.MkdirTemp(env.SharedDir, "configcheck-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		for name, text := range cfg.Files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		in := "/shared/" + filepath.Base(dir)
		script := render.ConfigCheckPod(sc, n, cfg).Spec.Containers[0].Command[2]
		script = strings.NewReplacer("/candidate/*", in+"/*", "/dev/termination-log", in+"/termination-log").Replace(script)
		_, err = env.Exec("env", "SUNK_CONFIG_HASH="+hash, "sh", "-c", script)
		msg, _ := os.ReadFile(filepath.Join(dir, "termination-log"))
		return string(msg), err
	}
	if msg, err := run(cluster(), ""); err != nil {
		t.Fatalf("a good rendering fails the check: %v: %s", err, msg)
	}
	bad := cluster()
	bad.Spec.Controller.ExtraConf = "MaxJobCount=abc"
	if msg, err := run(bad, ""); err == nil || !strings.Contains(msg, "MaxJobCount value (abc) is not a valid number") {
		t.Fatalf("a bad rendering: %v, termination message %q", err, msg)
	}
	if msg, err := run(cluster(), "0123456789abcdef"); err == nil || !strings.Contains(msg, "stale candidate") {
		t.Fatalf("a stale candidate: %v, termination message %q", err, msg)
	}
}
