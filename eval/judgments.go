package eval

import (
	"bufio"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Judgment is one known-item query and the URLs that answer it.
type Judgment struct {
	ID       string
	Query    string
	Relevant []string
}

// Set is the judgments of one file.
type Set struct {
	Name      string // the file's base name without its extension
	Judgments []Judgment
}

// maxFileBytes caps a judgment file: the largest set a person reruns is a
// few thousand lines.
const maxFileBytes = 64 << 20

// ReadFile reads a judgment file (see the package comment for its format).
func ReadFile(path string) (Set, error) {
	f, err := os.Open(path)
	if err != nil {
		return Set{}, fmt.Errorf("judgments: %w", err)
	}
	defer f.Close()
	name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	s, err := Parse(io.LimitReader(f, maxFileBytes+1), name)
	if err != nil {
		return Set{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Parse reads judgments from r; blank lines and lines starting with # are
// skipped. Every problem is reported with its line number.
func Parse(r io.Reader, name string) (Set, error) {
	s := Set{Name: name}
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	read := 0
	for line := 1; sc.Scan(); line++ {
		read += len(sc.Bytes()) + 1
		if read > maxFileBytes {
			return Set{}, fmt.Errorf("larger than %d MiB", maxFileBytes>>20)
		}
		text := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(text) == "" || strings.HasPrefix(text, "#") {
			continue
		}
		j, err := parseLine(text)
		if err != nil {
			return Set{}, fmt.Errorf("line %d: %w", line, err)
		}
		if first, dup := seen[j.ID]; dup {
			return Set{}, fmt.Errorf("line %d: QID %q already on line %d", line, j.ID, first)
		}
		seen[j.ID] = line
		s.Judgments = append(s.Judgments, j)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Set{}, errors.New("a line is longer than 1 MiB")
		}
		return Set{}, fmt.Errorf("read: %w", err)
	}
	if len(s.Judgments) == 0 {
		return Set{}, errors.New("holds no judgments")
	}
	return s, nil
}

func parseLine(text string) (Judgment, error) {
	cols := strings.Split(text, "\t")
	if len(cols) != 3 {
		return Judgment{}, fmt.Errorf("want QID<TAB>QUERY<TAB>URL[,URL...], got %d column(s)", len(cols))
	}
	j := Judgment{ID: strings.TrimSpace(cols[0]), Query: strings.TrimSpace(cols[1])}
	switch {
	case j.ID == "":
		return Judgment{}, errors.New("empty QID")
	case j.Query == "":
		return Judgment{}, fmt.Errorf("QID %s: empty query", j.ID)
	}
	for _, u := range strings.Split(cols[2], ",") {
		u = strings.TrimSpace(u)
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return Judgment{}, fmt.Errorf("QID %s: %q is not an absolute http(s) URL", j.ID, u)
		}
		j.Relevant = append(j.Relevant, u)
	}
	return j, nil
}

// Split names a part of a judgment set.
type Split string

// The parts: dev is tuned on, test is held out, all is both.
const (
	Dev  Split = "dev"
	Test Split = "test"
	All  Split = "all"
)

// ParseSplit checks a --split value.
func ParseSplit(s string) (Split, error) {
	switch sp := Split(s); sp {
	case Dev, Test, All:
		return sp, nil
	}
	return "", fmt.Errorf("split %q: want dev, test or all", s)
}

// testShare is the held-out share of a set, in tenths.
const testShare = 3

// PartOf returns the part a QID belongs to: Dev or Test.
func PartOf(qid string) Split {
	h := fnv.New32a()
	h.Write([]byte(qid))
	if h.Sum32()%10 < testShare {
		return Test
	}
	return Dev
}

// Part returns the judgments of s in part sp (all of them for All).
func (s Set) Part(sp Split) Set {
	if sp == All {
		return s
	}
	out := Set{Name: s.Name}
	for _, j := range s.Judgments {
		if PartOf(j.ID) == sp {
			out.Judgments = append(out.Judgments, j)
		}
	}
	return out
}

// MatchKey is what a result and a relevant URL must share to match: host
// (lowercased, the scheme's default port dropped) and decoded path ("/" when
// empty). Query string and fragment are ignored. A string that does not
// parse as a URL is its own key.
func MatchKey(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	host := strings.ToLower(u.Host)
	switch u.Scheme {
	case "http":
		host = strings.TrimSuffix(host, ":80")
	case "https":
		host = strings.TrimSuffix(host, ":443")
	}
	p := u.Path
	if p == "" {
		p = "/"
	}
	return host + p
}
