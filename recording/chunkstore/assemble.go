package chunkstore

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"
)

// getChunk is Reader.Get (a test sees which chunks Assemble reads).
var getChunk = (*Reader).Get

// Assemble rebuilds bytes [start, end) of a region from its chunks: hashes
// lists the region's chunk hashes in order (16 bytes each), every chunk
// chunkBytes long but the last. A chunk the store lacks (dropped while
// recording) is left zero in the result and its index is listed in missing;
// any other failure is an error. Chunks are read and checked on all CPUs.
func (r *Reader) Assemble(hashes [][]byte, chunkBytes, start, end uint64) (data []byte, missing []int, err error) {
	if end < start || chunkBytes == 0 {
		return nil, nil, fmt.Errorf("chunk store: bad range [%d, %d) or chunk size %d", start, end, chunkBytes)
	}
	first := int(start / chunkBytes)
	last := int((end + chunkBytes - 1) / chunkBytes) // one past
	if start == end {
		last = first
	}
	if last > len(hashes) {
		return nil, nil, fmt.Errorf("chunk store: %d chunk hashes cover %d bytes of the region, want %d", len(hashes), uint64(len(hashes))*chunkBytes, end)
	}
	// Every hash is checked before any chunk is read: a return from inside the loop below
	// would leave reads running after Assemble returned, into a Reader the caller may close.
	for i := first; i < last; i++ {
		if len(hashes[i]) != 16 {
			return nil, nil, fmt.Errorf("chunk store: chunk %d: hash of %d bytes", i, len(hashes[i]))
		}
	}
	data = make([]byte, end-start)
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i := first; i < last; i++ {
		h := hashes[i]
		g.Go(func() error {
			lo := uint64(i) * chunkBytes
			chunk, err := getChunk(r, [16]byte(h))
			if errors.Is(err, ErrNotFound) {
				mu.Lock()
				missing = append(missing, i)
				mu.Unlock()
				return nil
			}
			if err != nil {
				return err
			}
			hi := lo + uint64(len(chunk))
			if hi < min(end, lo+chunkBytes) {
				return fmt.Errorf("chunk store: chunk %d holds %d bytes, want %d", i, len(chunk), min(end, lo+chunkBytes)-lo)
			}
			copy(data[max(start, lo)-start:], chunk[max(start, lo)-lo:min(end, hi)-lo])
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	slices.Sort(missing)
	return data, missing, nil
}
