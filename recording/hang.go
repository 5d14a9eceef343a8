package recording

import (
	"cmp"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// HangLogPrefix starts the agent's log entries about a Hang: the lines of its report
// (HangReport), and what the agent did then. Readers that show the Hang record itself leave
// them out of the log they show.
const HangLogPrefix = "hang: "

// Where says on one line where the call of callstack c was made, for a message read at once
// (the hang report): its Line, and after " via " its innermost Python frame when that is
// another (library code the line called); with no Python frame, its innermost native frames
// outside the CUDA libraries (NativeFrames), at most three, each called from the next. ""
// when it holds neither, or c is nil.
func Where(c *pb.Callstack) string {
	line := Line(c)
	if line == "" {
		return strings.Join(NativeFrames(c, 3), ", called from ")
	}
	if top := FrameText(firstFrame(c, isPython)); top != line {
		return line + " via " + top
	}
	return line
}

// NativeFrames are a callstack's native frames outside the CUDA driver and NVIDIA's libraries
// (the program's own code, libtorch), innermost first, as text (object+offset function, the
// object's file name without its folder), at most n.
func NativeFrames(c *pb.Callstack, n int) []string {
	out := []string{}
	for _, f := range c.GetFrames() {
		if f.GetKind() != pb.Frame_NATIVE || len(out) == n {
			continue
		}
		if lib := filepath.Base(f.GetFile()); strings.HasPrefix(lib, "libcuda.so") || strings.HasPrefix(lib, "libcudart") ||
			strings.HasPrefix(lib, "libcupti") || strings.HasPrefix(lib, "libnvidia-") {
			continue
		}
		text := filepath.Base(f.GetFile()) + fmt.Sprintf("+0x%x", f.GetOffset())
		if f.GetFunction() != "" {
			text += " " + f.GetFunction()
		}
		out = append(out, text)
	}
	return out
}

// NewHangLaunch is launch l as a Hang names it, with the count of unfinished launches on its
// stream, itself included.
func NewHangLaunch(l *pb.Launch, unfinished uint32) *pb.HangLaunch {
	return &pb.HangLaunch{Seq: l.GetSeq(), HostNs: l.GetHostNs(), KernelId: l.GetKernelId(), Device: l.GetDevice(),
		StreamId: l.GetStreamId(), Grid: l.GetGrid(), Block: l.GetBlock(), CallstackId: l.GetCallstackId(),
		ForwardCallstackId: ForwardCallstackID(l), Unfinished: unfinished}
}

// HangReport writes a Hang as the agent wrote it on the program's stderr, a line each: first
// the launch that hangs, then each other stream's oldest unfinished launch. Each launch is
// named with its kernel (name gives a kernel id's readable name, "" when unknown) and the line
// that made it (where gives a callstack's Where, and whether the callstack is known).
func HangReport(h *pb.Hang, name func(kernelID uint64) string, where func(callstackID uint64) (string, bool)) []string {
	l := h.GetLaunch()
	out := []string{fmt.Sprintf("launch %d (%s) has not finished on the GPU after %v; %s%s",
		l.GetSeq(), hangLaunchText(l, name), time.Duration(h.GetTimeoutNs()), hangWhere(l, where), behind(l))}
	for _, o := range h.GetStreams() {
		age := time.Duration(h.GetHostNs() - min(o.GetHostNs(), h.GetHostNs())).Round(time.Millisecond)
		out = append(out, fmt.Sprintf("also unfinished: launch %d (%s), made %v before; %s%s",
			o.GetSeq(), hangLaunchText(o, name), age, hangWhere(o, where), behind(o)))
	}
	return out
}

// behind says how many unfinished launches of its stream wait behind a launch of a hang.
func behind(l *pb.HangLaunch) string {
	switch n := l.GetUnfinished(); {
	case n == 2:
		return "; 1 more unfinished launch waits behind it on its stream"
	case n > 2:
		return fmt.Sprintf("; %d more unfinished launches wait behind it on its stream", n-1)
	}
	return ""
}

// hangLaunchText is a launch's kernel and shape, as the hang report names it.
func hangLaunchText(l *pb.HangLaunch, name func(uint64) string) string {
	g, b := l.GetGrid(), l.GetBlock()
	return fmt.Sprintf("%s, grid %dx%dx%d, block %dx%dx%d, device %d, stream %d",
		cmp.Or(name(l.GetKernelId()), fmt.Sprintf("kernel %d", l.GetKernelId())),
		g.GetX(), g.GetY(), g.GetZ(), b.GetX(), b.GetY(), b.GetZ(), l.GetDevice(), l.GetStreamId())
}

// hangWhere says where a launch of a hang was made: for a launch in autograd's backward, the
// forward line whose backward it computes, as readers attribute it (Links.LineCallstack).
func hangWhere(l *pb.HangLaunch, where func(uint64) (string, bool)) string {
	if id := l.GetForwardCallstackId(); id != 0 {
		if text, ok := where(id); ok && text != "" {
			return "launched in the backward of " + text
		}
	}
	id := l.GetCallstackId()
	if id == 0 {
		return "no callstack taken"
	}
	text, ok := where(id)
	switch {
	case !ok:
		return fmt.Sprintf("callstack %d not recorded", id)
	case text == "":
		return fmt.Sprintf("callstack %d holds no frame outside the CUDA libraries", id)
	}
	return "launched at " + text
}

// HangReport is the package's HangReport, naming kernels and callstacks from the records l
// holds.
func (l *Links) HangReport(h *pb.Hang) []string {
	return HangReport(h, func(id uint64) string {
		if k := l.Kernel(id); k != nil {
			return l.KernelName(k)
		}
		return ""
	}, func(id uint64) (string, bool) {
		c := l.Callstack(id)
		return Where(c), c != nil
	})
}
