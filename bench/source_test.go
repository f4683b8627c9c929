package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCorpusDocs(t *testing.T) {
	root := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("main/index.html", "<html><head><title>Main 首页</title></head><body><p>hello 搜索引擎</p></body></html>")
	write("main/sub/page.HTML", "<title>Sub</title><p>second page</p>")
	write("main/notes.txt", "not html")
	write("main/hidden.html", `<meta name="robots" content="noindex"><title>hidden</title>`)
	write("mirror/index.html", "<title>Mirror</title>")
	tsv := filepath.Join(root, "sites.tsv")
	write("sites.tsv", "docs.test\t"+filepath.Join(root, "main")+"\t/\tmain\nmirror.test\t"+filepath.Join(root, "mirror")+"\t/\tmirror\n")
	docs, err := CorpusDocs(context.Background(), tsv)
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, d := range docs {
		urls = append(urls, d.URL)
	}
	want := []string{"http://docs.test/index.html", "http://docs.test/sub/page.HTML"}
	if !slices.Equal(urls, want) {
		t.Fatalf("CorpusDocs URLs = %q, want %q (mirrors, non-HTML and noindex pages left out)", urls, want)
	}
	if docs[0].Title != "Main 首页" || docs[0].Host != "docs.test" || docs[0].Body == "" {
		t.Fatalf("first doc = %+v", docs[0])
	}
	if _, err := ReadSites(filepath.Join(root, "missing.tsv")); err == nil {
		t.Fatal("ReadSites of a missing file: want an error")
	}
}

func TestLoadQrels(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	good := "import sys\nprint('lo-%s-0000\\t打印 页面\\thttp://help.libreoffice.test/a.html,http://help.libreoffice.test/b.html' % sys.argv[2])\n"
	tests := []struct {
		name, body, err string
	}{
		{"good", good, ""},
		{"a malformed line is an error, not skipped", good + "print('malformed line')\n", "line 2"},
		{"nothing printed", "pass\n", "no judgments"},
	}
	for _, tc := range tests {
		script := filepath.Join(t.TempDir(), "qrels.py")
		if err := os.WriteFile(script, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		qs, err := LoadQrels(context.Background(), script, "zh-CN", 10)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err = %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || len(qs) != 1 || qs[0].ID != "lo-zh-CN-0000" || qs[0].Text != "打印 页面" || len(qs[0].Relevant) != 2 {
			t.Errorf("%s: LoadQrels = %+v, %v", tc.name, qs, err)
		}
	}
}
