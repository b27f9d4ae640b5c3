package slurmcluster

import (
	"fmt"
	"testing"
	"time"

	"sunk.dev/sunk/pkg/slurm"
)

func TestNextJWTStep(t *testing.T) {
	refused := fmt.Errorf("slurm diag: %w", slurm.ErrUnauthorized)
	down := fmt.Errorf("slurm diag: %w", slurm.ErrUnavailable)
	long := time.Hour
	for _, c := range []struct {
		name     string
		probe    error
		previous bool
		own      bool
		since    time.Duration
		want     jwtStep
	}{
		{"accepted, no rotation", nil, false, true, long, jwtSteady},
		{"accepted, previous left in the operator's Secret", nil, true, true, long, jwtDropPrevious},
		{"accepted, previous left in an admin's Secret", nil, true, false, long, jwtSteady},
		{"refused, previous present: reconfigure", refused, true, true, long, jwtReconfigure},
		{"refused, reconfigured a moment ago: kubelet may not have delivered the file", refused, true, true, 10 * time.Second, jwtWait},
		{"refused, no previous key to reach slurmctld with", refused, false, true, long, jwtStuck},
		{"slurmctld unreachable says nothing about the key", down, true, true, long, jwtWait},
		{"unreachable, no previous key either", down, false, true, long, jwtWait},
	} {
		if got := nextJWTStep(c.probe, c.previous, c.own, c.since); got != c.want {
			t.Errorf("%s: step %d, want %d", c.name, got, c.want)
		}
	}
}

func TestKeyIDHidesTheKey(t *testing.T) {
	a, b := keyID([]byte("key-a")), keyID([]byte("key-b"))
	if a == b || len(a) != jwtKeyIDHexCharacters || a != keyID([]byte("key-a")) {
		t.Fatalf("key ids %q %q", a, b)
	}
}
