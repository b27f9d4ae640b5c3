package plugin

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	fakedynamic "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"sunk.dev/sunk/test/wait"
)

// TestWatchPodGroups: without the CRD the label means nothing (and the loop may start); with
// it, PodGroups are read through the dynamic informer; a CRD installed later is found at a
// recheck, and the labelled pods waiting then are let in once the PodGroups are listed.
func TestWatchPodGroups(t *testing.T) {
	for _, tc := range []struct {
		name          string
		served, later bool
	}{{"absent", false, false}, {"served", true, false}, {"installed later", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			b := newTestBed(t, 1, nil, nil)
			waiting := b.addPod(pgPod("waiting", "train"))
			// Of a PodGroup not made yet: no add event lets it in.
			orphan := b.addPod(pgPod("orphan", "missing"))
			disc := &switchedDiscovery{DiscoveryInterface: fake.NewClientset().Discovery()}
			disc.serve(tc.served)
			dyn := fakedynamic.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{podGroupGVR: "PodGroupList"}, podGroup("train", int64(3)))
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); b.p.watchPodGroups(ctx, disc, dyn, 10*time.Millisecond) }()
			t.Cleanup(func() { cancel(); <-done })
			wait.For(t, "the first answer", 10*time.Second, time.Millisecond, func() error {
				if !b.p.podGroups.ready() {
					return fmt.Errorf("state %d, not ready", b.p.podGroups.current())
				}
				return nil
			})
			b.h.mu.Lock()
			first := slices.Clone(b.h.activated)
			b.h.mu.Unlock()
			// Not at the first answer (the lifecycle loop's first passes do); a PodGroup listed
			// lets in its pods (activatePodGroupPods).
			if len(first) != 0 && !tc.served {
				t.Errorf("activated %v at the first answer", first)
			}
			want, wantFrom := gang{}, gangSource("")
			if tc.later {
				disc.serve(true)
				wait.For(t, "PodGroups read", 10*time.Second, time.Millisecond, func() error {
					if b.p.podGroups.current() != podGroupsServed || !b.p.podGroups.ready() {
						return fmt.Errorf("state %d", b.p.podGroups.current())
					}
					return nil
				})
				wait.For(t, "the waiting pods let in", 10*time.Second, time.Millisecond, func() error {
					b.h.mu.Lock()
					defer b.h.mu.Unlock()
					if !slices.Contains(b.h.activated, "ns/"+waiting.Name) || !slices.Contains(b.h.activated, "ns/"+orphan.Name) {
						return fmt.Errorf("activated %v", b.h.activated)
					}
					return nil
				})
			}
			if tc.served || tc.later {
				want, wantFrom = gang{"podgroup/train", 3}, gangFromPodGroup
			}
			g, from, err := b.p.gangOf(waiting)
			if err != nil || g != want || from != wantFrom {
				t.Errorf("gang %+v from %q (%v), want %+v from %q", g, from, err, want, wantFrom)
			}
		})
	}
}

// switchedDiscovery answers for PodGroups as told (served or not), from any goroutine.
type switchedDiscovery struct {
	discovery.DiscoveryInterface
	mu     sync.Mutex
	served bool
}

func (d *switchedDiscovery) serve(served bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.served = served
}

func (d *switchedDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.served || gv != podGroupGVR.GroupVersion().String() {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, gv)
	}
	return &metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: "podgroups", Namespaced: true, Kind: "PodGroup"}}}, nil
}
