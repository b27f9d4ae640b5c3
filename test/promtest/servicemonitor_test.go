package promtest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func monitor(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestScrapeConfigs(t *testing.T) {
	sm := monitor(t, `
metadata: {name: sunk-scheduler, namespace: sunk-system}
spec:
  selector: {matchLabels: {app.kubernetes.io/name: sunk, app.kubernetes.io/component: scheduler}}
  namespaceSelector: {matchNames: [slurm]}
  endpoints:
    - port: https-metrics
      scheme: https
      interval: 5s
      tlsConfig: {insecureSkipVerify: true}
      bearerTokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
`)
	var asked string
	discover := func(namespaces []string, matchLabels map[string]string, port string) ([]Target, error) {
		asked = fmt.Sprintln(namespaces, matchLabels, port)
		return []Target{{Address: "10.88.0.5:10259", Labels: map[string]string{"job": "sunk-scheduler-metrics", "pod": "p"}}}, nil
	}
	got, err := ScrapeConfigs(sm, "/t/token", discover)
	if err != nil {
		t.Fatal(err)
	}
	if want := "[slurm] map[app.kubernetes.io/component:scheduler app.kubernetes.io/name:sunk] https-metrics\n"; asked != want {
		t.Errorf("discovery asked for %s, want %s", asked, want)
	}
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"authorization":{"credentials_file":"/t/token"},"job_name":"serviceMonitor/sunk-system/sunk-scheduler/0",` +
		`"metrics_path":"/metrics","scheme":"https","scrape_interval":"5s",` +
		`"static_configs":[{"labels":{"job":"sunk-scheduler-metrics","pod":"p"},"targets":["10.88.0.5:10259"]}],` +
		`"tls_config":{"insecure_skip_verify":true}}]`
	if string(b) != want {
		t.Errorf("got\n%s\nwant\n%s", b, want)
	}
}

func TestScrapeConfigsRefusesWhatItCannotTranslate(t *testing.T) {
	for name, y := range map[string]string{
		"unknown endpoint field": `{metadata: {name: m}, spec: {selector: {}, endpoints: [{port: p, honorLabels: true}]}}`,
		"no port":                `{metadata: {name: m}, spec: {selector: {}, endpoints: [{path: /metrics}]}}`,
		"unknown spec field":     `{metadata: {name: m}, spec: {selector: {}, jobLabel: x, endpoints: []}}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ScrapeConfigs(monitor(t, y), "t", func([]string, map[string]string, string) ([]Target, error) { return nil, nil })
			if err == nil || !strings.Contains(err.Error(), "m") {
				t.Fatalf("err = %v, want an error naming the monitor's field", err)
			}
		})
	}
}
