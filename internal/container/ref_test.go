package container

import (
	"strings"
	"testing"
)

func TestParseImage(t *testing.T) {
	const dig = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		in        string
		want      Image
		transport string
		err       string
	}{
		{in: "ubuntu", want: Image{Registry: "docker.io", Repository: "library/ubuntu", Tag: "latest"},
			transport: "docker://docker.io/library/ubuntu:latest"},
		{in: "nvidia/cuda:12.4.0-base", want: Image{Registry: "docker.io", Repository: "nvidia/cuda", Tag: "12.4.0-base"}},
		// The and Pyxis's README examples, in enroot syntax.
		{in: "nvcr.io#nvidia/pytorch:24.01-py3", want: Image{Registry: "nvcr.io", Repository: "nvidia/pytorch", Tag: "24.01-py3"},
			transport: "docker://nvcr.io/nvidia/pytorch:24.01-py3"},
		{in: "localhost:5000#test/alpine-like:1", want: Image{Registry: "localhost:5000", Repository: "test/alpine-like", Tag: "1"},
			transport: "docker://localhost:5000/test/alpine-like:1"},
		{in: "docker://alice@registry.example.com#team/img", want: Image{User: "alice", Registry: "registry.example.com", Repository: "team/img", Tag: "latest"}},
		{in: "$oauthtoken@nvcr.io#nvidia/cuda:12", want: Image{User: "$oauthtoken", Registry: "nvcr.io", Repository: "nvidia/cuda", Tag: "12"}},
		// Docker's syntax: the first component names a registry when it looks like a host.
		{in: "localhost:5000/test/alpine-like:1", want: Image{Registry: "localhost:5000", Repository: "test/alpine-like", Tag: "1"}},
		{in: "localhost/img", want: Image{Registry: "localhost", Repository: "img", Tag: "latest"}},
		{in: "ghcr.io/sunk-dev/slurm:24.11", want: Image{Registry: "ghcr.io", Repository: "sunk-dev/slurm", Tag: "24.11"}},
		{in: "[::1]:5000#img", want: Image{Registry: "[::1]:5000", Repository: "img", Tag: "latest"}},
		// A one-component name on another registry gets no library/.
		{in: "reg.local#busybox", want: Image{Registry: "reg.local", Repository: "busybox", Tag: "latest"}},
		{in: "alpine@" + dig, want: Image{Registry: "docker.io", Repository: "library/alpine", Digest: dig},
			transport: "docker://docker.io/library/alpine@" + dig},
		{in: "bob@reg.local#a/b:1@" + dig, want: Image{User: "bob", Registry: "reg.local", Repository: "a/b", Tag: "1", Digest: dig},
			transport: "docker://reg.local/a/b:1@" + dig},
		{in: "/shared/images/pytorch.sqsh", want: Image{Path: "/shared/images/pytorch.sqsh"}},
		{in: "./pytorch.sqsh", want: Image{Path: "./pytorch.sqsh"}},

		{in: "", err: "empty image"},
		{in: "Ubuntu", err: `bad image name "Ubuntu"`},
		{in: "reg.local#", err: `bad image name ""`},
		{in: "img:", err: `bad tag ""`},
		{in: "img:a/b", err: `bad registry "img:a"`}, // Docker's form: a ":" in the first component makes it a host
		{in: "img:" + strings.Repeat("x", 129), err: "bad tag"},
		{in: "bad_host#img", err: `bad registry "bad_host"`},
		{in: "reg.local:99999999#img", err: `bad registry`},
		{in: "alpine@sha256:abc", err: "digest"},
		{in: "a b@reg#img", err: `bad user "a b"`},
		{in: "dockerd://img", err: "local daemon"},
		{in: "oci-archive://x", err: "only docker://"},
	} {
		got, err := ParseImage(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseImage(%q) = %+v, %v; want error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseImage(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			continue
		}
		if tc.transport != "" && got.Transport() != tc.transport {
			t.Errorf("ParseImage(%q).Transport() = %q, want %q", tc.in, got.Transport(), tc.transport)
		}
	}
}
