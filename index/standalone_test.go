package index

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The sou binary carries its dictionaries. Built here and run as a node
// in a private mount namespace where the Go module cache (where gojieba's
// own dictionary paths point) is an empty tmpfs, and without
// SOU_JIEBA_DICT_DIR, it analyzes Chinese queries exactly as this process
// does. Skipped with -short, and where mount namespaces are not allowed.
func TestBinaryWithoutModuleCache(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the sou binary")
	}
	if err := exec.Command("unshare", "--mount", "true").Run(); err != nil {
		t.Skipf("no private mount namespace here: %v", err)
	}
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	modCache := strings.TrimSpace(string(out))
	if _, err := os.Stat(modCache); err != nil {
		t.Skipf("module cache %q: %v", modCache, err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "sou")
	build := exec.Command("go", "build", "-o", bin, "sou/cmd/sou")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node := exec.CommandContext(ctx, "unshare", "--mount", "sh", "-c",
		`mount -t tmpfs tmpfs "$1" && shift && exec "$@"`, "sh", modCache,
		bin, "node", "--data", filepath.Join(dir, "data"), "--http", addr,
		"--listen", "/ip4/127.0.0.1/tcp/0", "--mdns=false", "--min-free-disk-mb", "0",
		"--network", fmt.Sprintf("analyzer-test-%d", os.Getpid()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SOU_") {
			node.Env = append(node.Env, kv)
		}
	}
	var logs strings.Builder
	node.Stdout, node.Stderr = &logs, &logs
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = node.Wait()
		close(exited)
	}()
	defer func() {
		_ = node.Process.Kill()
		<-exited
	}()

	a := SharedAnalyzer()
	for _, q := range []string{"資訊檢索系統", "開啟檔案並變更設定", "我们的搜索引擎很好用", "中文English混合Go语言"} {
		var want []string
		for _, tok := range a.AnalyzeQuery(q) {
			if !slices.Contains(want, tok.Term) {
				want = append(want, tok.Term)
			}
		}
		got, err := nodeQueryTerms(ctx, addr, q, exited)
		if err != nil {
			t.Fatalf("%v\nnode output:\n%s", err, logs.String())
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: the binary without the module cache reads %v, this process %v", q, got, want)
		}
	}
}

// nodeQueryTerms asks the node at addr to search for q, waiting for it to
// come up, and returns the terms it analyzed q into.
func nodeQueryTerms(ctx context.Context, addr, q string, exited <-chan struct{}) ([]string, error) {
	u := "http://" + addr + "/api/search?q=" + url.QueryEscape(q)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			var body struct{ Terms []string }
			err = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("status %s", resp.Status)
			}
			return body.Terms, err
		}
		select {
		case <-exited:
			return nil, fmt.Errorf("node exited")
		case <-ctx.Done():
			return nil, fmt.Errorf("node did not answer: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
