package replay

import (
	"bytes"
	"encoding/binary"
	"regexp"
	"slices"
	"strings"

	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/recording/cubin"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// fatbinMagic starts a fatbin (several cubins and PTX for different
// architectures).
const fatbinMagic = 0xBA55ED50

var ptxTarget = regexp.MustCompile(`(?m)^\s*\.target\s+(sm_\w+)`)

// ModuleKind describes a module image for messages: "cubin for sm_90",
// "PTX for sm_80", "fatbin", "unknown image".
func ModuleKind(image []byte) string {
	if f, err := cubin.Parse(image); err == nil {
		if !f.IsCubin() {
			return "ELF file that is not a cubin"
		}
		if sm := f.Arch(); sm != "" {
			return "cubin for " + sm
		}
		return "cubin"
	}
	switch {
	case len(image) >= 4 && binary.LittleEndian.Uint32(image) == fatbinMagic:
		return "fatbin"
	case bytes.Contains(image[:min(len(image), 4096)], []byte(".version")):
		var targets []string
		for _, m := range ptxTarget.FindAllSubmatch(image, -1) {
			if t := string(m[1]); !slices.Contains(targets, t) {
				targets = append(targets, t)
			}
		}
		if len(targets) > 0 {
			return "PTX for " + strings.Join(targets, ", ")
		}
		return "PTX"
	}
	return "unknown image"
}

func recordedLayoutText(ps []*pb.ParamInfo) string {
	conv := make([]cuda.Param, len(ps))
	for i, p := range ps {
		conv[i] = cuda.Param{Offset: p.Offset, Size: p.Size}
	}
	return layoutText(conv)
}
