package testnet

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseLatencyRange parses --latency: "MIN..MAX" or one duration for both
// ("20ms..200ms", "50ms").
func ParseLatencyRange(s string) (lo, hi time.Duration, err error) {
	bad := func() (time.Duration, time.Duration, error) {
		return 0, 0, fmt.Errorf("--latency %q: want MIN..MAX like 20ms..200ms, or one duration", s)
	}
	a, b, isRange := strings.Cut(strings.TrimSpace(s), "..")
	if lo, err = parseNonNegDuration(a); err != nil {
		return bad()
	}
	hi = lo
	if isRange {
		if hi, err = parseNonNegDuration(b); err != nil {
			return bad()
		}
	}
	if hi < lo {
		return 0, 0, fmt.Errorf("--latency %q: MIN is above MAX", s)
	}
	return lo, hi, nil
}

func parseNonNegDuration(s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("bad duration %q", s)
	}
	return d, nil
}

// bandwidthUnits are --bandwidth's units in bytes per second.
var bandwidthUnits = []struct {
	suffix string
	bytes  float64
}{
	{"gbit", 1e9 / 8}, {"mbit", 1e6 / 8}, {"kbit", 1e3 / 8}, {"bit", 1.0 / 8},
	{"gb", 1e9}, {"mb", 1e6}, {"kb", 1e3}, {"b", 1},
}

// ParseBandwidth parses --bandwidth ("10Mbit", "512kbit", "2MB"; "0" =
// unlimited) into bytes per second. A bare number is refused: bits or
// bytes is too easy to get wrong.
func ParseBandwidth(s string) (float64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "0" || t == "" {
		return 0, nil
	}
	for _, u := range bandwidthUnits {
		if num, ok := strings.CutSuffix(t, u.suffix); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
			if err != nil || v < 0 {
				break
			}
			return v * u.bytes, nil
		}
	}
	return 0, fmt.Errorf("--bandwidth %q: want a rate like 10Mbit, 512kbit or 2MB (per second), or 0 for unlimited", s)
}

// ParseLossPercent parses --loss, a percentage ("1%" or "1"), into a
// probability below 0.5.
func ParseLossPercent(s string) (float64, error) {
	t := strings.TrimSuffix(strings.TrimSpace(s), "%")
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || v >= 50 {
		return 0, fmt.Errorf("--loss %q: want a percentage from 0 to below 50, like 1%%", s)
	}
	return v / 100, nil
}
