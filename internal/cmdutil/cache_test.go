package cmdutil

import (
	"maps"
	"slices"
	"testing"
)

func TestWatchNamespaces(t *testing.T) {
	for flagValue, want := range map[string][]string{
		"":             nil,
		" , ":          nil,
		"research":     {"research"},
		"a, b,,a":      {"a", "b"},
		"team-1,team2": {"team-1", "team2"},
	} {
		got := slices.Sorted(maps.Keys(WatchNamespaces(flagValue)))
		if !slices.Equal(got, want) {
			t.Errorf("WatchNamespaces(%q) = %v, want %v", flagValue, got, want)
		}
		if want == nil && WatchNamespaces(flagValue) != nil {
			t.Errorf("WatchNamespaces(%q) is not nil: an empty map would watch no namespace", flagValue)
		}
	}
}
