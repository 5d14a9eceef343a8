package export

import (
	"os"
	"regexp"
	"slices"
	"testing"
)

// TestPythonTables: the Python reader names export's tables (EXPORT_TABLES), to refuse
// another name before it exports anything; it must name them as Tables does.
func TestPythonTables(t *testing.T) {
	const path = "../../python/gpurr/__init__.py"
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^EXPORT_TABLES = \(([^)]*)\)`).FindSubmatch(src)
	if m == nil {
		t.Fatalf("%s: no EXPORT_TABLES = (...) line", path)
	}
	var names []string
	for _, q := range regexp.MustCompile(`"([^"]*)"`).FindAllSubmatch(m[1], -1) {
		names = append(names, string(q[1]))
	}
	if !slices.Equal(names, Tables) {
		t.Errorf("%s: EXPORT_TABLES is %q, export writes %q", path, names, Tables)
	}
}
