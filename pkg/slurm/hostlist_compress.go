package slurm

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// CompressHostlist writes names as a Slurm hostlist expression that ExpandHostlist (and
// Slurm's hostlist_create) reads back as the same set: names that differ only in a trailing
// number share one bracket ("gpu-[0-3,7]"). Only numbers without leading zeros and of at most
// nine digits are bracketed, so that no padding width or overflow is left to Slurm's reading;
// every other name is written as it is. The result is sorted and so deterministic.
func CompressHostlist(names []string) string {
	groups := map[string][]int{}
	var plain []string
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		prefix, num, ok := numericSuffix(n)
		if !ok {
			plain = append(plain, n)
			continue
		}
		groups[prefix] = append(groups[prefix], num)
	}
	type item struct{ sortKey, text string }
	var items []item
	for _, n := range plain {
		items = append(items, item{n, n})
	}
	for prefix, nums := range groups {
		sort.Ints(nums)
		if len(nums) == 1 {
			n := prefix + strconv.Itoa(nums[0])
			items = append(items, item{n, n})
			continue
		}
		var ranges []string
		for i := 0; i < len(nums); {
			j := i
			for j+1 < len(nums) && nums[j+1] == nums[j]+1 {
				j++
			}
			if i == j {
				ranges = append(ranges, strconv.Itoa(nums[i]))
			} else {
				ranges = append(ranges, fmt.Sprintf("%d-%d", nums[i], nums[j]))
			}
			i = j + 1
		}
		items = append(items, item{prefix + strconv.Itoa(nums[0]), prefix + "[" + strings.Join(ranges, ",") + "]"})
	}
	sort.Slice(items, func(a, b int) bool { return items[a].sortKey < items[b].sortKey })
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.text
	}
	return strings.Join(out, ",")
}

// numericSuffix splits "gpu-12" into "gpu-" and 12 when the name ends in a number that
// brackets can carry unchanged.
func numericSuffix(name string) (string, int, bool) {
	if strings.ContainsAny(name, "[],") {
		return "", 0, false
	}
	i := len(name)
	for i > 0 && name[i-1] >= '0' && name[i-1] <= '9' {
		i--
	}
	digits := name[i:]
	if i == 0 || digits == "" || len(digits) > 9 || (len(digits) > 1 && digits[0] == '0') {
		return "", 0, false
	}
	n, err := strconv.Atoi(digits)
	return name[:i], n, err == nil
}
