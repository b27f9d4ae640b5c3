//go:build integration

package charts

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	goldenfile "sunk.dev/sunk/internal/golden"
	"sunk.dev/sunk/test/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// helm runs the helm that hack/provision.sh builds. A missing helm fails the test: CI
// provisions it, and a template test that did not run is not a pass.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := filepath.Join(testenv.CacheDir(), "bin", "helm")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no helm at %s (hack/provision.sh tools builds it): %v", bin, err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), err
}

func TestHelmLint(t *testing.T) {
	for _, chart := range []string{"sunk", "slurm"} {
		if out, err := helm(t, "lint", "--strict", chart); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	}
	if out, err := helm(t, "lint", "--strict", "slurm", "-f", "testdata/slurm-full.values.yaml"); err != nil {
		t.Errorf("%v\n%s", err, out)
	}
}

// secretLine matches the generated webhook certificate and key and the scheduler's job mark key,
// which differ on every render.
var secretLine = regexp.MustCompile(`(?m)^(\s*(?:ca\.crt|tls\.crt|tls\.key|caBundle|mark\.key):) \S+$`)

// TestTemplates pins `helm template` output in testdata/*.golden.yaml and checks what a
// golden file cannot: the SlurmClusters and NodeSets decode strictly into sunk's API types
// (a misspelt field fails here, not at admission), and the webhook's caBundle signs the
// certificate that its Secret serves for the webhook Service's name.
func TestTemplates(t *testing.T) {
	cases := []struct {
		name  string
		args  []string
		check func(t *testing.T, docs []map[string]any)
	}{
		{"sunk-default", []string{"template", "sunk", "sunk", "-n", "sunk-system"}, checkWebhookCert},
		{"sunk-minimal", []string{"template", "sunk", "sunk", "-n", "sunk-system",
			"--set", "operator.webhook.enabled=false", "--set", "syncer.enabled=false", "--set", "operator.leaderElection=false",
			"--set", "operator.replicas=1", "--set", "operator.podDisruptionBudget.enabled=false"}, nil},
		{"sunk-scheduler", []string{"template", "sunk", "sunk", "-n", "sunk-system", "--set", "operator.webhook.enabled=false",
			"--set", "scheduler.enabled=true", "--set", "scheduler.cluster.name=c1", "--set", "scheduler.cluster.namespace=slurm"}, checkSchedulerConfig},
		{"sunk-monitoring", []string{"template", "sunk", "sunk", "-n", "sunk-system", "--set", "operator.webhook.enabled=false",
			"--api-versions", "monitoring.coreos.com/v1", "--api-versions", "monitoring.coreos.com/v1/PrometheusRule",
			"--set", "metrics.serviceMonitor.labels.release=kube-prometheus-stack",
			"--set", "syncer.exporter.interval=1m", "--set", "syncer.exporter.userSeries=true",
			"--set", "metrics.dashboards.enabled=true", "--set", "metrics.dashboards.annotations.grafana_folder=Slurm",
			"--set", "metrics.prometheusRule.labels.release=kube-prometheus-stack",
			"--set", "metrics.prometheusRule.for.SunkSlurmNodeDown=1h", "--set", "metrics.prometheusRule.disabled={SunkReconcileErrors}"},
			func(t *testing.T, docs []map[string]any) {
				checkServiceMonitors(t, docs)
				checkDashboards(t, docs)
				checkAlerts(t, docs)
			}},
		{"slurm-default", []string{"template", "demo", "slurm", "-n", "slurm"}, nil},
		{"slurm-full", []string{"template", "research", "slurm", "-n", "research", "-f", "testdata/slurm-full.values.yaml"}, nil},
		{"slurm-directory", []string{"template", "research", "slurm", "-n", "research", "-f", "testdata/slurm-directory.values.yaml"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := helm(t, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			docs := decodeAll(t, out)
			if c.check != nil {
				c.check(t, docs)
			}
			golden(t, c.name, secretLine.ReplaceAllString(out, "$1 REDACTED"))
		})
	}
}

// TestTemplateRefusals: values that cannot work fail the render with a message that says why.
func TestTemplateRefusals(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"template", "sunk", "sunk", "--set", "scheduler.enabled=true"}, "set scheduler.cluster.name"},
		{[]string{"template", "sunk", "sunk", "--set", "operator.leaderElection=false"}, "needs operator.leaderElection"},
		{[]string{"template", "s", "slurm", "--set", "accounting.mode=External"}, "accounting.external is required"},
		{[]string{"template", "s", "slurm", "--set", "sharedVolumes[0].create=false"}, "claimName is required"},
		{[]string{"template", "s", "slurm", "--set", "login.ssh.permitRootLogin=true"}, "root logs in by key only"},
		{[]string{"template", "s", "slurm", "--set", "directory.enabled=true", "--set", "login.sssd.configSecretRef=site"}, "leave login.sssd.config and login.sssd.configSecretRef empty"},
		{[]string{"template", "s", "slurm", "--set", "directory.enabled=true", "--set", "directory.users[0].name=ada"}, "directory.users[0].uid is required"},
		{[]string{"template", "s", "slurm", "--set", "login.pools[0].name=users", "--set", "login.pools[0].group=analysts"}, "login.pools need a directory"},
	} {
		if _, err := helm(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("helm %v: want an error with %q, got %v", c.args, c.want, err)
		}
	}
}

func decodeAll(t *testing.T, out string) []map[string]any {
	t.Helper()
	var docs []map[string]any
	for _, d := range strings.Split(out, "\n---\n") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(d), &m); err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, d)
		}
		if m == nil {
			continue
		}
		docs = append(docs, m)
		var err error
		switch m["kind"] {
		case "SlurmCluster":
			err = yaml.UnmarshalStrict([]byte(d), &sunkv1.SlurmCluster{})
		case "NodeSet":
			err = yaml.UnmarshalStrict([]byte(d), &sunkv1.NodeSet{})
		case "Deployment":
			// The apiserver refuses a manifest whose annotation is a number (an unquoted hash
			// of digits and one "e" is a float to YAML): helm upgrade failed so.
			err = yaml.UnmarshalStrict([]byte(d), &appsv1.Deployment{})
		case "StatefulSet":
			err = yaml.UnmarshalStrict([]byte(d), &appsv1.StatefulSet{})
		}
		if err != nil {
			t.Errorf("%s does not decode strictly into the API type: %v\n%s", m["kind"], err, d)
		}
	}
	return docs
}

func checkWebhookCert(t *testing.T, docs []map[string]any) {
	var caBundle, crt, svc, ns string
	for _, d := range docs {
		switch d["kind"] {
		case "Secret":
			data := d["data"].(map[string]any)
			crt = data["tls.crt"].(string)
			if data["ca.crt"] == nil || data["tls.key"] == nil {
				t.Errorf("webhook Secret lacks ca.crt or tls.key")
			}
		case "ValidatingWebhookConfiguration":
			w := d["webhooks"].([]any)[0].(map[string]any)["clientConfig"].(map[string]any)
			caBundle = w["caBundle"].(string)
			s := w["service"].(map[string]any)
			svc, ns = s["name"].(string), s["namespace"].(string)
		}
	}
	pemOf := func(b64 string) []byte {
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pemOf(caBundle)) {
		t.Fatalf("caBundle is no PEM certificate")
	}
	block, _ := pem.Decode(pemOf(crt))
	if block == nil {
		t.Fatal("tls.crt is no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	// The API server calls the webhook at <service>.<namespace>.svc.
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: svc + "." + ns + ".svc"}); err != nil {
		t.Errorf("the serving certificate does not verify for %s.%s.svc against caBundle: %v", svc, ns, err)
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	goldenfile.Check(t, filepath.Join("testdata", name+".golden.yaml"), got, *update, "go test -tags integration ./charts -update")
}

// checkSchedulerConfig: the scheduler runs in the release's namespace, not the SlurmCluster's
// (docs/security.md: its account may patch pods everywhere); its configuration parses, and names
// the cluster's slurmrestd and the cluster's JWT key Secret, read through the API
// (internal/clusternames); it mounts only its own mark key Secret.
func checkSchedulerConfig(t *testing.T, docs []map[string]any) {
	var config string
	mounted := map[string]bool{} // Secrets the Deployment mounts
	made := map[string]bool{}    // Secrets the chart makes in the scheduler's namespace
	for _, d := range docs {
		md := d["metadata"].(map[string]any)
		switch {
		case d["kind"] == "Secret" && md["namespace"] == "sunk-system":
			made[md["name"].(string)] = true
		case d["kind"] == "ConfigMap" && md["name"] == "sunk-scheduler":
			config = d["data"].(map[string]any)["config.yaml"].(string)
		case d["kind"] == "Deployment" && md["name"] == "sunk-scheduler":
			if md["namespace"] != "sunk-system" {
				t.Errorf("the scheduler runs in %v, want the release's namespace sunk-system", md["namespace"])
			}
			vols := d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["volumes"].([]any)
			for _, v := range vols {
				if s, ok := v.(map[string]any)["secret"].(map[string]any); ok {
					mounted[s["secretName"].(string)] = true
				}
			}
		}
	}
	var c struct {
		Profiles []struct {
			SchedulerName string `json:"schedulerName"`
			PluginConfig  []struct {
				Name string         `json:"name"`
				Args map[string]any `json:"args"`
			} `json:"pluginConfig"`
		} `json:"profiles"`
	}
	if err := yaml.Unmarshal([]byte(config), &c); err != nil {
		t.Fatalf("scheduler config: %v\n%s", err, config)
	}
	if len(c.Profiles) != 1 || c.Profiles[0].SchedulerName != "sunk-scheduler" || len(c.Profiles[0].PluginConfig) != 1 {
		t.Fatalf("scheduler config profiles: %+v", c.Profiles)
	}
	sc := &sunkv1.SlurmCluster{}
	sc.Name, sc.Namespace = "c1", "slurm"
	names := clusternames.For(sc, "cluster.local")
	args := c.Profiles[0].PluginConfig[0].Args
	if want := fmt.Sprintf("https://%s:%d", names.ServerName(names.RestAPI), clusternames.SlurmrestdPort); args["slurmURL"] != want || args["caSecret"] != names.TLSSecret {
		t.Errorf("slurmURL %v with caSecret %v, want %s with %s", args["slurmURL"], args["caSecret"], want, names.TLSSecret)
	}
	if args["jwtKeySecret"] != names.JWTSecret || args["jwtKeyFile"] != nil || args["namespace"] != "slurm" {
		t.Errorf("jwtKeySecret %v (jwtKeyFile %v) in namespace %v, want %s in slurm", args["jwtKeySecret"], args["jwtKeyFile"], args["namespace"], names.JWTSecret)
	}
	if len(mounted) != 1 {
		t.Errorf("the Deployment mounts Secrets %v, want only its job mark key", mounted)
	}
	if args["markKeyFile"] != "/etc/sunk/mark/mark.key" || !mounted["sunk-scheduler-job-mark"] || !made["sunk-scheduler-job-mark"] {
		t.Errorf("job mark key: markKeyFile %v, mounted %v, made %v; want sunk-scheduler-job-mark made, mounted and named", args["markKeyFile"], mounted, made)
	}
}

// checkServiceMonitors: one ServiceMonitor per metrics Service, carrying the configured labels,
// whose selector and port name match that Service (a monitor that selects nothing scrapes
// nothing, silently).
func checkServiceMonitors(t *testing.T, docs []map[string]any) {
	services := map[string]map[string]any{} // metrics Services by name
	var monitors []map[string]any
	for _, d := range docs {
		name := d["metadata"].(map[string]any)["name"].(string)
		switch {
		case d["kind"] == "Service" && strings.HasSuffix(name, "-metrics"):
			services[name] = d
		case d["kind"] == "ServiceMonitor":
			monitors = append(monitors, d)
		}
	}
	if len(monitors) != 2 || len(services) != 2 {
		t.Fatalf("%d ServiceMonitors for %d metrics Services, want 2 and 2", len(monitors), len(services))
	}
	for _, m := range monitors {
		meta := m["metadata"].(map[string]any)
		if meta["labels"].(map[string]any)["release"] != "kube-prometheus-stack" {
			t.Errorf("ServiceMonitor %s lacks the configured label: %v", meta["name"], meta["labels"])
		}
		spec := m["spec"].(map[string]any)
		sel := spec["selector"].(map[string]any)["matchLabels"].(map[string]any)
		port := spec["endpoints"].([]any)[0].(map[string]any)["port"]
		matched := 0
		for name, svc := range services {
			labels := svc["metadata"].(map[string]any)["labels"].(map[string]any)
			all := true
			for k, v := range sel {
				all = all && labels[k] == v
			}
			if !all {
				continue
			}
			matched++
			if p := svc["spec"].(map[string]any)["ports"].([]any)[0].(map[string]any)["name"]; p != port {
				t.Errorf("ServiceMonitor %s scrapes port %v, Service %s names it %v", meta["name"], port, name, p)
			}
		}
		if matched != 1 {
			t.Errorf("ServiceMonitor %s selects %d metrics Services, want 1", meta["name"], matched)
		}
	}
}

// checkDashboards: one ConfigMap per dashboard file, labelled for Grafana's sidecar, holding
// the file unchanged under its name.
func checkDashboards(t *testing.T, docs []map[string]any) {
	files, err := filepath.Glob("sunk/files/dashboards/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards: %v", err)
	}
	got := map[string]string{} // file name → content
	for _, d := range docs {
		md := d["metadata"].(map[string]any)
		if d["kind"] != "ConfigMap" || md["labels"].(map[string]any)["grafana_dashboard"] == nil {
			continue
		}
		if md["labels"].(map[string]any)["grafana_dashboard"] != "1" || md["annotations"].(map[string]any)["grafana_folder"] != "Slurm" {
			t.Errorf("dashboard ConfigMap %s: labels %v, annotations %v", md["name"], md["labels"], md["annotations"])
		}
		for k, v := range d["data"].(map[string]any) {
			got[k] = v.(string)
		}
	}
	if len(got) != len(files) {
		t.Errorf("%d dashboards in ConfigMaps, %d files", len(got), len(files))
	}
	for _, f := range files {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if got[filepath.Base(f)] != strings.TrimRight(string(want), "\n") {
			t.Errorf("the ConfigMap of %s does not hold the file unchanged", f)
		}
	}
}
