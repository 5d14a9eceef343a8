package tables

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated parts of docs/ from the descriptions")

// The docs' column lists are the descriptions, rendered by Markdown between
// two marker lines; go test ./internal/tables -run TestDocs -update
// rewrites them after a change.
func TestDocs(t *testing.T) {
	for _, d := range []struct {
		file   string
		set    string
		tables []*Table
	}{
		{"../../docs/query.md", "Query", Query},
	} {
		text, err := os.ReadFile(d.file)
		if err != nil {
			t.Fatal(err)
		}
		begin := "<!-- generated from tables." + d.set + " by go test ./internal/tables -run TestDocs -update -->\n"
		end := "<!-- end of generated tables -->\n"
		i, j := strings.Index(string(text), begin), strings.Index(string(text), end)
		if i < 0 || j < i {
			t.Fatalf("%s: no %q ... %q lines", d.file, strings.TrimSpace(begin), strings.TrimSpace(end))
		}
		want := "\n" + Markdown(d.tables) + "\n"
		got := string(text[i+len(begin) : j])
		if got == want {
			continue
		}
		if *update {
			out := string(text[:i+len(begin)]) + want + string(text[j:])
			if err := os.WriteFile(d.file, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s: the column lists are not the descriptions': go test ./internal/tables -run TestDocs -update", d.file)
	}
}
