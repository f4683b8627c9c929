package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sou/node"
)

// brokenAfter is a connection that breaks after limit bytes of the body.
type brokenAfter struct {
	http.ResponseWriter
	limit int
}

func (b *brokenAfter) Unwrap() http.ResponseWriter { return b.ResponseWriter }

func (b *brokenAfter) Write(p []byte) (int, error) {
	if len(p) <= b.limit {
		b.limit -= len(p)
		return b.ResponseWriter.Write(p)
	}
	k, _ := b.ResponseWriter.Write(p[:b.limit])
	b.limit = 0
	return k, errors.New("connection broke")
}

// TestExportWARCKeepsPartialFile: `sou export warc --out FILE` renames
// FILE.partial to FILE only after a clean transfer; when the node breaks
// off (as it does when its export fails half-way) the command fails, says
// so, and leaves FILE.partial, never a FILE that looks complete.
func TestExportWARCKeepsPartialFile(t *testing.T) {
	cfg := node.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", Network: "sou-test", Listen: []string{"/ip4/127.0.0.1/tcp/0"}}
	n, err := node.New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = n.Run(ctx) // closes the node
	})
	h := n.Handler()
	tests := []struct {
		name    string
		breakAt int // -1: never
		wantErr string
	}{
		{"clean transfer", -1, ""},
		{"connection broken by the node", 100, "interrupted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.breakAt >= 0 {
					w = &brokenAfter{ResponseWriter: w, limit: tc.breakAt}
				}
				h.ServeHTTP(w, r)
			}))
			defer srv.Close()
			out := filepath.Join(t.TempDir(), "sou.warc")
			cmd := newExportCmd()
			cmd.SetArgs([]string{"warc", "--out", out, "--node", srv.URL})
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			err := cmd.ExecuteContext(context.Background())
			_, statOut := os.Stat(out)
			partial, statPartial := os.ReadFile(out + ".partial")
			if tc.wantErr == "" {
				if err != nil || statOut != nil || statPartial == nil {
					t.Fatalf("clean transfer: error %v, %s: %v, .partial left: %v", err, out, statOut, statPartial == nil)
				}
				if b, _ := os.ReadFile(out); !strings.HasPrefix(string(b), "WARC/1.1\r\n") {
					t.Fatalf("exported file %.40q", b)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), out+".partial") {
				t.Fatalf("error %v, want one saying %q and naming the partial file", err, tc.wantErr)
			}
			if statOut == nil {
				t.Fatalf("%s exists after a broken transfer", out)
			}
			if statPartial != nil || len(partial) != tc.breakAt {
				t.Fatalf("partial file: %d bytes, %v; want the %d bytes received", len(partial), statPartial, tc.breakAt)
			}
		})
	}
}
