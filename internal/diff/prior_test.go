package diff

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording/memhash"
)

// priorOf records s and returns the states before its launch seq of that launch's regions.
func priorOf(t *testing.T, s testrec.Script, seq uint64) []Prior {
	t.Helper()
	run, err := Scan(testrec.OpenScript(t, s))
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, l := range run.Launches {
		seqs = append(seqs, l.Seq)
	}
	side, err := ReadLaunch(run.Process, seq)
	if err != nil {
		t.Fatal(err)
	}
	prior, err := PriorStates(run.Process, seqs, side.Launch)
	if err != nil {
		t.Fatal(err)
	}
	return prior
}

// regionHash is the gpurr-h128 of a 4 KiB region holding data from its first byte.
func regionHash(data []byte) []byte {
	b := make([]byte, 4096)
	copy(b, data)
	chunk := memhash.Chunk(b).Bytes()
	h := memhash.RegionOfEncoded(chunk[:], 4096).Bytes()
	return h[:]
}

var (
	kFill = testrec.ScriptKernel{Name: "fill", Params: []uint32{8}}
	kUse  = testrec.ScriptKernel{Name: "use", Params: []uint32{8, 8}}
)

// A region's state before a launch is the latest write of it among the launches and the copies
// between them (format 1.17): a copy after the last launch that reached it, by the copy's
// state; a launch after a copy, by the launch's; a cleared allocation nothing wrote since, by
// zeros. A copy whose state was lost, or a call with no memory state after the copy, makes it
// unknown.
func TestPriorStatesTakeCopies(t *testing.T) {
	script := func(calls ...testrec.Call) testrec.Script {
		return testrec.Script{Host: "box", Pid: 1, Mode: "hash", Kernels: []testrec.ScriptKernel{kFill, kUse},
			Allocs: []uint64{4096, 4096}, Cleared: map[int]bool{1: true}, Calls: calls}
	}
	fill := testrec.Call{Kernel: 0, Args: []testrec.Arg{testrec.Ptr(0)}, Writes: map[int][]byte{0: {1}}}
	copyIn := testrec.Call{Copied: true, CopyLine: 12, Writes: map[int][]byte{0: {2}}}
	use := testrec.Call{Kernel: 1, Args: []testrec.Arg{testrec.Ptr(0), testrec.Ptr(1)}, Writes: map[int][]byte{1: {3}}}
	setIn := copyIn
	setIn.CopyAPI, setIn.CopyLine, setIn.Writes = "cuMemsetD8Async", 14, map[int][]byte{0: {4}}

	p := priorOf(t, script(fill, copyIn, use), 2)
	x, y := p[0], p[1]
	if x.State == nil || !bytes.Equal(x.State.GetHash(), regionHash([]byte{2})) || x.Seq != 1 || x.Writer != 0 ||
		WriterOf(x).Text() != "written by a host-to-device copy at train.py:12 <module>" {
		t.Errorf("x after fill and a copy: %+v, %q", x, WriterOf(x).Text())
	}
	if !y.Cleared || y.State == nil || !bytes.Equal(y.State.GetHash(), regionHash(nil)) || !y.Stored || y.Seq != 0 ||
		WriterOf(y).Text() != "nothing wrote it since gpurr cleared it when it was allocated" {
		t.Errorf("y, cleared and not written: %+v, %q", y, WriterOf(y).Text())
	}

	// Two copies after the same launch call count in call order; a launch after them is the
	// latest.
	p = priorOf(t, script(fill, copyIn, setIn, use), 2)
	if w := WriterOf(p[0]).Text(); !bytes.Equal(p[0].State.GetHash(), regionHash([]byte{4})) || w != "written by a memset at train.py:14 <module>" {
		t.Errorf("after a copy and a memset: %q", w)
	}
	p = priorOf(t, script(copyIn, fill, use), 2)
	if w := WriterOf(p[0]).Text(); !bytes.Equal(p[0].State.GetHash(), regionHash([]byte{1})) || w != "written by launch 1, fill" {
		t.Errorf("a copy, then fill: %q", w)
	}

	lost := copyIn
	lost.CopyLost = true
	p = priorOf(t, script(fill, lost, use), 2)
	if p[0].State != nil || p[0].Unknown != "the host-to-device copy at train.py:12 <module> that last wrote it lost its state (memory capture had stopped)" ||
		WriterOf(p[0]).Text() != "last written by a host-to-device copy at train.py:12 <module>, whose state was lost" {
		t.Errorf("a lost copy state: %+v, %q", p[0], WriterOf(p[0]).Text())
	}

	graph := testrec.Call{Graph: true, Writes: map[int][]byte{0: {5}}}
	p = priorOf(t, script(fill, copyIn, graph, use), 3)
	want := "after the host-to-device copy at train.py:12 <module>, which last wrote it, ran call 2, with no memory state recorded"
	if p[0].State != nil || !strings.HasPrefix(p[0].Unknown, want) {
		t.Errorf("a graph replay after the copy: %q; want %q...", p[0].Unknown, want)
	}
	if p[1].State != nil || !strings.HasPrefix(p[1].Unknown, "after its allocation, which gpurr cleared, ran call 2") {
		t.Errorf("y, cleared before a graph replay, which may have written it: %+v", p[1])
	}
	p = priorOf(t, script(fill, graph, copyIn, use), 3)
	if p[0].State == nil || !bytes.Equal(p[0].State.GetHash(), regionHash([]byte{2})) {
		t.Errorf("a copy after a graph replay: %+v; want the copy's state", p[0])
	}
}
