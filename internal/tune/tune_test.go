package tune

import (
	"bytes"
	"encoding/csv"
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/gpurr/gpurr/internal/cuda"
)

func TestSpaceAndSample(t *testing.T) {
	rec := cuda.LaunchConfig{Grid: cuda.Dim3{X: 132, Y: 1, Z: 1}, Block: cuda.Dim3{X: 256, Y: 1, Z: 1}}
	blocks := []cuda.Dim3{{X: 128, Y: 1, Z: 1}, {X: 256, Y: 1, Z: 1}, {X: 512, Y: 1, Z: 1}}
	grids := []cuda.Dim3{{X: 132, Y: 1, Z: 1}, {X: 264, Y: 1, Z: 1}}
	space := Space(rec, grids, blocks)
	if len(space) != 6 || space[0] != rec {
		t.Fatalf("space has %d shapes, first %v; want 6 with the recorded one first", len(space), space[0])
	}
	if got := Space(rec, nil, blocks); len(got) != 3 || got[1].Grid != rec.Grid {
		t.Errorf("blocks only: %v", got)
	}
	s1, s2 := Sample(space, 3, 7), Sample(space, 3, 7)
	if len(s1) != 4 || s1[0] != rec {
		t.Fatalf("sample: %v", s1)
	}
	for i := range s1 {
		if s1[i] != s2[i] {
			t.Error("the same seed gave another sample")
		}
	}
	if got := Sample(space, 10, 1); len(got) != len(space) {
		t.Errorf("sample larger than the space: %d shapes", len(got))
	}
	if got := Space(rec, grids, append(blocks, blocks...)); len(got) != len(space) {
		t.Errorf("blocks given twice: %d shapes, want %d", len(got), len(space))
	}
}

// A long list of sizes is the space in moments, as it is before any GPU work: each new shape
// was looked for in the list so far, which took 11 s for 300 grids by 300 blocks, and hours
// for 3000 by 3000, all before tune said that there was no GPU.
func TestSpaceOfLongLists(t *testing.T) {
	var dims []cuda.Dim3
	for x := range uint32(1000) {
		dims = append(dims, cuda.Dim3{X: x + 1, Y: 1, Z: 1})
	}
	done := make(chan int, 1)
	go func() { done <- len(Space(cuda.LaunchConfig{Grid: dims[0], Block: dims[0]}, dims, dims)) }()
	select {
	case n := <-done:
		if n != 1000*1000 {
			t.Errorf("%d shapes, want %d", n, 1000*1000)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("1000 grids by 1000 blocks took more than 20 s")
	}
}

func TestReports(t *testing.T) {
	rec := cuda.LaunchConfig{Grid: cuda.Dim3{X: 132, Y: 1, Z: 1}, Block: cuda.Dim3{X: 256, Y: 1, Z: 1}}
	fast, bad := rec, rec
	fast.Block.X, bad.Block.X = 512, 2048
	trials := []Trial{
		{Config: rec, Recorded: true, Median: 20 * time.Microsecond, Verified: true},
		{Config: fast, Median: 12 * time.Microsecond, Verified: true},
		{Config: bad, Why: "cuLaunchKernel: CUDA_ERROR_INVALID_VALUE"},
	}
	best, ok := Best(trials)
	if !ok || best.Config != fast {
		t.Fatalf("best = %v, %v; want block 512", best.Label(), ok)
	}
	var buf bytes.Buffer
	if err := WriteCSV(&buf, trials); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil || len(rows) != 4 || rows[2][7] != "12.000" || rows[3][9] != "false" || !strings.Contains(rows[3][11], "INVALID_VALUE") {
		t.Errorf("csv rows %q, err %v", rows, err)
	}
	buf.Reset()
	if err := WriteSVG(&buf, "tune <kernel>", trials); err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(buf.Bytes(), new(struct{})); err != nil {
		t.Errorf("SVG is not well-formed XML: %v", err)
	}
	for _, want := range []string{"fastest verified", "(recorded)", "rejected: cuLaunchKernel", "tune &lt;kernel&gt;"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
}
