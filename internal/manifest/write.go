package manifest

import (
	"bufio"
	"cmp"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"

	"github.com/gpurr/gpurr/internal/diff"
	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/chunkstore"
	"github.com/gpurr/gpurr/recording/memhash"
	"github.com/gpurr/gpurr/recording/memview"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Summary says what a manifest holds.
type Summary struct {
	Processes int
	Launches  int // launches listed
	States    int // with the hashes of their memory after them
	Snapshots int // of those, with the bytes stored in the recording
	// Warnings says, one line each, which processes' recordings ended short or lost or failed
	// to record something (recording.Shortfall, recording.LossWarning): a manifest made from
	// them promises nothing for what they lack; and whose chunk store cannot give the bytes
	// its snapshots name (chunkstore.Recovery.Problems), which verify shows where they differ.
	Warnings []string
	// Unread holds the processes left out because their recording cannot be read through (a
	// damaged frame), one error each: the manifest promises nothing for them.
	Unread []*recording.ProcessError
}

// NoMemoryError is the error for a process recorded without memory capture:
// it has no hashes to put in a manifest or to verify.
type NoMemoryError struct{ Dir string }

func (e *NoMemoryError) Error() string {
	return fmt.Sprintf("%s was recorded without memory capture: record with --memory hash (or --memory snapshot) for per-launch hashes", e.Dir)
}

// Write writes the manifest of every process of set to w. It reads each
// process's recording twice: once for its launch numbers (8 bytes a launch
// are held) and kernels, then its launches in launch order with their
// memory states (recording.Process.Ordered), writing each as it comes. A
// process whose recording cannot be read through is left out
// (Summary.Unread); when every one is, Write fails with the first's error.
func Write(w io.Writer, set *recording.Set) (Summary, error) {
	var sum Summary
	dir, err := filepath.Abs(set.Dir)
	if err != nil {
		return sum, err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	head, err := json.Marshal(Header{Format: Format, Version: Version, Hash: Hash, Recording: dir})
	if err != nil {
		return sum, err
	}
	bw.Write(head[:len(head)-1])
	bw.WriteString(`,"processes":[`)
	for _, p := range set.Processes {
		if p.Info.GetMemory().GetMode() == "" {
			return sum, &NoMemoryError{Dir: p.Dir}
		}
		if err := writeProcess(bw, p, &sum); err != nil {
			return sum, err
		}
	}
	if sum.Processes == 0 && len(sum.Unread) > 0 {
		return sum, sum.Unread[0] // nothing left to promise
	}
	bw.WriteString("\n]}\n")
	return sum, bw.Flush()
}

// firstPass reads what a process's header needs and the launches to list:
// those that ran (diff.Scan's launches: not those of XLA's compilation), by seq. The launches' streams are
// written numbered in order of first use, and the header maps them to the
// numbers diff aligns them by (Process.StreamUnits).
//
// warnings are its Shortfall and LossWarning, when it has them.
func firstPass(p *recording.Process) (proc Process, seqs []uint64, identity map[uint64]uint64, lib *diff.LibraryMemory, warnings []string, err error) {
	proc = Process{Name: p.Name, Rank: p.Info.Rank, Argv: append([]string{}, p.Info.GetArgv()...), Memory: p.Info.GetMemory().GetMode(),
		ChunkBytes: cmp.Or(p.Info.GetMemory().GetChunkBytes(), memhash.ChunkSize), WriteSets: p.Info.GetMemory().GetWriteSets(), Kernels: []Kernel{}}
	identity = map[uint64]uint64{} // Kernel.id to identity
	names := map[uint64]string{}   // identity to name
	used := map[uint64]bool{}      // Kernel.ids launched
	threads := diff.NewThreads(p.Info.GetPid())
	lib = diff.NewLibraryMemory()
	stats := &pb.Stats{}
	links := recording.NewLinks() // for Compile only
	res, err := p.Scan(func(b *pb.Batch) error {
		stats = cmp.Or(b.Stats, stats)
		links.Add(b, false)
		for _, a := range b.Allocations {
			lib.Add(a)
		}
		for _, k := range b.Kernels {
			identity[k.GetId()] = k.GetIdentity()
			names[k.GetIdentity()] = cmp.Or(k.GetDemangled(), recording.Demangle(k.GetName()))
		}
		for _, l := range b.Launches {
			if !l.GetCaptured() && !links.Compile(l) {
				seqs = append(seqs, l.GetSeq())
				used[l.GetKernelId()] = true
				threads.Add(l)
			}
		}
		if b.End != nil {
			proc.Complete = true
		}
		return nil
	})
	if err != nil {
		return proc, nil, nil, nil, nil, err
	}
	for _, w := range []string{recording.Shortfall(p.Name, res.Truncated, proc.Complete), recording.LossWarning(p.Name, stats)} {
		if w != "" {
			warnings = append(warnings, w+"; verify cannot check what is missing")
		}
	}
	proc.Complete = proc.Complete && !res.Truncated
	units, _ := threads.Units()
	proc.StreamUnits = diff.FirstUse(units)
	slices.Sort(seqs)
	listed := map[uint64]bool{}
	for id := range used {
		ident, ok := identity[id]
		if !ok {
			names[0] = fmt.Sprintf("kernel %d (not in the recording)", id)
		}
		if !listed[ident] {
			listed[ident] = true
			proc.Kernels = append(proc.Kernels, Kernel{Identity: identityText(ident), Name: names[ident]})
		}
	}
	slices.SortFunc(proc.Kernels, func(a, b Kernel) int { return cmp.Compare(a.Identity, b.Identity) })
	return proc, seqs, identity, lib, warnings, nil
}

func writeProcess(bw *bufio.Writer, p *recording.Process, sum *Summary) error {
	proc, seqs, identity, lib, warnings, err := firstPass(p)
	if err != nil {
		// The first pass reads the whole file before anything of p is written: p is left out.
		sum.Unread = append(sum.Unread, &recording.ProcessError{Name: p.Name, Err: err})
		return nil
	}
	sum.Warnings = append(sum.Warnings, warnings...)
	snapshots := sum.Snapshots
	head, err := json.Marshal(proc)
	if err != nil {
		return err
	}
	if sum.Processes > 0 {
		bw.WriteString(",")
	}
	bw.WriteString("\n")
	bw.Write(head[:len(head)-1])
	bw.WriteString(`,"launches":[`)
	streams := diff.Streams{}
	written := 0
	_, err = p.Ordered(seqs, func(r *recording.LaunchRecord) error {
		l := r.Launch
		line := Launch{Seq: l.GetSeq(), Stream: streams.Number(l.GetStream()), Identity: identityText(identity[l.GetKernelId()])}
		if s := r.After; s != nil && !s.GetLost() {
			line.After = &State{Snapshot: memview.HasBytes(s), Regions: make([]Region, len(s.GetRegions()))}
			for ri, rs := range s.GetRegions() {
				reg := &line.After.Regions[ri]
				if ri < len(l.GetRegions()) {
					reg.Size = l.GetRegions()[ri].GetSize()
					reg.Owner = lib.Owner(l.GetRegions()[ri])
				}
				if rs.GetUnknown() { // carried from a lost state: no hashes to promise
					reg.Unknown, reg.Chunks = true, []string{}
					continue
				}
				if len(rs.GetHash()) != recording.HashBytes {
					return fmt.Errorf("%s: launch %d region %d: hash of %d bytes, want %d (a damaged record)", p.Name, l.GetSeq(), ri, len(rs.GetHash()), recording.HashBytes)
				}
				reg.Hash = recording.HashText(rs.GetHash())
				hashes := recording.ChunkHashes(rs)
				reg.Chunks = make([]string, len(hashes))
				for k, h := range hashes {
					reg.Chunks[k] = hex.EncodeToString(h)
				}
			}
			sum.States++
			if memview.HasBytes(s) {
				sum.Snapshots++
			}
		}
		b, err := json.Marshal(line)
		if err != nil {
			return err
		}
		if written > 0 {
			bw.WriteString(",")
		}
		bw.WriteString("\n")
		bw.Write(b)
		written++
		sum.Launches++
		return nil
	})
	if err != nil {
		return err
	}
	sum.Processes++
	bw.WriteString("\n]}")
	if sum.Snapshots > snapshots {
		sum.Warnings = append(sum.Warnings, storeProblems(p, sum.Snapshots-snapshots)...)
	}
	return nil
}

// storeProblems says, one line each, why the chunk store of p, whose n snapshots name chunks
// in it, cannot give some of their bytes.
func storeProblems(p *recording.Process, n int) []string {
	const consequence = "; verify cannot show those bytes where a run differs"
	store, err := chunkstore.Open(p.Dir)
	if errors.Is(err, chunkstore.ErrNoChunks) {
		return []string{fmt.Sprintf("%s: missing, and %d snapshots hold bytes in it%s", filepath.Join(p.Dir, chunkstore.DirName), n, consequence)}
	}
	if err != nil {
		return []string{err.Error() + consequence}
	}
	defer store.Close()
	var out []string
	for _, problem := range store.Recovery().Problems() {
		out = append(out, problem+consequence)
	}
	return out
}
