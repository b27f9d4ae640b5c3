package plugin

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sunk.dev/sunk/pkg/nodewatch"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/test/wait"
)

// With a node watcher the plugin's nodes come from it, asked with the plugin's token, and
// slurmrestd's node list is never asked for; a malformed URL is refused naming the field.
func TestNodesFromTheNodeWatcher(t *testing.T) {
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != nodewatch.Path {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get(nodewatch.TokenHeader) != "the plugin's" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		asked.Add(1)
		if r.URL.Query().Get("epoch") == "e1" { // nothing changed since the first answer
			time.Sleep(50 * time.Millisecond)
			fmt.Fprint(w, `{"epoch":"e1","seq":1}`)
			return
		}
		fmt.Fprint(w, `{"epoch":"e1","seq":1,"full":true,"nodes":[{"name":"compute-0","state":["IDLE"]}]}`)
	}))
	defer srv.Close()
	rest := &countingClient{}
	tokens := slurm.StaticToken{User: "slurm", Value: "the plugin's"}
	inf, err := nodeInformer(rest, Args{NodeWatcherURL: srv.URL, PollInterval: metav1.Duration{Duration: 10 * time.Millisecond}}, tokens, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = inf.Run(ctx) }()
	wait.For(t, "the watcher's node in the plugin's informer", 5*time.Second, 10*time.Millisecond, func() error {
		if _, ok := inf.Get("compute-0"); !ok {
			return fmt.Errorf("no compute-0 (%d requests to the watcher)", asked.Load())
		}
		return nil
	})
	if n := rest.lists.Load(); n != 0 {
		t.Errorf("slurmrestd's node list asked %d times", n)
	}
	if _, err := nodeInformer(rest, Args{NodeWatcherURL: "demo-nodewatch:6830"}, tokens, nil); err == nil || !strings.Contains(err.Error(), "nodeWatcherURL") {
		t.Errorf("a URL without a scheme: %v", err)
	}
}

// countingClient counts node lists; nothing else of it is used here.
type countingClient struct {
	slurm.Client
	lists atomic.Int32
}

func (c *countingClient) ListNodes(context.Context, time.Time) (*slurm.NodeList, error) {
	c.lists.Add(1)
	return &slurm.NodeList{}, nil
}
