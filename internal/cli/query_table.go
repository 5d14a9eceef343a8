package cli

import (
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/rivo/uniseg"
	"golang.org/x/term"

	"github.com/gpurr/gpurr/internal/termsafe"
)

// maxTableBlob is how many bytes of a BLOB the table format shows.
const maxTableBlob = 32

// tableWidthRows is how many rows the table format holds to size its columns: the rows after
// them are written as they come, in those widths.
const tableWidthRows = 1000

// minTableColumn is the narrowest a column is cut to when the table is fitted to a terminal.
const minTableColumn = 10

// tableRows aligns columns under a header, two spaces apart. The header and the first
// tableWidthRows rows set the columns' widths; later rows are written as they come, so that a
// result of millions of rows is never held. Fitted to a width (a terminal's), the widest
// columns are narrowed until a line fits and cells cut, ending in "…"; otherwise every cell is
// whole, and a later cell wider than its column pushes the rest of its line right.
type tableRows struct {
	w      io.Writer
	fit    int // the width lines must fit in; 0: cells whole
	names  []string
	held   [][]string // the first rows, until the widths are set
	widths []int      // nil until set
	line   strings.Builder
}

// newTableRows writes a table to w, fitted to fit columns when fit is above 0.
func newTableRows(w io.Writer, fit int) *tableRows { return &tableRows{w: w, fit: fit} }

// terminalWidth is the width of the terminal out writes to, 0 when it is not one (a file, a
// pipe) or wide asks for whole cells.
func terminalWidth(out io.Writer, wide bool) int {
	f, ok := out.(*os.File)
	if wide || !ok || !term.IsTerminal(int(f.Fd())) {
		return 0
	}
	if w, _, err := term.GetSize(int(f.Fd())); err == nil {
		return w
	}
	return 0
}

func (t *tableRows) Columns(names []string) error {
	t.names = make([]string, len(names))
	for i, n := range names {
		t.names[i] = termsafe.String(n)
	}
	return nil
}

func (t *tableRows) Row(values []any) error {
	row := make([]string, len(values))
	for i, v := range values {
		row[i] = tableCell(v)
	}
	if t.widths != nil {
		return t.writeLine(row)
	}
	t.held = append(t.held, row)
	if len(t.held) == tableWidthRows {
		return t.start()
	}
	return nil
}

func (t *tableRows) Flush() error {
	if t.widths == nil {
		return t.start()
	}
	return nil
}

// start sets the columns' widths from the header and the rows held, and writes them.
func (t *tableRows) start() error {
	t.widths = make([]int, len(t.names))
	for i, n := range t.names {
		t.widths[i] = cellWidth(n)
	}
	for _, row := range t.held {
		for i, c := range row {
			t.widths[i] = max(t.widths[i], cellWidth(c))
		}
	}
	if t.fit > 0 {
		fitWidths(t.widths, t.fit-2*(len(t.widths)-1))
	}
	err := t.writeLine(t.names)
	for _, row := range t.held {
		if err != nil {
			break
		}
		err = t.writeLine(row)
	}
	t.held = nil
	return err
}

// fitWidths narrows the widest columns, none below minTableColumn, until they add up to
// room at most.
func fitWidths(widths []int, room int) {
	sum := func(limit int) (n int) {
		for _, w := range widths {
			n += min(w, limit)
		}
		return n
	}
	widest := 0
	for _, w := range widths {
		widest = max(widest, w)
	}
	limit := widest
	for limit > minTableColumn && sum(limit) > room {
		limit--
	}
	for i, w := range widths {
		widths[i] = min(w, limit)
	}
}

func (t *tableRows) writeLine(cells []string) error {
	t.line.Reset()
	for i, c := range cells {
		w := cellWidth(c)
		if t.fit > 0 && w > t.widths[i] {
			c, w = cutCell(c, t.widths[i]), t.widths[i]
		}
		t.line.WriteString(c)
		if i < len(cells)-1 {
			t.line.WriteString(strings.Repeat(" ", max(t.widths[i]-w, 0)+2))
		}
	}
	t.line.WriteByte('\n')
	_, err := io.WriteString(t.w, t.line.String())
	return err
}

// cellWidth is how many columns of a terminal s takes.
func cellWidth(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return uniseg.StringWidth(s)
		}
	}
	return len(s)
}

// cutCell cuts s to width columns of a terminal, the last one "…".
func cutCell(s string, width int) string {
	var b strings.Builder
	state, used := -1, 0
	for s != "" {
		var cluster string
		var w int
		cluster, s, w, state = uniseg.FirstGraphemeClusterInString(s, state)
		if used+w > width-1 {
			break
		}
		b.WriteString(cluster)
		used += w
	}
	b.WriteString("…")
	return b.String()
}

// tableCell writes a value on one line, made safe for a terminal: the table has no room for
// a newline or a tab inside a cell, and a recording's text may hold any byte.
func tableCell(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case []byte:
		if len(v) > maxTableBlob {
			return hex.EncodeToString(v[:maxTableBlob]) + fmt.Sprintf("...(%d bytes)", len(v))
		}
		return hex.EncodeToString(v)
	case string:
		return termsafe.String(v)
	default:
		return scalarText(v)
	}
}

// scalarText writes a number (or anything else SQLite returns) as text.
func scalarText(v any) string {
	switch v := v.(type) {
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case string:
		return v
	case []byte:
		return hex.EncodeToString(v)
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}
