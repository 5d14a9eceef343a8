package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

func TestSummarizeRecording(t *testing.T) {
	for _, tc := range []struct {
		dir  string
		want []string
	}{
		{"../../testdata/recordings/torch-graphs", []string{"gpurr: recorded 16 launch(es) in 1 process(es) into "}},
		{"../../testdata/recordings/killed", []string{"gpurr: recorded 501 launch(es)", "gpurr: record: vm-", " incomplete"}},
		{t.TempDir(), []string{"nothing recorded in", "no process initialized CUDA"}},
	} {
		var out bytes.Buffer
		summarizeRecording(&out, tc.dir)
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s: summary %q lacks %q", filepath.Base(tc.dir), out.String(), w)
			}
		}
	}
}
