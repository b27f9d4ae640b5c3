package testenv

import (
	"os"
	"slices"
	"strconv"
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
