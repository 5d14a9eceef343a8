package replay

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/gpurr/gpurr/internal/cuda"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// emCUDA is the ELF machine of NVIDIA cubins.
const emCUDA = 190

// fatbinMagic starts a fatbin (several cubins and PTX for different
// architectures).
const fatbinMagic = 0xBA55ED50

var ptxTarget = regexp.MustCompile(`(?m)^\s*\.target\s+(sm_\w+)`)

// ModuleKind describes a module image for messages: "cubin for sm_90",
// "PTX for sm_80", "fatbin", "unknown image".
func ModuleKind(image []byte) string {
	switch {
	case len(image) >= 52 && bytes.HasPrefix(image, []byte("\x7fELF")):
		if binary.LittleEndian.Uint16(image[18:]) != emCUDA {
			return "ELF file that is not a cubin"
		}
		if sm := cubinArch(image); sm != "" {
			return "cubin for " + sm
		}
		return "cubin"
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

// cubinArch reads the SM architecture a cubin was built for from its ELF
// header flags: in the low byte before ELF ABI version 8, in the second
// byte from version 8 on (CUDA 12.8 and later).
func cubinArch(image []byte) string {
	flags := binary.LittleEndian.Uint32(image[48:])
	sm := flags & 0xff
	if image[8] >= 8 {
		sm = (flags >> 8) & 0xff
	}
	if sm == 0 {
		return ""
	}
	return fmt.Sprintf("sm_%d", sm)
}

func recordedLayoutText(ps []*pb.ParamInfo) string {
	conv := make([]cuda.Param, len(ps))
	for i, p := range ps {
		conv[i] = cuda.Param{Offset: p.Offset, Size: p.Size}
	}
	return layoutText(conv)
}
