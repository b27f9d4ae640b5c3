package slurmcluster

import (
	"testing"
	"time"

	"sunk.dev/sunk/internal/render"
)

func TestNextAuthStep(t *testing.T) {
	key := []byte("0123456789abcdef")
	one := &render.AuthRing{Keys: []render.AuthRingKey{render.NewAuthRingKey("initial", key)}}
	added := &render.AuthRing{Keys: append(one.Keys, render.NewAuthRingKey("k2", key))}
	swapped := added.WithDefault("k2")
	only := swapped.Only("k2")
	long := 10 * time.Minute
	for _, tc := range []struct {
		name string
		f    authFacts
		want authStep
	}{
		{"nothing asked", authFacts{ownSecret: true}, authSteady},
		{"nothing asked, plain slurm.key", authFacts{}, authSteady},
		{"admin's Secret", authFacts{wanted: "k2", ring: one, loaded: true}, authRefused},
		{"admin's Secret, already there", authFacts{wanted: "k2", ring: only, loaded: true}, authSteady},
		{"upgrade: plain slurm.key", authFacts{wanted: "k2", ownSecret: true}, authConvert},
		{"converted, not loaded", authFacts{wanted: "k2", ring: one, ownSecret: true}, authWaitLoad},
		{"converted and loaded", authFacts{wanted: "k2", ring: one, ownSecret: true, loaded: true}, authAddKey},
		{"added, not loaded", authFacts{wanted: "k2", ring: added, ownSecret: true}, authWaitLoad},
		{"added, tokens alive", authFacts{wanted: "k2", ring: added, ownSecret: true, loaded: true, sinceLoaded: time.Minute}, authWaitTokens},
		{"added, jobs from before", authFacts{wanted: "k2", ring: added, ownSecret: true, loaded: true, sinceLoaded: long, oldJobs: 1}, authWaitJobs},
		{"added and loaded", authFacts{wanted: "k2", ring: added, ownSecret: true, loaded: true, sinceLoaded: long}, authMakeDefault},
		{"default, not loaded", authFacts{wanted: "k2", ring: swapped, ownSecret: true, sinceLoaded: long}, authWaitLoad},
		{"default, tokens alive", authFacts{wanted: "k2", ring: swapped, ownSecret: true, loaded: true, sinceLoaded: time.Minute}, authWaitTokens},
		{"default, old jobs", authFacts{wanted: "k2", ring: swapped, ownSecret: true, loaded: true, sinceLoaded: long, oldJobs: 1}, authWaitJobs},
		{"default, all clear", authFacts{wanted: "k2", ring: swapped, ownSecret: true, loaded: true, sinceLoaded: long}, authDropOld},
		{"dropped, not loaded", authFacts{wanted: "k2", ring: only, ownSecret: true}, authWaitLoad},
		{"done", authFacts{wanted: "k2", ring: only, ownSecret: true, loaded: true}, authSteady},
		{"first ring is the wish", authFacts{wanted: "initial", ring: one, ownSecret: true, loaded: true}, authSteady},
		{"back to an old key still in the ring", authFacts{wanted: "initial", ring: swapped, ownSecret: true, loaded: true, sinceLoaded: long}, authMakeDefault},
		// A job of --time=UNLIMITED must not keep the old key valid for ever when the admin
		// set a deadline; without one the rotation waits, as before.
		{"added, old jobs, deadline not reached", authFacts{wanted: "k2", ring: added, ownSecret: true, loaded: true, sinceLoaded: authTokenLifetime + time.Hour - time.Second, oldJobs: 1, deadline: time.Hour}, authWaitJobs},
		{"added, old jobs, deadline passed", authFacts{wanted: "k2", ring: added, ownSecret: true, loaded: true, sinceLoaded: authTokenLifetime + time.Hour, oldJobs: 1, deadline: time.Hour}, authRequeueOld},
		{"default, old jobs, deadline passed", authFacts{wanted: "k2", ring: swapped, ownSecret: true, loaded: true, sinceLoaded: 48 * time.Hour, oldJobs: 2, deadline: time.Hour}, authRequeueOld},
		{"default, old jobs, no deadline", authFacts{wanted: "k2", ring: swapped, ownSecret: true, loaded: true, sinceLoaded: 48 * time.Hour, oldJobs: 2}, authWaitJobs},
		{"deadline passed, no old job", authFacts{wanted: "k2", ring: swapped, ownSecret: true, loaded: true, sinceLoaded: 48 * time.Hour, deadline: time.Hour}, authDropOld},
	} {
		if got := nextAuthStep(tc.f); got != tc.want {
			t.Errorf("%s: nextAuthStep = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestAuthDeadline(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"", 0, false},
		{"24h", 24 * time.Hour, false},
		{"90m", 90 * time.Minute, false},
		{"0s", 0, true},
		{"-1h", 0, true},
		{"tomorrow", 0, true},
		{"24", 0, true},
	} {
		got, err := authDeadline(tc.in)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("authDeadline(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}
