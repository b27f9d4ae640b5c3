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

	"sigs.k8s.io/yaml"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
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

// secretLine matches the generated webhook certificate and key, which differ on every render.
var secretLine = regexp.MustCompile(`(?m)^(\s*(?:ca\.crt|tls\.crt|tls\.key|caBundle):) \S+$`)

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
			"--set", "operator.webhook.enabled=false", "--set", "syncer.enabled=false", "--set", "operator.leaderElection=false"}, nil},
		{"slurm-default", []string{"template", "demo", "slurm", "-n", "slurm"}, nil},
		{"slurm-full", []string{"template", "research", "slurm", "-n", "research", "-f", "testdata/slurm-full.values.yaml"}, nil},
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
		{[]string{"template", "sunk", "sunk", "--set", "scheduler.enabled=true"}, "not packaged"},
		{[]string{"template", "s", "slurm", "--set", "accounting.mode=External"}, "accounting.external is required"},
		{[]string{"template", "s", "slurm", "--set", "sharedVolumes[0].create=false"}, "claimName is required"},
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
