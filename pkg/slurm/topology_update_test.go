package slurm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// A node update's Topology reaches slurmrestd as topology_str on the versions that have it,
// and is refused before anything is sent on those that do not (the update would otherwise
// succeed and move nothing).
func TestUpdateNodeTopology(t *testing.T) {
	for _, tc := range []struct {
		version string
		want    bool
	}{{V0041, false}, {V0042, false}, {V0043, true}, {V0044, true}, {V0045, true}} {
		t.Run(tc.version, func(t *testing.T) {
			var mu sync.Mutex
			var bodies []map[string]any
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				var m map[string]any
				_ = json.Unmarshal(b, &m)
				mu.Lock()
				bodies = append(bodies, m)
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"errors":[],"warnings":[]}`))
			}))
			defer srv.Close()
			c := newTestClient(t, srv.URL, tc.version, nil)
			topo := "tree:spine-a:leaf-3"
			err := c.UpdateNode(context.Background(), "n1", NodeUpdate{Topology: &topo})
			mu.Lock()
			defer mu.Unlock()
			if !tc.want {
				if !errors.Is(err, ErrUnsupported) || len(bodies) != 0 {
					t.Fatalf("err %v, %d requests; want ErrUnsupported and none", err, len(bodies))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(bodies) != 1 || bodies[0]["topology_str"] != topo {
				t.Fatalf("bodies %v; want one with topology_str %q", bodies, topo)
			}
		})
	}
}
