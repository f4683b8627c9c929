package index

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// SOU_JIEBA_DICT_DIR replaces the embedded dictionaries; what cppjieba
// would abort the process on is an error instead, and a dictionary that
// differs gives another analyzer version.
func TestLoadAnalyzerDictOverride(t *testing.T) {
	main := embeddedJiebaDict
	if err := checkJiebaDict([]byte(main), true); err != nil {
		t.Fatalf("embedded dictionary: %v", err)
	}
	write := func(t *testing.T, main, user string) string {
		dir := t.TempDir()
		for name, data := range map[string]string{"jieba.dict.utf8": main, "user.dict.utf8": user} {
			if data == "\x00missing" {
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	for _, tc := range []struct {
		name, main, user, wantErr string
	}{
		{"no main dictionary", "\x00missing", "", "jieba.dict.utf8"},
		{"no user dictionary", "搜索 10 n\n", "\x00missing", "user.dict.utf8"},
		{"empty main dictionary", "", "", "empty"},
		{"two fields", "搜索 10 n\n引擎 10\n", "", "line 2"},
		{"blank line", "搜索 10 n\n\n引擎 10 n\n", "", "line 2"},
		{"frequency not a number", "搜索 ten n\n", "", "frequency"},
		{"invalid UTF-8", "\xff\xfe 10 n\n", "", "line 1"},
		{"user line of four fields", "搜索 10 n\n", "蓝翔 10 nz x\n", "user.dict.utf8: line 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadAnalyzer(write(t, tc.main, tc.user))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want one mentioning %q", err, tc.wantErr)
			}
		})
	}

	// A copy of the embedded dictionaries with one more word: that word is
	// now cut whole, and the version says the analyzer differs.
	user := embeddedJiebaUser
	const word = "搜索网络分片"
	a, err := loadAnalyzer(write(t, main, user+word+" 1000 n\n"))
	if err != nil {
		t.Fatal(err)
	}
	shared := SharedAnalyzer()
	if a.Version() == shared.Version() {
		t.Errorf("another dictionary, same version %q", a.Version())
	}
	if got := terms(a.AnalyzeQuery(word)); !slices.Equal(got, []string{word}) {
		t.Errorf("override analyzes %s into %v", word, got)
	}
	if got := terms(shared.AnalyzeQuery(word)); slices.Equal(got, []string{word}) {
		t.Errorf("embedded dictionary already knows %s", word)
	}
}
