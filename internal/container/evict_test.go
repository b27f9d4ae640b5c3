package container

import (
	"slices"
	"testing"
	"time"
)

func TestPlanEviction(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	img := func(d string, size int64, ageMin int, inUse bool) CachedImage {
		return CachedImage{Digest: d, Size: size, LastUsed: t0.Add(-time.Duration(ageMin) * time.Minute), InUse: inUse}
	}
	for _, tc := range []struct {
		name                 string
		images               []CachedImage
		pending, need, bound int64
		wantVictims          []string
		wantOK               bool
	}{
		{name: "no bound", images: []CachedImage{img("a", 100, 1, false)}, need: 1000, bound: 0, wantOK: true},
		{name: "fits without eviction", images: []CachedImage{img("a", 30, 1, false)}, need: 70, bound: 100, wantOK: true},
		{name: "exactly full fits", images: []CachedImage{img("a", 50, 1, false)}, need: 50, bound: 100, wantOK: true},
		{
			name:   "least recently used goes first",
			images: []CachedImage{img("new", 40, 1, false), img("old", 40, 10, false), img("mid", 10, 5, false)},
			need:   40, bound: 100,
			wantVictims: []string{"old"}, wantOK: true,
		},
		{
			name:   "several until it fits, oldest first",
			images: []CachedImage{img("new", 40, 1, false), img("old", 20, 10, false), img("mid", 30, 5, false)},
			need:   60, bound: 100,
			wantVictims: []string{"old", "mid"}, wantOK: true,
		},
		{
			name:   "an image in use is kept even when oldest",
			images: []CachedImage{img("old", 50, 10, true), img("new", 40, 1, false)},
			need:   50, bound: 100,
			wantVictims: []string{"new"}, wantOK: true,
		},
		{
			name:   "in use leaves too little: nothing evicted",
			images: []CachedImage{img("old", 60, 10, true), img("new", 30, 1, false)},
			need:   50, bound: 100,
			wantOK: false,
		},
		{
			name:    "pulls in progress count",
			images:  []CachedImage{img("a", 20, 3, false), img("b", 20, 2, false)},
			pending: 40, need: 40, bound: 100,
			wantVictims: []string{"a"}, wantOK: true,
		},
		{
			name:    "pending alone leaves too little",
			images:  nil,
			pending: 70, need: 40, bound: 100,
			wantOK: false,
		},
		{name: "an image larger than the bound", need: 101, bound: 100, wantOK: false},
		{
			name:   "equal times: by digest",
			images: []CachedImage{img("b", 50, 5, false), img("a", 50, 5, false)},
			need:   50, bound: 100,
			wantVictims: []string{"a"}, wantOK: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := PlanEviction(tc.images, tc.pending, tc.need, tc.bound)
			if ok != tc.wantOK || !slices.Equal(v, tc.wantVictims) {
				t.Errorf("PlanEviction = %v, %v; want %v, %v", v, ok, tc.wantVictims, tc.wantOK)
			}
		})
	}
}

func TestCacheFullError(t *testing.T) {
	images := []CachedImage{{Digest: "a", Size: 60 << 20, InUse: true}, {Digest: "b", Size: 10 << 20}}
	e := &CacheFullError{Need: 50 << 20, Have: Available(images, 5<<20, 100<<20), Bound: 100 << 20}
	if got, want := e.Error(), "container cache full: need 50.0 MiB, have 35.0 MiB of 100.0 MiB"; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 3 << 30: "3.0 GiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
