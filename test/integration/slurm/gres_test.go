//go:build integration

package slurm_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/internal/syncer"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/privateslurm"
	"sunk.dev/sunk/test/wait"
)

// TestGPUsWithoutGPUs: a compute pod's node line and gres.conf, as sunk renders them for a
// NodeSet granted four nvidia.com/gpu on a node GPU Feature Discovery labelled
// NVIDIA-H100-80GB-HBM3, make a real slurmd 24.11 register gpu:h100:4 with the CPUs and
// memory of the pod's limits, and a job asking for --gres=gpu:h100:2 gets two devices in
// CUDA_VISIBLE_DEVICES. The devices are fake (character devices of the NVIDIA major on a
// tmpfs over the node's /dev, in its own mount namespace); no driver is involved: Slurm
// hands out device files, which is all this proves. A second slurmd of the same line with
// device lines for only two GPUs gets Slurm's own drain and GRES rewritten to two, on which
// the syncer leaves Slurm's drain alone and drains the node for the mismatch once resumed.
//
// It runs its own configless slurmctld (GresTypes=gpu, the cluster gres.conf sunk renders)
// and two dynamic slurmd, on ports of their own: the shared test bed has no GRES.
func TestGPUsWithoutGPUs(t *testing.T) {
	ns := &sunkv1.NodeSet{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu", Namespace: "slurm"},
		Spec: sunkv1.NodeSetSpec{ClusterRef: "demo", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("2Gi"),
			render.ResourceGPU: resource.MustParse("4"),
		}}},
	}
	typ, err := render.MemberGPUType(ns, map[string]string{wellknown.LabelGPUProduct: "NVIDIA-H100-80GB-HBM3"})
	must(t, err)
	line, gresConf := render.SlurmdConf(ns, typ), render.SlurmdGresConf(ns, typ)
	sc := &sunkv1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "slurm"}}
	cfg, err := render.RenderConfig(sc, render.ConfigInputs{Names: clusternames.For(sc, ""), GPUs: true})
	must(t, err)

	const node = "gpu-0"
	p := startPrivateSlurmConfigless(t, cfg.Files)
	// The node's own /etc/slurm: the key, and what sunk-entrypoint writes from SUNK_GRES_CONF.
	etc := p.OwnEtc(t, node)
	must(t, os.WriteFile(filepath.Join(etc, "gres-node.conf"), []byte(gresConf), 0o644))
	p.NodeSpool(t, node)
	devices := "mount -t tmpfs -o mode=0755 dev /dev && mknod -m 666 /dev/null c 1 3 && mknod -m 666 /dev/zero c 1 5 && " +
		"mknod -m 666 /dev/urandom c 1 9 && for i in 0 1 2 3; do mknod -m 666 /dev/nvidia$i c 195 $i; done"
	p.Start(t, node, "sh", "-c", devices+` && exec slurmd -D -Z --conf-server 127.0.0.1:"$0" --conf "$1"`, p.ctldPort, line)

	var nodeOut string
	wait.For(t, node+" idle", 60*time.Second, 500*time.Millisecond, func() error {
		nodeOut, _ = p.Scontrol("show", "node", node)
		if !regexp.MustCompile(`State=IDLE[+ ]`).MatchString(nodeOut) || strings.Contains(nodeOut, "DRAIN") {
			return fmt.Errorf("%s", nodeOut)
		}
		return nil
	})
	for _, want := range []string{"Gres=gpu:h100:4", "CPUTot=2 ", "RealMemory=1920 ", "CfgTRES=cpu=2,mem=1920M,"} {
		if !strings.Contains(nodeOut, want) {
			t.Errorf("scontrol show node lacks %q:\n%s", want, nodeOut)
		}
	}
	if out, err := p.Run("sinfo", "-h", "-N", "-o", "%N %G"); err != nil || out != node+" gpu:h100:4" {
		t.Errorf("sinfo -o '%%N %%G': %q, %v", out, err)
	}

	id, err := p.Run("sbatch", "--parsable", "-o", "/shared/gpus.out", "--gres=gpu:h100:2", "--wrap", `echo "$CUDA_VISIBLE_DEVICES"`)
	if err != nil {
		t.Fatalf("sbatch --gres=gpu:h100:2: %s", id)
	}
	wait.For(t, "job "+id, 60*time.Second, 300*time.Millisecond, func() error {
		if out, _ := p.Scontrol("show", "job", id); !strings.Contains(out, "JobState=COMPLETED") {
			return fmt.Errorf("%s", out)
		}
		return nil
	})
	out, err := os.ReadFile(filepath.Join(p.Dir, "shared", "gpus.out"))
	must(t, err)
	if got := strings.TrimSpace(string(out)); got != "0,1" {
		t.Errorf("CUDA_VISIBLE_DEVICES of a job with --gres=gpu:h100:2: %q, want 0,1", got)
	}
	if out, _ := p.Run("sbatch", "--gres=gpu:a100:1", "--wrap", "true"); !strings.Contains(out, "Requested node configuration is not available") {
		t.Errorf("sbatch --gres=gpu:a100:1 on an h100 node: %s", out)
	}

	// A second pod of the NodeSet whose slurmd finds device lines for two of its four GPUs.
	const short = "gpu-1"
	etc = p.OwnEtc(t, short)
	must(t, os.WriteFile(filepath.Join(etc, "gres-node.conf"), []byte(render.GPUGresConf(typ, 2)), 0o644))
	p.NodeSpool(t, short)
	p.Start(t, short, "sh", "-c", devices+` && exec slurmd -D -Z -N "$2" --conf-server 127.0.0.1:"$0" --conf "$1"`,
		p.ctldPort, fmt.Sprintf("%s Port=%d", line, privateslurm.FreePorts(t, 1)[0]), short)
	// Slurm rebuilds the node's GRES from what slurmd found and drains it itself. (A device
	// file missing outright is worse: slurmd 24.11 waits for it, then stops, and never
	// registers.)
	wait.For(t, short+" registered", 60*time.Second, 500*time.Millisecond, func() error {
		nodeOut, _ = p.Scontrol("-o", "show", "node", short)
		if !strings.Contains(nodeOut, "Reason=") {
			return fmt.Errorf("%s", nodeOut)
		}
		return nil
	})
	sn := &slurm.Node{Name: short, Gres: field(nodeOut, "Gres="), State: strings.Split(field(nodeOut, "State="), "+")}
	sn.Reason, _, _ = strings.Cut(nodeOut[strings.Index(nodeOut, "Reason=")+len("Reason="):], " [")
	if sn.Gres != "gpu:h100:2" || !sn.Drained() || !strings.HasPrefix(sn.Reason, "gres/gpu count reported lower than configured (2 < 4)") {
		t.Fatalf("%s with device lines for two of four GPUs:\n%s", short, nodeOut)
	}
	// What the syncer decides on that answer, with what the pod registered: Slurm's drain is
	// Slurm's; once someone resumes the node, the syncer drains it for the mismatch.
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "slurmd",
		Env: []corev1.EnvVar{{Name: clusternames.EnvSlurmdConf, Value: line}}}}}}
	var reg syncer.Registered
	reg.Gres, reg.Known = clusternames.RegisteredGres(pod)
	if a := syncer.Decide(syncer.WithGres(nil, reg, sn), sn); a.Kind != syncer.Nothing {
		t.Errorf("syncer on Slurm's own drain: %+v, want nothing", a)
	}
	sn.State = []string{"IDLE", "DYNAMIC_NORM"}
	want := "k8s: GRES mismatch (Slurm has gpu:h100:2, the pod registered gpu:h100:4)"
	if a := syncer.Decide(syncer.WithGres(nil, reg, sn), sn); a.Kind != syncer.Drain || a.Reason != want {
		t.Errorf("syncer on the resumed node: %+v, want a drain %q", a, want)
	}
}

// field is the value of key in scontrol's one-line output ("" when absent).
func field(line, key string) string {
	i := strings.Index(line, " "+key)
	if i < 0 {
		return ""
	}
	v, _, _ := strings.Cut(line[i+1+len(key):], " ")
	return v
}

// startPrivateSlurmConfigless starts a configless slurmctld for dynamic nodes with GPUs, with
// sunk's rendered gres files; nodes are the test's to start (p.Start), against p.ctldPort.
func startPrivateSlurmConfigless(t *testing.T, files map[string]string) *privateSlurm {
	t.Helper()
	p := newPrivateSlurm(t)
	ports := privateslurm.FreePorts(t, 2)
	p.ctldPort = fmt.Sprint(ports[0])
	p.WriteEtc(t, "slurm.conf", p.Conf("grestest")+fmt.Sprintf(`SlurmctldPort=%d
SlurmdPort=%d
SlurmctldParameters=enable_configless
GresTypes=gpu
MaxNodeCount=8
PartitionName=all Nodes=ALL Default=YES State=UP
`, ports[0], ports[1]))
	for _, f := range []string{"gres.conf", "gres-node.conf"} {
		p.WriteEtc(t, f, files[f])
	}
	p.StartCtld(t)
	return p
}
