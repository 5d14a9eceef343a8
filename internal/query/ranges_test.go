package query

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
)

// Ranges nested thousands deep cost memory and rows in proportion to their count: paths
// written whole would hold n²/2 names (2.5 GB for 20000 levels, 150 MB for these 5000).
func TestNestedRangesBounded(t *testing.T) {
	const n = 5000
	set := testrec.OpenBatches(t, testrec.NestedRanges(n)...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	db, err := Load(context.Background(), set)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(n*8<<10); got > limit {
		t.Errorf("loading %d nested ranges allocated %d bytes, want at most %d", n, got, limit)
	}
	for _, q := range []string{"SELECT sum(length(path)) FROM ranges", "SELECT sum(length(range)) FROM launches"} {
		if got, limit := one(t, db, q), int64(n*200); got.(int64) > limit {
			t.Errorf("%s: %d, want at most %d", q, got, limit)
		}
	}
	if got := one(t, db, "SELECT max(depth) FROM ranges"); got != int64(n-1) {
		t.Errorf("deepest range: %v, want %d", got, n-1)
	}
	want := "level 1 / level 2 / level 3 / level 4 / … 4988 more … / level 4993 / level 4994 / level 4995 / level 4996 / level 4997 / level 4998 / level 4999 / level 5000"
	if got := one(t, db, "SELECT range FROM launches WHERE seq = 5000"); got != want {
		t.Errorf("innermost launch's range:\n%v\nwant\n%s", got, want)
	}
	if !slices.ContainsFunc(db.Warnings, func(w string) bool { return strings.Contains(w, "NVTX ranges nest 5000 deep") }) {
		t.Errorf("no warning of shortened paths: %q", db.Warnings)
	}
}
