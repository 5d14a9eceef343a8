package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/rivo/uniseg"
)

// The table format writes rows as they come once the first tableWidthRows have set the
// columns' widths: a result of millions of rows is never held whole.
func TestTableStreams(t *testing.T) {
	var out bytes.Buffer
	tr := newTableRows(&out, 0)
	if err := tr.Columns([]string{"seq", "kernel"}); err != nil {
		t.Fatal(err)
	}
	const rows = 3 * tableWidthRows
	for i := range rows {
		if err := tr.Row([]any{int64(i), fmt.Sprintf("k%d", i%7)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Count(out.String(), "\n"); got != rows+1 {
		t.Fatalf("before Flush the table holds %d lines of %d rows and a header: rows are held", got, rows)
	}
	if len(tr.held) != 0 {
		t.Errorf("%d rows held after the first %d were written", len(tr.held), tableWidthRows)
	}
	if err := tr.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	// The first rows' seq is 3 wide at most: a later, wider one pushes its line right.
	if lines[0] != "seq  kernel" || lines[1] != "0    k0" || lines[rows] != "2999  k3" {
		t.Errorf("layout:\n%s\n%s\n...\n%s", lines[0], lines[1], lines[rows])
	}
}

// A later cell wider than its column pushes the rest of its line right when cells are whole,
// and is cut when the table is fitted.
func TestTableLaterWideCell(t *testing.T) {
	for _, fit := range []int{0, 80} {
		var out bytes.Buffer
		tr := newTableRows(&out, fit)
		tr.Columns([]string{"name", "n"})
		for i := range tableWidthRows {
			tr.Row([]any{"short", int64(i)})
		}
		tr.Row([]any{"much longer than short", int64(1)})
		tr.Flush()
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		want := "much longer than short  1"
		if fit > 0 {
			want = "much…  1"
		}
		if last := lines[len(lines)-1]; last != want {
			t.Errorf("fit %d: %q, want %q", fit, last, want)
		}
	}
}

// On a terminal the table fits its width: the widest columns are narrowed and their cells
// cut, ending in "…"; --wide (fit 0) keeps every cell whole.
func TestTableFitsTerminal(t *testing.T) {
	long := "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float>>>(at::TensorIteratorBase&, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float>> const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<...>)"
	write := func(fit int) []string {
		var out bytes.Buffer
		tr := newTableRows(&out, fit)
		tr.Columns([]string{"seq", "demangled", "python_line", "grid"})
		tr.Row([]any{int64(1), long, "/home/ada/train.py:25 Model.forward — ünïcode", "1024,1,1"})
		tr.Row([]any{int64(2), "add_kernel", nil, "1,1,1"})
		if err := tr.Flush(); err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	}
	for _, line := range write(72) {
		if w := uniseg.StringWidth(line); w > 72 {
			t.Errorf("a line of %d columns on a terminal of 72: %q", w, line)
		}
	}
	fitted := write(72)
	if !strings.Contains(fitted[1], "void at::native::elementwi…  /home/ada/train.py:25 Mode…  1024,1,1") || !strings.Contains(fitted[2], "NULL") {
		t.Errorf("fitted:\n%s", strings.Join(fitted, "\n"))
	}
	if whole := write(0); !strings.Contains(whole[1], long) {
		t.Errorf("whole cells:\n%s", strings.Join(whole, "\n"))
	}
}

// Text from a recording reaches the table with its control characters escaped: the header
// (a column's name is the SQL's) and every cell.
func TestTableEscapesControls(t *testing.T) {
	var out bytes.Buffer
	tr := newTableRows(&out, 0)
	tr.Columns([]string{"name\x1b[2J"})
	tr.Row([]any{"add\x1b]0;owned\x07\r\ngpurr: FORGED\tx"})
	tr.Flush()
	want := "name\\x1b[2J\nadd\\x1b]0;owned\\a\\r\\ngpurr: FORGED\\tx\n"
	if out.String() != want {
		t.Errorf("table %q, want %q", out.String(), want)
	}
}
