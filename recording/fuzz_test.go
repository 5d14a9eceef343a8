package recording_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// FuzzScan feeds arbitrary bytes to the reader as a process's events file.
// Readers are total: the result is the records the bytes hold or a one-line
// error naming the file, never a panic or a hang.
func FuzzScan(f *testing.F) {
	whole := variantEvents(f, testrec.Lossy)
	f.Add(whole)
	f.Add(variantEvents(f, testrec.Memory))
	f.Add(variantEvents(f, testrec.Autograd))
	f.Add(variantEvents(f, testrec.WriteSets))
	f.Add(variantEvents(f, testrec.Hang))
	f.Add(whole[:len(whole)-7])
	f.Add(whole[:16])
	f.Add(whole[:40])
	f.Add([]byte{})
	f.Add([]byte("GPURREC\n"))
	newer := append([]byte(nil), whole...)
	binary.LittleEndian.PutUint16(newer[8:], recording.MajorVersion+1)
	f.Add(newer)
	huge := append([]byte(nil), whole[:16]...)
	huge = binary.LittleEndian.AppendUint32(huge, 0xFFFFFFF0)
	f.Add(append(huge, make([]byte, 8)...))

	dir := f.TempDir()
	path := filepath.Join(dir, recording.EventsFile)
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		set, err := recording.Open(dir)
		if err != nil {
			checkError(t, err, path)
			return
		}
		d, err := set.Processes[0].Load()
		if err != nil {
			checkError(t, err, path)
			return
		}
		if d.Process == nil || d.Frames < 1 {
			t.Fatalf("loaded %d frames and process %v without an error", d.Frames, d.Process)
		}
		// The join must take whatever records the bytes hold.
		links := d.Links()
		if err := d.JoinKernels(links, func(*pb.KernelActivity, *pb.Launch, *pb.GraphLaunch) error { return nil }); err != nil {
			t.Fatal(err)
		}
		for _, l := range d.Launches {
			links.PythonLine(l.CallstackId)
			recording.Line(links.Callstack(links.LineCallstack(l)))
			links.Forward(l)
			links.MemoryFor(l.Seq)
		}
		for _, st := range d.Memory {
			for i, rs := range st.Regions {
				links.Allocation(links.StateRegion(st, i).GetAllocationId())
				recording.ChunkHashes(rs)
				recording.CarriedText(rs.GetCarried())
			}
			recording.UnknownRegions(st)
		}
		for _, m := range d.WriteSetMisses {
			links.Kernel(m.GetKernelId())
		}
		for _, h := range d.Hangs {
			links.HangReport(h)
		}
	})
}

// variantEvents is rank 0's events file of a synthetic recording.
func variantEvents(f *testing.F, v testrec.Variant) []byte {
	dir := f.TempDir()
	if err := testrec.Write(dir, v); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, testrec.Name(0), recording.EventsFile))
	if err != nil {
		f.Fatal(err)
	}
	return b
}

func checkError(t *testing.T, err error, path string) {
	t.Helper()
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, path) {
		t.Fatalf("error must be one line naming %s: %q", path, msg)
	}
}
