//go:build race

package diffview

const raceEnabled = true
