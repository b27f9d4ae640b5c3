package testenv

import (
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchInt is the benchmark size the environment variable key sets, def when unset; a value
// that is not an integer from lo to hi fails the benchmark, naming the variable.
func BenchInt(tb testing.TB, key string, def, lo, hi int) int {
	tb.Helper()
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		tb.Fatalf("%s=%q: want an integer from %d to %d", key, v, lo, hi)
	}
	return n
}

// PercentileMS is the p-th percentile of d (nearest rank) in milliseconds; 0 for none.
func PercentileMS(d []time.Duration, p int) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := max(0, min((len(s)*p+99)/100-1, len(s)-1))
	return float64(s[i]) / float64(time.Millisecond)
}

// Parallel calls f(i) for i from 0 to n-1 on workers goroutines and fails tb with the first
// error once all have stopped (a worker stops at its first error).
func Parallel(tb testing.TB, n, workers int, f func(i int) error) {
	tb.Helper()
	var wg sync.WaitGroup
	var first atomic.Value
	var next atomic.Int64
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := f(i); err != nil {
					first.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := first.Load(); err != nil {
		tb.Fatal(err)
	}
}

// HeapInUseMB is the process's heap in use after a collection, in MiB: what a benchmark that
// runs its component in-process reports as its memory.
func HeapInUseMB() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapInuse) / (1 << 20)
}
