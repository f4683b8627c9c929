package index

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
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
const analyzerAlgorithm = 2

// Dictionaries compiled into the binary (data/README.md says where they
// come from), so that every node segments with the same ones wherever it
// runs.
var (
	//go:embed data/jieba/jieba.dict.utf8 data/jieba/user.dict.utf8
	embeddedJieba embed.FS
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
// SOU_JIEBA_DICT_DIR) and OpenCC's tables. The dictionary costs about
// 116 MB of C memory and half a second; cppjieba's Cut and CutForSearch
// are const methods over a read-only trie, so one instance serves all
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
	dicts, err := fs.Sub(embeddedJieba, "data/jieba")
	if err != nil {
		return nil, fmt.Errorf("index: jieba dictionaries: %w", err)
	}
	if overrideDir != "" {
		dicts = os.DirFS(overrideDir)
	}
	main, err := fs.ReadFile(dicts, "jieba.dict.utf8")
	if err != nil {
		return nil, fmt.Errorf("index: jieba dictionary: %w", err)
	}
	user, err := fs.ReadFile(dicts, "user.dict.utf8")
	if err != nil {
		return nil, fmt.Errorf("index: jieba user dictionary: %w", err)
	}
	if overrideDir != "" {
		// cppjieba aborts the process on a malformed line.
		if err := checkJiebaDict(main, 3, 3); err != nil {
			return nil, fmt.Errorf("index: %s/jieba.dict.utf8: %w", overrideDir, err)
		}
		if err := checkJiebaDict(user, 1, 3); err != nil {
			return nil, fmt.Errorf("index: %s/user.dict.utf8: %w", overrideDir, err)
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
	for _, b := range [][]byte{main, user} {
		fmt.Fprintf(h, "%d\n", len(b))
		h.Write(b)
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
		version:         fmt.Sprintf("%d-%s", analyzerAlgorithm, hex.EncodeToString(h.Sum(nil)[:6])),
		unfoldedVersion: fmt.Sprintf("%d-%s-unfolded", analyzerAlgorithm, hex.EncodeToString(dictHash[:6])),
	}, nil
}

// newJieba hands the dictionaries to cppjieba, which reads them from
// files once, in its constructor: they are written to a private temporary
// directory that is removed as soon as the trie is built (no shared cache
// that another process could change between a check and the load). The
// HMM model, IDF table and stop words serve only HMM segmentation (always
// off) and keyword extraction (never used): the smallest files cppjieba
// accepts stand in for them.
func newJieba(main, user []byte) (*gojieba.Jieba, error) {
	dir, err := os.MkdirTemp("", "sou-jieba-")
	if err != nil {
		return nil, fmt.Errorf("index: directory for the jieba dictionaries: %w", err)
	}
	defer os.RemoveAll(dir)
	if strings.ContainsAny(dir, "|;") {
		// cppjieba splits the user dictionary path at these.
		return nil, fmt.Errorf("index: temporary directory %q: cppjieba cannot read paths with | or ;", dir)
	}
	files := []struct {
		name string
		data []byte
	}{
		{"jieba.dict.utf8", main},
		{"hmm_model.utf8", []byte("0 0 0 0\n0 0 0 0\n0 0 0 0\n0 0 0 0\n0 0 0 0\n一:0\n一:0\n一:0\n一:0\n")},
		{"user.dict.utf8", user},
		{"idf.utf8", []byte("sou 1.0\n")},
		{"stop_words.utf8", []byte("的\n")},
	}
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = filepath.Join(dir, f.name)
		if err := os.WriteFile(paths[i], f.data, 0o600); err != nil {
			return nil, fmt.Errorf("index: write jieba dictionary: %w", err)
		}
	}
	return gojieba.NewJieba(paths...), nil
}

// checkJiebaDict checks what cppjieba would otherwise abort on or
// misread: every line non-empty, minFields to maxFields fields separated
// by single spaces, a valid UTF-8 word, a numeric frequency when there are
// three fields.
func checkJiebaDict(b []byte, minFields, maxFields int) error {
	if len(b) == 0 && minFields == 3 {
		return errors.New("empty dictionary")
	}
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
