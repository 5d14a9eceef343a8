package diff

import (
	"fmt"
	"strings"
	"testing"
)

// A warning about processes that pair with none, or the error when none pairs, names a few
// and counts the rest: a job of a thousand ranks made a line of 90 KB. Pairs that ran other
// programs alike get one warning, not one each.
func TestPairProcessesNamesAFew(t *testing.T) {
	var a []Proc
	for i := range int32(1000) {
		r := i
		a = append(a, Proc{Name: fmt.Sprintf("n%d", i), Rank: &r})
	}
	pairs, warnings := PairProcesses("A", a, "B", a[:10])
	if len(pairs) != 10 || len(warnings) != 1 ||
		warnings[0] != "A: 990 processes with no counterpart in B, not compared: n10 (rank 10), n11 (rank 11), n12 (rank 12), n13 (rank 13), n14 (rank 14), n15 (rank 15), n16 (rank 16), n17 (rank 17), and 982 more" {
		t.Errorf("%d pairs, warnings %q", len(pairs), warnings)
	}
	// A thousand ranks that ran another program than their pairs: one line, not a thousand.
	var b []Proc
	for i := range a {
		a[i].Argv = []string{"python", "train.py"}
		b = append(b, Proc{Name: a[i].Name, Rank: a[i].Rank, Argv: []string{"python", "eval.py"}})
	}
	if _, warnings := PairProcesses("A", a, "B", b); len(warnings) != 1 ||
		warnings[0] != `n0 ran "python train.py", n0 ran "python eval.py": different programs? aligning what can be aligned (and 999 more pairs alike)` {
		t.Errorf("other programs: warnings %q", warnings)
	}
	// Nothing pairs: the one-line error names a few of each side too, not a thousand.
	err := &NoPairsError{WhereA: "A", A: a, WhereB: "B", B: []Proc{{Name: "solo"}}}
	if want := "no processes to compare: A has n0 (rank 0), n1 (rank 1), n2 (rank 2), n3 (rank 3), n4 (rank 4), n5 (rank 5), n6 (rank 6), n7 (rank 7), and 992 more; " +
		"B has solo (no rank) (processes pair by torchrun rank, those without one in order)"; err.Error() != want {
		t.Errorf("no pairs: %v; want %q", err, want)
	}
}

// program is what a command line runs: the same for runs of one program with other
// arguments, another for another script, module or executable.
func TestProgram(t *testing.T) {
	same := [][2]string{
		{"python train.py --seed 1", "python train.py --seed 2"},
		{"/usr/bin/python3.12 -u -W ignore train.py", "/usr/bin/python3.12 -u -W ignore train.py --lr 3"},
		{"python -m torch.distributed.run a", "python -m torch.distributed.run b"},
		{"bin/gpurr demo --workload --variant a", "bin/gpurr demo --workload --variant b"},
	}
	for _, c := range same {
		if a, b := program(strings.Fields(c[0])), program(strings.Fields(c[1])); a != b {
			t.Errorf("%q and %q run different programs (%q, %q); want the same", c[0], c[1], a, b)
		}
	}
	differ := [][2]string{
		{"python train.py", "python eval.py"},
		{"python -m a", "python -m b"},
		{"./a.out", "./b.out"},
	}
	for _, c := range differ {
		if a, b := program(strings.Fields(c[0])), program(strings.Fields(c[1])); a == b {
			t.Errorf("%q and %q run the same program %q; want different", c[0], c[1], a)
		}
	}
}
