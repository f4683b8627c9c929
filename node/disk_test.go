package node

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sou/p2p"
	"sou/testnet/simweb"
)

// TestDiskLowPausesAndResumes is issue 9's full disk at the node: when the
// data directory's free space falls under MinFreeDisk the node stops
// fetching and refuses intake with a clear status, loses nothing, and once
// space returns finishes the crawl with every page and no duplicate fetch.
// Free space comes from a probe the test controls; TestDiskGuardOnTmpfs
// checks the real statfs probe on a real full file system.
func TestDiskLowPausesAndResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("crawls a simulated web")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	web, err := simweb.Start(ctx, simweb.Config{Seed: 3, Hosts: 12, Pages: 400, Misbehave: []string{"none"}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	cfg := testConfig(t)
	cfg.DNS = web.DNSAddr()
	cfg.Fast = true
	cfg.AllowLoopback = true
	cfg.MinFreeDisk = 100 << 20

	var free atomic.Uint64
	free.Store(10 << 30)
	n, err := New(ctx, cfg, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	n.disk.free = func(string) (uint64, error) { return free.Load(), nil }
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- n.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	for n.HTTPAddr() == "" {
		time.Sleep(20 * time.Millisecond)
	}
	base := "http://" + n.HTTPAddr()
	if _, err := n.AddSeeds(ctx, web.Seeds()); err != nil {
		t.Fatal(err)
	}
	for n.Status(ctx).Crawl.Fetched < 40 {
		time.Sleep(50 * time.Millisecond)
	}

	// The disk fills up.
	free.Store(50 << 20)
	waitFor(t, 10*time.Second, "the node to notice the low disk", func() bool { return n.Status(ctx).DiskLow })
	time.Sleep(time.Second) // requests in flight when it noticed
	before := len(web.Requests(0))
	time.Sleep(3 * time.Second)
	if after := len(web.Requests(0)); after != before {
		t.Fatalf("%d requests while the disk was low", after-before)
	}
	st := n.Status(ctx)
	if !strings.Contains(errorsText(st.Errors), "disk space low") {
		t.Fatalf("status does not say why the node stopped: %+v", st.Errors)
	}
	resp, err := http.Post(base+"/api/crawl", "application/json", strings.NewReader(`{"urls":["http://example.test/"]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInsufficientStorage {
		t.Fatalf("POST /api/crawl while the disk is low: %d, want 507", resp.StatusCode)
	}
	if err := n.inbound.receiveURLs(ctx, "", []p2p.URLRecord{{URL: "http://example.test/x"}}); !errors.Is(err, ErrDiskLow) {
		t.Fatalf("a peer's URL batch while the disk is low: %v, want ErrDiskLow (the sender keeps it)", err)
	}
	// Between the two marks free space is not enough to resume.
	free.Store(105 << 20)
	time.Sleep(2*diskCheckInterval + 500*time.Millisecond)
	if !n.Status(ctx).DiskLow {
		t.Fatal("resumed inside the hysteresis margin")
	}

	// Space returns: the crawl finishes, nothing lost, nothing fetched twice.
	free.Store(10 << 30)
	waitFor(t, 10*time.Second, "the node to resume", func() bool { return !n.Status(ctx).DiskLow })
	waitForCrawl(ctx, t, n, 1, 90*time.Second)
	fetched := map[string]int{}
	for _, r := range web.Requests(0) {
		if r.Completed && r.Status == http.StatusOK {
			fetched[r.URL]++
		}
	}
	missing := 0
	for _, p := range web.Truth().Pages {
		if p.Required && fetched[p.URL] == 0 {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d required pages never fetched after the disk came back", missing)
	}
	for u, c := range fetched {
		if c > 1 {
			t.Errorf("%s fetched %d times", u, c)
		}
	}
}

func errorsText(errs []RecentError) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString(e.Error + "\n")
	}
	return b.String()
}

func waitFor(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", limit, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDiskGuardOnTmpfs fills a real, small tmpfs and checks that the
// guard's statfs probe trips and clears. It needs root to mount; elsewhere
// it says so and skips.
func TestDiskGuardOnTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	g := newDiskGuard(dir, 16<<20)
	if changed, free, err := g.check(); err != nil || changed || g.Low() {
		t.Fatalf("empty 64 MB tmpfs: changed %v, free %d, err %v", changed, free, err)
	}
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 56<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, free, err := g.check(); err != nil || !changed || !g.Low() {
		t.Fatalf("tmpfs with %d bytes free: changed %v, low %v, err %v", free, changed, g.Low(), err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if changed, _, err := g.check(); err != nil || !changed || g.Low() {
		t.Fatalf("after freeing space: changed %v, low %v, err %v", changed, g.Low(), err)
	}
}
