// Package container is the logic of sunk-container, the helper that sunk's SPANK plugin
// (images/slurm/spank) runs on a compute node to give a job step a container: it reads the
// Pyxis flags the plugin hands on, and (not yet) pulls, unpacks and prepares the image
// (docs/containers.md). This file reads the image argument.
package container

import (
	"fmt"
	"regexp"
	"strings"
)

// DefaultRegistry is where an image reference without a registry comes from, as in enroot and
// Docker. sunk's test bed has no route there; its images name their registry.
const DefaultRegistry = "docker.io"

// Image is a parsed --container-image argument.
type Image struct {
	// Path is set when the argument is a file on the node (it starts with "/" or "."): Pyxis
	// reads a squashfs file there. Every other field is then empty.
	Path string
	// User is enroot's USER@: whose credentials (netrc) to use for the registry.
	User     string
	Registry string
	// Repository is the image's name in the registry, with "library/" added for a Docker Hub
	// image of one component, as Docker and enroot do.
	Repository string
	// Tag is "latest" when neither a tag nor a digest is given.
	Tag    string
	Digest string
}

// The parts of enroot's URI grammar (enroot's docker::_parse_uri), which Pyxis users write:
// docker://[USER@][REGISTRY#]IMAGE[:TAG|@DIGEST]. Repository names and tags follow the OCI
// distribution spec, which is stricter than enroot (enroot passes anything on and lets the
// registry refuse it); a refusal here names the part that is wrong.
var (
	userRE     = regexp.MustCompile(`^[A-Za-z0-9_.!~*'()%;:&=+$,-]+$`)
	registryRE = regexp.MustCompile(`^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?)(:[0-9]{1,5})?$`)
	repoRE     = regexp.MustCompile(`^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*$`)
	tagRE      = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	digestRE   = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)
)

// ParseImage reads --container-image. It accepts enroot's syntax, where "#" ends the
// registry (localhost:5000#test/alpine:1), and also Docker's (localhost:5000/test/alpine:1):
// without "#", a first component with a "." or ":" or equal to "localhost" is the registry.
// enroot itself would read such a reference as a Docker Hub image named after the host, which
// no registry serves, so accepting Docker's form changes no reference that works with Pyxis.
func ParseImage(s string) (Image, error) {
	if s == "" {
		return Image{}, fmt.Errorf("empty image")
	}
	if strings.HasPrefix(s, "/") || strings.HasPrefix(s, ".") {
		return Image{Path: s}, nil
	}
	if strings.HasPrefix(s, "dockerd://") || strings.HasPrefix(s, "podman://") {
		return Image{}, fmt.Errorf("%q: images from a local daemon are not supported; name a registry", s)
	}
	rest := strings.TrimPrefix(s, "docker://")
	if strings.Contains(rest, "://") {
		return Image{}, fmt.Errorf("%q: only docker:// references are supported", s)
	}
	var img Image
	// A digest is the only "@" after the name; a user is the only "@" before the registry.
	if i := strings.LastIndex(rest, "@"); i >= 0 && strings.HasPrefix(rest[i+1:], "sha256:") {
		img.Digest, rest = rest[i+1:], rest[:i]
		if !digestRE.MatchString(img.Digest) {
			return Image{}, fmt.Errorf("%q: digest %q is not sha256: and 64 lower-case hex digits", s, img.Digest)
		}
	}
	if i := strings.Index(rest, "@"); i >= 0 {
		img.User, rest = rest[:i], rest[i+1:]
		if !userRE.MatchString(img.User) {
			return Image{}, fmt.Errorf("%q: bad user %q", s, img.User)
		}
	}
	if i := strings.Index(rest, "#"); i >= 0 {
		img.Registry, rest = rest[:i], rest[i+1:]
		if !registryRE.MatchString(img.Registry) {
			return Image{}, fmt.Errorf("%q: bad registry %q (HOST[:PORT])", s, img.Registry)
		}
	} else if first, after, ok := strings.Cut(rest, "/"); ok &&
		(strings.ContainsAny(first, ".:") || first == "localhost") {
		if !registryRE.MatchString(first) {
			return Image{}, fmt.Errorf("%q: bad registry %q (HOST[:PORT])", s, first)
		}
		img.Registry, rest = first, after
	}
	// The tag follows the last ":" after the last "/" (a registry's port is gone by now).
	if i := strings.LastIndex(rest, ":"); i > strings.LastIndex(rest, "/") {
		img.Tag, rest = rest[i+1:], rest[:i]
		if !tagRE.MatchString(img.Tag) {
			return Image{}, fmt.Errorf("%q: bad tag %q", s, img.Tag)
		}
	}
	if !repoRE.MatchString(rest) {
		return Image{}, fmt.Errorf("%q: bad image name %q (lower-case letters, digits, . _ - and /)", s, rest)
	}
	img.Repository = rest
	if img.Registry == "" {
		img.Registry = DefaultRegistry
	}
	if img.Registry == DefaultRegistry && !strings.Contains(img.Repository, "/") {
		img.Repository = "library/" + img.Repository
	}
	if img.Tag == "" && img.Digest == "" {
		img.Tag = "latest"
	}
	return img, nil
}

// Transport is the image as skopeo names it: docker://REGISTRY/REPOSITORY[:TAG][@DIGEST].
// A reference with both keeps both; skopeo then pulls by digest.
func (i Image) Transport() string {
	if i.Path != "" {
		return ""
	}
	s := "docker://" + i.Registry + "/" + i.Repository
	if i.Tag != "" {
		s += ":" + i.Tag
	}
	if i.Digest != "" {
		s += "@" + i.Digest
	}
	return s
}

// String is the canonical reference, without the user (credentials do not change the image).
func (i Image) String() string {
	if i.Path != "" {
		return i.Path
	}
	return strings.TrimPrefix(i.Transport(), "docker://")
}
