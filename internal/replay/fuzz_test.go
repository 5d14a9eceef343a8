package replay

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording/cubin"
)

// FuzzModuleKind: ModuleKind names any bytes, as replay --module reads them from a file the user
// gives, with one of its kinds, never a panic; a cubin's kind is the one cubin.Parse gives it, and
// a PTX target it names is one the image declares.
func FuzzModuleKind(f *testing.F) {
	for _, image := range testrec.Images() {
		f.Add(image)
	}
	if image, err := os.ReadFile(filepath.Join("..", "..", "recording", "cubin", "testdata", "demo_sm90.cubin")); err == nil {
		f.Add(image)
		f.Add(image[:64])
	}
	ptxFiles, _ := filepath.Glob(filepath.Join("..", "ptx", "testdata", "*.ptx"))
	for _, file := range ptxFiles {
		if src, err := os.ReadFile(file); err == nil {
			f.Add(src)
		}
	}
	f.Add(binary.LittleEndian.AppendUint32(nil, fatbinMagic))
	f.Add([]byte("\x7fELF"))
	f.Add([]byte(".version 8.0\n.target sm_90, sm_80\n.target\tsm_70a\n"))
	f.Fuzz(func(t *testing.T, image []byte) {
		kind := ModuleKind(image)
		if _, err := cubin.Parse(image); err == nil {
			if !strings.HasPrefix(kind, "cubin") && kind != "ELF file that is not a cubin" {
				t.Fatalf("an ELF image cubin.Parse reads is %q", kind)
			}
			return
		}
		switch {
		case kind == "fatbin", kind == "PTX", kind == "unknown image":
		case strings.HasPrefix(kind, "PTX for "):
			for _, target := range strings.Split(strings.TrimPrefix(kind, "PTX for "), ", ") {
				if !strings.HasPrefix(target, "sm_") || !bytes.Contains(image, []byte(target)) {
					t.Fatalf("%q names %q, which the image does not declare", kind, target)
				}
			}
		default:
			t.Fatalf("kind %q", kind)
		}
	})
}
