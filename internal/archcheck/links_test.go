package archcheck

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/text"
)

// The documents a reader follows links through: every relative link in them must name a file
// of the tree, and a link to a heading of a Markdown file a heading it has.
var linkedDocs = []string{"README.md", "docs/*.md", "bench/*.md"}

func TestDocLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	var files []string
	for _, pattern := range linkedDocs {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil || len(m) == 0 {
			t.Fatalf("%s: no files (%v)", pattern, err)
		}
		files = append(files, m...)
	}
	docs := map[string]*doc{} // by path, parsed when first needed
	parse := func(path string) (*doc, error) {
		if d, ok := docs[path]; ok {
			return d, nil
		}
		d, err := parseDoc(path)
		docs[path] = d
		return d, err
	}
	for _, file := range files {
		d, err := parse(file)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, file)
		for _, link := range d.links {
			if msg := checkLink(file, link, parse); msg != "" {
				t.Errorf("%s: link %q: %s", name, link, msg)
			}
		}
	}
}

// checkLink says what is wrong with one link of the document at from, or "".
func checkLink(from, link string, parse func(string) (*doc, error)) string {
	u, err := url.Parse(link)
	if err != nil {
		return err.Error()
	}
	if u.Scheme != "" || u.Host != "" {
		return "" // another site's: not checked
	}
	target := from
	if u.Path != "" {
		if strings.HasPrefix(u.Path, "/") {
			return "an absolute path: links are relative to the document"
		}
		target = filepath.Join(filepath.Dir(from), filepath.FromSlash(u.Path))
		if _, err := os.Stat(target); err != nil {
			return "no such file"
		}
	}
	if u.Fragment == "" || !strings.HasSuffix(target, ".md") {
		return ""
	}
	d, err := parse(target)
	if err != nil {
		return err.Error()
	}
	if !d.anchors[u.Fragment] {
		return fmt.Sprintf("no heading with the anchor #%s in %s", u.Fragment, filepath.Base(target))
	}
	return ""
}

// doc is what a Markdown file offers links and what it links to.
type doc struct {
	links   []string        // link and image destinations, as written
	anchors map[string]bool // its headings' anchors, as GitHub makes them
}

func parseDoc(path string) (*doc, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	md := goldmark.New(goldmark.WithExtensions(extension.GFM))
	root := md.Parser().Parse(text.NewReader(src))
	d := &doc{anchors: map[string]bool{}}
	seen := map[string]int{}
	err = ast.Walk(root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Link:
			d.links = append(d.links, string(n.Destination))
		case *ast.Image:
			d.links = append(d.links, string(n.Destination))
		case *ast.Heading:
			var raw []byte
			for i := 0; i < n.Lines().Len(); i++ {
				seg := n.Lines().At(i)
				raw = append(raw, seg.Value(src)...)
			}
			a := anchor(string(raw))
			if k := seen[a]; k > 0 {
				d.anchors[fmt.Sprintf("%s-%d", a, k)] = true
			} else {
				d.anchors[a] = true
			}
			seen[a]++
		}
		return ast.WalkContinue, nil
	})
	return d, err
}

// anchor is the fragment GitHub gives a heading: its text in lower case, with every character
// but letters, digits, '-' and '_' dropped and spaces made '-'. (A heading's Markdown marks,
// such as the backquotes of code, are punctuation and go with the rest.)
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"Quick start: a PyTorch job":              "quick-start-a-pytorch-job",
		"`gpurr export REC... -o DIR`":            "gpurr-export-rec--o-dir",
		"Instrumentation (`internal/instrument`)": "instrumentation-internalinstrument",
		"Rebuilding a region's bytes":             "rebuilding-a-regions-bytes",
		"1. Check the machine":                    "1-check-the-machine",
		"Write sets (format 1.11)":                "write-sets-format-111",
	} {
		if got := anchor(heading); got != want {
			t.Errorf("anchor(%q) = %q, want %q", heading, got, want)
		}
	}
}

// A link to a missing file, or to a heading a file lacks, is reported; one to another site is
// not checked.
func TestCheckLink(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.md")
	if err := os.WriteFile(a, []byte("# Title\n\n## Some `code` here\n\n## Twice\n\n## Twice\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	from := filepath.Join(dir, "sub", "b.md")
	parse := func(path string) (*doc, error) { return parseDoc(path) }
	for link, bad := range map[string]bool{
		"../a.md":                     false,
		"../a.md#some-code-here":      false,
		"../a.md#twice-1":             false,
		"../a.md#twice-2":             true,
		"../a.md#missing":             true,
		"a.md":                        true,
		"../nothing.md":               true,
		"/etc/passwd":                 true,
		"https://example.com/x.md#no": false,
		"..":                          false,
	} {
		if msg := checkLink(from, link, parse); (msg != "") != bad {
			t.Errorf("checkLink(%q) = %q, want bad %v", link, msg, bad)
		}
	}
}
