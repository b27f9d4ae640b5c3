package container

import (
	"encoding/base64"
	"encoding/json"
	"strings"
)

// Registry credentials (docs/containers.md, "Credentials"). Two sources, the user's first:
//
//   - the user's own, enroot's netrc file ~/.config/enroot/.credentials, read as the user;
//   - the node's, the NodeSet's imagePullSecrets (--auth-dir: one dockerconfigjson file each).
//
// skopeo gets one of them as --authfile, covering the image's registry alone. The node's never
// reach a registry their files do not name, and a user's file never reaches another user's pull.

// NetrcPath is enroot's credentials file, below the user's home directory.
const NetrcPath = ".config/enroot/.credentials"

// NetrcEntry is one machine of a netrc file.
type NetrcEntry struct{ Machine, Login, Password string }

// ParseNetrc reads netrc's machine, login and password tokens (enroot's credentials file);
// "default" entries and macros are ignored: a registry is named or not used. Values are
// literal ($oauthtoken is NGC's login, not a variable: the helper reads no job environment).
func ParseNetrc(text string) []NetrcEntry {
	var out []NetrcEntry
	var cur *NetrcEntry
	tok := strings.Fields(text)
	for i := 0; i < len(tok); i++ {
		next := func() string {
			if i+1 < len(tok) {
				i++
				return tok[i]
			}
			return ""
		}
		switch tok[i] {
		case "machine":
			out = append(out, NetrcEntry{Machine: next()})
			cur = &out[len(out)-1]
		case "default":
			cur = nil
		case "login":
			if v := next(); cur != nil {
				cur.Login = v
			}
		case "password":
			if v := next(); cur != nil {
				cur.Password = v
			}
		case "macdef":
			// A macro runs to the next blank line, which Fields cannot see: stop reading.
			return out
		}
	}
	return out
}

// MatchNetrc is the entry for registry (HOST[:PORT]): machine HOST:PORT, else machine HOST;
// with login, only an entry of that login (enroot's USER@REGISTRY#IMAGE).
func MatchNetrc(entries []NetrcEntry, registry, login string) (NetrcEntry, bool) {
	host := registry
	if h, _, ok := strings.Cut(registry, ":"); ok && !strings.HasPrefix(registry, "[") {
		host = h
	}
	for _, want := range []string{registry, host} {
		for _, e := range entries {
			if e.Machine == want && e.Password != "" && (login == "" || e.Login == login) {
				return e, true
			}
		}
	}
	return NetrcEntry{}, false
}

// AuthFile is a dockerconfigjson holding one registry's credentials, what skopeo's --authfile reads.
func AuthFile(registry, login, password string) []byte {
	b, _ := json.Marshal(map[string]any{"auths": map[string]any{
		registry: map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(login + ":" + password))},
	}})
	return b
}

// AuthCovers says whether a dockerconfigjson has credentials for registry. Keys are read as
// Docker writes them too: with a scheme or a path ("https://index.docker.io/v1/").
func AuthCovers(config []byte, registry string) bool {
	var c struct {
		Auths map[string]json.RawMessage `json:"auths"`
	}
	if json.Unmarshal(config, &c) != nil {
		return false
	}
	for k := range c.Auths {
		if registryOfKey(k) == normalRegistry(registry) {
			return true
		}
	}
	return false
}

func registryOfKey(k string) string {
	k = strings.TrimPrefix(strings.TrimPrefix(k, "https://"), "http://")
	k, _, _ = strings.Cut(k, "/")
	return normalRegistry(k)
}

// normalRegistry names Docker Hub one way: its API host and the index's are the same registry.
func normalRegistry(r string) string {
	switch r {
	case "index.docker.io", "registry-1.docker.io":
		return DefaultRegistry
	}
	return r
}
