//go:build !race

package crawl

const raceDetector = false
