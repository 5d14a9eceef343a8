package archcheck

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// layer is one row of docs/ARCHITECTURE.md's table.
type layer struct {
	name     string
	patterns []string // module-relative package paths; "x/..." is x and everything under it
	imports  []string // the layers it may import
}

// readLayers parses the table between the layers markers.
func readLayers(t *testing.T) []layer {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	begin, end := strings.Index(text, "<!-- layers: begin -->"), strings.Index(text, "<!-- layers: end -->")
	if begin < 0 || end < begin {
		t.Fatal("docs/ARCHITECTURE.md: no layers table between <!-- layers: begin --> and <!-- layers: end -->")
	}
	code := regexp.MustCompile("`([^`]+)`")
	var layers []layer
	for _, row := range strings.Split(text[begin:end], "\n") {
		cells := strings.Split(row, "|")
		if len(cells) != 5 || strings.Contains(row, "---") || strings.TrimSpace(cells[1]) == "layer" {
			continue
		}
		l := layer{name: strings.TrimSpace(cells[1])}
		for _, m := range code.FindAllStringSubmatch(cells[2], -1) {
			l.patterns = append(l.patterns, m[1])
		}
		for _, name := range strings.Split(cells[3], ",") {
			l.imports = append(l.imports, strings.TrimSpace(name))
		}
		layers = append(layers, l)
	}
	if len(layers) == 0 {
		t.Fatal("docs/ARCHITECTURE.md: the layers table has no rows")
	}
	return layers
}

// layerOf names the layer whose most specific pattern matches path ("" for none).
func layerOf(layers []layer, path string) string {
	best, bestLen := "", -1
	for _, l := range layers {
		for _, p := range l.patterns {
			base, tree := strings.CutSuffix(p, "/...")
			if (path == base || tree && strings.HasPrefix(path, base+"/")) && len(base) > bestLen {
				best, bestLen = l.name, len(base)
			}
		}
	}
	return best
}

func TestLayers(t *testing.T) {
	layers := readLayers(t)
	allowed := map[string][]string{}
	for _, l := range layers {
		allowed[l.name] = l.imports
	}
	pkgs := load(t, packages.NeedName|packages.NeedImports, true, "./...")
	seen := map[string]bool{}
	for _, p := range pkgs {
		path, ok := strings.CutPrefix(p.PkgPath, module)
		if !ok || strings.HasSuffix(path, ".test") {
			continue
		}
		path, external := strings.CutSuffix(path, "_test") // an external test package: its package's layer
		from := layerOf(layers, path)
		if from == "" {
			if !seen[path] {
				t.Errorf("package %s is in no layer of docs/ARCHITECTURE.md's table", path)
			}
			seen[path] = true
			continue
		}
		// A package's own tests may import test helpers (the tests layer) too.
		testing := external || strings.HasSuffix(p.ID, ".test]")
		for imp := range p.Imports {
			to, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			target := layerOf(layers, to)
			if target == "" || slices.Contains(allowed[from], target) || testing && target == "tests" {
				continue
			}
			t.Errorf("%s (%s) imports %s (%s): docs/ARCHITECTURE.md lets %s import only %s",
				path, from, to, target, from, strings.Join(allowed[from], ", "))
		}
	}
}

// TestLayerOf checks the table lookup on its own: the most specific pattern wins.
func TestLayerOf(t *testing.T) {
	layers := []layer{
		{name: "format", patterns: []string{"recording/..."}},
		{name: "agent", patterns: []string{"internal/agent"}},
		{name: "platform", patterns: []string{"internal/agent/agentenv"}},
	}
	for path, want := range map[string]string{
		"recording": "format", "recording/chunkstore": "format", "recordingx": "",
		"internal/agent": "agent", "internal/agent/agentenv": "platform", "internal/agent/other": "",
	} {
		if got := layerOf(layers, path); got != want {
			t.Errorf("layerOf(%q) = %q, want %q", path, got, want)
		}
	}
}
