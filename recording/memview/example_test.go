package memview_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/memview"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Read a buffer of a SAXPY launch as it was before and after the kernel
// ran, from a --memory snapshot recording; see what a launch without a
// snapshot offers; and read a launch the streaming way, without loading
// the whole recording.
func Example() {
	dir, err := os.MkdirTemp("", "gpurr-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// Launch 2 has snapshots before and after it; launch 1 only hashes.
	if _, err := testrec.WriteReplayable(dir); err != nil {
		log.Fatal(err)
	}
	set, err := recording.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	p := set.Processes[0]
	data, err := p.Load()
	if err != nil {
		log.Fatal(err)
	}
	links := data.Links()
	v := memview.New(p)
	defer v.Close()

	// Region 1 of launch 2 is y of y = a·x + y: the first four uint32 of
	// it, before and after.
	l, ok := memview.FromLinks(links, 2)
	if !ok {
		log.Fatal("no launch 2")
	}
	for _, point := range []pb.MemoryState_Point{memview.Before, memview.After} {
		b, missing, err := v.Read(l, point, 1, 0, 16)
		if err != nil || len(missing) > 0 {
			log.Fatal(err, missing)
		}
		fmt.Printf("launch 2, region 1 %-7s %v\n", recording.EnumText(point)+":", words(b))
	}

	// Launch 1 was not selected for snapshots: its state after it holds
	// the hashes of the region and of each chunk, no bytes.
	l, _ = memview.FromLinks(links, 1)
	if _, err := v.State(l, memview.After); errors.Is(err, memview.ErrHashOnly) {
		fmt.Printf("%v (hashes of %d chunks)\n", err, len(recording.ChunkHashes(l.After.Regions[1])))
	}

	// Streaming: Process.Ordered reads the recording once and delivers
	// the launches asked for with their states.
	_, err = p.Ordered([]uint64{2}, func(r *recording.LaunchRecord) error {
		chunk, err := v.Chunk(memview.FromRecord(r), memview.After, 1, 2)
		if err != nil {
			return err
		}
		fmt.Printf("streamed launch %d: chunk 2 of region 1 after it holds %d bytes\n", r.Launch.GetSeq(), len(chunk))
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// launch 2, region 1 before: [0 3 6 9]
	// launch 2, region 1 after:  [0 5 10 15]
	// launch 1 has only hashes after it, no bytes (hashes of 3 chunks)
	// streamed launch 2: chunk 2 of region 1 after it holds 28928 bytes
}

func words(b []byte) []uint32 {
	out := make([]uint32, len(b)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out
}
