package soak

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Series is one line of Prometheus' text exposition format.
type Series struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Key names the series uniquely: its name and its labels in order.
func (s Series) Key() string {
	keys := make([]string, 0, len(s.Labels))
	for k := range s.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(s.Name)
	for _, k := range keys {
		fmt.Fprintf(&b, ",%s=%s", k, s.Labels[k])
	}
	return b.String()
}

// ParseMetrics reads Prometheus' text format (what every sunk component serves on /metrics).
// Comments and blank lines are skipped; a malformed line is an error.
func ParseMetrics(text string) ([]Series, error) {
	var out []Series
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d %q: %w", n+1, line, err)
		}
		out = append(out, s)
	}
	return out, nil
}

func parseLine(line string) (Series, error) {
	s := Series{Labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return s, fmt.Errorf("no value")
	}
	s.Name, line = line[:i], line[i:]
	if line[0] == '{' {
		line = line[1:]
		for {
			line = strings.TrimLeft(line, ", ")
			if strings.HasPrefix(line, "}") {
				line = line[1:]
				break
			}
			eq := strings.Index(line, "=\"")
			if eq <= 0 {
				return s, fmt.Errorf("bad label")
			}
			name := strings.TrimSpace(line[:eq])
			line = line[eq+2:]
			var val strings.Builder
			closed := false
			for j := 0; j < len(line); j++ {
				c := line[j]
				if c == '\\' && j+1 < len(line) {
					j++
					switch line[j] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(line[j])
					}
					continue
				}
				if c == '"' {
					line, closed = line[j+1:], true
					break
				}
				val.WriteByte(c)
			}
			if !closed {
				return s, fmt.Errorf("unterminated label value")
			}
			s.Labels[name] = val.String()
		}
	}
	f := strings.Fields(line)
	if len(f) == 0 {
		return s, fmt.Errorf("no value")
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return s, err
	}
	s.Value = v
	return s, nil
}

// Counters tracks the increase of counters between scrapes of one process, across restarts:
// a counter that went down was reset (the process restarted) and its whole value is new.
type Counters struct {
	last map[string]float64
}

// Delta returns how much each series grew since the previous call (nothing on the first call,
// which only records the base).
func (c *Counters) Delta(series []Series) map[string]float64 {
	first := c.last == nil
	if first {
		c.last = map[string]float64{}
	}
	out := map[string]float64{}
	for _, s := range series {
		k := s.Key()
		prev, seen := c.last[k]
		c.last[k] = s.Value
		switch {
		case first:
		case !seen || s.Value < prev:
			// A new series, or a reset: everything it counts happened since the last scrape
			// (a new series appears at its first increment).
			if s.Value > 0 {
				out[k] = s.Value
			}
		case s.Value > prev:
			out[k] = s.Value - prev
		}
	}
	return out
}

// Histogram is a cumulative bucket histogram: upper bound → count of observations ≤ it.
type Histogram map[float64]float64

// Add merges other into h.
func (h Histogram) Add(other Histogram) {
	for le, n := range other {
		h[le] += n
	}
}

// Count is the number of observations (the +Inf bucket).
func (h Histogram) Count() float64 { return h[math.Inf(1)] }

// Quantile estimates the q-quantile the way Prometheus' histogram_quantile does: linear
// interpolation inside the bucket the rank falls in (the lowest bucket starts at 0). It also
// returns that bucket's upper bound, the estimate's honest ceiling. A rank in the +Inf bucket
// returns the largest finite bound for both. NaN when there are no observations.
func (h Histogram) Quantile(q float64) (est, upper float64) {
	les := make([]float64, 0, len(h))
	for le := range h {
		les = append(les, le)
	}
	sort.Float64s(les)
	total := h.Count()
	if len(les) == 0 || total == 0 {
		return math.NaN(), math.NaN()
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for _, le := range les {
		n := h[le]
		if n >= rank {
			if math.IsInf(le, 1) {
				return lower, lower
			}
			if n == below {
				return le, le
			}
			return lower + (le-lower)*(rank-below)/(n-below), le
		}
		lower, below = le, n
	}
	return lower, lower
}

// HistogramDelta picks the buckets of histogram name (with labels matching sel) out of a
// counter delta as produced by Counters.Delta, grouped by the value of label by.
func HistogramDelta(series []Series, delta map[string]float64, name, by string) map[string]Histogram {
	out := map[string]Histogram{}
	for _, s := range series {
		if s.Name != name+"_bucket" {
			continue
		}
		le, err := strconv.ParseFloat(s.Labels["le"], 64)
		if err != nil {
			continue
		}
		g := s.Labels[by]
		if out[g] == nil {
			out[g] = Histogram{}
		}
		out[g][le] += delta[s.Key()]
	}
	return out
}

// Find returns the value of the first series named name whose labels include all of sel.
func Find(series []Series, name string, sel map[string]string) (float64, bool) {
	for _, s := range series {
		if s.Name != name {
			continue
		}
		ok := true
		for k, v := range sel {
			if s.Labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			return s.Value, true
		}
	}
	return 0, false
}
