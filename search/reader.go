package search

import (
	"golang.org/x/text/language"

	"sou/index"
)

// ReaderScript is the script a reader of language tag reads Chinese in
// (Request.Script): Traditional for zh-TW, zh-HK, zh-MO and zh-Hant,
// Simplified for any other Chinese (zh, zh-CN, zh-SG, zh-Hans), and
// ScriptUnknown for a language that is not Chinese.
func ReaderScript(tag language.Tag) index.Script {
	if base, _ := tag.Base(); base.String() != "zh" {
		return index.ScriptUnknown
	}
	if script, _ := tag.Script(); script.String() == "Hant" {
		return index.ScriptTraditional
	}
	return index.ScriptSimplified
}
