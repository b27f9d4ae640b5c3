//go:build integration

package slurm_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/test/testenv"
)

const benchNodes = 5000

// BenchmarkNodeList5000 measures, against the real slurmrestd with 5,000 node records
// (`scontrol create nodename=bench[0001-5000] state=future`, removed afterwards):
//   - FullList: one GET /nodes/ from slurmrestd and its decoding into []slurm.Node;
//   - DecodeOnly: the same answer (recorded from slurmrestd) served locally, so the time and
//     allocations are the client's decoding alone;
//   - GetNode: one GET /node/X of the same cluster (what the syncer's writer reads before a
//     write: internal/syncer nodesPerRead is FullList's time over GetNode's, per node);
//   - UnchangedPoll: an incremental list of the unchanged cluster (304 Not Modified). A poll
//     that finds a change (the test bed is shared) re-arms update_time and is counted.
//
// Run: go test -tags integration -run '^$' -bench NodeList5000 -benchtime 5x ./test/integration/slurm/
func BenchmarkNodeList5000(b *testing.B) {
	env := testenv.Slurm(b)
	spec := fmt.Sprintf("nodename=bench[0001-%04d]", benchNodes)
	if out, err := env.Exec("scontrol", "create", spec, "state=future", "cpus=1", "realmemory=100", "features=bench"); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
	b.Cleanup(func() {
		if out, err := env.Exec("scontrol", "delete", spec); err != nil {
			b.Errorf("cleanup: %v: %s", err, out)
		}
	})
	for _, v := range env.APIVersions(b) {
		c := newClient(b, env, v)
		ctx := context.Background()
		l, err := c.ListNodes(ctx, time.Time{})
		if err != nil {
			b.Fatal(err)
		}
		if len(l.Nodes) < benchNodes {
			b.Fatalf("%s: listed %d nodes, want at least %d", v, len(l.Nodes), benchNodes)
		}
		body := rawBody(b, env, v)
		size := int64(len(body))
		b.Run(v+"/FullList", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(size)
			for b.Loop() {
				l, err := c.ListNodes(ctx, time.Time{})
				if err != nil || len(l.Nodes) < benchNodes {
					b.Fatalf("%v, %d nodes", err, count(l))
				}
			}
		})
		b.Run(v+"/GetNode", func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				name := fmt.Sprintf("bench%04d", 1+i%benchNodes)
				if n, err := c.GetNode(ctx, name); err != nil || n.Name != name {
					b.Fatalf("%s: %v", name, err)
				}
			}
		})
		b.Run(v+"/DecodeOnly", func(b *testing.B) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(body)
			}))
			defer srv.Close()
			local, err := slurm.New(slurm.Config{URL: srv.URL, APIVersion: v, Tokens: slurm.StaticToken{User: "u", Value: "t"}})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(size)
			for b.Loop() {
				l, err := local.ListNodes(ctx, time.Time{})
				if err != nil || len(l.Nodes) < benchNodes {
					b.Fatalf("%v, %d nodes", err, count(l))
				}
			}
		})
		b.Run(v+"/UnchangedPoll", func(b *testing.B) {
			// Slurm compares update_time at one-second granularity.
			time.Sleep(1100 * time.Millisecond)
			since := l.LastUpdate
			if l2, err := c.ListNodes(ctx, time.Time{}); err == nil {
				since = l2.LastUpdate
			}
			time.Sleep(1100 * time.Millisecond)
			changed := 0
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				l, err := c.ListNodes(ctx, since)
				if err != nil {
					b.Fatal(err)
				}
				if !l.NotModified {
					changed++
					since = l.LastUpdate
				}
			}
			b.ReportMetric(float64(changed), "changed-polls")
		})
	}
}

func count(l *slurm.NodeList) int {
	if l == nil {
		return 0
	}
	return len(l.Nodes)
}

// rawBody is one full node list answer as slurmrestd sends it.
func rawBody(b *testing.B, env *testenv.SlurmEnv, version string) []byte {
	req, err := http.NewRequest("GET", env.RESTURL+"/slurm/"+version+"/nodes/?flags=ALL&flags=DETAIL&flags=MIXED&flags=FUTURE", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("X-SLURM-USER-NAME", env.User)
	req.Header.Set("X-SLURM-USER-TOKEN", env.Token(b, env.User))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%s: full list of %d+ nodes is %d bytes", version, benchNodes, len(body))
	return body
}
