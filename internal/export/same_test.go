package export

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/gpurr/gpurr/internal/query"
	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
)

// TestSameAsQuery: every recording the tests use, read through gpurr query (SQLite) and
// through gpurr export (Parquet, read back), has the same tables, the same columns in the same
// order with the same types and null rules, and the same rows; export adds only host and rank,
// from its partition folders.
func TestSameAsQuery(t *testing.T) {
	sets := map[string]func(t *testing.T) *recording.Set{
		"hostile":       func(t *testing.T) *recording.Set { return testrec.OpenBatches(t, testrec.HostileBatches()...) },
		"nested-ranges": func(t *testing.T) *recording.Set { return testrec.OpenBatches(t, testrec.NestedRanges(40)...) },
		"threaded": func(t *testing.T) *recording.Set {
			batches, _ := testrec.ThreadedBatches(testrec.Threaded{})
			return testrec.OpenBatches(t, batches...)
		},
	}
	for _, v := range testrec.Variants {
		if v != testrec.Newer { // neither reads it: a newer format
			sets[string(v)] = func(t *testing.T) *recording.Set { return testrec.Open(t, v) }
		}
	}
	for _, name := range []string{"killed", "torch-graphs"} {
		sets[name] = func(t *testing.T) *recording.Set {
			set, err := recording.Open(filepath.Join("..", "..", "testdata", "recordings", name))
			if err != nil {
				t.Fatal(err)
			}
			return set
		}
	}
	for name, open := range sets {
		t.Run(name, func(t *testing.T) {
			set := open(t)
			var unreadable []string
			for _, d := range set.Damaged {
				if pe := (*recording.ProcessError)(nil); errors.As(d, &pe) {
					unreadable = append(unreadable, pe.Name)
				}
			}
			dir := filepath.Join(t.TempDir(), "pq")
			if _, err := Parquet(dir, set.Processes, unreadable...); err != nil {
				t.Fatal(err)
			}
			exported := readExport(t, dir)
			db, err := query.Load(context.Background(), set)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			queried := readQuery(t, db)
			for _, name := range slices.Sorted(maps.Keys(queried)) {
				q, e := queried[name], exported[name]
				if e == nil {
					t.Errorf("%s: export has no such table", name)
					continue
				}
				if !slices.Equal(q.columns, e.columns) {
					t.Errorf("%s: columns differ:\nquery  %v\nexport %v", name, q.columns, e.columns)
					continue
				}
				if diff := rowsDiff(q.rows, e.rows); diff != "" {
					t.Errorf("%s: rows differ (- query, + export):\n%s", name, diff)
				}
			}
			for name := range exported {
				if queried[name] == nil {
					t.Errorf("%s: query has no such table", name)
				}
			}
		})
	}
}

// tableText is a table read through one path: its columns as "name TYPE", and " NOT NULL"
// after one that never holds NULL (SQLite's declaration; Parquet's required columns), with
// Parquet's types named by the SQLite type they are read as; and each row as text: NULL, an
// integer, a quoted string or x'hex'.
type tableText struct {
	columns []string
	rows    []string
}

func readQuery(t *testing.T, db *query.DB) map[string]*tableText {
	t.Helper()
	ctx := context.Background()
	var names rowsText
	if err := db.Query(ctx, "SELECT name FROM pragma_table_list WHERE schema = 'main' AND name NOT LIKE 'sqlite_%' ORDER BY name", &names); err != nil {
		t.Fatal(err)
	}
	out := map[string]*tableText{}
	for _, name := range names {
		var cols rowsText
		if err := db.Query(ctx, fmt.Sprintf("SELECT name || ' ' || type || iif(\"notnull\", ' NOT NULL', '') FROM pragma_table_info('%s') ORDER BY cid", name), &cols); err != nil {
			t.Fatal(err)
		}
		rows := &valueRows{}
		if err := db.Query(ctx, "SELECT * FROM "+name, rows); err != nil {
			t.Fatal(err)
		}
		out[name] = &tableText{columns: cols, rows: rows.rows}
	}
	return out
}

// rowsText collects a query's rows as text, one per row.
type rowsText []string

func (r *rowsText) Columns([]string) error { return nil }
func (r *rowsText) Row(values []any) error {
	*r = append(*r, fmt.Sprint(values...))
	return nil
}

// valueRows collects a query's rows as text, valueText each value.
type valueRows struct{ rows []string }

func (r *valueRows) Columns([]string) error { return nil }
func (r *valueRows) Row(values []any) error {
	parts := make([]string, len(values))
	for i, v := range values {
		switch v := v.(type) {
		case nil:
			parts[i] = "NULL"
		case int64:
			parts[i] = strconv.FormatInt(v, 10)
		case string:
			parts[i] = strconv.Quote(v)
		case []byte:
			parts[i] = "x'" + hex.EncodeToString(v) + "'"
		default:
			parts[i] = fmt.Sprintf("%T %v", v, v)
		}
	}
	r.rows = append(r.rows, strings.Join(parts, ", "))
	return nil
}

// readExport reads every table of an export folder: each file's schema must be its table's,
// each file must lie in host=H/rank=R.
func readExport(t *testing.T, dir string) map[string]*tableText {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*tableText{}
	for _, e := range entries {
		table := &tableText{}
		out[e.Name()] = table
		err := filepath.WalkDir(filepath.Join(dir, e.Name()), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(filepath.Join(dir, e.Name()), path)
			if parts := strings.Split(rel, string(filepath.Separator)); len(parts) != 3 || !strings.HasPrefix(parts[0], "host=") ||
				!strings.HasPrefix(parts[1], "rank=") || !strings.HasSuffix(parts[2], ".parquet") {
				t.Errorf("%s: not TABLE/host=H/rank=R/PROCESS.parquet", path)
			}
			cols, rows, err := readParquet(path)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if table.columns != nil && !slices.Equal(cols, table.columns) {
				t.Errorf("%s: columns %v, another file of the table has %v", path, cols, table.columns)
			}
			table.columns = cols
			table.rows = append(table.rows, rows...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// readParquet reads a Parquet file's columns, as tableText has them, and its rows as
// valueRows writes them.
func readParquet(path string) (columns, rows []string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		return nil, nil, err
	}
	fields := pf.Schema().Fields()
	for _, field := range fields {
		c := field.Name() + " " + sqlType(field.Type())
		if field.Required() {
			c += " NOT NULL"
		}
		columns = append(columns, c)
	}
	r := parquet.NewReader(pf)
	defer r.Close()
	buf := make([]parquet.Row, 128)
	for {
		n, err := r.ReadRows(buf)
		for _, row := range buf[:n] {
			parts := make([]string, len(fields))
			for _, v := range row {
				parts[v.Column()] = parquetText(v, fields[v.Column()].Type())
			}
			rows = append(rows, strings.Join(parts, ", "))
		}
		if errors.Is(err, io.EOF) {
			return columns, rows, nil
		}
		if err != nil {
			return nil, nil, err
		}
	}
}

// sqlType is the SQLite type a Parquet type is read as: INTEGER (int64), BOOLEAN (boolean),
// TEXT (a UTF-8 byte array), BLOB (another byte array); any other is named as Parquet has it.
func sqlType(typ parquet.Type) string {
	switch typ.Kind() {
	case parquet.Int64:
		return "INTEGER"
	case parquet.Boolean:
		return "BOOLEAN"
	case parquet.ByteArray:
		if isString(typ) {
			return "TEXT"
		}
		return "BLOB"
	}
	return "parquet " + typ.String()
}

// isString reports whether typ is a byte array that holds UTF-8 text.
func isString(typ parquet.Type) bool {
	lt := typ.LogicalType()
	if lt == nil {
		return false
	}
	_, ok := lt.Value.(*format.StringType)
	return ok
}

func parquetText(v parquet.Value, typ parquet.Type) string {
	switch {
	case v.IsNull():
		return "NULL"
	case v.Kind() == parquet.Boolean:
		if v.Boolean() {
			return "1"
		}
		return "0"
	case v.Kind() == parquet.Int32:
		return strconv.FormatInt(int64(v.Int32()), 10)
	case v.Kind() == parquet.Int64:
		return strconv.FormatInt(v.Int64(), 10)
	case v.Kind() == parquet.ByteArray && isString(typ):
		return strconv.Quote(string(v.ByteArray()))
	case v.Kind() == parquet.ByteArray:
		return "x'" + hex.EncodeToString(v.ByteArray()) + "'"
	}
	return v.Kind().String() + " " + v.String()
}

// rowsDiff is the rows of a and b that the other has not (as many times), a's with -, b's
// with +; "" when they hold the same rows in any order. It lists ten of each at most.
func rowsDiff(a, b []string) string {
	count := map[string]int{}
	for _, r := range a {
		count[r]++
	}
	for _, r := range b {
		count[r]--
	}
	var minus, plus []string
	for _, r := range slices.Sorted(maps.Keys(count)) {
		for n := count[r]; n > 0; n-- {
			minus = append(minus, "- "+r)
		}
		for n := count[r]; n < 0; n++ {
			plus = append(plus, "+ "+r)
		}
	}
	if len(minus)+len(plus) == 0 {
		return ""
	}
	cut := func(lines []string) []string {
		if len(lines) > 10 {
			return append(lines[:10:10], fmt.Sprintf("  ... %d more", len(lines)-10))
		}
		return lines
	}
	return strings.Join(append(cut(minus), cut(plus)...), "\n")
}
