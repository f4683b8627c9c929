package node

import (
	"testing"

	"sou/crawl"
	"sou/index"
)

// FuzzDecodePeerMessages feeds arbitrary bytes to the decoders of every
// message a peer can deliver to the node's handlers (handoff pages,
// replicas, host exports, manifests): they must fail with an error, never
// panic, and a decoded message must survive the handlers' own checks.
func FuzzDecodePeerMessages(f *testing.F) {
	for _, v := range []any{
		pagesMsg{Docs: []*index.Document{{URL: "http://a.test/", Host: "a.test", Title: "t"}}, Fetched: []fetchedMarker{{Host: "a.test", URL: "http://a.test/x"}}, Anchors: map[string][]string{"http://a.test/": {"x"}}},
		hostMsg{Export: &crawl.HostExport{Host: "a.test", State: []byte("{}"), URLs: [][]byte{[]byte("{}")}}},
		manifestMsg{Hosts: []string{"a.test", "b.test"}},
	} {
		b, err := encodeGob(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var pm pagesMsg
		if decodeGob(b, &pm) == nil {
			for _, d := range pm.Docs {
				if d != nil && d.URL != "" {
					_ = hostOf(d.URL) == d.Host
					_ = docBytes(d)
				}
			}
		}
		var hm hostMsg
		_ = decodeGob(b, &hm)
		var mm manifestMsg
		_ = decodeGob(b, &mm)
	})
}
