//go:build integration

package syncer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/test/faultproxy"
)

// TestSyncerFaults: while slurmrestd answers 500s, garbage JSON or nothing at all, the syncer
// changes nothing in either world (no drain, no mirror, no record removed, no annotation
// wiped); once it heals, what happened meanwhile is applied within a few polls.
func TestSyncerFaults(t *testing.T) {
	h := setup(t)
	proxy := faultproxy.New(t, h.env.RESTURL)
	tokens, err := slurm.NewJWTSource(h.env.User, h.env.JWTKey(t), slurm.WithLifetime(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	// The syncer's client goes through the proxy, with a short timeout so that a hang shows.
	proxied, err := slurm.NewDiscovering(slurm.Config{URL: proxy.URL, Tokens: tokens, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	direct := h.sl
	h.sl = proxied
	h.start()
	h.sl = direct
	n1, n2 := h.env.Nodes[0], h.env.Nodes[1]
	for _, name := range h.env.Nodes {
		h.waitMirror(name, func(m mirror) bool { return m.podState == "idle" }, "idle before the faults")
	}
	eventually(t, 10*time.Second, func() error {
		if !h.s.Healthy() {
			return errors.New("the syncer does not read Slurm yet")
		}
		return nil
	})

	for _, fault := range []string{faultproxy.HTTP500, faultproxy.GarbageJSON, faultproxy.Hang} {
		ok := t.Run(fault, func(t *testing.T) {
			h.t = t
			defer func() { h.t = h.top }()
			proxy.Set(fault)
			defer proxy.Set(faultproxy.None)
			eventually(t, 20*time.Second, func() error {
				if h.s.Healthy() {
					return errors.New("the syncer still reads Slurm as healthy")
				}
				return nil
			})
			before := map[string]mirror{}
			for _, name := range h.env.Nodes {
				before[name], _ = h.mirror(name)
			}
			h.cordon(k8sNode(0), true, "during "+fault)
			why := "set during " + fault
			if out, err := h.env.Exec("scontrol", "update", "nodename="+n2, "state=drain", "reason="+why); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			// Eight polls: nothing drained, nothing mirrored, no record removed, no mirror wiped.
			deadline := time.Now().Add(8 * poll)
			for time.Now().Before(deadline) {
				if st, _, err := h.slurmNode(n1); err != nil || strings.Contains(st, "DRAIN") {
					t.Fatalf("n1 changed in Slurm during the fault: %s %v", st, err)
				}
				for _, name := range h.env.Nodes {
					if _, err := direct.GetNode(context.Background(), name); err != nil {
						t.Fatalf("%s unreadable or removed during the fault: %v", name, err)
					}
					if m, err := h.mirror(name); err != nil || m.podState != before[name].podState || m.podReason != before[name].podReason {
						t.Fatalf("%s's mirror changed during the fault: %+v -> %+v (%v)", name, before[name], m, err)
					}
				}
			}
			healed := time.Now()
			proxy.Set(faultproxy.None)
			h.waitSlurm(n1, drainedWith("k8s: node cordoned (during "+fault+")"), "drained after healing")
			toSlurm := time.Since(healed)
			h.waitMirror(n2, func(m mirror) bool { return m.podReason == why }, "mirrored after healing")
			toKube := time.Since(healed)
			fmt.Printf("bench: fault=%s recovery_k8s_to_slurm_ms=%d recovery_slurm_to_k8s_ms=%d poll_ms=%d\n",
				fault, toSlurm.Milliseconds(), toKube.Milliseconds(), poll.Milliseconds())
			// The syncer trusts its store again one good poll after healing, and a node it
			// could not read is decided afresh then: a few polls, not minutes.
			if limit := 10 * poll; toSlurm > limit+2*time.Second || toKube > limit+2*time.Second {
				t.Errorf("recovery took %v / %v, want within %v", toSlurm, toKube, limit+2*time.Second)
			}
			h.cordon(k8sNode(0), false, "")
			if out, err := h.env.Exec("scontrol", "update", "nodename="+n2, "state=resume"); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			h.waitSlurm(n1, notDrained, "resumed")
			h.waitSlurm(n2, notDrained, "resumed")
		})
		if !ok {
			t.FailNow()
		}
	}
}
