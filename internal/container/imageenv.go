package container

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The image's environment (its config's Env: PATH, LD_LIBRARY_PATH, ...), which Pyxis gives
// the tasks in the container and images count on. The cache keeps it beside the unpacked
// root filesystem as rootfs+".env" (a JSON list), written before the root filesystem is
// renamed into place.

// imageConfig is what the helper keeps of an image's configuration.
type imageConfig struct {
	Env []string `json:"Env"`
	// Entrypoint is run once per container with --container-entrypoint (entrypoint.go).
	Entrypoint []string `json:"Entrypoint"`
}

// layoutConfig is the configuration of the image tagged ref in the OCI layout dir.
func layoutConfig(dir, ref string) (imageConfig, error) {
	var index struct {
		Manifests []struct {
			MediaType   string            `json:"mediaType"`
			Digest      string            `json:"digest"`
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if err := readJSON(filepath.Join(dir, "index.json"), &index); err != nil {
		return imageConfig{}, err
	}
	for _, m := range index.Manifests {
		if m.Annotations["org.opencontainers.image.ref.name"] != ref {
			continue
		}
		var manifest struct {
			Config struct {
				Digest string `json:"digest"`
			} `json:"config"`
		}
		if err := readBlob(dir, m.Digest, &manifest); err != nil {
			return imageConfig{}, err
		}
		var config struct {
			Config imageConfig `json:"config"`
		}
		if err := readBlob(dir, manifest.Config.Digest, &config); err != nil {
			return imageConfig{}, err
		}
		return config.Config, nil
	}
	return imageConfig{}, fmt.Errorf("no image %q in the layout", ref)
}

func readBlob(dir, digest string, v any) error {
	if !digestRE.MatchString(digest) {
		return fmt.Errorf("bad digest %q in the layout", digest)
	}
	return readJSON(filepath.Join(dir, "blobs", "sha256", strings.TrimPrefix(digest, "sha256:")), v)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return nil
}

// ImageEnv is the environment recorded for an unpacked root filesystem; none for a directory
// that is not from the cache (--rootfs) or was cached before environments were kept.
func ImageEnv(rootfs string) ([]string, error) {
	var env []string
	err := readJSON(rootfs+".env", &env)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return env, err
}

// environFile is env as the plugin reads it: NAME=VALUE entries each ended by a NUL (a value
// may hold a newline). Entries without "=" or with an empty name are dropped.
func environFile(env []string) []byte {
	var b []byte
	for _, e := range env {
		if name, _, ok := strings.Cut(e, "="); ok && name != "" && !strings.ContainsRune(e, 0) {
			b = append(append(b, e...), 0)
		}
	}
	return b
}
