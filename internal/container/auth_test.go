package container

import (
	"encoding/json"
	"testing"
)

func TestNetrc(t *testing.T) {
	entries := ParseNetrc(`
machine nvcr.io login $oauthtoken password nvapi-1
machine reg.example.com:5000
  login alice
  password s3cret
machine reg.example.com login bob password other
default login anon password anon
machine reg.example.com login carol password c
`)
	if len(entries) != 4 || entries[0] != (NetrcEntry{"nvcr.io", "$oauthtoken", "nvapi-1"}) {
		t.Fatalf("ParseNetrc = %+v", entries)
	}
	for _, tc := range []struct {
		registry, login string
		want            string // the password, "" for no match
	}{
		{"nvcr.io", "", "nvapi-1"},
		{"reg.example.com:5000", "", "s3cret"}, // HOST:PORT first
		{"reg.example.com:5001", "", "other"},  // then HOST
		{"reg.example.com", "carol", "c"},      // USER@: that login only
		{"reg.example.com:5000", "carol", "c"}, // falls back to HOST for the login
		{"reg.example.com", "dave", ""},        // no entry of that login
		{"docker.io", "", ""},                  // default is not used
		{"[::1]:5000", "", ""},
	} {
		e, ok := MatchNetrc(entries, tc.registry, tc.login)
		if got := e.Password; ok != (tc.want != "") || got != tc.want {
			t.Errorf("MatchNetrc(%q, %q) = %+v, %v; want password %q", tc.registry, tc.login, e, ok, tc.want)
		}
	}
	if got := ParseNetrc("machine a login x password y macdef init\nmachine b login z password w\n"); len(got) != 1 {
		t.Errorf("a macro ends the file: %+v", got)
	}
}

func TestAuthCovers(t *testing.T) {
	config := []byte(`{"auths":{"https://index.docker.io/v1/":{"auth":"eDp5"},"reg.example.com:5000":{"auth":"eDp5"},"http://other.example.com/path":{}}}`)
	for registry, want := range map[string]bool{
		"docker.io":            true,
		"reg.example.com:5000": true,
		"reg.example.com":      false, // another port, another registry
		"other.example.com":    true,
		"nvcr.io":              false,
	} {
		if got := AuthCovers(config, registry); got != want {
			t.Errorf("AuthCovers(%q) = %v, want %v", registry, got, want)
		}
	}
	if AuthCovers([]byte("not json"), "docker.io") {
		t.Error("a file that is not JSON covers nothing")
	}
	var f struct {
		Auths map[string]struct{ Auth string }
	}
	if err := json.Unmarshal(AuthFile("reg:5000", "alice", "pw:1"), &f); err != nil || f.Auths["reg:5000"].Auth != "YWxpY2U6cHc6MQ==" || len(f.Auths) != 1 {
		t.Errorf("AuthFile = %+v, %v", f, err)
	}
}
