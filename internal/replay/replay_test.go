package replay

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gpurr/gpurr/internal/dtype"
	"github.com/gpurr/gpurr/internal/outdir"
	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/cubin"
	"github.com/gpurr/gpurr/recording/memhash"
)

func openSource(t *testing.T, dir string) *Source {
	t.Helper()
	set, err := recording.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	src, err := Open(set.Processes[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

// replayableCase opens testrec's replayable recording and its snapshotted launch 2.
func replayableCase(t *testing.T) (string, *Source, *Case) {
	t.Helper()
	dir := t.TempDir()
	if _, err := testrec.WriteReplayable(dir); err != nil {
		t.Fatal(err)
	}
	src := openSource(t, dir)
	c, err := src.Case(2)
	if err != nil {
		t.Fatal(err)
	}
	return dir, src, c
}

func TestCase(t *testing.T) {
	dir := t.TempDir()
	want, err := testrec.WriteReplayable(dir)
	if err != nil {
		t.Fatal(err)
	}
	src := openSource(t, dir)
	if got := src.Replayable(); len(got) != 1 || got[0] != 2 {
		t.Fatalf("replayable launches %v, want [2]", got)
	}
	c, err := src.Case(2)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "saxpy_gridstride" || !bytes.Equal(c.Module, want.Module) || c.Line != "saxpy.py:12 main" {
		t.Errorf("case: kernel %q, line %q, module %d bytes", c.Name, c.Line, len(c.Module))
	}
	if len(c.Regions) != 2 || !bytes.Equal(c.Regions[0].Before, want.XBefore) || !bytes.Equal(c.Regions[1].Before, want.YBefore) ||
		!bytes.Equal(c.Regions[1].After, want.YAfter) {
		t.Error("region contents differ from the recorded ones")
	}
	if cfg := c.Recorded(); cfg.Grid.X != 16 || cfg.Block.X != 64 || cfg.Cluster.X != 0 {
		t.Errorf("recorded shape %+v", cfg)
	}
	for seq, msg := range map[uint64]string{1: "has no snapshot (memory status hash)", 3: "captured into a CUDA graph", 9: "has no launch 9 (launches 1 to 3)"} {
		if _, err := src.Case(seq); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("launch %d: error %v, want %q", seq, err, msg)
		}
	}
}

func TestExtract(t *testing.T) {
	dir := t.TempDir()
	want, err := testrec.WriteReplayable(dir)
	if err != nil {
		t.Fatal(err)
	}
	src := openSource(t, dir)
	out := filepath.Join(t.TempDir(), "repro")
	n, err := Extract(src, 2, out)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Error("extract wrote no chunk bytes")
	}
	readme, err := os.ReadFile(filepath.Join(out, ReadmeFile))
	if err != nil || !strings.Contains(string(readme), "gpurr replay repro") || !strings.Contains(string(readme), "saxpy.py:12") {
		t.Errorf("README: %v\n%s", err, readme)
	}
	again := openSource(t, out)
	if got := again.Replayable(); len(got) != 1 || got[0] != 2 {
		t.Fatalf("the reproducer's replayable launches: %v", got)
	}
	c, err := again.Case(2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c.Launch.Params, want.ParamsLaunch2) || !bytes.Equal(c.Regions[1].After, want.YAfter) || !bytes.Equal(c.Module, want.Module) {
		t.Error("the reproducer's launch differs from the recording's")
	}
	if !again.Data.Complete() {
		t.Error("the reproducer's recording is not complete")
	}
	if _, err := Extract(src, 2, out); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("extract into a used directory: %v", err)
	}
}

func TestPlanAndRelocate(t *testing.T) {
	const mib = 1 << 20
	c := &Case{Regions: []Region{
		{Address: 0x7f00_0020_0400, Size: 1024, ParamOffsets: []uint32{8}},
		{Address: 0x7f00_0020_0000, Size: 1024, ParamOffsets: []uint32{0}},
		{Address: 0x7f00_0100_0000, Size: 3 * mib},
		{Address: 0x7f00_1000_0000, Size: 4096},
	}}
	spans := planSpans(c, 2*mib)
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2: %+v", len(spans), spans)
	}
	if sp := spans[0]; sp.start != 0x7f00_0000_0000 || sp.end != 0x7f00_0200_0000 || len(sp.regions) != 3 ||
		len(sp.pieces) != 2 || sp.pieces[0] != [2]uint64{0x7f00_0020_0000, 0x7f00_0040_0000} || sp.pieces[1] != [2]uint64{0x7f00_0100_0000, 0x7f00_0140_0000} {
		t.Errorf("first span %+v", sp)
	}
	params := make([]byte, 16)
	binary.LittleEndian.PutUint64(params[0:], 0x7f00_0020_0010)
	binary.LittleEndian.PutUint64(params[8:], 0x7f00_0020_0400)
	addrs := []uint64{0x5000_0020_0400, 0x5000_0020_0000, 0x5000_0100_0000, 0x7f00_1000_0000}
	got, moved, err := relocate(c, params, addrs)
	if err != nil || moved != 2 || binary.LittleEndian.Uint64(got[0:]) != 0x5000_0020_0010 || binary.LittleEndian.Uint64(got[8:]) != 0x5000_0020_0400 {
		t.Errorf("relocate: moved %d, err %v, words %x", moved, err, got)
	}
	if binary.LittleEndian.Uint64(params[0:]) != 0x7f00_0020_0010 {
		t.Error("relocate changed its input")
	}
	binary.LittleEndian.PutUint64(params[0:], 0x1234)
	if _, _, err := relocate(c, params, addrs); err == nil || !strings.Contains(err.Error(), "outside the region") {
		t.Errorf("a word that does not point into its region: %v", err)
	}
}

func TestPointerWords(t *testing.T) {
	c := &Case{Regions: []Region{{Address: 0x1000, Size: 64}, {Address: 0x9000, Size: 32}}}
	c.Regions[0].Before = make([]byte, 64)
	binary.LittleEndian.PutUint64(c.Regions[0].Before[0:], 0x9008)  // into region 1
	binary.LittleEndian.PutUint64(c.Regions[0].Before[8:], 0x9020)  // just past region 1
	binary.LittleEndian.PutUint64(c.Regions[0].Before[16:], 0x1010) // into itself
	binary.LittleEndian.PutUint64(c.Regions[0].Before[24:], 0x5000) // between them
	got := pointerWords(c, 0)
	if len(got) != 2 || got[1] != 1 || got[0] != 1 {
		t.Errorf("pointer words %v, want one into region 0 and one into region 1", got)
	}
}

func TestCompare(t *testing.T) {
	f32, _ := dtype.Parse("f32")
	want := make([]byte, 3*memhash.ChunkSize)
	got := bytes.Clone(want)
	binary.LittleEndian.PutUint32(got[memhash.ChunkSize+8:], 0x3f800000) // 1.0 where 0 was recorded
	reg := &Region{Size: uint64(len(want)), After: want, ChunkBytes: memhash.ChunkSize, AfterMissing: []int{2}}
	r := compare(0, reg, got, Check{Type: f32, Elements: 4})
	if r.Identical || r.DifferingChunks != 1 || r.Chunks != 2 || r.Missing != 1 || r.FirstDiff != memhash.ChunkSize+10 ||
		r.DifferingElements != 1 || r.MaxAbs != 1 || len(r.Elements) != 1 || r.Elements[0].Index != (memhash.ChunkSize+8)/4 || r.Output == 0 {
		t.Errorf("compare: %+v", r)
	}
	if r.Within(Check{Type: f32, Atol: 0.5}) {
		t.Error("a difference of 1 is within atol 0.5")
	}
	if r2 := compare(0, reg, got, Check{Type: f32, Atol: 1}); !r2.Within(Check{Type: f32, Atol: 1}) {
		t.Error("a difference of 1 is not within atol 1")
	}
	copy(got, want)
	if r := compare(0, reg, got, Check{}); !r.Identical || r.FirstDiff != -1 || r.Output != 0 {
		t.Errorf("identical: %+v", r)
	}
}

func TestModuleKind(t *testing.T) {
	header := func(abi byte, flags uint32) []byte {
		b := make([]byte, 64)
		copy(b, "\x7fELF")
		b[8] = abi
		binary.LittleEndian.PutUint16(b[18:], uint16(cubin.MachineCUDA))
		binary.LittleEndian.PutUint32(b[48:], flags)
		return b
	}
	x86 := header(8, 0)
	x86[18] = byte(elf.EM_X86_64)
	fatbin := binary.LittleEndian.AppendUint32(nil, fatbinMagic)
	for _, c := range []struct {
		image []byte
		want  string
	}{
		// e_flags as nvcc 13 writes them (ELF ABI 8) and as older ones did.
		{header(8, 0x6005a04), "cubin for sm_90"},
		{header(8, 0x6006402), "cubin for sm_100"},
		{header(7, 0x500550), "cubin for sm_80"},
		{header(8, 0), "cubin"},
		{x86, "ELF file that is not a cubin"},
		{[]byte("\x7fELF cut short"), "unknown image"},
		{fatbin, "fatbin"},
		{[]byte(".version 8.0\n.target sm_80\n.address_size 64\n"), "PTX for sm_80"},
		{[]byte("nonsense"), "unknown image"},
	} {
		if got := ModuleKind(c.image); got != c.want {
			t.Errorf("ModuleKind = %q, want %q", got, c.want)
		}
	}
}

// An extract that fails part way (here the disk refuses the README, the last file) leaves the
// folder as it found it: gone when it made it, empty when it was there; the same command then
// runs.
func TestExtractFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	if _, err := testrec.WriteReplayable(dir); err != nil {
		t.Fatal(err)
	}
	src := openSource(t, dir)
	full := syscall.ENOSPC
	writeFile = func(string, []byte, os.FileMode) error { return full }
	t.Cleanup(func() { writeFile = os.WriteFile })
	testrec.FailPartWay(t, full, func(out string) error {
		_, err := Extract(src, 2, out)
		return err
	})
	writeFile = os.WriteFile
	if _, err := Extract(src, 2, filepath.Join(t.TempDir(), "repro")); err != nil {
		t.Errorf("extract again: %v", err)
	}
}

// An extract into a new folder appears whole or not at all: while it writes, a reader of its
// folder finds nothing there, and nothing is left beside it. Of several extracts into one
// folder at once, new or empty, one wins and the others fail without touching what it
// wrote (a loser used to remove the folder it had found missing or empty, the winner's files
// with it). An empty folder that is there is filled, not replaced (it may be the shell's
// working directory), and a symlink to one is filled through.
func TestExtractAppearsWhole(t *testing.T) {
	dir := t.TempDir()
	if _, err := testrec.WriteReplayable(dir); err != nil {
		t.Fatal(err)
	}
	src := openSource(t, dir)
	parent := t.TempDir()
	out := filepath.Join(parent, "repro")
	writeFile = func(name string, b []byte, mode os.FileMode) error {
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s is there before the extract is whole", out)
		}
		return os.WriteFile(name, b, mode)
	}
	t.Cleanup(func() { writeFile = os.WriteFile })
	if _, err := Extract(src, 2, out); err != nil {
		t.Fatal(err)
	}
	writeFile = os.WriteFile
	whole := func(what string) {
		t.Helper()
		set, err := recording.Open(out)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if _, err := os.Stat(filepath.Join(out, ReadmeFile)); err != nil || len(set.Processes) != 1 {
			t.Errorf("%s: README %v, %d processes", what, err, len(set.Processes))
		}
		if entries, _ := os.ReadDir(parent); len(entries) != 1 {
			t.Errorf("%s: %d entries beside the reproducer, want none", what, len(entries)-1)
		}
	}
	whole("one extract")

	for _, empty := range []bool{false, true} {
		if err := os.RemoveAll(out); err != nil {
			t.Fatal(err)
		}
		if empty {
			if err := os.Mkdir(out, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		before, _ := os.Stat(out)
		const n = 8
		won := testrec.AtOnce(n, func() error {
			_, err := Extract(src, 2, out)
			return err
		}, func(err error) {
			if !strings.Contains(err.Error(), "already exists and is not empty") && !strings.Contains(err.Error(), "appeared while the reproducer was written") {
				t.Errorf("a losing extract: %v", err)
			}
		})
		if won != 1 {
			t.Errorf("empty folder there %v: %d of %d extracts succeeded, want 1", empty, won, n)
		}
		whole("extracts at once")
		if after, _ := os.Stat(out); empty && !os.SameFile(before, after) {
			t.Errorf("the empty folder that was there was replaced")
		}
	}

	target := filepath.Join(t.TempDir(), "empty")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Extract(src, 2, link); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink: %v, %v", st, err)
	}
	if _, err := os.Stat(filepath.Join(target, ReadmeFile)); err != nil {
		t.Errorf("the folder the symlink names: %v", err)
	}
}

// A folder that cannot be made is named as the user gave it, not by the folder beside it
// that extract writes first ('mkdir /proc/.gpurr-1797477559: no such file or directory').
func TestExtractNamesTheFolderAsked(t *testing.T) {
	dir := t.TempDir()
	if _, err := testrec.WriteReplayable(dir); err != nil {
		t.Fatal(err)
	}
	_, err := Extract(openSource(t, dir), 2, "/proc/gpurr-repro") // no folder can be made in /proc
	if want := "/proc/gpurr-repro: cannot create a folder in /proc: "; err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), outdir.TempPrefix) {
		t.Errorf("Extract into /proc: %v; want %q and no temporary name", err, want)
	}
}

// An error writing the new folder names the file by the folder the user gave (a full disk:
// 'write repro/README.md: no space left on device'), not by the folder beside it that
// extract writes first, and is still the error it was.
func TestExtractErrorsNameTheFolderAsked(t *testing.T) {
	dir := t.TempDir()
	if _, err := testrec.WriteReplayable(dir); err != nil {
		t.Fatal(err)
	}
	writeFile = func(name string, _ []byte, _ os.FileMode) error {
		return &fs.PathError{Op: "write", Path: name, Err: syscall.ENOSPC}
	}
	t.Cleanup(func() { writeFile = os.WriteFile })
	out := filepath.Join(t.TempDir(), "repro")
	_, err := Extract(openSource(t, dir), 2, out)
	if want := "write " + filepath.Join(out, ReadmeFile) + ": no space left on device"; err == nil || err.Error() != want || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Extract on a full disk: %v; want %q, wrapping ENOSPC", err, want)
	}
}
