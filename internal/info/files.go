package info

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/chunkstore"
	"github.com/gpurr/gpurr/recording/memview"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// fileCheck looks at the files beside the events file that the process's records point to,
// as its records are read: module images, and the chunk store of its snapshots (its packs,
// and the chunks its snapshots name that it lacks beyond those dropped while recording),
// opened at the first snapshot. It reads no chunk's bytes: a damaged entry inside a whole pack
// is found when read.
type fileCheck struct {
	p         *recording.Process
	snapshots int
	store     *chunkstore.Reader
	storeErr  error
	absent    uint64
}

// state checks the chunks a snapshot names.
func (c *fileCheck) state(s *pb.MemoryState) {
	if !memview.HasBytes(s) {
		return
	}
	c.snapshots++
	if c.snapshots == 1 {
		c.store, c.storeErr = chunkstore.Open(c.p.Dir)
	}
	if c.store == nil {
		return
	}
	for _, rs := range s.GetRegions() {
		lacking := uint64(0)
		for _, h := range recording.ChunkHashes(rs) {
			if !c.store.Has([16]byte(h)) {
				lacking++
			}
		}
		c.absent += lacking - min(lacking, uint64(rs.GetChunksMissing()))
	}
}

// close closes the chunk store, if it was opened (c may be nil).
func (c *fileCheck) close() {
	if c != nil && c.store != nil {
		c.store.Close()
		c.store = nil
	}
}

// finish says what is wrong: missing are the digests of module images the process stored
// that are not there; damaged names, one line each, files that are damaged or missing where
// the recording needs them whole: a module image of another size than stored, and the chunk
// store of its snapshots.
func (c *fileCheck) finish(modules []*pb.Module) (missing, damaged []string) {
	var out []string
	for _, m := range modules {
		if !m.GetStored() {
			continue // modules_failed counts it
		}
		path := c.p.ModulePath(m.GetSha256())
		st, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			missing = append(missing, m.GetSha256())
		case err != nil:
			out = append(out, fmt.Sprintf("%s: module image unreadable (%v)", path, unwrapPath(err)))
		case uint64(st.Size()) != m.GetSize():
			out = append(out, fmt.Sprintf("%s: module image of %d bytes, the recording stored %d", path, st.Size(), m.GetSize()))
		}
	}
	if c.snapshots == 0 {
		return missing, out
	}
	if errors.Is(c.storeErr, chunkstore.ErrNoChunks) {
		return missing, append(out, fmt.Sprintf("%s: missing, and %s hold bytes in it", filepath.Join(c.p.Dir, chunkstore.DirName), Count(c.snapshots, "snapshot")))
	}
	if c.storeErr != nil {
		return missing, append(out, fmt.Sprintf("chunk store: %v", c.storeErr))
	}
	out = append(out, c.store.Recovery().Problems()...)
	if c.absent > 0 {
		out = append(out, fmt.Sprintf("%s: %s that snapshots name not in the store, and not dropped while recording: lost with its files", c.store.Dir(), Count(c.absent, "chunk")))
	}
	return missing, out
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
