package render

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/wellknown"
)

func minimalNodeSet() *sunkv1.NodeSet {
	return &sunkv1.NodeSet{
		ObjectMeta: metav1.ObjectMeta{Name: "cpu", Namespace: "slurm"},
		Spec: sunkv1.NodeSetSpec{
			ClusterRef:   "demo-cluster",
			Mode:         sunkv1.NodeSetPerNode,
			NodeSelector: map[string]string{"sunk.dev/compute": "true"},
		},
	}
}

func fullNodeSet() *sunkv1.NodeSet {
	return &sunkv1.NodeSet{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu", Namespace: "slurm"},
		Spec: sunkv1.NodeSetSpec{
			ClusterRef:   "demo-cluster",
			Mode:         sunkv1.NodeSetReplicas,
			Replicas:     ptr.To(int32(3)),
			NodeSelector: map[string]string{"nvidia.com/gpu.present": "true"},
			Affinity: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}}}}}},
			Image: "sunk.dev/slurm:24.11-cuda",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("7500m"), corev1.ResourceMemory: resource.MustParse("30Gi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("15500m"), corev1.ResourceMemory: resource.MustParse("60Gi")},
			},
			Env:          []corev1.EnvVar{{Name: "NCCL_DEBUG", Value: "INFO"}},
			Volumes:      []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}},
			Sidecars:     []corev1.Container{{Name: "dcgm-exporter", Image: "nvcr.io/nvidia/k8s/dcgm-exporter:3"}},
			Tolerations:  []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Services:     []sunkv1.S6Service{{Name: "node-exporter", Run: "#!/bin/sh\nexec sleep infinity\n"}},
			Features:     []string{"a100", "ib"},
			Weight:       ptr.To(int32(10)),
			ExtraConf:    "Gres=gpu:8 CPUs=14",
			Containers: &sunkv1.NodeSetContainers{Enabled: true, CacheSize: ptr.To(resource.MustParse("50Gi")),
				InsecureRegistries: []string{"registry.slurm.svc:5000", "10.0.0.5"},
				ImagePullSecrets:   []sunkv1.SecretName{{Name: "nvcr"}, {Name: "team-registry"}}},
		},
	}
}

func TestComputePodGolden(t *testing.T) {
	for _, c := range []struct {
		name string
		sc   *sunkv1.SlurmCluster
		ns   *sunkv1.NodeSet
		m    ComputeMember
	}{
		{"minimal", minimal(), minimalNodeSet(), ComputeMember{Name: clusternames.PerNodeMemberName("cpu", "node-1.example.com"), NodeName: "node-1.example.com"}},
		{"full", full(), fullNodeSet(), ComputeMember{Name: clusternames.OrdinalMemberName("gpu", 2)}},
	} {
		n := clusternames.For(c.sc, "")
		objs := []any{ComputePod(c.ns, c.sc, n, c.m)}
		if cm := ComputeServicesConfigMap(c.ns, n); cm != nil {
			objs = append(objs, cm)
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
		golden(t, c.name+".compute.golden", b.String())
	}
}

func TestSlurmdConf(t *testing.T) {
	ns := minimalNodeSet()
	if got, want := SlurmdConf(ns, ""), "Features=cpu Weight=1"; got != want {
		t.Errorf("without resources: %q, want %q", got, want)
	}
	ns.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")}
	if got, want := SlurmdConf(ns, ""), "CPUs=1 RealMemory=384 Features=cpu Weight=1"; got != want {
		t.Errorf("requests only: %q, want %q", got, want)
	}
	ns.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("64Gi")}
	if got, want := SlurmdConf(ns, ""), "CPUs=2 RealMemory=64512 Features=cpu Weight=1"; got != want {
		t.Errorf("limits win: %q, want %q", got, want)
	}
	if got, want := SlurmdConf(fullNodeSet(), ""), "RealMemory=60416 Features=gpu,a100,ib Weight=10 Gres=gpu:8 CPUs=14"; got != want {
		t.Errorf("extraConf replaces CPUs: %q, want %q", got, want)
	}
}

func TestComputeTemplateHash(t *testing.T) {
	sc, ns := full(), fullNodeSet()
	n := clusternames.For(sc, "")
	base := ComputeTemplateHash(ns, sc, n)
	a, b := ComputePod(ns, sc, n, ComputeMember{Name: "gpu-0"}), ComputePod(ns, sc, n, ComputeMember{Name: "gpu-1"})
	if a.Labels[wellknown.LabelTemplateHash] != base || b.Labels[wellknown.LabelTemplateHash] != base {
		t.Error("members of one template must share its hash")
	}
	ns2 := ns.DeepCopy()
	ns2.Spec.Replicas, ns2.Spec.UpdateStrategy.Type = ptr.To(int32(7)), sunkv1.OnDeleteNodeSetStrategy
	ns2.Spec.NodeSelector = map[string]string{"other": "x"}
	if ComputeTemplateHash(ns2, sc, n) != base {
		t.Error("scale, strategy and placement are not part of the template")
	}
	for name, mutate := range map[string]func(*sunkv1.NodeSet, *sunkv1.SlurmCluster){
		"image":         func(ns *sunkv1.NodeSet, _ *sunkv1.SlurmCluster) { ns.Spec.Image = "other" },
		"features":      func(ns *sunkv1.NodeSet, _ *sunkv1.SlurmCluster) { ns.Spec.Features = []string{"x"} },
		"service text":  func(ns *sunkv1.NodeSet, _ *sunkv1.SlurmCluster) { ns.Spec.Services[0].Run = "#!/bin/sh\n" },
		"cluster image": func(ns *sunkv1.NodeSet, sc *sunkv1.SlurmCluster) { ns.Spec.Image, sc.Spec.Image = "", "new" },
		"backup ctld":   func(_ *sunkv1.NodeSet, sc *sunkv1.SlurmCluster) { sc.Spec.Controller.Backup = false },
	} {
		ns2, sc2 := ns.DeepCopy(), sc.DeepCopy()
		mutate(ns2, sc2)
		base2 := base
		if name == "cluster image" {
			base2 = ComputeTemplateHash(ns2, sc, n)
		}
		if ComputeTemplateHash(ns2, sc2, n) == base2 {
			t.Errorf("%s: hash unchanged", name)
		}
	}
}

// TestContainersPod: a NodeSet with containers gets the helper's settings and the volume at
// ContainersDir (an emptyDir, or cacheVolume); one without gets neither.
func TestContainersPod(t *testing.T) {
	sc, n := minimal(), clusternames.For(minimal(), "")
	env := func(p *corev1.Pod) (string, bool) {
		for _, e := range p.Spec.Containers[0].Env {
			if e.Name == EnvContainers {
				return e.Value, true
			}
		}
		return "", false
	}
	vol := func(p *corev1.Pod) *corev1.Volume {
		for i, v := range p.Spec.Volumes {
			if v.Name == containersVolume {
				return &p.Spec.Volumes[i]
			}
		}
		return nil
	}
	ns := minimalNodeSet()
	p := ComputePod(ns, sc, n, ComputeMember{Name: "cpu-0"})
	if _, ok := env(p); ok || vol(p) != nil {
		t.Errorf("a NodeSet without containers: %s set or volume %v", EnvContainers, vol(p))
	}
	ns.Spec.Containers = &sunkv1.NodeSetContainers{Enabled: false, InsecureRegistries: []string{"r"}}
	if p := ComputePod(ns, sc, n, ComputeMember{Name: "cpu-0"}); vol(p) != nil {
		t.Error("enabled: false still mounts the containers volume")
	}
	hostPath := corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/sunk"}}
	ns.Spec.Containers = &sunkv1.NodeSetContainers{Enabled: true, CacheVolume: &hostPath, InsecureRegistries: []string{"r:5000", "s"}}
	p = ComputePod(ns, sc, n, ComputeMember{Name: "cpu-0"})
	if v, ok := env(p); !ok || !strings.Contains(v, "\n--insecure-registry=r:5000,s\n") {
		t.Errorf("%s = %q, want the insecure registries as the helper's flag", EnvContainers, v)
	}
	if v := vol(p); v == nil || v.HostPath == nil || v.HostPath.Path != "/var/lib/sunk" {
		t.Errorf("containers volume %+v, want the cacheVolume", v)
	}
	if !slices.ContainsFunc(p.Spec.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == containersVolume && m.MountPath == ContainersDir
	}) {
		t.Errorf("slurmd does not mount the containers volume at %s", ContainersDir)
	}
	if c, _ := RenderConfig(sc, ConfigInputs{Names: n}); strings.Contains(c.Files["plugstack.conf"], "sunk_container") {
		t.Errorf("plugstack.conf loads the plugin though no NodeSet enables containers:\n%s", c.Files["plugstack.conf"])
	}
}

func TestSlurmdReadiness(t *testing.T) {
	ns := fullNodeSet()
	for _, c := range []struct {
		version  string
		tcp      bool
		wantExec []string
	}{
		{sunkv1.SlurmVersion2411, false, []string{"/usr/local/bin/sunk-ready", "slurmd"}},
		{sunkv1.SlurmVersion2605, true, nil},
	} {
		sc := full()
		sc.Spec.SlurmVersion = c.version
		p := ComputePod(ns, sc, clusternames.For(sc, ""), ComputeMember{Name: "gpu-0"}).Spec.Containers[0].ReadinessProbe
		if p.PeriodSeconds != computeReadinessPeriod {
			t.Errorf("%s: period %d, want %d", c.version, p.PeriodSeconds, computeReadinessPeriod)
		}
		switch {
		case c.tcp && (p.TCPSocket == nil || p.TCPSocket.Port.String() != "slurmd" || p.Exec != nil):
			t.Errorf("%s: want a TCP probe of port slurmd, got %+v", c.version, p.ProbeHandler)
		case !c.tcp && (p.Exec == nil || !slices.Equal(p.Exec.Command, c.wantExec) || p.TCPSocket != nil):
			t.Errorf("%s: want exec %v, got %+v", c.version, c.wantExec, p.ProbeHandler)
		}
	}
	// The probe is not part of the template: a new probe does not replace running pods. The
	// two releases' pods differ in their probe alone here (same image, same spec).
	old, cur := full(), full()
	old.Spec.SlurmVersion, cur.Spec.SlurmVersion = sunkv1.SlurmVersion2411, sunkv1.SlurmVersion2605
	if ho, hc := ComputeTemplateHash(ns, old, clusternames.For(old, "")), ComputeTemplateHash(ns, cur, clusternames.For(cur, "")); ho != hc {
		t.Errorf("template hash covers the readiness probe: %s (exec) != %s (TCP)", ho, hc)
	}
}

// TestComputeSSSD: with the cluster's sssd.conf, a compute pod runs SSSD beside slurmd, which
// mounts SSSD's pipes read-only; a NodeSet that sets SSSD up itself (an s6 service, a volume of
// that name), as the user guide once told admins to, keeps its pod as it was; without sssd.conf
// there is no SSSD.
func TestComputeSSSD(t *testing.T) {
	sc, ns := full(), minimalNodeSet()
	if sc.Spec.Login.SSSDConfigSecretRef == nil {
		t.Fatal("the full cluster has no sssd.conf: the test needs one")
	}
	n := clusternames.For(sc, "")
	sssd := func(p *corev1.Pod) (container bool, slurmdMount *corev1.VolumeMount) {
		for _, c := range p.Spec.Containers {
			container = container || c.Name == SSSDContainer
		}
		for i, m := range p.Spec.Containers[0].VolumeMounts {
			if m.MountPath == SSSPipesDir {
				slurmdMount = &p.Spec.Containers[0].VolumeMounts[i]
			}
		}
		return container, slurmdMount
	}
	if c, m := sssd(ComputePod(ns, sc, n, ComputeMember{Name: "cpu-0"})); !c || m == nil || !m.ReadOnly {
		t.Errorf("with sssd.conf: sssd container %v, slurmd's pipes mount %+v; want the container and a read-only mount", c, m)
	}
	own := ns.DeepCopy()
	own.Spec.Services = []sunkv1.S6Service{{Name: "sssd", Run: "#!/bin/sh\nexec sssd -i\n"}}
	if c, m := sssd(ComputePod(own, sc, n, ComputeMember{Name: "cpu-0"})); c || m != nil {
		t.Errorf("a NodeSet with its own sssd service: sssd container %v, pipes mount %+v; want neither", c, m)
	}
	vol := ns.DeepCopy()
	vol.Spec.Volumes = []corev1.Volume{{Name: "sssd", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "site-sssd"}}}}
	if c, m := sssd(ComputePod(vol, sc, n, ComputeMember{Name: "cpu-0"})); c || m != nil {
		t.Errorf("a NodeSet with its own volume sssd: sssd container %v, pipes mount %+v; want neither", c, m)
	}
	without := sc.DeepCopy()
	without.Spec.Login.SSSDConfigSecretRef = nil
	if c, m := sssd(ComputePod(ns, without, n, ComputeMember{Name: "cpu-0"})); c || m != nil {
		t.Errorf("without sssd.conf: sssd container %v, pipes mount %+v; want neither", c, m)
	}
}
