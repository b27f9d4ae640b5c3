package nodewatch

import (
	"context"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/test/wait"
)

// Lines as sunk-slurm-nodes prints them (a node line is shortened to the fields under test).
func nodeLine(name, state, reason string) string {
	return `{"node":{"name":"` + name + `","state":` + state + `,"reason":"` + reason + `","features":"a,b","cpus":2}}` + "\n"
}

const (
	syncFull = `{"sync":{"full":true,"last_update":100,"nodes":2,"changed":2}}` + "\n"
	syncDiff = `{"sync":{"full":false,"last_update":101,"nodes":2,"changed":1}}` + "\n"
)

type feeder struct {
	t *testing.T
	w *io.PipeWriter
	s *Store
}

func newFeeder(t *testing.T) *feeder {
	r, w := io.Pipe()
	f := &feeder{t: t, w: w, s: NewStore()}
	go func() { _ = Feed(f.s, r) }()
	t.Cleanup(func() { _ = w.Close() })
	return f
}

// feed writes lines; the pipe hands each one over only once Feed has read it, and the last
// write returns once the sync line has been applied (Feed reads the next line only after).
func (f *feeder) feed(lines ...string) {
	for _, l := range lines {
		if _, err := io.WriteString(f.w, l); err != nil {
			f.t.Fatal(err)
		}
	}
}

func since(t *testing.T, s *Store, epoch string, seq uint64) Changes {
	t.Helper()
	var c Changes
	wait.For(t, "the store", 5*time.Second, 10*time.Millisecond, func() error {
		var err error
		c, _, err = s.Since(epoch, seq, time.Now(), time.Minute)
		return err
	})
	return c
}

func names(ns []slurm.Node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Name)
	}
	slices.Sort(out)
	return out
}

func TestStoreServesOnlyChanges(t *testing.T) {
	f := newFeeder(t)
	if _, _, err := f.s.Since("", 0, time.Now(), time.Minute); err == nil {
		t.Fatal("an empty store answered: want unreadable before the first table")
	}
	f.feed(nodeLine("n1", `["IDLE","DYNAMIC_NORM","DRAIN"]`, "x"), nodeLine("n2", `["IDLE"]`, ""), syncFull)
	c := since(t, f.s, "", 0)
	if !c.Full || !slices.Equal(names(c.Nodes), []string{"n1", "n2"}) {
		t.Fatalf("first answer: %+v, want the whole table", c)
	}
	for _, n := range c.Nodes {
		if n.Name == "n1" && !slices.Equal(n.State, []string{"IDLE", "DRAIN", "DYNAMIC_NORM"}) {
			t.Errorf("n1's state %v: want slurmrestd's order IDLE, DRAIN, DYNAMIC_NORM", n.State)
		}
		if !slices.Equal(n.Features, []string{"a", "b"}) {
			t.Errorf("%s's features %v", n.Name, n.Features)
		}
	}
	first := c.Seq

	// Nothing changed: an empty answer at the same seq, and a wake channel still open.
	c, wake, err := f.s.Since(c.Epoch, first, time.Now(), time.Minute)
	if err != nil || c.Full || len(c.Nodes) != 0 || c.Seq != first {
		t.Fatalf("unchanged: %+v, %v", c, err)
	}
	// A change of n2 and the deletion of n1.
	f.feed(nodeLine("n2", `["IDLE","DRAIN"]`, "bad"), `{"gone":"n1"}`+"\n", syncDiff)
	select {
	case <-wake:
	case <-time.After(5 * time.Second):
		t.Fatal("a change did not wake the waiter")
	}
	c = since(t, f.s, c.Epoch, first)
	if c.Full || !slices.Equal(names(c.Nodes), []string{"n2"}) || !slices.Equal(c.Deleted, []string{"n1"}) || c.Seq != first+1 {
		t.Fatalf("after a change: %+v, want n2 changed and n1 deleted at seq %d", c, first+1)
	}
	// The same node again (a ping cycle's timestamp bump) is no change.
	f.feed(nodeLine("n2", `["IDLE","DRAIN"]`, "bad"), syncDiff)
	if c2 := since(t, f.s, c.Epoch, c.Seq); len(c2.Nodes) != 0 || c2.Seq != c.Seq {
		t.Fatalf("an identical line: %+v, want no change", c2)
	}
	// Another epoch (the reader knew a watcher that restarted) gets the whole table.
	if c2 := since(t, f.s, "other", c.Seq); !c2.Full || !slices.Equal(names(c2.Nodes), []string{"n2"}) {
		t.Fatalf("another epoch: %+v, want the whole table", c2)
	}
}

func TestStoreFailsClosedAndCatchesUp(t *testing.T) {
	f := newFeeder(t)
	f.feed(nodeLine("n1", `["IDLE"]`, ""), nodeLine("n2", `["IDLE"]`, ""), syncFull)
	c := since(t, f.s, "", 0)
	// slurmctld goes away: unreadable, not "nothing changed".
	f.feed(`{"error":"loading the node table: Unable to contact slurm controller"}` + "\n")
	wait.For(t, "the store", 5*time.Second, 10*time.Millisecond, func() error {
		if _, _, err := f.s.Since(c.Epoch, c.Seq, time.Now(), time.Minute); err == nil {
			return io.EOF
		}
		return nil
	})
	// Changes without a whole table first are not applied (the reader does not print them so,
	// but a store must not trust them).
	f.feed(nodeLine("n1", `["DOWN"]`, "x"), syncDiff)
	if _, _, err := f.s.Since(c.Epoch, c.Seq, time.Now(), time.Minute); err == nil {
		t.Fatal("readable after changes without a whole table")
	}
	// The next whole table: n1 drained meanwhile, n2 deleted meanwhile.
	f.feed(nodeLine("n1", `["IDLE","DRAIN"]`, "meanwhile"), `{"sync":{"full":true,"last_update":200,"nodes":1,"changed":1}}`+"\n")
	c2 := since(t, f.s, c.Epoch, c.Seq)
	if c2.Full || !slices.Equal(names(c2.Nodes), []string{"n1"}) || !slices.Equal(c2.Deleted, []string{"n2"}) {
		t.Fatalf("after the outage: %+v, want n1 changed and n2 deleted", c2)
	}
	// A stale table (the reader hangs) is unreadable too.
	if _, _, err := f.s.Since(c2.Epoch, c2.Seq, time.Now().Add(time.Hour), time.Minute); err == nil || !strings.Contains(err.Error(), "last read") {
		t.Fatalf("stale: %v", err)
	}
	// A line sunk does not read ends the feed and makes the table unreadable.
	f.feed("{\"what\":1}\n")
	wait.For(t, "the store", 5*time.Second, 10*time.Millisecond, func() error {
		if _, _, err := f.s.Since(c2.Epoch, c2.Seq, time.Now(), time.Minute); err == nil {
			return io.EOF
		}
		return nil
	})
}

// TestClientInformer: the syncer's node cache fed by the watcher's HTTP endpoint: the whole
// table, a change, unreadable while the watcher is gone, and a new watcher (another epoch).
func TestClientInformer(t *testing.T) {
	f := newFeeder(t)
	f.feed(nodeLine("n1", `["IDLE"]`, ""), nodeLine("n2", `["IDLE"]`, ""), syncFull)
	auth, tokens := testKeys(t)
	srv := httptest.NewServer(Handler(f.s, time.Minute, auth))
	c, err := NewClient(srv.URL, 200*time.Millisecond, tokens)
	if err != nil {
		t.Fatal(err)
	}
	inf := slurm.NewNodeChangeInformer(c, slurm.InformerOptions{Interval: 100 * time.Millisecond})
	var events []string
	evc := make(chan string, 100)
	inf.AddHandler(slurm.Handler[slurm.Node]{
		OnAdd:    func(n slurm.Node) { evc <- "add " + n.Name },
		OnUpdate: func(_, n slurm.Node) { evc <- "update " + n.Name + " " + n.Reason },
		OnDelete: func(n slurm.Node) { evc <- "delete " + n.Name },
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = inf.Run(ctx) }()
	next := func(want string) {
		t.Helper()
		select {
		case e := <-evc:
			events = append(events, e)
			if e != want {
				t.Fatalf("event %q, want %q (so far %v)", e, want, events)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no event, want %q (so far %v)", want, events)
		}
	}
	got := []string{<-evc, <-evc}
	slices.Sort(got)
	if !slices.Equal(got, []string{"add n1", "add n2"}) {
		t.Fatalf("first events %v", got)
	}
	f.feed(nodeLine("n2", `["IDLE","DRAIN"]`, "r"), syncDiff)
	next("update n2 r")

	// The watcher goes away: the cache keeps its nodes and reports the error.
	srv.Close()
	wait.For(t, "the store", 5*time.Second, 10*time.Millisecond, func() error {
		if inf.LastError() == nil {
			return io.EOF
		}
		return nil
	})
	if _, ok := inf.Get("n1"); !ok {
		t.Fatal("an unreachable watcher emptied the cache")
	}
	// A new watcher (a new store, so a new epoch) whose table lost n1 and changed n2 while
	// the old one was gone.
	f2 := newFeeder(t)
	f2.feed(nodeLine("n2", `["IDLE","DRAIN"]`, "while down"), syncFull)
	srv2 := httptest.NewServer(Handler(f2.s, time.Minute, auth))
	defer srv2.Close()
	c.mu.Lock()
	c.url = srv2.URL
	c.mu.Unlock()
	got = []string{<-evc, <-evc}
	slices.Sort(got)
	if !slices.Equal(got, []string{"delete n1", "update n2 while down"}) {
		t.Fatalf("after the new watcher: %v", got)
	}
	if inf.LastError() != nil {
		t.Fatalf("still failing: %v", inf.LastError())
	}
}

// A node line reads as slurmrestd's node: state flags in slurmrestd's order, lists split, times
// as times, and topology_str (Slurm 25.05 on) as Topology, which the operator plans moves on.
func TestLineReadsAsRESTNode(t *testing.T) {
	l, err := parseLine([]byte(`{"node":{"name":"c-0","state":["IDLE","DRAIN","DYNAMIC_NORM","RESERVED"],"features":"a,b","partitions":"p",` +
		`"boot_time":100,"topology":"tree:s1:l1,blk:b1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	n := l.Node.toNode()
	if !slices.Equal(n.State, []string{"IDLE", "RESERVED", "DRAIN", "DYNAMIC_NORM"}) || !slices.Equal(n.Features, []string{"a", "b"}) ||
		!slices.Equal(n.Partitions, []string{"p"}) || n.BootTime.Unix() != 100 || n.Topology != "tree:s1:l1,blk:b1" {
		t.Errorf("node %+v", n)
	}
}
