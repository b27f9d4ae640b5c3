package charts

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/internal/slurmversion"
	"sunk.dev/sunk/pkg/wellknown"
)

// The sunk chart repeats names, ports and keys that the Go code defines: the scheduler's URLs
// of slurmrestd and the node watchers, the JWT key Secret it reads and may read, the user its
// tokens name, the node lock it tolerates, the one command the operator may exec and the
// keys the node policy lets sunk's controllers write. Nothing would tell when one of them
// changed in Go alone. These tests read the chart's golden `helm template` output, which
// TestTemplates (go test -tags integration ./charts) keeps equal to what the chart renders,
// so that they run without helm.

// goldenDocs are the objects of a golden file, by kind and name.
func goldenDocs(t *testing.T, name string) map[string]string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name + ".golden.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	for _, d := range strings.Split(string(b), "\n---\n") {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(d), &meta); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if meta.Kind != "" {
			docs[meta.Kind+"/"+meta.Metadata.Name] = d
		}
	}
	return docs
}

// goldenObject decodes the object kind/name of a golden file into into.
func goldenObject(t *testing.T, docs map[string]string, key string, into any) {
	t.Helper()
	d, ok := docs[key]
	if !ok {
		t.Fatalf("the golden output has no %s", key)
	}
	if err := yaml.Unmarshal([]byte(d), into); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
}

// TestSchedulerNamesMatchGo: sunk-scheduler reaches the cluster of sunk-scheduler.golden.yaml
// (c1 in slurm) under the names and ports the operator gives its objects.
func TestSchedulerNamesMatchGo(t *testing.T) {
	docs := goldenDocs(t, "sunk-scheduler")
	sc := &sunkv1.SlurmCluster{}
	sc.Name, sc.Namespace = "c1", "slurm"
	n := clusternames.For(sc, "")
	// The scheduler reaches Services by <service>.<namespace>.svc, whatever the cluster domain.
	// https: the chart's scheduler.tls matches spec.tls's default; the host is the name the
	// serving certificate carries (clusternames.Names.ServerName).
	url := func(svc string, port int) string {
		return fmt.Sprintf("%s://%s:%d", n.Scheme(), n.ServerName(svc), port)
	}

	var cm corev1.ConfigMap
	goldenObject(t, docs, "ConfigMap/sunk-scheduler", &cm)
	var config struct {
		Profiles []struct {
			PluginConfig []struct {
				Args map[string]any `json:"args"`
			} `json:"pluginConfig"`
		} `json:"profiles"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &config); err != nil || len(config.Profiles) != 1 || len(config.Profiles[0].PluginConfig) != 1 {
		t.Fatalf("scheduler config: %v\n%s", err, cm.Data["config.yaml"])
	}
	args := config.Profiles[0].PluginConfig[0].Args
	for key, want := range map[string]string{
		"slurmURL":       url(n.RestAPI, clusternames.SlurmrestdPort),
		"nodeWatcherURL": url(n.NodeWatch, clusternames.NodeWatchPort),
		"jwtKeySecret":   n.JWTSecret,
		"caSecret":       n.TLSSecret,
		"slurmUser":      wellknown.SlurmUser,
		"cluster":        n.Cluster,
		"namespace":      n.Namespace,
	} {
		if args[key] != want {
			t.Errorf("scheduler argument %s is %v, want %s", key, args[key], want)
		}
	}

	var role rbacv1.Role
	goldenObject(t, docs, "Role/sunk-scheduler-cluster", &role)
	var secrets []string
	for _, r := range role.Rules {
		if slices.Contains(r.Resources, "secrets") {
			secrets = append(secrets, r.ResourceNames...)
		}
	}
	if role.Namespace != n.Namespace || !slices.Equal(secrets, []string{n.JWTSecret, n.TLSSecret}) {
		t.Errorf("the scheduler's Role in %s may read Secrets %v, want only %s and %s in %s", role.Namespace, secrets, n.JWTSecret, n.TLSSecret, n.Namespace)
	}

	var d appsv1.Deployment
	goldenObject(t, docs, "Deployment/sunk-scheduler", &d)
	lock := corev1.Toleration{Key: wellknown.TaintJob, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	if !slices.Contains(d.Spec.Template.Spec.Tolerations, lock) {
		t.Errorf("the scheduler does not tolerate its node lock %v: %v", lock, d.Spec.Template.Spec.Tolerations)
	}
	// The operator's key names a Slurm configuration on slurmctld's pods; the chart's checksum
	// of the scheduler's configuration is another thing.
	if _, ok := d.Spec.Template.Annotations[wellknown.AnnotationConfigHash]; ok {
		t.Errorf("the scheduler's pods carry the operator's %s", wellknown.AnnotationConfigHash)
	}
}

// TestOperatorExecPolicyMatchesGo: the one exec the policy admits is the container and command
// the operator runs to read slurm.conf's hash line.
func TestOperatorExecPolicyMatchesGo(t *testing.T) {
	var p admissionv1.ValidatingAdmissionPolicy
	goldenObject(t, goldenDocs(t, "sunk-default"), "ValidatingAdmissionPolicy/sunk-operator-exec", &p)
	var quoted []string
	for _, a := range render.ConfigHashCommand() {
		quoted = append(quoted, strconv.Quote(a))
	}
	want := fmt.Sprintf("object.container == %q && object.command == [%s]", render.ControllerContainer, strings.Join(quoted, ", "))
	if len(p.Spec.Validations) != 1 || !strings.Contains(p.Spec.Validations[0].Expression, want) {
		t.Errorf("the exec policy does not admit %s: %+v", want, p.Spec.Validations)
	}
}

// TestNodePolicyAdmitsSunksKeys: the keys sunk's controllers write on nodes are ones the node
// policy calls theirs (the variable "ours", an RE2 expression as Go's regexp reads it).
func TestNodePolicyAdmitsSunksKeys(t *testing.T) {
	var p admissionv1.ValidatingAdmissionPolicy
	goldenObject(t, goldenDocs(t, "sunk-default"), "ValidatingAdmissionPolicy/sunk-node-writes", &p)
	var ours *regexp.Regexp
	for _, v := range p.Spec.Variables {
		if v.Name != "ours" {
			continue
		}
		expr, ok := strings.CutPrefix(v.Expression, "r'")
		if expr, ok = strings.CutSuffix(expr, "'"); !ok {
			t.Fatalf("variable ours is not a raw string: %s", v.Expression)
		}
		ours = regexp.MustCompile(expr)
	}
	if ours == nil {
		t.Fatal("the node policy has no variable ours")
	}
	for _, key := range []string{wellknown.TaintJob, wellknown.LabelCluster, wellknown.AnnotationSlurmState,
		wellknown.AnnotationSlurmReason, wellknown.AnnotationSlurmJobs, wellknown.ConditionSlurmNode} {
		if !ours.MatchString(key) {
			t.Errorf("the node policy's %s does not admit %s", ours, key)
		}
	}
}

// The chart's operator.slurmImages and the operator binary's --slurm-images default name the
// same images: a SlurmCluster without an image runs the same Slurm either way.
func TestSlurmImagesDefaultIsTheOperators(t *testing.T) {
	b, err := os.ReadFile("sunk/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Operator struct {
			SlurmImages slurmversion.Images `json:"slurmImages"`
		} `json:"operator"`
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	want, err := slurmversion.ParseImages(slurmversion.DefaultImagesFlag)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(values.Operator.SlurmImages) != fmt.Sprint(want) {
		t.Errorf("charts/sunk/values.yaml operator.slurmImages %v, the operator's --slurm-images default %v", values.Operator.SlurmImages, want)
	}
}
