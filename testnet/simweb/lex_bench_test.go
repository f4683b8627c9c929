package simweb

import "testing"

func BenchmarkLoadChinese(b *testing.B) {
	for i := 0; i < b.N; i++ {
		l, err := loadLexiconUncached()
		if err != nil {
			b.Fatal(err)
		}
		l.chineseFor("big5")
	}
}
