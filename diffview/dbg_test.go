package diffview

import (
	"os"
)

func init() {
	if os.Getenv("MERGE_SEEDS") != "" {
		mergeSeeds = 4000
	}
}
