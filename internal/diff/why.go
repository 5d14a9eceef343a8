package diff

import (
	"bytes"
	"cmp"
	"fmt"
	"strings"
	"sync"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Explanation says why two runs part ways at a launch, from what their recordings hold: its
// scalar parameters, and the state of each of its regions before it.
type Explanation struct {
	// Kind is the verdict's kind: "parameters" (a scalar parameter differs), "input" (a
	// region's state before the launch differs), "collective" (an NCCL collective: what it
	// wrote depends on the other ranks), "nondeterministic" (the same inputs), "unrecorded" (the
	// same recorded inputs, but a region's state before the launch was not recorded).
	Kind    string      `json:"kind"`
	Verdict string      `json:"verdict"` // the line the report prints
	Params  []ParamDiff `json:"parameters,omitempty"`
	Inputs  []Input     `json:"inputs"` // the first MaxListed regions
	// InputsMore counts the regions past MaxListed, left out of Inputs.
	InputsMore int `json:"inputs_more,omitempty"`
}

// Input is the state of one region of the launch before it, in each run.
type Input struct {
	Region int    `json:"region"`
	State  string `json:"state"` // same, differs or unknown
	A      Before `json:"a"`
	B      Before `json:"b"`
}

// Before is where a run's state of a region before the launch comes from.
type Before struct {
	// From: "snapshot" (the launch's own snapshot before it), "launch" (the state after launch
	// Seq, the last earlier launch that reached the region), "copy" (the state after the copy or
	// memset Writer names, format 1.17), "cleared" (zeros: gpurr cleared it when it was
	// allocated and nothing wrote it since), "digest", or "" (none: Unknown says why).
	From string `json:"from,omitempty"`
	Seq  uint64 `json:"seq,omitempty"`
	Writer
	Step    *uint32 `json:"digest_step,omitempty"` // From "digest": the step whose digest holds it
	Unknown string  `json:"unknown,omitempty"`
	hash    []byte
}

// MaxListed is how many entries of a list of regions a report shows; it counts the rest.
const MaxListed = 8

// Explain says why the runs part ways at the launch of pair, read as sa and sb (ReadLaunch):
// whether a scalar parameter differs, and each region's state before the launch in each run,
// from the launch's snapshot before it where the run has one, else from the state after the
// last earlier launch that reached the region (one more pass over each recording, up to the
// launch, the two at once).
func Explain(a, b *Run, pair Pair, sa, sb *Side) (*Explanation, error) {
	e := &Explanation{Params: ParamDiffs(sa.Kernel, sa.Launch, sb.Launch)}
	// The two recordings are read at once, each on a goroutine of its own.
	var ba, bb []Before
	var errA, errB error
	var wg sync.WaitGroup
	wg.Go(func() { ba, errA = befores(a, sa) })
	bb, errB = befores(b, sb)
	wg.Wait()
	if err := cmp.Or(errA, errB); err != nil {
		return nil, err
	}
	n := max(len(ba), len(bb))
	inputs := make([]Input, n)
	for i := range inputs {
		in := &inputs[i]
		in.Region, in.State = i, "unknown"
		if i < len(ba) {
			in.A = ba[i]
		} else {
			in.A.Unknown = "A's launch has no such region"
		}
		if i < len(bb) {
			in.B = bb[i]
		} else {
			in.B.Unknown = "B's launch has no such region"
		}
		switch {
		case in.A.Unknown != "" || in.B.Unknown != "":
		case bytes.Equal(in.A.hash, in.B.hash):
			in.State = "same"
		default:
			in.State = "differs"
		}
	}
	e.Kind, e.Verdict = verdict(e.Params, inputs, a.KernelName(a.Launches[pair.A]))
	e.Inputs, e.InputsMore = inputs[:min(n, MaxListed)], max(0, n-MaxListed)
	return e, nil
}

// verdict is the explanation's kind and line: the first cause found, in the order a parameter,
// a collective, an input, then the same inputs, known or as far as recorded.
//
// Only scalar parameters decide: a struct's words that differ may be bytes its kernel never
// reads (PyTorch's TensorInfo holds 25 sizes and strides and uses as many as the tensor has
// dimensions, the rest left as they were), so they are listed but do not make the verdict.
func verdict(params []ParamDiff, inputs []Input, kernel string) (kind, line string) {
	var scalars []ParamDiff
	for _, p := range params {
		if p.Type != "struct" {
			scalars = append(scalars, p)
		}
	}
	if len(scalars) > 0 {
		line = "inputs differ: " + scalars[0].Text()
		if len(scalars) > 1 {
			line += fmt.Sprintf(" (and %d more)", len(scalars)-1)
		}
		return "parameters", line
	}
	// A collective's regions include the library's own buffers, which differ from run to run
	// by design: that it is one says more than that they differ.
	if IsCollective(kernel) {
		return "collective", "a collective: what it wrote depends on the other ranks' data"
	}
	for _, in := range inputs {
		if in.State == "differs" {
			return "input", fmt.Sprintf("inputs differ: region %d's state before the launch differs (%s)", in.Region, in.A.writerText())
		}
	}
	for _, in := range inputs {
		if in.State == "unknown" {
			why := in.A.Unknown
			if why == "" {
				why = "in B: " + in.B.Unknown
			} else if in.B.Unknown != "" && in.B.Unknown != in.A.Unknown {
				why = "in A: " + why
			}
			return "unrecorded", fmt.Sprintf("same recorded inputs, but region %d's state before the launch was not recorded (%s): the difference may come from there", in.Region, why)
		}
	}
	return "nondeterministic", "same inputs, different outputs: the kernel is nondeterministic (e.g. float atomics)"
}

// writerText names the launch that last wrote a region.
func (b Before) writerText() string {
	if t := b.Writer.Text(); strings.HasPrefix(t, "written") {
		return "last " + t
	}
	return b.Writer.Text()
}

// Text is a region's state before the launch, for the report: "same", "differs (last written
// by launch 3, fill; in B by launch 4, fill)", "unknown: ...".
func (in Input) Text() string {
	switch in.State {
	case "same":
		if in.A.Step != nil && in.B.Step != nil {
			return fmt.Sprintf("the same in both runs (as step %d's digest holds it; no launch since reached it)", *in.A.Step)
		}
		return "the same in both runs"
	case "differs":
		text := "differs (" + in.A.writerText()
		if in.B.Writer.Seq != in.A.Writer.Seq {
			text += "; in B " + in.B.writerText()
		}
		return text + ")"
	}
	switch {
	case in.A.Unknown != "" && (in.B.Unknown == "" || in.B.Unknown == in.A.Unknown):
		return "not recorded: " + in.A.Unknown
	case in.A.Unknown == "":
		return "not recorded in B: " + in.B.Unknown
	}
	return "not recorded: in A " + in.A.Unknown + "; in B " + in.B.Unknown
}

// befores is each region's state before the launch of s, in run r: from its snapshot before it
// where it has one, else from the last earlier launch that reached the region (PriorStates),
// which also names the launch that last wrote it.
func befores(r *Run, s *Side) ([]Before, error) {
	regions := s.Launch.GetRegions()
	out := make([]Before, len(regions))
	snap := s.Before.GetRegions()
	if s.Before.GetLost() {
		snap = nil
	}
	var seqs []uint64
	for _, l := range r.Launches {
		if l.Seq >= s.Launch.GetSeq() {
			break
		}
		seqs = append(seqs, l.Seq)
	}
	prior, err := PriorStates(r.Process, seqs, s.Launch)
	if err != nil {
		return nil, err
	}
	// A region no earlier launch reached may be in a step digest taken since it was last
	// written (--hash-steps: the launches before the steps hashed record no regions).
	var digested map[uint64]DigestState
	for i, p := range prior {
		if p.State == nil && p.Seq == 0 && regions[i].GetAllocationId() != 0 && digested == nil {
			if digested, _, err = LastDigest(r.Process, s.Launch.GetSeq()); err != nil {
				return nil, err
			}
		}
	}
	for i := range out {
		p := prior[i]
		out[i] = Before{Writer: WriterOf(p)}
		switch {
		case i < len(snap) && !snap[i].GetUnknown() && len(snap[i].GetHash()) > 0:
			out[i].From, out[i].hash = "snapshot", snap[i].GetHash()
		case p.State != nil && staleCarry(r, regions[i], p, s.Launch.GetSeq()) != "":
			out[i].Seq, out[i].Unknown = p.Seq, staleCarry(r, regions[i], p, s.Launch.GetSeq())
		case p.State != nil:
			out[i].From, out[i].Seq, out[i].hash = priorFrom(p), p.Seq, p.State.GetHash()
		case p.Seq == 0 && digested[regions[i].GetAllocationId()].State != nil:
			d := digested[regions[i].GetAllocationId()]
			out[i].From, out[i].Seq, out[i].Step, out[i].hash = "digest", d.Seq, &d.Step, d.State.GetHash()
		default:
			out[i].Seq, out[i].Unknown = p.Seq, p.Unknown
		}
	}
	return out, nil
}

// priorFrom is where a prior state comes from, as Before.From says it.
func priorFrom(p Prior) string {
	switch {
	case p.Cleared:
		return "cleared"
	case p.Copy != "":
		return "copy"
	}
	return "launch"
}

// staleCarry says why a region's state before launch seq, carried by a learned write set
// (format 1.11), may be stale: an audit of r found the region written unseen in launches that
// may come before seq; "" when it is not in doubt.
func staleCarry(r *Run, region *pb.Region, p Prior, seq uint64) string {
	if p.State.GetCarried() != pb.RegionState_LEARNED_READ_ONLY {
		return ""
	}
	from := p.State.GetCarriedFrom()
	for _, m := range r.Misses {
		if m.GetAllocationId() == region.GetAllocationId() && m.GetSinceSeq()+1 < seq && m.GetAuditSeq() > from {
			return fmt.Sprintf("launch %d carried it from launch %d by a learned write set, and an audit at launch %d found it written unseen since launch %d",
				p.Seq, from, m.GetAuditSeq(), m.GetSinceSeq())
		}
	}
	return ""
}

// IsCollective reports whether a kernel is an NCCL collective (ncclDevKernel_AllReduce_...,
// ncclKernel_..., or a demangled name whose function or namespace names nccl): what it writes
// depends on the data of the other ranks.
func IsCollective(kernel string) bool {
	name := strings.TrimPrefix(kernel, "void ")
	if i := strings.IndexAny(name, "(<"); i >= 0 {
		name = name[:i] // the arguments may name NCCL's types in any kernel
	}
	return strings.Contains(strings.ToLower(name), "nccl")
}

// ShortKernel is a kernel's name without its arguments: ncclDevKernel_AllReduce_Sum_f32_RING_LL.
func ShortKernel(kernel string) string {
	if i := strings.IndexByte(kernel, '('); i > 0 {
		return kernel[:i]
	}
	return kernel
}
