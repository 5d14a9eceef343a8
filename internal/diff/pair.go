package diff

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/gpurr/gpurr/internal/info"
	"github.com/gpurr/gpurr/recording"
)

// Proc is what pairing needs of a process, of a recording or of a manifest.
type Proc struct {
	Name string
	Rank *int32 // torchrun's RANK, nil without one
	Argv []string
}

// Procs is what pairing needs of each process of set, in its order.
func Procs(set *recording.Set) []Proc {
	out := make([]Proc, len(set.Processes))
	for i, p := range set.Processes {
		out[i] = Proc{Name: p.Name, Rank: p.Info.Rank, Argv: p.Info.GetArgv()}
	}
	return out
}

// PairProcesses matches the processes of two recordings (or a recording
// and a manifest), as indices: rank with the same rank, and the processes
// without a rank in order among themselves; processes that share a rank (a
// child that inherited its parent's RANK) pair in order within it. It warns
// when the command lines differ, and names each side's processes that pair
// with none: they are not compared.
func PairProcesses(whereA string, a []Proc, whereB string, b []Proc) (pairs [][2]int, warnings []string) {
	byRank := map[int32][]int{}
	var unrankedB []int
	for j, q := range b {
		if q.Rank != nil {
			byRank[*q.Rank] = append(byRank[*q.Rank], j)
		} else {
			unrankedB = append(unrankedB, j)
		}
	}
	pairedB := make([]bool, len(b))
	// Programs of A and B that differ, in the order first met; the warning of the first pair
	// that ran them, and how many pairs did.
	var programs [][2]string
	firstWarning, pairsAlike := map[[2]string]string{}, map[[2]string]int{}
	var onlyA []Proc
	for i, p := range a {
		queue := unrankedB
		if p.Rank != nil {
			queue = byRank[*p.Rank]
		}
		if len(queue) == 0 {
			onlyA = append(onlyA, p)
			continue
		}
		j := queue[0]
		if p.Rank != nil {
			byRank[*p.Rank] = queue[1:]
		} else {
			unrankedB = queue[1:]
		}
		pairedB[j] = true
		q := b[j]
		if progA, progB := program(p.Argv), program(q.Argv); progA != progB {
			key := [2]string{progA, progB}
			if _, ok := firstWarning[key]; !ok {
				programs = append(programs, key)
				firstWarning[key] = fmt.Sprintf("%s ran %q, %s ran %q: different programs? aligning what can be aligned",
					p.Name, strings.Join(p.Argv, " "), q.Name, strings.Join(q.Argv, " "))
			}
			pairsAlike[key]++
		}
		pairs = append(pairs, [2]int{i, j})
	}
	// Every rank of a job runs the same program: one line for all pairs that differ alike.
	for _, key := range programs {
		w := firstWarning[key]
		if n := pairsAlike[key] - 1; n > 0 {
			w += fmt.Sprintf(" (and %s alike)", info.Count(n, "more pair"))
		}
		warnings = append(warnings, w)
	}
	var onlyB []Proc
	for j, q := range b {
		if !pairedB[j] {
			onlyB = append(onlyB, q)
		}
	}
	for _, side := range []struct {
		where, other string
		procs        []Proc
	}{{whereA, whereB, onlyA}, {whereB, whereA, onlyB}} {
		if len(side.procs) > 0 {
			warnings = append(warnings, fmt.Sprintf("%s: %s with no counterpart in %s, not compared: %s",
				side.where, info.Count(len(side.procs), "process"), side.other, procList(side.procs)))
		}
	}
	return pairs, warnings
}

// procList names processes with their ranks, a few of them (info.Few).
func procList(procs []Proc) string {
	parts := make([]string, len(procs))
	for i, p := range procs {
		rank := "no rank"
		if p.Rank != nil {
			rank = fmt.Sprintf("rank %d", *p.Rank)
		}
		parts[i] = fmt.Sprintf("%s (%s)", p.Name, rank)
	}
	return info.Few(parts, ", ")
}

// NoPairsError is the error of a comparison where no process of one side pairs with one of
// the other: it names each side's processes and their ranks, and how processes pair.
type NoPairsError struct {
	WhereA, WhereB string
	A, B           []Proc
}

func (e *NoPairsError) Error() string {
	list := func(procs []Proc) string {
		if len(procs) == 0 {
			return "no process that made kernel launches"
		}
		return procList(procs)
	}
	return fmt.Sprintf("no processes to compare: %s has %s; %s has %s (processes pair by torchrun rank, those without one in order)",
		e.WhereA, list(e.A), e.WhereB, list(e.B))
}

// program is what a command line runs, without the arguments it runs it with: the executable,
// and for a Python interpreter the script or module. Runs of one program with other arguments
// (a seed, a flag) are what diff is for; different programs deserve a warning.
func program(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	exe := strings.TrimRight(filepath.Base(argv[0]), "0123456789.")
	if exe != "python" {
		return argv[0]
	}
	for i := 1; i < len(argv); i++ {
		switch a := argv[i]; {
		case a == "-m" || a == "-c":
			if i+1 < len(argv) {
				return argv[0] + " " + a + " " + argv[i+1]
			}
		case a == "-W" || a == "-X": // options with a value
			i++
		case !strings.HasPrefix(a, "-"):
			return argv[0] + " " + a
		}
	}
	return argv[0]
}
