package container

import "testing"

func TestWithEntries(t *testing.T) {
	image := "root:x:0:0:root:/root:/bin/sh\nubuntu:x:1000:1000:Ubuntu:/home/ubuntu:/bin/bash\nalice:x:1500:1500::/home/a:/bin/sh\n"
	for _, tc := range []struct {
		name, file string
		entries    []string
		want       string
	}{
		{"the cluster's user replaces the image's at the same uid and name", image,
			[]string{"alice:x:1000:1000::/home/alice:/bin/bash\n"},
			"root:x:0:0:root:/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/bash\n"},
		{"no clash: added", "root:x:0:0:root:/root:/bin/sh",
			[]string{"bob:x:2000:2000::/home/bob:/bin/sh"},
			"root:x:0:0:root:/root:/bin/sh\nbob:x:2000:2000::/home/bob:/bin/sh\n"},
		{"an image without the file", "", []string{"bob:x:2000:2000::/:/bin/sh"}, "bob:x:2000:2000::/:/bin/sh\n"},
		{"groups", "root:x:0:\nusers:x:100:\nubuntu:x:1000:\n",
			[]string{"alice:x:1000:", "hpc:x:100:alice"},
			"root:x:0:\nalice:x:1000:\nhpc:x:100:alice\n"},
		{"a malformed entry is ignored", "root:x:0:0::/:/bin/sh\n", []string{"", "junk"}, "root:x:0:0::/:/bin/sh\n"},
	} {
		if got := withEntries(tc.file, tc.entries); got != tc.want {
			t.Errorf("%s:\ngot  %q\nwant %q", tc.name, got, tc.want)
		}
	}
}
