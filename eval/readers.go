package eval

import (
	"fmt"
	"strings"

	"golang.org/x/text/language"
)

// ParseReaders reads SET=LANGUAGE items (lo-zh-CN=zh-CN): the language of
// a set's readers, a BCP 47 tag, which a searcher sends with each of the
// set's queries as a reader's browser sends Accept-Language. It returns
// the canonical tag by set name.
func ParseReaders(items []string) (map[string]string, error) {
	readers := make(map[string]string, len(items))
	for _, item := range items {
		set, lang, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || set == "" {
			return nil, fmt.Errorf("reader language %q: want SET=LANGUAGE", item)
		}
		tag, err := language.Parse(lang)
		if err != nil {
			return nil, fmt.Errorf("reader language of %s: %w", set, err)
		}
		if _, dup := readers[set]; dup {
			return nil, fmt.Errorf("reader language of %s given twice", set)
		}
		readers[set] = tag.String()
	}
	return readers, nil
}
