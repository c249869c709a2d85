package fsx

import "strconv"

// HumanBytes is the one way strata prints a byte count: exact below 1 KiB
// ("512 B"), otherwise one decimal and a binary unit ("1.2 MiB", "3.0 GiB").
// A value that would round up to 1024 of a unit is printed in the next one
// ("1.0 MiB", never "1024.0 KiB").
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	neg := n < 0
	f := float64(n)
	if neg {
		f = -f
	}
	exp := -1
	for f >= unit-0.05 && exp < len(units)-1 {
		f /= unit
		exp++
	}
	s := strconv.FormatFloat(f, 'f', 1, 64) + " " + units[exp]
	if neg {
		s = "-" + s
	}
	return s
}

var units = [...]string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
