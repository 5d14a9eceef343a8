package cubin_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/recording/cubin"
)

// demoCubin is gpurr's demo kernels built by nvcc 13.0 for sm_90
// (scripts/gen-testdata): its ELF version fields hold NVIDIA's numbers,
// which debug/elf alone rejects.
func demoCubin(tb testing.TB) []byte {
	tb.Helper()
	image, err := os.ReadFile(filepath.Join("testdata", "demo_sm90.cubin"))
	if err != nil {
		tb.Fatal(err)
	}
	return image
}

func TestParseCubin(t *testing.T) {
	f, err := cubin.Parse(demoCubin(t))
	if err != nil {
		t.Fatal(err)
	}
	if !f.IsCubin() || f.Arch() != "sm_90" {
		t.Errorf("machine %v, arch %q; want a cubin for sm_90", f.Machine, f.Arch())
	}
	got, err := f.Functions()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{"gpurr_demo_fill", "gpurr_demo_reduce", "gpurr_demo_saxpy"}; !slices.Equal(got, want) {
		t.Errorf("Functions = %q, want %q", got, want)
	}
}

func TestArch(t *testing.T) {
	for _, c := range []struct {
		abi   uint8
		flags uint32
		want  string
	}{
		// e_flags as nvcc 13 writes them (ELF ABI 8) and as older ones did.
		{8, 0x6005a04, "sm_90"},
		{8, 0x6006402, "sm_100"},
		{7, 0x500550, "sm_80"},
		{8, 0, ""},
	} {
		f := cubin.File{Machine: cubin.MachineCUDA, ABIVersion: c.abi, Flags: c.flags}
		if got := f.Arch(); got != c.want {
			t.Errorf("Arch of ABI %d flags %#x = %q, want %q", c.abi, c.flags, got, c.want)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("short"), []byte("\x7fELF" + strings.Repeat("x", 40)), make([]byte, 4096)} {
		if f, err := cubin.Parse(b); err == nil {
			t.Errorf("Parse(%d bytes) = %+v, want an error", len(b), f)
		}
	}
	// An ELF header with nothing behind it has no symbols to give.
	f, err := cubin.Parse(demoCubin(t)[:64])
	if err != nil {
		t.Fatal(err)
	}
	if names, err := f.Functions(); err == nil {
		t.Errorf("Functions of a bare header = %q, want an error", names)
	}
}

// FuzzParse feeds arbitrary bytes to Parse and Functions: module images
// come from the recorded program and from recordings, and reading them
// gives names or an error, never a panic.
func FuzzParse(f *testing.F) {
	image := demoCubin(f)
	f.Add(image)
	f.Add(image[:64])
	f.Add(image[:len(image)/2])
	f.Add([]byte{})
	f.Add([]byte("\x7fELF"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := cubin.Parse(data)
		if err != nil {
			return
		}
		file.Arch()
		names, err := file.Functions()
		if err != nil && names != nil {
			t.Errorf("Functions returned names %q with error %v", names, err)
		}
		for _, n := range names {
			if n == "" {
				t.Error("Functions returned an empty name")
			}
		}
	})
}
