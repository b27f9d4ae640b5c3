package container

import (
	"errors"
	"os"
	"path"
	"strings"
)

// --container-entrypoint runs the image's entrypoint once per container, as Pyxis does: when
// the container is made (not for each task, nor for a later step of a named container), as
// the user, in the container, with the image's environment and no arguments, its standard
// input empty. What it leaves in the container's files (a configuration it writes, say) the
// tasks see; its environment changes end with it. A failing entrypoint fails the step.

// entrypointExt, after an unpacked image's path, records its entrypoint (a JSON list).
const entrypointExt = ".entrypoint"

// ImageEntrypoint is the entrypoint recorded for an unpacked root filesystem: none for an
// image without one, for a --rootfs directory without the record, or an image cached before
// entrypoints were kept.
func ImageEntrypoint(rootfs string) ([]string, error) {
	var ep []string
	err := readJSON(rootfs+entrypointExt, &ep)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return ep, err
}

// lookPathIn finds name as execvp would with the PATH of env (the image's), via exists; a
// name with a slash is taken as it is. "" if not found.
func lookPathIn(name string, env []string, exists func(string) bool) string {
	if strings.Contains(name, "/") {
		return name
	}
	p := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			p = v
		}
	}
	for _, dir := range strings.Split(p, ":") {
		if dir == "" {
			dir = "."
		}
		if f := path.Join(dir, name); exists(f) {
			return f
		}
	}
	return ""
}
