package render

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/slurmversion"
	"sunk.dev/sunk/pkg/slurmconf"
	"sunk.dev/sunk/pkg/wellknown"
)

// ComputeMember is one member of a NodeSet: a compute pod and the Slurm node of the same name.
type ComputeMember struct {
	// Name of the pod, its host name and the Slurm node name.
	Name string
	// NodeName, in PerNode mode, is the Kubernetes node the pod is pinned to.
	NodeName string
	// GPUType is the GRES type of the node's GPUs from its product label (MemberGPUType);
	// the NodeSet's spec.gpuType wins over it. Not part of the template hash: it is read
	// when the pod is made.
	GPUType string
	// Topology is the Topology= its slurmd registers with (RegistrationTopology), "" for
	// none. Not part of the template hash either: a pod without one is not outdated.
	Topology string
}

// ComputeServicesName is the ConfigMap of a NodeSet's s6 services.
func ComputeServicesName(nodeSet string) string { return nodeSet + "-slurmd-services" }

// ComputeSelectorLabels select the pods of one NodeSet.
func ComputeSelectorLabels(n clusternames.Names, nodeSet string) map[string]string {
	l := SelectorLabels(n, wellknown.ComponentCompute)
	l[wellknown.LabelNodeSet] = nodeSet
	return l
}

// slurmdMemoryReserve is what RealMemory leaves of the container's memory for slurmd, s6
// and the container's own processes: 5%, at least 128 MiB and at most 1 GiB.
func slurmdMemoryReserve(mib int64) int64 { return min(max(mib/20, 128), 1024) }

// resourceOf is the limit of r, else its request.
func resourceOf(res corev1.ResourceRequirements, r corev1.ResourceName) (resource.Quantity, bool) {
	if q, ok := res.Limits[r]; ok {
		return q, true
	}
	q, ok := res.Requests[r]
	return q, ok
}

// SlurmdConf is slurmd's --conf node line: CPUs and RealMemory from the container's
// resources (limit, else request; omitted when neither is set, and slurmd then reports the
// host's), Gres from its nvidia.com/gpu and gpuType (wellknown.GPUGres), the NodeSet's name and
// features as Features, Weight, a member's Topology (ComputeMember), then spec.extraConf,
// whose keys replace sunk's.
func SlurmdConf(ns *sunkv1.NodeSet, gpuType string) string {
	line, _ := slurmdConf(ns, gpuType, "")
	return line
}

// SlurmdGresConf is the pod's own gres.conf (GPUGresConf), or "" when spec.extraConf sets
// Gres itself: then the GRES are the user's, and so are their devices.
func SlurmdGresConf(ns *sunkv1.NodeSet, gpuType string) string {
	_, gres := slurmdConf(ns, gpuType, "")
	return gres
}

func slurmdConf(ns *sunkv1.NodeSet, gpuType, topology string) (line, gresConf string) {
	extra := strings.Fields(ns.Spec.ExtraConf)
	params, _ := slurmconf.Parse(ns.Spec.ExtraConf) // admission refuses text it cannot read
	set := map[string]bool{}
	for _, p := range params {
		set[strings.ToLower(p.Key)] = true
	}
	var parts []string
	add := func(k, v string) {
		if !set[strings.ToLower(k)] {
			parts = append(parts, k+"="+v)
		}
	}
	res := ns.Spec.Resources
	if q, ok := resourceOf(res, corev1.ResourceCPU); ok {
		add("CPUs", strconv.FormatInt(max(q.MilliValue()/1000, 1), 10))
	}
	if q, ok := resourceOf(res, corev1.ResourceMemory); ok {
		mib := q.Value() / (1 << 20)
		add("RealMemory", strconv.FormatInt(max(mib-slurmdMemoryReserve(mib), 1), 10))
	}
	if gpus := ComputeGPUs(ns); gpus > 0 && !set["gres"] {
		add("Gres", wellknown.GPUGres(gpuType, gpus))
		gresConf = GPUGresConf(gpuType, gpus)
	}
	parts = append(parts, "Features="+strings.Join(clusternames.NodeFeatures(ns), ","))
	add("Weight", strconv.Itoa(int(ptr.Deref(ns.Spec.Weight, 1))))
	if topology != "" {
		add("Topology", topology)
	}
	return strings.Join(append(parts, extra...), " "), gresConf
}

// MemberGPUType is the GRES type of a member's GPUs: spec.gpuType, else the product label of
// its Kubernetes node (nil labels: not known, as in Replicas mode), else none (untyped). A
// label value that cannot be a type gives none and the error, for an event.
func MemberGPUType(ns *sunkv1.NodeSet, nodeLabels map[string]string) (string, error) {
	if ns.Spec.GPUType != "" || ComputeGPUs(ns) == 0 {
		return ns.Spec.GPUType, nil
	}
	product, ok := nodeLabels[wellknown.LabelGPUProduct]
	if !ok {
		return "", nil
	}
	return wellknown.GPUTypeFromProduct(product)
}

// computePodSpec is the part of a compute pod that is the same for every member but its GPU
// type: what the template hash covers (with spec.gpuType as the type).
func computePodSpec(ns *sunkv1.NodeSet, sc *sunkv1.SlurmCluster, n clusternames.Names, gpuType, topology string) corev1.PodSpec {
	c := slurmContainer(sc, clusternames.SlurmdContainer, ns.Spec.Image, ns.Spec.Resources)
	c.ReadinessProbe = slurmdReadiness(sc, c.ReadinessProbe)
	c.Ports = []corev1.ContainerPort{{Name: "slurmd", ContainerPort: clusternames.SlurmdPort}}
	line, gresConf := slurmdConf(ns, gpuType, topology)
	c.Env = []corev1.EnvVar{
		{Name: "SLURM_CONF_SERVER", Value: n.ConfServer(Controllers(sc))},
		{Name: clusternames.EnvSlurmdConf, Value: line},
	}
	// Only with GPUs: a NodeSet without them keeps its template hash.
	if gresConf != "" {
		c.Env = append(c.Env, corev1.EnvVar{Name: EnvGresConf, Value: gresConf})
	}
	c.Env = append(c.Env, ns.Spec.Env...)
	// slurmd makes cgroups for job steps and runs them as their users.
	c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	scripts, scriptsMount := ScriptsVolume(n)
	c.VolumeMounts = []corev1.VolumeMount{mount("keys", KeysMountDir), scriptsMount}
	vols := []corev1.Volume{KeysVolume(n, false), scripts}
	if v, ok := S6ServicesVolume("services", ComputeServicesName(ns.Name), ns.Spec.Services); ok {
		vols = append(vols, v)
		c.VolumeMounts = append(c.VolumeMounts, mount("services", S6ServicesDir))
	}
	sv, sm := SharedVolumeMounts(sc.Spec.SharedVolumes)
	vols, c.VolumeMounts = append(vols, sv...), append(c.VolumeMounts, sm...)
	vols = containersPodSpec(ns, &c, vols)
	vols, c.VolumeMounts = append(vols, ns.Spec.Volumes...), append(c.VolumeMounts, ns.Spec.VolumeMounts...)
	spec := corev1.PodSpec{
		ImagePullSecrets: sc.Spec.ImagePullSecrets,
		Containers:       append([]corev1.Container{c}, ns.Spec.Sidecars...),
		Volumes:          vols,
		Tolerations:      ns.Spec.Tolerations,
		// With a class above the Kubernetes workloads', a compute pod takes its machine back
		// from them by kube-scheduler's preemption (docs/autoscaling.md).
		PriorityClassName: ns.Spec.PriorityClassName,
		// Jobs run in this container as their users: no API token for them to find, and no
		// service environment variables in their environment.
		AutomountServiceAccountToken: ptr.To(false),
		EnableServiceLinks:           ptr.To(false),
	}
	computeSSSD(ns, sc, &spec, &spec.Containers[0])
	return spec
}

// slurmdReadiness is slurmd's readiness probe. Where slurmd takes a bare connection silently
// (26.05), kubelet connects to its port: no process in the pod. Otherwise it is exec (the Slurm
// container's `sunk-ready slurmd`, local checks only), which costs a runc exec, about a
// container start, a probe: 40 compute pods on one machine (the soak) ran 8 a second and kept 2
// cores saturated, with their pods' probes, and with them the pods, timing out.
func slurmdReadiness(sc *sunkv1.SlurmCluster, exec *corev1.Probe) *corev1.Probe {
	p := exec.DeepCopy()
	p.PeriodSeconds = computeReadinessPeriod
	if slurmversion.FeaturesOf(sc.Spec.Version()).QuietSlurmdConnect {
		// Listening means it has fetched its configuration; it registers right after.
		p.ProbeHandler = corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("slurmd")}}
		p.TimeoutSeconds = computeConnectTimeout
	}
	return p
}

// ComputeTemplateHash is the hash of everything a compute pod is made of except its name,
// its placement and its readiness probe: when it changes, the NodeSet's pods are replaced (the
// protected way). A probe is kubelet's business, not the pod's work: a new one reaches new pods
// without draining every compute pod of every cluster on an operator upgrade.
func ComputeTemplateHash(ns *sunkv1.NodeSet, sc *sunkv1.SlurmCluster, n clusternames.Names) string {
	hashed := computePodSpec(ns, sc, n, ns.Spec.GPUType, "")
	hashed.Containers[0].ReadinessProbe = nil
	spec, err := json.Marshal(hashed)
	if err != nil {
		panic(fmt.Sprintf("render: marshalling a pod spec: %v", err)) // cannot happen for a PodSpec
	}
	return HashStrings(string(spec), S6ServicesHash(ns.Spec.Services))
}

// ComputePod is the compute pod of member m: slurmd as dynamic Slurm node m.Name,
// configless against the cluster's slurmctld. In PerNode mode it is pinned to its node by
// required node affinity on the node's name (not spec.nodeName), so that the scheduler
// still checks resources and taints; in Replicas mode it goes where the NodeSet's selection
// allows.
func ComputePod(ns *sunkv1.NodeSet, sc *sunkv1.SlurmCluster, n clusternames.Names, m ComputeMember) *corev1.Pod {
	spec := computePodSpec(ns, sc, n, cmp.Or(ns.Spec.GPUType, m.GPUType), m.Topology)
	spec.Hostname = m.Name
	if m.NodeName != "" {
		spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchFields: []corev1.NodeSelectorRequirement{{
					Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{m.NodeName}}},
			}}},
		}}
	} else {
		spec.NodeSelector = ns.Spec.NodeSelector
		if ns.Spec.Affinity != nil {
			spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: ns.Spec.Affinity.DeepCopy()}}
		}
		// A NodeSet's members spread over the machines they may use, so that one machine's
		// failure takes as few Slurm nodes as it can; softly: they share a machine rather than
		// wait. kube-scheduler spreads only the pods of its own workload kinds by default.
		spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector: &metav1.LabelSelector{MatchLabels: ComputeSelectorLabels(n, ns.Name)},
		}}
	}
	l := labels(n, wellknown.ComponentCompute)
	l[wellknown.LabelNodeSet] = ns.Name
	l[wellknown.LabelTemplateHash] = ComputeTemplateHash(ns, sc, n)
	l[wellknown.LabelSlurmNode] = m.Name
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: m.Name, Namespace: ns.Namespace, Labels: l,
			Finalizers: []string{wellknown.FinalizerSlurmNode},
		},
		Spec: spec,
	}
}

// ComputeServicesConfigMap holds a NodeSet's s6 services (nil without services).
func ComputeServicesConfigMap(ns *sunkv1.NodeSet, n clusternames.Names) *corev1.ConfigMap {
	if len(ns.Spec.Services) == 0 {
		return nil
	}
	cm := S6ServicesConfigMap(n, ComputeServicesName(ns.Name), wellknown.ComponentCompute, ns.Spec.Services)
	cm.Namespace = ns.Namespace
	cm.Labels[wellknown.LabelNodeSet] = ns.Name
	return cm
}
