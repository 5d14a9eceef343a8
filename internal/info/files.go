package info

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
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
	images    imageSums // nil: each image is hashed where it is checked
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
// the recording needs them whole: a module image of another size than stored or whose bytes
// do not hash to its name (as replay and extract check it), and the chunk store of its
// snapshots.
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
		default:
			if problem := c.images.check(path, m.GetSha256()); problem != "" {
				out = append(out, problem)
			}
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

// imageSums keeps, by path, what hashing a module image found ("" when whole): the processes
// of a recording share its modules folder, and a job's ranks load the same images, so each
// is read once however many processes name it.
type imageSums map[string]string

// check hashes the image at path, which is named by its SHA-256 sum; a problem when its
// bytes do not hash to sum or cannot be read.
func (m imageSums) check(path, sum string) string {
	if problem, ok := m[path]; ok {
		return problem
	}
	problem := hashProblem(path, sum)
	if m != nil {
		m[path] = problem
	}
	return problem
}

func hashProblem(path, sum string) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("%s: module image unreadable (%v)", path, unwrapPath(err))
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && !st.Mode().IsRegular() {
		return fmt.Sprintf("%s: module image is not a regular file", path)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Sprintf("%s: module image unreadable (%v)", path, unwrapPath(err))
	}
	if hex.EncodeToString(h.Sum(nil)) != sum {
		return fmt.Sprintf("%s: module image damaged: its bytes do not hash to its name", path)
	}
	return ""
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
