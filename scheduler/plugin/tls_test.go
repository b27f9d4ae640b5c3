package plugin

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"sunk.dev/sunk/pkg/clustertls"
	"sunk.dev/sunk/pkg/clustertls/clustertlstest"
	"sunk.dev/sunk/test/wait"
)

func TestArgsValidateTLS(t *testing.T) {
	ok := Args{SlurmURL: "https://c1-restapi.slurm.svc:6820", NodeWatcherURL: "https://c1-nodewatch.slurm.svc:6830",
		MarkKeyFile: "/m", Cluster: "c1", Namespace: "slurm", JWTKeySecret: "c1-jwt-key", CASecret: "c1-tls"}
	checkArgs(t, ok, []argsRefusal{
		{func(a *Args) { a.CASecret = "" }, "exactly one of caSecret"},
		{func(a *Args) { a.CAFile = "/ca" }, "exactly one of caSecret"},
		{func(a *Args) { a.NodeWatcherURL = "http://c1-nodewatch.slurm.svc:6830" }, "both over TLS"},
		{func(a *Args) { a.SlurmURL, a.NodeWatcherURL = "http://r:6820", "" }, "https URLs only"},
	})
}

// The scheduler's clients verify slurmrestd against the CA of the cluster's TLS Secret, read
// through the API, and the URL's host name: another CA or another name is refused, naming the
// cluster; a new CA in the Secret is followed without a restart.
func TestClientTLSFromTheSecret(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	names := []string{"c1-restapi.slurm.svc"}
	data, other := clustertlstest.Issue(t, "c1", names), clustertlstest.Issue(t, "c1", names)
	srv := clustertlstest.Server(t, data, nil)

	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "slurm", Name: "c1-tls"}, Data: map[string][]byte{clustertls.CACertKey: other[clustertls.CACertKey]}}
	cs := fake.NewClientset(secret)
	args := Args{Cluster: "c1", Namespace: "slurm", CASecret: "c1-tls"}
	roots := caRoots(ctx, cs, args)
	get := func(serverName string) error {
		cfg, err := clientTLS(args, "https://"+serverName+":6820", roots)
		if err != nil {
			t.Fatal(err)
		}
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		resp, err := c.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(names[0]); err == nil || !strings.Contains(err.Error(), "cluster slurm/c1") || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("a Secret of another CA: %v", err)
	}
	secret.Data[clustertls.CACertKey] = data[clustertls.CACertKey]
	if _, err := cs.CoreV1().Secrets("slurm").Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the cluster's CA", 10*time.Second, 10*time.Millisecond, func() error { return get(names[0]) })
	if err := get("c2-restapi.slurm.svc"); err == nil || !strings.Contains(err.Error(), "c2-restapi.slurm.svc") {
		t.Fatalf("another name: %v", err)
	}
	if cfg, err := clientTLS(args, "http://c1-restapi.slurm.svc:6820", roots); cfg != nil || err != nil {
		t.Fatalf("http: %v, %v", cfg, err)
	}
}
