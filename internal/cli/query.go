package cli

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpurr/gpurr/internal/info"
	"github.com/gpurr/gpurr/internal/query"
)

func newQueryCmd() *cobra.Command {
	var format string
	var wide bool
	var schema, listTables bool
	cmd := &cobra.Command{
		Use:   "query REC 'SQL'",
		Short: "Run SQL over a recording's tables",
		Long: `Load a recording into SQLite tables (a temporary database: 32 MB of cache, the
rest in a nameless file in $TMPDIR) and run one SQL statement.

  gpurr query rec 'SELECT demangled, count(*) FROM gpu_activity GROUP BY 1 ORDER BY 2 DESC'
  gpurr query --tables          the tables and what they hold
  gpurr query --schema          every column, with its meaning

Every table has a process column, so a recording of several ranks is one
database. BLOBs print as hex (cut to 32 bytes in the table format). The
table format escapes control characters (\n, \x1b) and, on a terminal,
cuts cells to fit its width ("…"; --wide keeps them whole). In json, a
column name the result repeats (SELECT * over a join) is suffixed _2, _3,
...; jsonl, for programs, is a header line naming the columns, then a JSON
array per row, each value of its own type (docs/query.md).

SQL that opens with a "--" comment is SQL, not a flag, when the comment's
first line holds a blank or a line break (before any "="); after a lone --
every argument is SQL: gpurr query rec -- '--x=1
SELECT 1'.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if schema || listTables {
				if len(args) > 1 {
					return usageErrorf("query: --schema and --tables take no SQL")
				}
				return nil
			}
			if len(args) > 2 { // most often SQL that the shell split into words
				return usageErrorf("query: want a recording and one SQL statement, got %s: quote the SQL as one argument (gpurr query REC 'SELECT ...')", info.Count(len(args), "argument"))
			}
			if len(args) != 2 {
				return usageErrorf("query: want a recording and one SQL statement, got %s (gpurr query REC 'SQL', or --schema)", info.Count(len(args), "argument"))
			}
			if strings.TrimSpace(args[1]) == "" {
				return usageErrorf("query: the SQL statement is empty")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat("query", format, queryFormats...); err != nil {
				return err
			}
			out := bufio.NewWriter(cmd.OutOrStdout())
			w := newRowWriter(format, out, terminalWidth(cmd.OutOrStdout(), wide))
			var err error
			switch {
			case listTables:
				err = writeTables(w)
			case schema:
				err = writeSchema(w)
			default:
				err = runQuery(cmd, args[0], args[1], w)
			}
			if err == nil {
				err = w.Flush()
			}
			if ferr := out.Flush(); err == nil {
				err = ferr
			}
			return err
		},
	}
	cmd.Flags().StringVar(&format, "format", "table", "output format: table, csv, json, or jsonl (typed, for programs: docs/query.md)")
	completeValues(cmd, "format", queryFormats...)
	cmd.Flags().BoolVar(&schema, "schema", false, "list every table's columns and what they mean")
	cmd.Flags().BoolVar(&listTables, "tables", false, "list the tables and what they hold")
	cmd.Flags().BoolVar(&wide, "wide", false, "table format on a terminal: cells whole, lines as long as they are, not cut to the terminal's width")
	addStepRangeFlag(cmd)
	return cmd
}

func runQuery(cmd *cobra.Command, path, statement string, w rowWriter) error {
	ctx := cmd.Context()
	set, err := openRecording(cmd, path)
	if err != nil {
		return err
	}
	db, err := query.Load(ctx, set, statement)
	if err != nil {
		return usageErrorf("%v", err)
	}
	defer db.Close()
	for _, warning := range db.Warnings {
		warnf(cmd, "%s", warning)
	}
	if err := db.Query(ctx, statement, w); err != nil {
		return usageErrorf("query: %v", err)
	}
	return nil
}

func writeTables(w rowWriter) error {
	if err := w.Columns([]string{"table", "columns", "description"}); err != nil {
		return err
	}
	for _, t := range query.Schema() {
		if err := w.Row([]any{t.Name, int64(len(t.Columns)), t.Doc}); err != nil {
			return err
		}
	}
	return nil
}

func writeSchema(w rowWriter) error {
	if err := w.Columns([]string{"table", "column", "type", "description"}); err != nil {
		return err
	}
	for _, t := range query.Schema() {
		for _, c := range t.Columns {
			if err := w.Row([]any{t.Name, c.Name, c.TypeText(), c.Doc}); err != nil {
				return err
			}
		}
	}
	return nil
}

// queryFormats are query's --format values.
var queryFormats = []string{"table", "csv", "json", "jsonl"}

// rowWriter is a query.RowWriter for one output format; Flush ends the
// output once every row has been written.
type rowWriter interface {
	query.RowWriter
	Flush() error
}

// newRowWriter writes rows in format to w; a table fitted to fit columns when fit is above 0
// (terminalWidth).
func newRowWriter(format string, w io.Writer, fit int) rowWriter {
	switch format {
	case "csv":
		return &csvRows{w: csv.NewWriter(w)}
	case "json":
		return &jsonRows{w: w}
	case "jsonl":
		return &jsonlRows{w: w}
	default:
		return newTableRows(w, fit)
	}
}

type csvRows struct{ w *csv.Writer }

func (c *csvRows) Columns(names []string) error { return c.w.Write(names) }

func (c *csvRows) Row(values []any) error {
	row := make([]string, len(values))
	for i, v := range values {
		row[i] = scalarText(v)
	}
	return c.w.Write(row)
}

func (c *csvRows) Flush() error {
	c.w.Flush()
	return c.w.Error()
}

// jsonRows writes an array of objects, one per row, keys in column order,
// as the rows arrive.
type jsonRows struct {
	w    io.Writer
	keys [][]byte // each column name, encoded
	rows int
}

func (j *jsonRows) Columns(names []string) error {
	for _, n := range uniqueNames(names) {
		k, err := jsonText(n)
		if err != nil {
			return err
		}
		j.keys = append(j.keys, k)
	}
	return nil
}

// jsonText encodes v as JSON, leaving <, > and & as they are: C++ kernel
// names are full of them.
func jsonText(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func (j *jsonRows) Row(values []any) error {
	var b strings.Builder
	if j.rows == 0 {
		b.WriteString("[\n  {")
	} else {
		b.WriteString(",\n  {")
	}
	for i, v := range values {
		if i > 0 {
			b.WriteString(", ")
		}
		b.Write(j.keys[i])
		b.WriteString(": ")
		val, err := jsonText(jsonValue(v))
		if err != nil {
			return err
		}
		b.Write(val)
	}
	b.WriteString("}")
	j.rows++
	_, err := io.WriteString(j.w, b.String())
	return err
}

func (j *jsonRows) Flush() error {
	end := "\n]\n"
	if j.rows == 0 {
		end = "[]\n"
	}
	_, err := io.WriteString(j.w, end)
	return err
}

// uniqueNames names each column once, for the formats that key values by
// name: a name the result repeats (SELECT * over a join) is suffixed _2,
// _3, ... from its second use on, skipping the names the result has.
func uniqueNames(names []string) []string {
	taken := make(map[string]bool, len(names))
	for _, n := range names {
		taken[n] = true
	}
	out := make([]string, len(names))
	used := make(map[string]bool, len(names))
	for i, n := range names {
		name := n
		for k := 2; used[name]; k++ {
			if name = n + "_" + strconv.Itoa(k); taken[name] {
				name = n // a name of the result's own: try the next suffix
			}
		}
		used[name], taken[name] = true, true
		out[i] = name
	}
	return out
}

// jsonValue maps a SQLite value to what JSON can hold: BLOBs as hex, and
// the infinities SQLite can compute as strings.
func jsonValue(v any) any {
	switch v := v.(type) {
	case []byte:
		return hex.EncodeToString(v)
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return strconv.FormatFloat(v, 'g', -1, 64)
		}
	}
	return v
}

// jsonlRows writes JSON Lines for programs (the Python reader): a header
// object {"columns":[...]} with the names as json writes them, then one
// array per row. A value JSON has no type for is an object naming its type:
// {"blob":HEX}, and {"float":"+Inf"}, "-Inf" or "NaN"; a REAL always has
// a point or an exponent, so that 1.0 does not read back as an integer.
type jsonlRows struct {
	w   io.Writer
	buf []byte
}

func (j *jsonlRows) Columns(names []string) error {
	head, err := jsonText(struct {
		Columns []string `json:"columns"`
	}{uniqueNames(names)})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(j.w, "%s\n", head)
	return err
}

func (j *jsonlRows) Row(values []any) error {
	b := append(j.buf[:0], '[')
	for i, v := range values {
		if i > 0 {
			b = append(b, ',')
		}
		switch v := v.(type) {
		case nil:
			b = append(b, "null"...)
		case int64:
			b = strconv.AppendInt(b, v, 10)
		case float64:
			b = appendTypedFloat(b, v)
		case []byte:
			b = append(b, `{"blob":"`...)
			b = hex.AppendEncode(b, v)
			b = append(b, `"}`...)
		default:
			text, err := jsonText(v)
			if err != nil {
				return err
			}
			b = append(b, text...)
		}
	}
	b = append(b, "]\n"...)
	j.buf = b
	_, err := j.w.Write(b)
	return err
}

func (j *jsonlRows) Flush() error { return nil }

// appendTypedFloat writes v as a JSON number that reads back as a float,
// or, for the values JSON has no number for, as {"float":"+Inf"}.
func appendTypedFloat(b []byte, v float64) []byte {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		b = append(b, `{"float":"`...)
		b = strconv.AppendFloat(b, v, 'g', -1, 64)
		return append(b, `"}`...)
	}
	start := len(b)
	b = strconv.AppendFloat(b, v, 'g', -1, 64)
	if !bytes.ContainsAny(b[start:], ".e") {
		b = append(b, ".0"...)
	}
	return b
}
