package testnet

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadQrels(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.tsv")
	os.WriteFile(good, []byte("lo-1\t文件 打开\thttp://help.libreoffice.test/zh-CN/a.html\nlo-2\tcharts\thttp://h.test/a.html,http://h.test/b.html\n\n"), 0o644)
	qs, err := readQrels(good)
	if err != nil || len(qs) != 2 || len(qs[1].Relevant) != 2 || qs[0].Query != "文件 打开" {
		t.Fatalf("readQrels = %+v, %v", qs, err)
	}
	for name, body := range map[string]string{"two-columns": "a\tb\n", "empty-query": "a\t\thttp://x/\n", "nothing": "\n"} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := readQrels(p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := readQrels(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file accepted")
	}
}

func TestHostPathIgnoresQueryAndFragment(t *testing.T) {
	tests := []struct{ a, b string }{
		{"http://Help.LibreOffice.test/zh-CN/a.html?DbPAR=WRITER#x", "http://help.libreoffice.test/zh-CN/a.html"},
		{"http://h.test/a%20b.html", "http://h.test/a%20b.html?x=1"},
		{"http://h.test:80", "http://H.test/"},
	}
	for _, tc := range tests {
		if hostPath(tc.a) != hostPath(tc.b) {
			t.Errorf("hostPath(%q) = %q, hostPath(%q) = %q", tc.a, hostPath(tc.a), tc.b, hostPath(tc.b))
		}
	}
}
