package cli

import (
	"slices"
	"strings"

	"github.com/gpurr/gpurr/recording"
)

// openRecording opens the recording a verb was given; any failure is an
// input error naming the path.
func openRecording(path string) (*recording.Set, error) {
	set, err := recording.Open(path)
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	return set, nil
}

// checkFormat accepts one of the formats a verb writes.
func checkFormat(verb, format string, formats ...string) error {
	if slices.Contains(formats, format) {
		return nil
	}
	return usageErrorf("%s: unknown --format %q (want %s)", verb, format, strings.Join(formats, ", "))
}
