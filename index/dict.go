package index

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/yanyiwu/gojieba"
)

// analyzerAlgorithm is the part of AnalyzerVersion that the dictionaries'
// hash does not cover: bump it whenever a change to the analyzer's code
// changes the terms of any text.
const analyzerAlgorithm = 5

// Dictionaries compiled into the binary (data/README.md says where they
// come from), so that every node segments with the same ones wherever it
// runs. jieba's are strings, read in place (5 MB the heap does not copy).
var (
	//go:embed data/jieba/jieba.dict.utf8
	embeddedJiebaDict string
	//go:embed data/jieba/user.dict.utf8
	embeddedJiebaUser string
	//go:embed data/opencc/*.txt
	embeddedOpenCC embed.FS
)

// jiebaDictEnv names a directory whose jieba.dict.utf8 and user.dict.utf8
// replace the embedded ones (the analyzer version changes with them).
const jiebaDictEnv = "SOU_JIEBA_DICT_DIR"

var (
	sharedOnce     sync.Once
	sharedAnalyzer *Analyzer
	sharedErr      error
)

// LoadAnalyzer returns the process's one analyzer, loading it on the first
// call: gojieba over the embedded dictionaries (or those of
// SOU_JIEBA_DICT_DIR) and OpenCC's tables. cppjieba's trie is most of a
// node's memory floor (BENCHMARKS.md), hence one per process; its Cut and
// CutForSearch are const methods over it, so one instance serves all
// goroutines without a lock (AddWord/RemoveWord, which would not be safe,
// are never called). A failure (an unreadable or malformed override, no
// writable temporary directory) is returned on every call: Chinese is
// never segmented any other way, since a node that cut text differently
// from its peers would corrupt global IDF without a sign.
func LoadAnalyzer() (*Analyzer, error) {
	sharedOnce.Do(func() {
		sharedAnalyzer, sharedErr = loadAnalyzer(os.Getenv(jiebaDictEnv))
	})
	return sharedAnalyzer, sharedErr
}

// SharedAnalyzer is LoadAnalyzer for callers that cannot go on without
// it; it panics if the analyzer cannot be loaded. A node opens its index
// (which returns the error) before anything calls this.
func SharedAnalyzer() *Analyzer {
	a, err := LoadAnalyzer()
	if err != nil {
		panic(err)
	}
	return a
}

func loadAnalyzer(overrideDir string) (*Analyzer, error) {
	main, user := embeddedJiebaDict, embeddedJiebaUser
	if overrideDir != "" {
		var err error
		if main, user, err = readJiebaDicts(overrideDir); err != nil {
			return nil, err
		}
	}
	tables, err := fs.Sub(embeddedOpenCC, "data/opencc")
	if err != nil {
		return nil, fmt.Errorf("index: conversion tables: %w", err)
	}
	fold, err := newFolder(tables)
	if err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	jieba, err := newJieba(main, user)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	for _, s := range []string{main, user} {
		fmt.Fprintf(h, "%d\n", len(s))
		hashString(h, s)
	}
	dictHash := h.Sum(nil)
	for _, name := range slices.Concat(variantTables, charTables, vocabularyTables, classTables[1:]) {
		b, err := fs.ReadFile(tables, name)
		if err != nil {
			return nil, fmt.Errorf("index: conversion table %s: %w", name, err)
		}
		fmt.Fprintf(h, "%s %d\n", name, len(b))
		h.Write(b)
	}
	return &Analyzer{
		jieba:           jieba,
		fold:            fold,
		stem:            true,
		stems:           &stemCache{},
		scratch:         &sync.Pool{New: func() any { return &analyzeScratch{} }},
		version:         fmt.Sprintf("%d-%s", analyzerAlgorithm, hex.EncodeToString(h.Sum(nil)[:6])),
		unfoldedVersion: fmt.Sprintf("%d-%s-unfolded", analyzerAlgorithm, hex.EncodeToString(dictHash[:6])),
	}, nil
}

// readJiebaDicts reads and checks jieba.dict.utf8 and user.dict.utf8 from
// dir: cppjieba aborts the process on a malformed line.
func readJiebaDicts(dir string) (main, user string, err error) {
	for _, f := range []struct {
		name string
		dst  *string
		main bool
	}{
		{"jieba.dict.utf8", &main, true},
		{"user.dict.utf8", &user, false},
	} {
		b, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			return "", "", fmt.Errorf("index: jieba dictionary: %w", err)
		}
		if err := checkJiebaDict(b, f.main); err != nil {
			return "", "", fmt.Errorf("index: %s: %w", filepath.Join(dir, f.name), err)
		}
		*f.dst = string(b)
	}
	return main, user, nil
}

// hashString writes s to h without copying it whole.
func hashString(h hash.Hash, s string) {
	var buf [64 << 10]byte
	for len(s) > 0 {
		n := copy(buf[:], s)
		h.Write(buf[:n])
		s = s[n:]
	}
}

// newJieba hands the dictionaries to cppjieba, which reads them from
// files once, in its constructor: they are written to a private temporary
// directory that is removed as soon as the trie is built (no shared cache
// that another process could change between a check and the load). The
// HMM model, IDF table and stop words serve only HMM segmentation (always
// off) and keyword extraction (never used): the smallest files cppjieba
// accepts stand in for them.
func newJieba(main, user string) (*gojieba.Jieba, error) {
	dir, err := os.MkdirTemp("", "sou-jieba-")
	if err != nil {
		return nil, fmt.Errorf("index: directory for the jieba dictionaries: %w", err)
	}
	defer os.RemoveAll(dir)
	if strings.ContainsAny(dir, "|;") {
		// cppjieba splits the user dictionary path at these.
		return nil, fmt.Errorf("index: temporary directory %q: cppjieba cannot read paths with | or ;", dir)
	}
	files := []struct{ name, data string }{
		{"jieba.dict.utf8", main},
		{"hmm_model.utf8", "0 0 0 0\n0 0 0 0\n0 0 0 0\n0 0 0 0\n0 0 0 0\n一:0\n一:0\n一:0\n一:0\n"},
		{"user.dict.utf8", user},
		{"idf.utf8", "sou 1.0\n"},
		{"stop_words.utf8", "的\n"},
	}
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = filepath.Join(dir, f.name)
		if err := writeFile(paths[i], f.data); err != nil {
			return nil, fmt.Errorf("index: write jieba dictionary: %w", err)
		}
	}
	return gojieba.NewJieba(paths...), nil
}

// checkJiebaDict checks what cppjieba would otherwise abort on or
// misread: a main dictionary of at least one line, every line word,
// frequency and tag separated by single spaces (a user dictionary's:
// word, then optionally a frequency and a tag, or a tag), a valid UTF-8
// word, a numeric frequency.
func checkJiebaDict(b []byte, main bool) error {
	minFields := 1
	if main {
		minFields = 3
		if len(b) == 0 {
			return errors.New("empty dictionary")
		}
	}
	const maxFields = 3
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		fields := strings.Split(sc.Text(), " ")
		if len(fields) < minFields || len(fields) > maxFields || slices.Contains(fields, "") || !utf8.ValidString(fields[0]) {
			return fmt.Errorf("line %d: want %d to %d fields: word [frequency] [tag]", line, minFields, maxFields)
		}
		if len(fields) == 3 {
			if _, err := strconv.ParseFloat(fields[1], 64); err != nil {
				return fmt.Errorf("line %d: frequency %q: %w", line, fields[1], err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read dictionary: %w", err)
	}
	return nil
}

func writeFile(path, data string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// JiebaDictionary is the segmentation dictionary the analyzer embeds: one
// "word frequency tag" line a word. The simulated web writes its Chinese
// text with these words.
func JiebaDictionary() string { return embeddedJiebaDict }
