package container

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseArgs(t *testing.T) {
	job := []string{"--job-id=12", "--step-id=0", "--uid=1000", "--gid=1000"}
	yes, no := true, false
	alpine := Image{Registry: "localhost:5000", Repository: "test/alpine", Tag: "1"}
	for _, tc := range []struct {
		name string
		args []string
		want Options
		err  string
	}{
		{name: "image only", args: []string{"--container-image=localhost:5000#test/alpine:1"},
			want: Options{Image: &alpine}},
		{name: "everything supported",
			args: []string{"--container-image=localhost:5000/test/alpine:1",
				"--container-mounts=/shared:/data:ro+rprivate,/scratch", "--container-workdir=/data/run/",
				"--container-name=train:create", "--no-container-mount-home", "--container-remap-root",
				"--no-container-entrypoint", "--container-readonly", "--container-env=PATH,LD_LIBRARY_PATH",
				"--container-entrypoint-log"},
			want: Options{Image: &alpine,
				Mounts:  []Mount{{Source: "/shared", Target: "/data", ReadOnly: true}, {Source: "/scratch", Target: "/scratch"}},
				Workdir: "/data/run", Name: "train", NameFlags: "create", MountHome: &no, RemapRoot: &yes, Entry: &no,
				Writable: &no, Env: []string{"PATH", "LD_LIBRARY_PATH"}}},
		{name: "a later step names its container only", args: []string{"--container-name=train"},
			want: Options{Name: "train", NameFlags: "auto"}},
		{name: "the same flag twice is one", args: []string{"--container-image=a/b", "--container-image=a/b",
			"--container-writable", "--container-writable", "--container-mounts=/x", "--container-mounts=/x:/x"},
			want: Options{Image: &Image{Registry: "docker.io", Repository: "a/b", Tag: "latest"}, Writable: &yes,
				Mounts: []Mount{{Source: "/x", Target: "/x"}}}},

		{name: "no image nor name", args: nil, err: "--container-image or --container-name is required"},
		{name: "empty image", args: []string{"--container-image="}, err: "--container-image: argument required"},
		{name: "bad image", args: []string{"--container-image=Bad"}, err: `--container-image: "Bad": bad image name`},
		{name: "two images", args: []string{"--container-image=a", "--container-image=b"}, err: `--container-image: given twice`},
		{name: "squashfs", args: []string{"--container-image=/x.sqsh"}, err: "--container-image: \"/x.sqsh\": squashfs files are not supported yet"},
		{name: "relative mount", args: []string{"--container-image=a", "--container-mounts=data:/data"}, err: `--container-mounts: "data:/data": "data" is not an absolute path`},
		{name: "mount without source", args: []string{"--container-image=a", "--container-mounts=:/data"}, err: "--container-mounts: \":/data\": expected SRC[:DST[:FLAGS]]"},
		{name: "mount with four parts", args: []string{"--container-image=a", "--container-mounts=/a:/b:ro:x"}, err: "expected SRC[:DST[:FLAGS]]"},
		{name: "empty mount entry", args: []string{"--container-image=a", "--container-mounts=/a,,/b"}, err: "--container-mounts: \"\": expected"},
		{name: "mount over root", args: []string{"--container-image=a", "--container-mounts=/a:/"}, err: "cannot mount over the container's root"},
		{name: "tmpfs mount", args: []string{"--container-image=a", "--container-mounts=tmpfs:/t"}, err: "tmpfs mounts are not supported yet"},
		{name: "mount flag", args: []string{"--container-image=a", "--container-mounts=/a:/a:suid"}, err: `mount flag "suid" is not supported`},
		{name: "two sources one target", args: []string{"--container-image=a", "--container-mounts=/a:/t,/b:/t"}, err: "/t is already a mount target"},
		{name: "relative workdir", args: []string{"--container-image=a", "--container-workdir=run"}, err: `--container-workdir: "run" is not an absolute path`},
		{name: "name with slash", args: []string{"--container-name=../x"}, err: `--container-name: "../x": a name is`},
		{name: "name flag", args: []string{"--container-name=x:sometimes"}, err: `--container-name: flag "sometimes"`},
		{name: "yes and no", args: []string{"--container-image=a", "--container-remap-root", "--no-container-remap-root"},
			err: "both --container-remap-root and --no-container-remap-root were given"},
		{name: "writable and readonly", args: []string{"--container-image=a", "--container-readonly", "--container-writable"},
			err: "both --container-writable and --container-readonly were given"},
		{name: "bool with value", args: []string{"--container-image=a", "--container-writable=1"}, err: "--container-writable: takes no argument"},
		{name: "env name", args: []string{"--container-image=a", "--container-env=PATH,1X"}, err: `--container-env: "1X" is not a variable name`},
		{name: "save", args: []string{"--container-image=a", "--container-save=/x.sqsh"}, err: "--container-save: saving a container"},
		{name: "unshare", args: []string{"--container-image=a", "--container-unshare=net"}, err: "--container-unshare: private network"},
		{name: "unknown", args: []string{"--container-image=a", "--container-magic"}, err: "unknown flag --container-magic"},
		{name: "positional", args: []string{"--container-image=a", "bash"}, err: `unexpected argument "bash"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseArgs(append(append([]string{}, job...), tc.args...))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Fatalf("error %q is more than one line", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Opts, tc.want) {
				t.Fatalf("options\n got %+v\nwant %+v", got.Opts, tc.want)
			}
			if got.Job.JobID != 12 || got.Job.UID != 1000 {
				t.Fatalf("job = %+v", got.Job)
			}
		})
	}
}

func TestParseArgsJobFacts(t *testing.T) {
	img := "--container-image=a"
	for _, tc := range []struct {
		args []string
		want Job
		err  string
	}{
		{args: []string{"--job-id=7", "--step-id=4294967291", "--uid=0", "--gid=0", "--gids=5,27,", img},
			want: Job{JobID: 7, StepID: 4294967291, GIDs: []uint32{5, 27}}},
		{args: []string{"--job-id=7", "--step-id=0", "--uid=1", "--gid=1", "--gpu-env=SLURM_STEP_GPUS=0,1", "--gpu-env=CUDA_VISIBLE_DEVICES=0,1", img},
			want: Job{JobID: 7, UID: 1, GID: 1, GPUEnv: map[string]string{"SLURM_STEP_GPUS": "0,1", "CUDA_VISIBLE_DEVICES": "0,1"}}},
		{args: []string{"--job-id=7", "--step-id=0", "--uid=1", "--gid=1", "--gpu-env=LD_PRELOAD=/x.so", img}, err: `--gpu-env: "LD_PRELOAD=/x.so" is not NAME=VALUE of SLURM_STEP_GPUS`},
		{args: []string{"--job-id=7", "--step-id=0", "--uid=1000", img}, err: "--job-id, --step-id, --uid and --gid are required"},
		{args: []string{"--job-id=7", "--step-id=0", "--uid=-1", "--gid=0", img}, err: `--uid: "-1" is not a number`},
		{args: []string{"--job-id=7", "--step-id=0", "--uid=4294967296", "--gid=0", img}, err: `--uid: "4294967296" is not a number`},
		{args: []string{"--job-id=7", "--step-id=0", "--uid=1", "--gid=1", "--gids=1,x", img}, err: `--gids: "x" is not a number`},
	} {
		got, err := ParseArgs(tc.args)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseArgs(%q): err = %v, want one containing %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got.Job, tc.want) {
			t.Errorf("ParseArgs(%q) = %+v, %v; want %+v", tc.args, got.Job, err, tc.want)
		}
	}
}

func TestParseJobArgs(t *testing.T) {
	for _, tc := range []struct {
		argv    []string
		job     uint64
		state   string
		wantErr string
	}{
		{[]string{"--job-id=7"}, 7, DefaultStateDir, ""},
		{[]string{"--job-id=7", "--state-dir=/s/", "--cache-dir=/c", "--insecure-registry=r:5000", "--driver-root=/d"}, 7, "/s", ""},
		{[]string{"--state-dir=/s"}, 0, "", "--job-id is required"},
		{[]string{"--job-id=7", "--state-dir=s"}, 0, "", `--state-dir: "s" is not an absolute path`},
		{[]string{"--job-id=x"}, 0, "", "--job-id"},
		{[]string{"--job-id=7", "--container-image=x"}, 0, "", "unknown flag --container-image"},
	} {
		job, state, err := ParseJobArgs(tc.argv)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: err = %v, want %q", tc.argv, err, tc.wantErr)
			}
			continue
		}
		if err != nil || job != tc.job || state != tc.state {
			t.Errorf("%v = %d, %q, %v; want %d, %q", tc.argv, job, state, err, tc.job, tc.state)
		}
	}
}
