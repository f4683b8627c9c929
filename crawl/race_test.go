//go:build race

package crawl

// raceDetector: the race detector is on. Whole-corpus walks (one goroutine,
// minutes of parsing, several times slower under it) skip then.
const raceDetector = true
