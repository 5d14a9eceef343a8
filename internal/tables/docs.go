package tables

import (
	"fmt"
	"strings"
)

// Markdown describes tables in Markdown, as docs/query.md and
// docs/trace.md list them: for each table a heading, what a row is, and a
// table of its columns (name, type, meaning). typeName names a column's
// type: Column.Type.SQL for the SQLite tables, ParquetType for Parquet.
func Markdown(ts []*Table, typeName func(Column) string) string {
	var b strings.Builder
	for i, t := range ts {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "### `%s`\n\n%s.\n\n| column | type | meaning |\n|---|---|---|\n", t.Name, markdownText(upperFirst(t.Doc)))
		for _, c := range t.Columns {
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", c.Name, typeName(c), markdownText(c.Doc))
		}
	}
	return b.String()
}

// ParquetType names a column's type as Parquet holds it: int32, int64,
// bool, string or binary, "(null)" after one that may be null.
func ParquetType(c Column) string {
	if c.Null {
		return c.Type.String() + " (null)"
	}
	return c.Type.String()
}

// SQLType names a column's SQLite type.
func SQLType(c Column) string { return c.Type.SQL() }

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// markdownText keeps a description's characters from being read as
// Markdown: table cells end at |, * and _ emphasize, < opens HTML.
var markdownText = strings.NewReplacer("|", `\|`, "*", `\*`, "<", "&lt;", ">", "&gt;").Replace
