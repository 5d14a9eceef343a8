package recording

import (
	"encoding/binary"
	"hash/fnv"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// CallstackID is the id the agent gives a callstack: FNV-1a 64 over each
// frame's text with a 0xFF byte between frames. A Python frame contributes
// its file, line (4 bytes, little-endian) and function; a native frame its
// object, a zero line and its offset in the object (8 bytes, little-endian),
// not its symbol, which is looked up later. The same stack has the same id
// in every run of the same program. 0 is reserved for "no stack".
func CallstackID(frames []*pb.Frame) uint64 {
	h := fnv.New64a()
	var b [8]byte
	for i, f := range frames {
		if i > 0 {
			h.Write([]byte{0xff})
		}
		h.Write([]byte(f.GetFile()))
		binary.LittleEndian.PutUint32(b[:4], f.GetLine())
		h.Write(b[:4])
		if f.GetKind() == pb.Frame_NATIVE {
			binary.LittleEndian.PutUint64(b[:], f.GetOffset())
			h.Write(b[:])
		} else {
			h.Write([]byte(f.GetFunction()))
		}
	}
	if id := h.Sum64(); id != 0 {
		return id
	}
	return 1
}
