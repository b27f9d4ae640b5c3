//go:build integration

package operator

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"sunk.dev/sunk/internal/cmdutil"
	"sunk.dev/sunk/test/testenv"
	"sunk.dev/sunk/test/wait"
)

// TestMetricsNeedAReader: the operator's and the syncer's metrics server, with the options
// their --metrics-secure gives (cmdutil.MetricsOptions), against a real API server. It serves
// HTTPS; a request without a token gets 401, a ServiceAccount token without the grant 403, a
// forged token 401, and a token of a ServiceAccount bound to a ClusterRole that may get
// /metrics (as the chart's <release>-metrics-reader) the metrics.
func TestMetricsNeedAReader(t *testing.T) {
	cfg := testenv.API(t, testenv.APIOptions{})
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	reader := testenv.ServiceAccountToken(t, cs, "default", "reader", role.Name, time.Hour)
	other := testenv.ServiceAccountToken(t, cs, "default", "other", "", time.Hour)

	addr := testenv.FreeAddr(t, "127.0.0.1")
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := metricsserver.NewServer(cmdutil.MetricsOptions(addr, true), cfg, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	srvCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Start(srvCtx) }()
	t.Cleanup(func() { stop(); <-done })

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // the server's certificate is self-signed
	get := func(token string) (int, string, error) {
		req, _ := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), nil
	}
	wait.For(t, "the metrics server serves HTTPS", time.Minute, 100*time.Millisecond, func() error {
		_, _, err := get("")
		return err
	})
	for _, c := range []struct {
		who, token string
		code       int
		body       string
	}{
		{"no token", "", http.StatusUnauthorized, "needs a bearer token"},
		{"a forged token", "eyJhbGciOiJSUzI1NiJ9.e30.c2ln", http.StatusUnauthorized, "does not know this token"},
		{"a ServiceAccount without the grant", other, http.StatusForbidden, `"system:serviceaccount:default:other" may not get /metrics`},
		{"the metrics reader", reader, http.StatusOK, "# TYPE"},
	} {
		code, body, err := get(c.token)
		if err != nil || code != c.code || !strings.Contains(body, c.body) {
			t.Errorf("%s: %d %.200q %v, want %d with %q", c.who, code, body, err, c.code, c.body)
		}
	}
}
