package cli

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// microsPerUSD: amounts are integers in USD millionths.
const microsPerUSD = 1_000_000

// parseUSD parses a non-negative amount of dollars with at most 6 decimal
// places ("2", "0.5", "1.000001") into USD millionths, exactly: the decimal
// string is read digit by digit, never through a float.
func parseUSD(s string) (int64, error) {
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" && frac == "" {
		return 0, errors.New("want an amount in dollars such as 2.50")
	}
	if hasDot && frac == "" {
		return 0, errors.New("want digits after the decimal point")
	}
	if len(frac) > 6 {
		return 0, errors.New("at most 6 decimal places (USD millionths)")
	}
	var w int64
	for _, r := range whole {
		if r < '0' || r > '9' {
			return 0, errors.New("want a non-negative amount in dollars such as 2.50")
		}
		w = w*10 + int64(r-'0') // no overflow: w was at most MaxInt64/10⁶
		if w > math.MaxInt64/microsPerUSD {
			return 0, errors.New("too large")
		}
	}
	var f int64
	for i := 0; i < 6; i++ {
		f *= 10
		if i < len(frac) {
			r := frac[i]
			if r < '0' || r > '9' {
				return 0, errors.New("want a non-negative amount in dollars such as 2.50")
			}
			f += int64(r - '0')
		}
	}
	if w > (math.MaxInt64-f)/microsPerUSD {
		return 0, errors.New("too large")
	}
	return w*microsPerUSD + f, nil
}

// formatUSD prints USD millionths as dollars with 6 decimal places.
func formatUSD(micros int64) string {
	sign := ""
	u := uint64(micros)
	if micros < 0 {
		sign, u = "-", uint64(-(micros+1))+1 // no overflow at MinInt64
	}
	return fmt.Sprintf("%s%d.%06d", sign, u/microsPerUSD, u%microsPerUSD)
}

// formatAmount prints a quantity (hours, seconds) with prec decimal places.
func formatAmount(f float64, prec int) string {
	return strconv.FormatFloat(f, 'f', prec, 64)
}
