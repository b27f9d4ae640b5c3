package docs

import (
	"go/scanner"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// keyRe is a key in sunk's domain: sunk.dev/x or under a subdomain (slurm.sunk.dev/x).
var keyRe = regexp.MustCompile(`(?:[a-z0-9-]+\.)*sunk\.dev/[A-Za-z0-9][A-Za-z0-9._-]*`)

// notKeys are names in sunk's domain that are no label, annotation, taint, condition or
// finalizer: the API's group/version and the images' repositories.
var notKeys = map[string]bool{"sunk.dev/v1alpha1": true, "sunk.dev/sunk": true, "sunk.dev/slurm": true, "sunk.dev/slapd": true}

// goKeys are the string literals of production Go code (both modules, test code and test
// helpers excepted) that are a key in sunk's domain, with where each is defined.
func goKeys(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, root := range []string{"api", "cmd", "internal", "pkg", "scheduler/cmd", "scheduler/plugin"} {
		err := filepath.WalkDir(filepath.Join("..", root), func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			src, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			var s scanner.Scanner
			fset := token.NewFileSet()
			s.Init(fset.AddFile(p, -1, len(src)), src, nil, 0)
			for {
				pos, tok, lit := s.Scan()
				if tok == token.EOF {
					return nil
				}
				if tok != token.STRING {
					continue
				}
				v, err := strconv.Unquote(lit)
				if err == nil && v != "" && keyRe.FindString(v) == v && !notKeys[v] {
					out[v] = strings.TrimPrefix(filepath.ToSlash(fset.Position(pos).String()), "../")
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// chartComment is a YAML comment (a line's rest from " #" or a line that starts with "#") or
// a template comment ({{/* ... */}}), whose keys are examples, not definitions.
var chartComment = regexp.MustCompile(`\{\{-?\s*/\*(?s:.*?)\*/\s*-?\}\}|(?m:(?:^|[ \t])#.*$)`)

// chartKeys are the keys in sunk's domain the charts' templates, values and files name
// outside comments, with the file of each.
func chartKeys(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir("../charts", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "crds") {
			return filepath.SkipDir
		}
		if d.IsDir() || !(strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".tpl") || strings.HasSuffix(p, ".txt")) {
			return nil
		}
		text := chartComment.ReplaceAllString(read(t, p), "")
		for _, k := range keyRe.FindAllString(text, -1) {
			if !notKeys[k] {
				out[k] = strings.TrimPrefix(filepath.ToSlash(p), "../")
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReferenceNamesEveryKey: docs/reference.md names every key in sunk's domain that
// production code (a Go string literal, pkg/wellknown's above all) or a chart defines, and
// names no key that none of them defines. The page's keys are those in its code spans.
func TestReferenceNamesEveryKey(t *testing.T) {
	defined := goKeys(t)
	if len(defined) < 10 {
		t.Fatalf("found only %d keys in the Go code: %v", len(defined), defined)
	}
	for k, where := range chartKeys(t) {
		if _, ok := defined[k]; !ok {
			defined[k] = where
		}
	}
	named := map[string]int{}
	for _, s := range spans(read(t, "reference.md")) {
		for _, k := range keyRe.FindAllString(s.code, -1) {
			if _, ok := named[k]; !ok {
				named[k] = s.line
			}
		}
	}
	for _, k := range sortedKeys(defined) {
		if _, ok := named[k]; !ok {
			t.Errorf("docs/reference.md does not name %s (defined in %s)", k, defined[k])
		}
	}
	var unknown []string
	for k := range named {
		if _, ok := defined[k]; !ok {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		t.Errorf("docs/reference.md:%d: %s is defined by no production code or chart", named[k], k)
	}
}
