// Package query loads recordings into SQLite tables and runs SQL over them.
//
// The database is built from the recording each time, in SQLite's private
// temporary database (a bounded page cache, the rest in a nameless file:
// tempdb.go); the recording stays the truth. The tables are tables.Query, filled by
// tables.Flatten as it streams each process's recording. Every table has a
// process column (the process directory's name inside the recording), so a
// recording of many ranks queries as one.
//
// SQLite integers are signed 64-bit: unsigned 64-bit values at or above
// 2^63 (callstack ids are hashes, so half of them are) are stored with the
// same bits and read back negative. They still join and compare for
// equality; kernel identities are given as hex text instead, as gpurr
// prints them. A column that never holds NULL is declared NOT NULL, as
// its Parquet column (gpurr export) is required.
package query

import (
	"fmt"
	"strings"

	"github.com/gpurr/gpurr/internal/tables"
)

// Schema describes every table, in the order they are created.
func Schema() []*tables.Table { return tables.Query }

func createSQL(t *tables.Table) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE %s (", t.Name)
	for i, c := range t.Columns {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q %s", c.Name, c.Type.SQL())
		if !c.Null {
			b.WriteString(" NOT NULL")
		}
	}
	b.WriteString(")")
	return b.String()
}

func insertSQL(t *tables.Table) string {
	return fmt.Sprintf("INSERT INTO %s VALUES (%s)", t.Name, strings.TrimSuffix(strings.Repeat("?, ", len(t.Columns)), ", "))
}

func indexSQL(t *tables.Table) string {
	if len(t.Key) == 0 {
		return ""
	}
	return fmt.Sprintf("CREATE INDEX %s_key ON %s (%s)", t.Name, t.Name, strings.Join(t.Key, ", "))
}
