package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// Served is what a slurmrestd says of itself in its OpenAPI document.
type Served struct {
	// Versions are the data parser versions it serves (its /slurm/<version>/ paths), sorted.
	Versions []string
	// Release is its Slurm release (info.x-slurm.release, e.g. "26.05.5"); slurmrestd 24.11
	// does not say, and Release is "".
	Release string
}

// Newest is the newest of the served versions that New knows, or "" when it knows none.
func (s Served) Newest() string {
	for i := len(versions) - 1; i >= 0; i-- {
		if slices.Contains(s.Versions, versions[i].name) {
			return versions[i].name
		}
	}
	return ""
}

var versionPath = regexp.MustCompile(`^/slurm/(v\d+\.\d+\.\d+)/`)

// Discover asks slurmrestd once which data parser versions it serves: the /slurm/<version>/
// paths of its OpenAPI document (GET /openapi/v3, about 0.7–0.9 MB). It fails closed as every
// operation does: an error answer, or a document without paths, is an error, never "none".
func Discover(ctx context.Context, cfg Config) (Served, error) {
	c, err := newCore(cfg)
	if err != nil {
		return Served{}, err
	}
	const endpoint = "GET /openapi/v3"
	var doc struct {
		Paths map[string]struct{} `json:"paths"`
		Info  struct {
			XSlurm struct {
				Release string `json:"release"`
			} `json:"x-slurm"`
		} `json:"info"`
	}
	err = c.call(ctx, endpoint, false, func(ctx context.Context) (answer, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url+"/openapi/v3", nil)
		if err != nil {
			return answer{}, err
		}
		resp, err := c.Do(req)
		if err != nil {
			return answer{}, err
		}
		defer resp.Body.Close()
		a := answer{status: resp.StatusCode}
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			return a, nil
		}
		if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
			return a, err
		}
		if len(doc.Paths) == 0 {
			return a, fmt.Errorf("OpenAPI document lists no paths")
		}
		return a, nil
	})
	if err != nil {
		return Served{}, err
	}
	s := Served{Release: doc.Info.XSlurm.Release}
	for p := range doc.Paths {
		if m := versionPath.FindStringSubmatch(p); m != nil && !slices.Contains(s.Versions, m[1]) {
			s.Versions = append(s.Versions, m[1])
		}
	}
	slices.Sort(s.Versions)
	return s, nil
}

// Connect returns a Client for cfg.APIVersion or, when that is empty, for the newest version
// that both New and cfg.URL's slurmrestd know (Discover), and the version it speaks. A
// slurmrestd that serves none of New's versions is an error naming what it serves.
func Connect(ctx context.Context, cfg Config) (Client, string, error) {
	if cfg.APIVersion == "" {
		s, err := Discover(ctx, cfg)
		if err != nil {
			return nil, "", err
		}
		if cfg.APIVersion = s.Newest(); cfg.APIVersion == "" {
			return nil, "", fmt.Errorf("slurm: slurmrestd at %s (Slurm %s) serves API versions [%s], none of which this client knows (%s)",
				cfg.URL, cmpOr(s.Release, "release unknown"), strings.Join(s.Versions, " "), strings.Join(Versions(), ", "))
		}
	}
	c, err := New(cfg)
	if err != nil {
		return nil, "", err
	}
	return c, cfg.APIVersion, nil
}
