package render

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/wellknown"
)

// The node line and the pod's gres.conf, from the product label to what slurmd registers.
func TestSlurmdGres(t *testing.T) {
	ns := minimalNodeSet()
	ns.Spec.Resources.Limits = corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"), ResourceGPU: resource.MustParse("8")}
	for _, c := range []struct {
		name, product, specType string
		labels                  bool
		line, gres              string
	}{
		{"h100 from GFD", "NVIDIA-H100-80GB-HBM3", "", true,
			"CPUs=16 RealMemory=64512 Gres=gpu:h100:8 Features=cpu Weight=1", "Name=gpu Type=h100 File=/dev/nvidia[0-7]\n"},
		{"a100", "NVIDIA-A100-SXM4-80GB", "", true,
			"CPUs=16 RealMemory=64512 Gres=gpu:a100:8 Features=cpu Weight=1", "Name=gpu Type=a100 File=/dev/nvidia[0-7]\n"},
		{"l40s", "NVIDIA-L40S", "", true,
			"CPUs=16 RealMemory=64512 Gres=gpu:l40s:8 Features=cpu Weight=1", "Name=gpu Type=l40s File=/dev/nvidia[0-7]\n"},
		{"v100 as Slurm names it", "Tesla-V100-SXM2-16GB", "", true,
			"CPUs=16 RealMemory=64512 Gres=gpu:tesla_v100_sxm2_16gb:8 Features=cpu Weight=1", "Name=gpu Type=tesla_v100_sxm2_16gb File=/dev/nvidia[0-7]\n"},
		{"spec.gpuType wins", "NVIDIA-H100-80GB-HBM3", "gh100", true,
			"CPUs=16 RealMemory=64512 Gres=gpu:gh100:8 Features=cpu Weight=1", "Name=gpu Type=gh100 File=/dev/nvidia[0-7]\n"},
		{"no label: untyped", "", "", true,
			"CPUs=16 RealMemory=64512 Gres=gpu:8 Features=cpu Weight=1", "Name=gpu File=/dev/nvidia[0-7]\n"},
		{"Replicas (no node): untyped", "NVIDIA-H100-80GB-HBM3", "", false,
			"CPUs=16 RealMemory=64512 Gres=gpu:8 Features=cpu Weight=1", "Name=gpu File=/dev/nvidia[0-7]\n"},
	} {
		ns := ns.DeepCopy()
		ns.Spec.GPUType = c.specType
		var labels map[string]string
		if c.labels {
			labels = map[string]string{"kubernetes.io/arch": "amd64"}
			if c.product != "" {
				labels[wellknown.LabelGPUProduct] = c.product
			}
		}
		typ, err := MemberGPUType(ns, labels)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := SlurmdConf(ns, typ); got != c.line {
			t.Errorf("%s: node line %q, want %q", c.name, got, c.line)
		}
		if got := SlurmdGresConf(ns, typ); got != c.gres {
			t.Errorf("%s: gres.conf %q, want %q", c.name, got, c.gres)
		}
	}

	// One GPU, from requests only; an unusable label is untyped with the reason.
	ns.Spec.Resources.Limits = nil
	ns.Spec.Resources.Requests = corev1.ResourceList{ResourceGPU: resource.MustParse("1")}
	typ, err := MemberGPUType(ns, map[string]string{wellknown.LabelGPUProduct: "4090"})
	if err == nil || typ != "" {
		t.Errorf("product 4090: %q, %v; want untyped and an error", typ, err)
	}
	if got, want := SlurmdConf(ns, typ)+" | "+SlurmdGresConf(ns, typ), "Gres=gpu:1 Features=cpu Weight=1 | Name=gpu File=/dev/nvidia0\n"; got != want {
		t.Errorf("one GPU: %q, want %q", got, want)
	}
	// extraConf's Gres is the user's, devices included: no gres.conf lines from sunk.
	ns.Spec.ExtraConf = "Gres=gpu:tesla:1"
	if got, want := SlurmdConf(ns, "h100")+" | "+SlurmdGresConf(ns, "h100"), "Features=cpu Weight=1 Gres=gpu:tesla:1 | "; got != want {
		t.Errorf("extraConf Gres: %q, want %q", got, want)
	}
	// Without GPUs: no Gres, no lines, and the label is not read.
	ns = minimalNodeSet()
	if typ, err := MemberGPUType(ns, map[string]string{wellknown.LabelGPUProduct: "4090"}); typ != "" || err != nil {
		t.Errorf("no GPUs: %q, %v", typ, err)
	}
	if got := SlurmdGresConf(ns, "h100"); got != "" {
		t.Errorf("no GPUs: gres.conf %q", got)
	}
}

// TestGresConfIncludesDevicesOnlyWithGPUs: a cluster without GPU NodeSets keeps a gres.conf
// without the Include, which an slurmd of an older image could not follow (it has no
// gres-node.conf); with one, every slurmd includes its pod's own device lines.
func TestGresConfIncludesDevicesOnlyWithGPUs(t *testing.T) {
	sc := &sunkv1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "n"}}
	for _, gpus := range []bool{false, true} {
		cfg, err := RenderConfig(sc, ConfigInputs{Names: clusternames.For(sc, ""), GPUs: gpus})
		if err != nil {
			t.Fatal(err)
		}
		include := "Include " + GresNodeConfPath + "\n"
		if got := strings.Contains(cfg.Files["gres.conf"], include); got != gpus {
			t.Errorf("GPUs %v: gres.conf %q, want the Include %v", gpus, cfg.Files["gres.conf"], gpus)
		}
		if cfg.Files[gresNodeConfName] == "" {
			t.Errorf("GPUs %v: no empty %s for slurmctld", gpus, gresNodeConfName)
		}
	}
}

// TestRegisteredGres: what the syncer compares Slurm's GRES with is read back from the pod
// ComputePod made, for sunk's Gres, extraConf's, none, and a pod sunk did not render.
func TestRegisteredGres(t *testing.T) {
	sc := &sunkv1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "n"}}
	ns := minimalNodeSet()
	ns.Spec.Resources.Limits = corev1.ResourceList{ResourceGPU: resource.MustParse("8")}
	for _, c := range []struct {
		name, extra, typ, want string
	}{
		{"typed", "", "h100", "gpu:h100:8"},
		{"untyped", "", "", "gpu:8"},
		{"extraConf's", "Gres=gpu:a100:2,nic:1", "h100", "gpu:a100:2,nic:1"},
		{"extraConf's with spaces around =", "TmpDisk=1 gres = gpu:a100:2", "h100", "gpu:a100:2"},
	} {
		ns := ns.DeepCopy()
		ns.Spec.ExtraConf = c.extra
		pod := ComputePod(ns, sc, clusternames.For(sc, ""), ComputeMember{Name: "cpu-0", GPUType: c.typ})
		if got, ok := clusternames.RegisteredGres(pod); !ok || got != c.want {
			t.Errorf("%s: RegisteredGres = %q, %v; want %q", c.name, got, ok, c.want)
		}
	}
	pod := ComputePod(minimalNodeSet(), sc, clusternames.For(sc, ""), ComputeMember{Name: "cpu-0"})
	if got, ok := clusternames.RegisteredGres(pod); !ok || got != "" {
		t.Errorf("no GPUs: RegisteredGres = %q, %v; want \"\", true", got, ok)
	}
	if got, ok := clusternames.RegisteredGres(&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "slurmd"}}}}); ok {
		t.Errorf("a pod without %s: RegisteredGres = %q, true; want not ok", clusternames.EnvSlurmdConf, got)
	}
}
