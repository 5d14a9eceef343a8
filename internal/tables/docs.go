package tables

import (
	"fmt"
	"strings"
)

// Markdown describes tables in Markdown, as docs/query.md lists them: for
// each table a heading, what a row is, and a table of its columns (name,
// type and null rule, meaning).
func Markdown(ts []*Table) string {
	var b strings.Builder
	for i, t := range ts {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "### `%s`\n\n%s.\n\n| column | type | meaning |\n|---|---|---|\n", t.Name, markdownText(upperFirst(t.Doc)))
		for _, c := range t.Columns {
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", c.Name, c.TypeText(), markdownText(c.Doc))
		}
	}
	return b.String()
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// markdownText keeps a description's characters from being read as
// Markdown: table cells end at |, * and _ emphasize, < opens HTML.
var markdownText = strings.NewReplacer("|", `\|`, "*", `\*`, "<", "&lt;", ">", "&gt;").Replace
