package slurm

import (
	"fmt"
	"strconv"
	"strings"
)

// GresEntries splits a GRES string as Slurm writes it ("gpu:a100:2(S:0-1),gpu:h100:2",
// "gpu:a100:1(IDX:0),shard:a100:0(0/8,0/8)") into its entries, each without the detail in
// parentheses, whose commas are not separators. Empty and "(null)" have none.
func GresEntries(gres string) []string {
	var entries []string
	var b strings.Builder
	depth := 0
	flush := func() {
		if e := strings.TrimSpace(b.String()); e != "" && e != "(null)" {
			entries = append(entries, e)
		}
		b.Reset()
	}
	for _, r := range gres {
		switch {
		case r == '(':
			depth++
		case r == ')':
			depth--
		case r == ',' && depth == 0:
			flush()
		case depth == 0:
			b.WriteRune(r)
		}
	}
	flush()
	return entries
}

// ParseGres reads a GRES string, as a node line configures it or as Slurm reports a node's,
// into counts by name and type: "gpu:h100:4,gpu:2" is {"gpu:h100": 4, "gpu": 2}. An entry
// without a count is one ("gpu:h100"), Slurm's count suffixes are powers of 1024 ("2K"), and
// the no_consume flag is not part of the name. An entry that is not name[:type][:count] is
// an error: a string sunk cannot read says nothing about the node.
func ParseGres(gres string) (map[string]int64, error) {
	counts := map[string]int64{}
	for _, e := range GresEntries(gres) {
		var f []string
		for _, p := range strings.Split(e, ":") {
			if p != "no_consume" {
				f = append(f, p)
			}
		}
		n := int64(1)
		if len(f) > 1 {
			if c, ok := gresCount(f[len(f)-1]); ok {
				n, f = c, f[:len(f)-1]
			}
		}
		if len(f) > 2 || f[0] == "" || (len(f) == 2 && f[1] == "") {
			return nil, fmt.Errorf("GRES %q: entry %q is not name[:type][:count]", gres, e)
		}
		counts[strings.Join(f, ":")] += n
	}
	return counts, nil
}

// gresCount reads a count as Slurm prints it: digits and an optional K, M, G or T (1024s).
func gresCount(s string) (int64, bool) {
	mult := int64(1)
	if i := strings.IndexAny(s, "KMGT"); i >= 0 && i == len(s)-1 {
		mult = int64(1) << (10 * (strings.IndexByte("KMGT", s[i]) + 1))
		s = s[:i]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n * mult, true
}
