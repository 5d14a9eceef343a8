package replay

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"

	"github.com/gpurr/gpurr/internal/info"
	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/memview"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Source is a process recording opened for replay: its records indexed and
// its chunk store open. Close releases the store.
type Source struct {
	Proc  *recording.Process
	Data  *recording.Data
	Links *recording.Links
	view  *memview.View
	torn  func() map[recording.StateKey][]recording.Tear // Data.TornStates, once
}

// Open reads a process recording for replay.
func Open(proc *recording.Process) (*Source, error) {
	data, err := proc.Load()
	if err != nil {
		return nil, err
	}
	links := data.Links()
	links.UseXLA(proc.XLA())
	s := &Source{Proc: proc, Data: data, Links: links, view: memview.New(proc), torn: sync.OnceValue(data.TornStates)}
	if data.Process.GetMemory().GetMode() == recording.MemorySnapshot {
		if _, err := s.view.Store(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Close closes the chunk store.
func (s *Source) Close() error { return s.view.Close() }

// Replayable lists the launches that have contents recorded before and
// after them, in launch order: the ones Case can load.
func (s *Source) Replayable() []uint64 {
	var seqs []uint64
	for _, l := range s.Data.Launches {
		ml, _ := memview.FromLinks(s.Links, l.Seq)
		if _, err := s.view.State(ml, memview.Before); err != nil {
			continue
		}
		if _, err := s.view.State(ml, memview.After); err == nil {
			seqs = append(seqs, l.Seq)
		}
	}
	return seqs
}

// Case is one recorded launch with everything a standalone run needs.
type Case struct {
	Seq        uint64
	Process    string // the process recording's name
	Kernel     *pb.Kernel
	Name       string // demangled kernel name
	Module     []byte // the recorded module image
	ModuleHash string // its sha256
	Launch     *pb.Launch
	Line       string // the user's Python line that launched it (for a backward launch, its forward line: Links.LineCallstack), "" when unknown
	Device     *pb.Device
	Regions    []Region
	// CooperativeRecorded: the recording says of every launch whether it was cooperative
	// (Launch.cooperative, format 1.14), cuLaunchKernelEx's attribute included.
	CooperativeRecorded bool
}

// Region is one region of the launch with its recorded contents.
type Region struct {
	Address, Size uint64
	ParamOffsets  []uint32 // parameter words that point into it
	Before, After []byte
	// AfterMissing lists chunks (of ChunkBytes) whose after-contents were
	// dropped while recording; they are not compared.
	AfterMissing []int
	ChunkBytes   uint64
}

// ErrNoLaunch is wrapped by Case when the recording has no such launch.
var ErrNoLaunch = errors.New("no such launch")

// Case loads launch seq with its module and its regions' contents. The
// errors are one line and say what the recording lacks and how to record
// it.
func (s *Source) Case(seq uint64) (*Case, error) {
	l := s.Links.Launch(seq)
	if l == nil {
		return nil, fmt.Errorf("%s: %w", info.NoLaunch(s.Proc.Name, seq, s.Data), ErrNoLaunch)
	}
	if l.Captured {
		return nil, fmt.Errorf("launch %d was captured into a CUDA graph and ran only inside graph replays, which have no snapshots", seq)
	}
	mode := s.Data.Process.GetMemory().GetMode()
	if mode != recording.MemorySnapshot {
		have := "without --memory"
		if mode != "" {
			have = "with --memory " + mode
		}
		return nil, fmt.Errorf("%s was recorded %s; replay needs the contents before and after the launch: record with --memory snapshot (and --snapshot-launches %d or --snapshot-kernels NAME to select it)", s.Proc.Name, have, seq)
	}
	ml, _ := memview.FromLinks(s.Links, seq)
	before, berr := s.view.State(ml, memview.Before)
	after, aerr := s.view.State(ml, memview.After)
	switch {
	case noSnapshot(berr) || noSnapshot(aerr):
		return nil, fmt.Errorf("launch %d has no snapshot (memory status %s); record with --snapshot-launches %d or a --snapshot-kernels that matches it",
			seq, recording.EnumText(l.GetMemory().GetStatus()), seq)
	case berr != nil:
		return nil, fmt.Errorf("the snapshot before launch %d was lost: %s", seq, ml.Before.LostReason)
	case aerr != nil:
		return nil, fmt.Errorf("the snapshot after launch %d was lost: %s", seq, ml.After.LostReason)
	}
	k := s.Links.Kernel(l.KernelId)
	if k == nil {
		return nil, fmt.Errorf("launch %d names kernel id %d, which the recording lacks", seq, l.KernelId)
	}
	c := &Case{Seq: seq, Process: s.Proc.Name, Kernel: k, Name: s.Links.KernelName(k), Launch: l, Line: s.Links.UserLine(s.Links.LineCallstack(l)),
		CooperativeRecorded: s.Proc.Version.Major > 1 || s.Proc.Version.Minor >= 14}
	for _, d := range s.Data.Devices {
		if d.Ordinal == l.Device {
			c.Device = d
		}
	}
	if k.ModuleSha256 == "" {
		return nil, fmt.Errorf("kernel %s came from a module the recording does not know", c.Name)
	}
	path := s.Proc.ModulePath(k.ModuleSha256)
	image, err := s.Proc.ModuleImage(k.ModuleSha256)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("module of kernel %s: %w (was it stored? see gpurr info's log)", c.Name, unwrap(err))
	case err != nil:
		return nil, fmt.Errorf("module of kernel %s: %s: %w", c.Name, path, unwrap(err))
	}
	// Its name is its SHA-256: a damaged image would be loaded, or copied into a reproducer,
	// as the code that ran.
	if sum := sha256.Sum256(image); hex.EncodeToString(sum[:]) != k.ModuleSha256 {
		return nil, fmt.Errorf("module of kernel %s: %s is damaged (its bytes do not hash to its name): the recording no longer holds the code that ran", c.Name, path)
	}
	c.Module, c.ModuleHash = image, k.ModuleSha256
	for i, r := range l.Regions {
		if i >= len(before.Regions) || i >= len(after.Regions) {
			return nil, fmt.Errorf("launch %d: the snapshots hold %d and %d of its %d regions", seq, len(before.Regions), len(after.Regions), len(l.Regions))
		}
		reg := Region{Address: r.Address, Size: r.Size, ParamOffsets: r.ParamOffsets, ChunkBytes: s.view.ChunkBytes()}
		var missing []int
		if reg.Before, missing, err = s.view.Read(ml, memview.Before, i, 0, r.Size); err != nil {
			return nil, fmt.Errorf("launch %d region %d before: %w", seq, i, err)
		}
		if len(missing) > 0 {
			return nil, fmt.Errorf("launch %d region %d: it cannot be restored: %d chunks of its contents before the launch %s", seq, i, len(missing), memview.MissingWhy(s.Proc))
		}
		if reg.After, reg.AfterMissing, err = s.view.Read(ml, memview.After, i, 0, r.Size); err != nil {
			return nil, fmt.Errorf("launch %d region %d after: %w", seq, i, err)
		}
		c.Regions = append(c.Regions, reg)
	}
	return c, nil
}

// noSnapshot: a state memview has no bytes of, but for one marked as a
// snapshot that was lost, which Case names as lost. (The agent writes lost
// states unmarked: replay calls them "no snapshot".)
func noSnapshot(err error) bool {
	var e *memview.Error
	return errors.As(err, &e) && (e.Err != memview.ErrLost || !e.State.GetSnapshot())
}

// unwrap drops the *PathError's path, which the caller's message replaces.
func unwrap(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// sortedRegions returns the indexes of c's regions by address.
func (c *Case) sortedRegions() []int {
	idx := make([]int, len(c.Regions))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(c.Regions[a].Address, c.Regions[b].Address) })
	return idx
}
