package slurm

import (
	"fmt"
	"strconv"
	"strings"
)

// ExpandHostlist expands a Slurm hostlist expression ("n[1-3,7],login-0") into host names, in
// order. Only what Slurm prints for node lists is understood: comma-separated names, each with
// at most one bracketed range list; ranges keep their zero padding ("n[01-02]" is n01, n02).
func ExpandHostlist(expr string) ([]string, error) {
	var out []string
	for expr != "" {
		// The next item ends at the first comma outside brackets.
		depth, end := 0, len(expr)
		for i, r := range expr {
			switch r {
			case '[':
				depth++
			case ']':
				depth--
			}
			if r == ',' && depth == 0 {
				end = i
				break
			}
		}
		item := expr[:end]
		expr = strings.TrimPrefix(expr[end:], ",")
		names, err := expandItem(item)
		if err != nil {
			return nil, err
		}
		out = append(out, names...)
	}
	return out, nil
}

func expandItem(item string) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		if item == "" || strings.ContainsRune(item, ']') {
			return nil, fmt.Errorf("slurm: bad hostlist item %q", item)
		}
		return []string{item}, nil
	}
	closing := strings.IndexByte(item, ']')
	if closing < open || strings.IndexByte(item[closing+1:], '[') >= 0 {
		return nil, fmt.Errorf("slurm: bad hostlist item %q", item)
	}
	prefix, suffix := item[:open], item[closing+1:]
	var out []string
	for _, rng := range strings.Split(item[open+1:closing], ",") {
		lo, hi, isRange := strings.Cut(rng, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || b < a || b-a > 1<<16 {
			return nil, fmt.Errorf("slurm: bad hostlist range %q in %q", rng, item)
		}
		for i := a; i <= b; i++ {
			out = append(out, fmt.Sprintf("%s%0*d%s", prefix, len(lo), i, suffix))
		}
	}
	return out, nil
}
