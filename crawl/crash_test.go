package crawl

import (
	"bufio"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// fileSink is the crash child's node: Store appends the URL to a file (the
// write is in the kernel when Store returns, so it survives SIGKILL).
type fileSink struct {
	mu sync.Mutex
	f  *os.File
}

func (s *fileSink) Owns(host string) bool                       { return host != "foreign.test" }
func (s *fileSink) Forward(context.Context, []Discovered) error { return nil }
func (s *fileSink) Store(_ context.Context, p *Page) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.f.WriteString(p.URL + "\n")
	return err
}

// TestCrashChild is the crawler process of TestCrashResume; it does nothing
// unless started by it.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv("SOU_CRASH_DIR")
	if dir == "" {
		t.Skip("only run as a child of TestCrashResume")
	}
	// The node removes the empty value-log file a kill during Badger's
	// file creation leaves, which Badger cannot open (node.openDB); the
	// child stands in for the node.
	torn, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	for _, path := range torn {
		if info, err := os.Stat(path); err == nil && info.Size() == 0 {
			_ = os.Remove(path)
		}
	}
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f, err := os.OpenFile(os.Getenv("SOU_CRASH_STORE"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := New(db, engConfig(os.Getenv("SOU_CRASH_DNS")), &fileSink{f: f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Add(context.Background(), []Discovered{{URL: os.Getenv("SOU_CRASH_SEED")}}); err != nil {
		t.Fatal(err)
	}
	engRun(t, c, 60*time.Second)
}

// TestCrashResume kills a crawling process with SIGKILL at random instants,
// restarts it on the same Badger directory, and checks against the web's
// request log that the crawl completes, that every page is stored, and that
// no page was fetched twice except the few in flight at a kill.
func TestCrashResume(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	web := newEngWeb(t, 6, 25, 3*time.Millisecond)
	dnsAddr := engDNS(t)
	dir, store := t.TempDir(), t.TempDir()+"/stored.txt"
	const kills = 4
	workers := engConfig("").Workers
	run := func(killAfter time.Duration) bool {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "SOU_CRASH_DIR="+dir, "SOU_CRASH_STORE="+store,
			"SOU_CRASH_DNS="+dnsAddr, "SOU_CRASH_SEED="+web.url(0, "/"))
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		if killAfter > 0 {
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("child failed: %v\n%s", err, out)
				}
				return true
			case <-time.After(killAfter):
				_ = cmd.Process.Signal(syscall.SIGKILL)
				<-done
				return false
			}
		}
		if err := <-done; err != nil {
			t.Fatalf("child failed: %v\n%s", err, out)
		}
		return true
	}
	killed := 0
	for range kills {
		if run(time.Duration(150+rand.IntN(250)) * time.Millisecond) {
			break // finished before the kill
		}
		killed++
	}
	if !run(0) {
		t.Fatal("final run did not finish")
	}

	fetched := map[string]int{}
	for _, r := range web.requests() {
		fetched["http://"+r.host+r.path]++
		if r.concurrent {
			t.Errorf("two requests in flight to %s at once", r.host)
		}
		if strings.HasPrefix(r.path, "/private") {
			t.Errorf("robots violation: %s%s", r.host, r.path)
		}
	}
	dups := 0
	for _, u := range web.truth() {
		n := fetched[u]
		if u == web.url(0, "/p1") {
			n-- // the 503
		}
		if n < 1 {
			t.Errorf("%s never fetched", u)
		}
		dups += max(n-1, 0)
	}
	f, err := os.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stored := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		stored[sc.Text()] = true
	}
	for _, u := range web.truth() {
		if !strings.HasSuffix(u, "/moved") && !stored[u] {
			t.Errorf("%s never stored", u)
		}
	}
	t.Logf("%d kills, %d requests, %d duplicate page fetches (allowed %d)", killed, len(web.requests()), dups, killed*workers)
	if dups > killed*workers {
		t.Errorf("%d duplicate page fetches after %d kills, more than the %d requests that can be in flight", dups, killed, killed*workers)
	}
	if killed == 0 {
		t.Log("the crawl finished before the first kill; nothing was tested about crashes")
	}
}
