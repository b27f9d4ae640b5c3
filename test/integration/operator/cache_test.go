//go:build integration

package operator

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Other tenants' objects: unrelatedNamespaces × unrelatedPerNamespace ConfigMaps and as many
// Secrets, each with unrelatedDataBytes of data, none labelled by sunk.
const (
	unrelatedNamespaces   = 50
	unrelatedPerNamespace = 100
	unrelatedDataBytes    = 2048
)

// TestOperatorHeapIgnoresUnrelatedObjects: with 5,000 ConfigMaps and 5,000 Secrets of other
// namespaces in the API, the operator's heap grows by what it owns and their metadata (the
// script ConfigMaps' watch), not by their data. The same objects in a cache without the label
// selectors (what the operator had before) show what the selectors save.
func TestOperatorHeapIgnoresUnrelatedObjects(t *testing.T) {
	env := startAPI(t)
	direct, err := client.New(env.Config, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	createUnrelated(t, direct)
	const total = unrelatedNamespaces * unrelatedPerNamespace

	// The operator first: it keeps running (until the test ends) while the unselected cache
	// is measured, whose stop would otherwise leave garbage behind in the operator's figure.
	selected := heapGrowth(t, func() func() {
		h := startOperator(t, env)
		// A reconciled cluster: the operator's informers (pods, secrets, configmaps, the
		// script sources' metadata) have all synced.
		ctx := context.Background()
		if err := h.c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "site-scripts"},
			Data: map[string]string{"marker.sh": "#!/bin/sh\n"}}); err != nil {
			t.Fatal(err)
		}
		if err := h.c.Create(ctx, newCluster(h.ns, "c1")); err != nil {
			t.Fatal(err)
		}
		eventually(t, "c1 rendered", func() error { return h.get(t, "c1-scripts", &corev1.ConfigMap{}) })
		return func() {}
	})
	unselected := heapGrowth(t, func() func() { return syncUnselectedCache(t, env) })

	fmt.Printf("bench: name=operator-heap unrelated_configmaps=%d unrelated_secrets=%d data_bytes_each=%d heap_growth_selected_bytes=%d heap_growth_unselected_bytes=%d\n",
		total, total, unrelatedDataBytes, selected, unselected)

	// The unselected cache holds at least the unrelated data; if it does not, the measurement
	// measures nothing and the comparison below proves nothing.
	if data := int64(2 * total * unrelatedDataBytes); unselected < data {
		t.Fatalf("a cache of every object grew the heap by %d bytes, less than the %d bytes of data it holds: the measurement is broken", unselected, data)
	}
	// What stays is the ConfigMaps' metadata (a few hundred bytes each) and the operator itself.
	if limit := int64(16 << 20); selected > limit {
		t.Errorf("the operator's heap grew by %d bytes with %d unrelated ConfigMaps and Secrets, want under %d", selected, 2*total, limit)
	}
	// The selectors save at least the unrelated objects' data.
	if data := int64(2 * total * unrelatedDataBytes); unselected-selected < data {
		t.Errorf("the label-selected operator grew the heap by %d bytes, an unselected cache by %d: the selectors save less than the %d bytes of unrelated data", selected, unselected, data)
	}
}

// createUnrelated fills other namespaces with ConfigMaps and Secrets sunk did not make.
func createUnrelated(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	data := strings.Repeat("x", unrelatedDataBytes)
	type job struct{ ns, name string }
	jobs := make(chan job)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				meta := metav1.ObjectMeta{Namespace: j.ns, Name: j.name, Labels: map[string]string{"app": "other-tenant"}}
				for _, o := range []client.Object{
					&corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"data": data}},
					&corev1.Secret{ObjectMeta: meta, StringData: map[string]string{"data": data}},
				} {
					if err := c.Create(ctx, o); err != nil {
						select {
						case errs <- err:
						default:
						}
					}
				}
			}
		}()
	}
	for i := range unrelatedNamespaces {
		ns := fmt.Sprintf("tenant-%02d", i)
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		for j := range unrelatedPerNamespace {
			jobs <- job{ns, fmt.Sprintf("obj-%03d", j)}
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("creating unrelated objects: %v", err)
	default:
	}
}

// syncUnselectedCache caches every Pod, Secret and ConfigMap, as the operator did without
// cmdutil.OperatorCacheOptions, and returns its stop.
func syncUnselectedCache(t *testing.T, env *envtest.Environment) func() {
	t.Helper()
	c, err := cache.New(env.Config, cache.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	for _, o := range []client.Object{&corev1.Pod{}, &corev1.Secret{}, &corev1.ConfigMap{}} {
		if _, err := c.GetInformer(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the unselected cache did not sync")
	}
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("unselected cache: %v", err)
		}
	}
}

// heapGrowth is the live heap after run (whose result is kept alive until measured) minus the
// live heap before it; the stop run returns is called after the measurement.
func heapGrowth(t *testing.T, run func() (stop func())) int64 {
	t.Helper()
	before := liveHeap()
	stop := run()
	after := liveHeap()
	stop()
	return after - before
}

func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
