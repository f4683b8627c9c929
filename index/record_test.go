package index

import (
	"context"
	"encoding/binary"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// encodeLegacyRecord is the page record as stored before summaries
// (recordVersion 1, the whole record in one zstd frame): stores written
// then must still read.
func encodeLegacyRecord(d *Document) []byte {
	w := recWriter{}
	w.u64(recordVersion)
	w.str(d.URL)
	w.str(d.Host)
	w.str(d.Title)
	w.u64(uint64(len(d.Headings)))
	for _, h := range d.Headings {
		w.str(h)
	}
	w.str(d.Body)
	w.str(d.Lang)
	w.u64(uint64(int64(d.Status)))
	w.u64(uint64(d.FetchedAt.UnixNano()))
	w.str(d.ContentType)
	w.str(d.Charset)
	w.u64(uint64(len(d.Header)))
	for k, vs := range d.Header {
		w.str(k)
		w.u64(uint64(len(vs)))
		for _, v := range vs {
			w.str(v)
		}
	}
	w.u64(math.Float64bits(d.StaticRank))
	w.b = append(w.b, d.ContentHash[:]...)
	w.b = binary.BigEndian.AppendUint64(w.b, d.SimHash)
	return w.b
}

// TestStoredRecordForms stores a page in each stored form, the current
// one (summary, then the compressed rest, in S2 or, from older builds,
// zstd) and the legacy one (one zstd frame), and reads each back whole and as a summary; a record whose
// summary is cut short is an error, never a panic.
func TestStoredRecordForms(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	ix := openIndex(t, db, 1)
	defer ix.Close()
	doc := Document{
		URL: "http://h.example/a?b=1", Host: "h.example", Title: "标题 and title",
		Headings: []string{"one", "二"}, Body: "body text 正文", Lang: "zh", Status: 200,
		FetchedAt: time.Unix(1700000000, 5).UTC(), ContentType: "text/html", Charset: "gbk",
		Header: map[string][]string{"Etag": {`"x"`}}, StaticRank: 0.25,
		ContentHash: [16]byte{1, 2, 3, 15: 9}, SimHash: 0xfeedface12345678,
	}
	current := appendStored(nil, &doc, ix.compressPage)
	zenc := zstdFastest(t)
	legacy := zenc(encodeLegacyRecord(&doc), nil)
	forms := []struct {
		name    string
		stored  []byte
		wantErr bool
	}{
		{"current", current, false},
		{"summary, then zstd (older builds)", appendStored(nil, &doc, zenc), false},
		{"legacy", legacy, false},
		{"summary cut short", current[:8], true},
		{"summary length past the end", []byte{storedWithSummary, 0x7f, 1, 2}, true},
	}
	for i, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			id := uint32(1000 + i)
			if err := db.Update(func(txn *badger.Txn) error { return txn.Set(docKey(prefixDoc, id), f.stored) }); err != nil {
				t.Fatal(err)
			}
			var got Document
			var sum *Summary
			err := db.View(func(txn *badger.Txn) error {
				item, err := txn.Get(docKey(prefixDoc, id))
				if err != nil {
					return err
				}
				if err := item.Value(func(v []byte) error { return ix.decodeStored(v, &got) }); err != nil {
					return err
				}
				sum, err = ix.summaryByID(txn, id)
				return err
			})
			if f.wantErr {
				if err == nil {
					t.Fatal("a damaged record was read without an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, doc) {
				t.Errorf("record read back as %+v, want %+v", got, doc)
			}
			want := Summary{URL: doc.URL, Host: doc.Host, Title: doc.Title, ContentHash: doc.ContentHash, SimHash: doc.SimHash}
			if *sum != want {
				t.Errorf("summary %+v, want %+v", *sum, want)
			}
		})
	}
	// Through the index: Put writes the current form, Get and a reader's
	// Summary read it.
	ctx := context.Background()
	if err := ix.Put(ctx, &doc); err != nil {
		t.Fatal(err)
	}
	rec, err := ix.Get(ctx, doc.URL)
	if err != nil || rec.Title != doc.Title || rec.Body != doc.Body || rec.SimHash != doc.SimHash {
		t.Fatalf("Get after Put: %+v, %v", rec, err)
	}
	if err := ix.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	r := ix.NewReader()
	defer r.Close()
	s, err := r.Summary(rec.DocID)
	if err != nil || s.URL != doc.URL || s.Title != doc.Title || s.ContentHash != doc.ContentHash {
		t.Fatalf("reader summary %+v, %v", s, err)
	}
}
