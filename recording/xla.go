package recording

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/gpurr/gpurr/recording/internal/xla"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// XLADir is the folder of a recording where gpurr record has XLA dump the
// optimized HLO modules of the programs it compiles (XLA_FLAGS
// --xla_dump_to), for XLA's kernels to be shown at the lines of the
// program that made them.
const XLADir = "xla"

// KeepXLAFile reports whether a file of the XLA dump folder is one readers
// use (the optimized modules and their thunk sequences); gpurr record
// deletes the others when the program ends.
func KeepXLAFile(name string) bool { return xla.Keep(name) }

// XLA is what a recording's XLA dump says of the kernels XLA launched:
// for each, the fusion it computes, the JAX op name, and the program's
// source lines.
type XLA struct {
	Dir string // the dump folder
	// Err is why the dump could not be read (an XLA whose text this
	// reader does not know); nil when it was read or there is none. Then
	// XLA's kernels show no lines, as in a recording without a dump.
	Err     error
	Modules int // optimized modules read
	dump    *xla.Dump
}

// NewLinks is NewLinks for a reader that streams the process's records:
// links that give XLA's kernels the lines of the recording's XLA dump.
func (p *Process) NewLinks() *Links {
	l := NewLinks()
	l.UseXLA(p.XLA())
	return l
}

// XLA reads the XLA dump of the process's recording (ReadXLA).
func (p *Process) XLA() *XLA { return ReadXLA(filepath.Join(xlaParent(p), XLADir)) }

// ReadXLA reads an XLA dump folder. It returns nil when there is none, or
// it is empty (the program was no XLA program, or gpurr record did not ask
// for one).
func ReadXLA(dir string) *XLA {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) || err == nil && len(entries) == 0 {
		return nil
	}
	x := &XLA{Dir: dir}
	if err == nil {
		x.dump, err = xla.Read(dir)
	}
	if err != nil {
		x.Err = fmt.Errorf("XLA dump %s: %w", dir, err)
		return x
	}
	x.Modules = len(x.dump.Modules)
	return x
}

// xlaParent is the recording folder that holds the process's, where the dump
// is written.
func xlaParent(p *Process) string {
	if p.setDir != "" {
		return p.setDir
	}
	return filepath.Dir(p.Dir)
}

// autotuneKernel matches the kernels stream_executor launches only while
// XLA autotunes: the redzone checks around each candidate, the buffers it
// fills, the comparison of candidates' results, the timer's delay kernel.
var autotuneKernel = regexp.MustCompile(`stream_executor.*(RedzoneAllocatorKernel|RepeatBufferKernel|xla_[a-z]*_?comparison|DelayKernel)`)

// isJAXCompile reports whether a Python frame is JAX compiling a
// computation (jax/_src/compiler.py), where XLA autotunes on the calling
// thread.
func isJAXCompile(f *pb.Frame) bool {
	return isPython(f) && strings.HasSuffix(f.GetFile(), "jax/_src/compiler.py")
}

// syntheticStackBase numbers the callstacks Links makes of XLA's lines,
// above any id a recording holds.
const syntheticStackBase = 1 << 62

// UseXLA makes the links attribute XLA's kernels to the lines XLA's dump
// gives (x may be nil, or hold an error: then nothing changes).
func (l *Links) UseXLA(x *XLA) {
	if x != nil && x.Err == nil {
		l.xla = x
	}
}

// xlaSite is the dump's site of a launch's kernel, with how many modules
// left it ambiguous (then site is nil).
func (l *Links) xlaSite(la *pb.Launch) (site *xla.Site, ambiguous int) {
	if l.xla == nil {
		return nil, 0
	}
	g, b := la.GetGrid(), la.GetBlock()
	key := xlaKey{la.GetKernelId(), [3]uint32{g.GetX(), g.GetY(), g.GetZ()}, [3]uint32{b.GetX(), b.GetY(), b.GetZ()}}
	if r, ok := l.xlaSites[key]; ok {
		return r.site, r.ambiguous
	}
	k := l.kernels[key.kernel]
	if k == nil {
		return nil, 0 // not cached: its kernel may come in a later batch
	}
	var r xlaFound
	s, n, amb := l.xla.dump.Find(k.GetName(), l.modules[k.GetModuleSha256()], key.grid, key.block)
	if amb {
		r.ambiguous = n
	} else {
		r.site = s
	}
	l.xlaSites[key] = r
	return r.site, r.ambiguous
}

// xlaKey is what a launch's site depends on; launches of a step repeat it.
type xlaKey struct {
	kernel      uint64
	grid, block [3]uint32
}

type xlaFound struct {
	site      *xla.Site
	ambiguous int
}

// xlaCallstack is the callstack Links makes of a site's lines: one Python
// frame, the first line, whose function says how many more lines the
// kernel fuses. 0 for a site without lines.
func (l *Links) xlaCallstack(s *xla.Site) uint64 {
	if id, ok := l.xlaStacks[s]; ok {
		return id
	}
	var id uint64
	if len(s.Lines) > 0 {
		id = syntheticStackBase + uint64(len(l.xlaStacks)) + 1
		first := s.Lines[0]
		fn := first.Function
		if n := len(s.Lines) - 1; n > 0 {
			fn += fmt.Sprintf(" +%d more", n)
		}
		l.callstacks[id] = &pb.Callstack{Id: id, Frames: []*pb.Frame{{Kind: pb.Frame_PYTHON, File: first.File, Line: first.Line, Function: fn}}}
	}
	l.xlaStacks[s] = id
	return id
}

// OpName is the JAX op name of the HLO fusion a launch of an XLA kernel
// computes (from the recording's XLA dump), e.g. jit(step)/jvp()/tanh;
// "" when the launch is no XLA kernel the dump knows. When several modules
// hold a kernel of that name and the launch does not say which ran, it
// says so.
func (l *Links) OpName(la *pb.Launch) string {
	s, n := l.xlaSite(la)
	switch {
	case n > 0:
		return fmt.Sprintf("(ambiguous: %d XLA modules have this kernel)", n)
	case s == nil:
		return ""
	}
	return s.OpName
}

// Compile reports whether a launch was made while XLA compiled and
// autotuned a computation rather than while the program ran: a kernel
// stream_executor launches only for autotuning, a launch whose Python
// stack is inside JAX's compiler, or a launch without a Python stack on a
// thread that launched one of those autotuning kernels without one
// (XLA's compilation threads) before or in the same batch.
func (l *Links) Compile(la *pb.Launch) bool {
	if l.autotuneKernel(la) {
		return true
	}
	id := la.GetCallstackId()
	if l.jaxCompile[id] {
		return true
	}
	return l.compileThreads[la.GetTid()] && firstFrame(l.callstacks[id], isPython) == nil
}

// noteCompile notes, once per kernel and callstack, those Compile knows by.
func (l *Links) noteCompile(b *pb.Batch) {
	for _, k := range b.Kernels {
		if autotuneKernel.MatchString(k.GetName()) {
			l.autotune[k.GetId()] = true
		}
	}
	for _, c := range b.Callstacks {
		if firstFrame(c, isJAXCompile) != nil {
			l.jaxCompile[c.GetId()] = true
		}
	}
}

func (l *Links) autotuneKernel(la *pb.Launch) bool {
	return l.autotune[la.GetKernelId()]
}

// noteCompileThread marks the thread of an autotuning kernel launched
// without a Python stack as one of XLA's compilation threads.
func (l *Links) noteCompileThread(la *pb.Launch) {
	if l.autotuneKernel(la) && firstFrame(l.callstacks[la.GetCallstackId()], isPython) == nil {
		l.compileThreads[la.GetTid()] = true
	}
}

// LinesFromXLA reports whether a launch's lines come from the XLA dump
// (LineCallstack gives a callstack made of them).
func (l *Links) LinesFromXLA(la *pb.Launch) bool {
	return l.LineCallstack(la) >= syntheticStackBase
}

// KernelLineCallstack is LineCallstack for a kernel that ran without a launch
// of the recording to take its lines from: a graph replay's kernel whose node
// no captured launch built, as in a command buffer XLA builds node by node.
// Its XLA fusion is found by the kernel's name, grid and block alone; 0 when
// the dump has none, several that differ, or no lines for it.
func (l *Links) KernelLineCallstack(a *pb.KernelActivity) uint64 {
	if l.xla == nil {
		return 0
	}
	g, b := a.GetGrid(), a.GetBlock()
	key := xlaRunKey{a.GetName(), [3]uint32{g.GetX(), g.GetY(), g.GetZ()}, [3]uint32{b.GetX(), b.GetY(), b.GetZ()}}
	s, ok := l.xlaRuns[key]
	if !ok {
		if site, _, amb := l.xla.dump.Find(key.name, nil, key.grid, key.block); !amb {
			s = site
		}
		l.xlaRuns[key] = s
	}
	if s == nil {
		return 0
	}
	return l.xlaCallstack(s)
}

type xlaRunKey struct {
	name        string
	grid, block [3]uint32
}
