package replay

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpurr/gpurr/internal/outdir"
	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording/chunkstore"
)

// An extract interrupted (Ctrl-C) before any file or folder it makes leaves no folder beside
// its target and nothing in an empty folder it was given, so that the same command can run
// again; and that although extract goes on while the interrupt's undo runs on another
// goroutine: it made the folder beside again (MkdirAll), or a file in the folder it was given,
// after the undo had looked, and they were left.
func TestExtractInterrupted(t *testing.T) {
	testrec.InterruptAtEach(t, func(out string, point func()) {
		dir := t.TempDir()
		if _, err := testrec.WriteReplayable(dir); err != nil {
			panic(err)
		}
		// An output the process began before, whose undo takes a while (removing a large
		// folder): the process ends only once it is undone too.
		outdir.Undoable(func() (func(), error) {
			return func() { time.Sleep(200 * time.Millisecond) }, nil
		})
		add = func(f func() error) error {
			point()
			return outdir.Add(f)
		}
		Extract(openSource(t, dir), 2, out)
	})
}

// The reproducer's chunk store starts no pack once an interrupt's undo has begun: its own
// goroutine starts each pack past the first while extract goes on putting chunks, and one it
// started while the undo was removing the store's folder was left there, with the folders
// above. Here every chunk takes a pack of its own, and the undo removes the store as
// os.RemoveAll does, listing the folder and then removing what it listed and the folder, but
// slowly, as it removes packs of a GiB.
func TestStoreInterrupted(t *testing.T) {
	testrec.InterruptPartWay(t, func(out string, stop func()) {
		_, err := os.Stat(out)
		existed := err == nil
		chunks := filepath.Join(out, chunkstore.DirName)
		outdir.Undoable(func() (func(), error) {
			return func() {
				packs, _ := os.ReadDir(chunks)
				time.Sleep(100 * time.Millisecond)
				for _, p := range packs {
					os.Remove(filepath.Join(chunks, p.Name()))
				}
				os.Remove(chunks)
				if !existed {
					os.Remove(out)
				}
			}, os.MkdirAll(out, 0o700)
		})
		storeOptions.PackBytes = 1
		store, err := chunkstore.Create(out, storeOptions)
		if err != nil {
			panic(err)
		}
		put := func(i uint64) error {
			var h [16]byte
			binary.LittleEndian.PutUint64(h[:], i)
			return store.Put(h, h[:])
		}
		put(0)
		store.Flush() // the first pack written: the next chunk starts another
		go func() {
			for i := uint64(1); put(i) == nil; i++ {
			}
		}()
		stop()
	})
}
