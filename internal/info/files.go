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
)

// checkFiles looks at the files beside the events file that the process's records point to:
// missing are the digests of module images it stored that are not there; damaged names, one
// line each, files that are damaged or missing where the recording needs them whole: a module
// image of another size than stored, and the chunk store of its snapshots (its packs, and the
// chunks its snapshots name that it lacks beyond those dropped while recording). It reads no
// chunk's bytes: a damaged entry inside a whole pack is found when read.
func checkFiles(p *recording.Process, d *recording.Data) (missing, damaged []string) {
	var out []string
	for _, m := range d.Modules {
		if !m.GetStored() {
			continue // modules_failed counts it
		}
		path := p.ModulePath(m.GetSha256())
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
	snapshots := 0
	for _, s := range d.Memory {
		if memview.HasBytes(s) {
			snapshots++
		}
	}
	if snapshots == 0 {
		return missing, out
	}
	store, err := chunkstore.Open(p.Dir)
	if errors.Is(err, chunkstore.ErrNoChunks) {
		return missing, append(out, fmt.Sprintf("%s: missing, and %s hold bytes in it", filepath.Join(p.Dir, chunkstore.DirName), Count(snapshots, "snapshot")))
	}
	if err != nil {
		return missing, append(out, fmt.Sprintf("chunk store: %v", err))
	}
	defer store.Close()
	out = append(out, store.Recovery().Problems()...)
	var absent uint64
	for _, s := range d.Memory {
		if !memview.HasBytes(s) {
			continue
		}
		for _, rs := range s.GetRegions() {
			lacking := uint64(0)
			for _, h := range recording.ChunkHashes(rs) {
				if !store.Has([16]byte(h)) {
					lacking++
				}
			}
			absent += lacking - min(lacking, uint64(rs.GetChunksMissing()))
		}
	}
	if absent > 0 {
		out = append(out, fmt.Sprintf("%s: %s that snapshots name not in the store, and not dropped while recording: lost with its files", store.Dir(), Count(absent, "chunk")))
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
