package fatbin

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPTXs(t *testing.T) {
	want := bytes.TrimRight(fixture(t, "kernel.ptx"), "\x00")
	for _, name := range []string{"plain.fatbin", "lz4.fatbin", "zstd.fatbin"} {
		t.Run(name, func(t *testing.T) {
			ps, err := PTXs(fixture(t, name))
			if err != nil {
				t.Fatal(err)
			}
			if len(ps) != 1 || ps[0].Arch != 80 || !bytes.Equal(ps[0].Text, want) {
				t.Fatalf("got %d entries, first for sm_%d:\n%s", len(ps), ps[0].Arch, ps[0].Text)
			}
			if got := Kernels(ps[0].Text); len(got) != 1 || got[0] != "gpurr_fixture_add" {
				t.Errorf("kernels %q", got)
			}
		})
	}
}

func TestEntries(t *testing.T) {
	es, err := Parse(fixture(t, "plain.fatbin"))
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].Kind != KindPTX || es[1].Kind != KindELF || es[1].Arch != 90 || es[0].Compressed() {
		t.Fatalf("entries %+v", es)
	}
	if d, _ := es[1].Data(); string(d) != "\x7fELF stand-in for a cubin" || es[1].Size != 25 {
		t.Errorf("ELF entry %q", d)
	}
}

func TestContainersInARow(t *testing.T) {
	ps, err := PTXs(fixture(t, "two.fatbin"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || ps[0].Arch != 80 || ps[1].Arch != 100 {
		t.Fatalf("%d entries", len(ps))
	}
	// A section aligns its containers with zero bytes.
	padded := append(append(fixture(t, "noptx.fatbin"), make([]byte, 8)...), fixture(t, "plain.fatbin")...)
	es, err := Parse(padded)
	if err != nil || len(es) != 3 {
		t.Fatalf("%d entries, %v; want 3", len(es), err)
	}
	if es[0].Container != 0 || es[1].Container != 1 || es[2].Container != 1 {
		t.Errorf("containers %d %d %d; want 0 1 1", es[0].Container, es[1].Container, es[2].Container)
	}
}

func TestPick(t *testing.T) {
	ps, err := PTXs(fixture(t, "two.fatbin"))
	if err != nil {
		t.Fatal(err)
	}
	for gpu, want := range map[int]int{90: 80, 100: 100, 120: 100, 0: 100} {
		p, err := Pick(ps, gpu)
		if err != nil || p.Arch != want {
			t.Errorf("GPU sm_%d: got sm_%d, %v; want sm_%d", gpu, p.Arch, err, want)
		}
	}
	newer, err := PTXs(fixture(t, "newer.fatbin"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Pick(newer, 90)
	var ne *NewerError
	if !errors.As(err, &ne) || ne.Oldest != 100 || ne.GPU != 90 || !strings.Contains(err.Error(), "sm_100") || !strings.Contains(err.Error(), "sm_90") {
		t.Errorf("PTX newer than the GPU: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	if _, err := PTXs(fixture(t, "noptx.fatbin")); !errors.Is(err, ErrNoPTX) {
		t.Errorf("no PTX: %v", err)
	}
	plain := fixture(t, "plain.fatbin")
	for name, b := range map[string][]byte{
		"empty":     nil,
		"a cubin":   []byte("\x7fELF\x02\x01\x01"),
		"truncated": plain[:len(plain)-9],
		"short entry": func() []byte {
			b := bytes.Clone(plain[:16+40])
			b[8], b[9] = 40, 0
			return b
		}(),
	} {
		if _, err := Parse(b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// A compressed entry whose stored bytes are not what its flag says.
	bad := bytes.Clone(fixture(t, "lz4.fatbin"))
	for i := 16 + 64; i < len(bad); i++ {
		bad[i] = 0xff
	}
	if _, err := PTXs(bad); err == nil {
		t.Error("corrupt LZ4: no error")
	}
}

func FuzzPTXs(f *testing.F) {
	for _, name := range []string{"plain.fatbin", "lz4.fatbin", "zstd.fatbin", "two.fatbin", "noptx.fatbin"} {
		f.Add(fixture(f, name))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = PTXs(b)
	})
}
