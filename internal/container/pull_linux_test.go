package container

import "testing"

func TestLogMessage(t *testing.T) {
	for in, want := range map[string]string{
		`time="2026-11-25T04:13:54Z" level=fatal msg="Error reading manifest 1 in 127.0.0.1:5055/test/nope: name unknown: repository name not known to registry"`: "Error reading manifest 1 in 127.0.0.1:5055/test/nope: name unknown: repository name not known to registry",
		`time="x" level=fatal msg="a \"quoted\" word:\n\t* one error\n\n"`:                                                                                        `a "quoted" word: * one error`,
		`level=fatal msg="Error parsing image name \"docker://r:5000/t/p:1\": reading manifest 1 in r:5000/t/p: unauthorized: authentication required"`:           "reading manifest 1 in r:5000/t/p: unauthorized: authentication required",
		`plain error`:        `plain error`,
		`level=fatal msg="x`: `level=fatal msg="x`,
	} {
		if got := logMessage(in); got != want {
			t.Errorf("logMessage(%q) = %q, want %q", in, got, want)
		}
	}
}
