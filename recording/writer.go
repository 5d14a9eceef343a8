package recording

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// File and folder names inside a recording.
const (
	EventsFile = "events.gpurr"
	ModulesDir = "modules"
	ModuleExt  = ".cubin"
	PTXExt     = ".ptx" // a module's PTX, beside its image, where it was found (Module.ptx)
	LogFile    = "agent.log"
	SetFile    = "recording.json"
)

// Writer appends frames to one process's events file. It is not safe for
// concurrent use: the agent owns one writer goroutine per process.
type Writer struct {
	setDir string
	dir    string
	f      *os.File
	buf    []byte
	size   int64 // bytes of whole frames (and the header) written
}

// Create makes setDir (0700) if needed, the process directory setDir/name
// and its events file (0600), and writes the file header and, unless first
// is nil, a first frame holding first. The first frame of a file must carry
// Process. A failure to write them leaves no events file, so that Create can run again.
func Create(setDir, name string, first *pb.Batch) (*Writer, error) {
	dir := filepath.Join(setDir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return create(setDir, dir, first)
}

// maxTakenNames is how many processes of one recording CreateNew lets share a name.
const maxTakenNames = 10000

// CreateNew is Create for a process that may share its name with another of the recording:
// containers on one host with its network share its host name and number their pids from 1
// in PID namespaces of their own, so two of their processes can both be host-1. It makes
// the process directory only where nothing is, as name, else name+"+2", name+"+3" and so on,
// so that a process never writes in another's directory; Writer.Dir says which it made.
//
// A directory it made can still be written by another process before the events file is
// started in it: one whose gpurr makes its directory with Create (MkdirAll), an agent older
// than CreateNew recording into the same folder. CreateNew then leaves that directory to it
// and takes the next name; on any failure it removes only what it made, never what another
// process wrote.
func CreateNew(setDir, name string, first *pb.Batch) (*Writer, error) {
	if err := os.MkdirAll(setDir, 0o700); err != nil {
		return nil, err
	}
	for n := 1; ; n++ {
		dir := filepath.Join(setDir, name)
		if n > 1 {
			dir += "+" + strconv.Itoa(n)
		}
		err := mkdir(dir, 0o700)
		if errors.Is(err, fs.ErrExist) && n < maxTakenNames {
			continue
		}
		if err != nil {
			return nil, err
		}
		w, err := create(setDir, dir, first)
		if errors.Is(err, fs.ErrExist) && n < maxTakenNames {
			continue // another process started its events file here first
		}
		if err != nil {
			os.Remove(dir) // only when empty: create removed its events file
		}
		return w, err
	}
}

// mkdir makes CreateNew's process directory (a test lets another process write in it first).
var mkdir = os.Mkdir

// create starts the events file in the process directory dir, made. A failure leaves no
// events file of this call's (ErrExist: another's is there, left as it is).
func create(setDir, dir string, first *pb.Batch) (*Writer, error) {
	path := filepath.Join(dir, EventsFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	w := &Writer{setDir: setDir, dir: dir, f: f}
	header := encodeFileHeader()
	_, err = f.Write(header)
	w.size = int64(len(header))
	if err == nil && first != nil {
		err = w.Write(first)
	}
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	return w, nil
}

// Dir is the process directory.
func (w *Writer) Dir() string { return w.dir }

// rawMemoryBytes is how many bytes of hashes a batch's memory states must hold for Write to
// store them in a frame of their own, uncompressed. Hashes are random bytes: compressing
// them gains nothing and cost about 45 ns per 64 KiB chunk hashed (zstd's fastest level
// searching for matches that are not there), more than the writer has in hash mode.
const rawMemoryBytes = 64 << 10

// Write appends b as one frame (two when b's memory states hold many hashes: the rest
// compressed, then the states stored raw) with a single write, so a killed program leaves
// whole frames and at most one partial frame at the end. A write that fails (disk full) is
// cut back off, so the file ends at its last whole frame and a later Write may succeed.
func (w *Writer) Write(b *pb.Batch) error {
	w.buf = w.buf[:0]
	if states := b.Memory; len(states) > 0 && hashBytes(states) >= rawMemoryBytes {
		b.Memory = nil
		payload, err := proto.Marshal(b)
		b.Memory = states
		if err != nil {
			return err
		}
		w.buf = appendFrame(w.buf, payload)
		if payload, err = proto.Marshal(&pb.Batch{Memory: states}); err != nil {
			return err
		}
		w.buf = appendRawFrame(w.buf, payload)
	} else {
		payload, err := proto.Marshal(b)
		if err != nil {
			return err
		}
		w.buf = appendFrame(w.buf, payload)
	}
	if _, err := w.f.Write(w.buf); err != nil {
		if terr := w.f.Truncate(w.size); terr != nil {
			return errors.Join(err, fmt.Errorf("cut back the partial frame: %w", terr))
		}
		return err
	}
	w.size += int64(len(w.buf))
	return nil
}

// hashBytes counts the hash bytes memory states hold.
func hashBytes(states []*pb.MemoryState) int {
	n := 0
	for _, s := range states {
		for _, r := range s.GetRegions() {
			n += len(r.GetHash()) + len(r.GetChunkHashes())
		}
	}
	return n
}

// Sync flushes the file to stable storage.
func (w *Writer) Sync() error { return w.f.Sync() }

// Close closes the events file.
func (w *Writer) Close() error { return w.f.Close() }

// PutModule stores image under the shared modules folder, named by its
// SHA-256, unless it is already there, and returns the hex digest. The file
// appears whole or not at all (temporary file, then rename).
func (w *Writer) PutModule(image []byte) (string, error) {
	return PutModule(w.setDir, image)
}

// PutModulePTX stores the PTX of the module image digest beside it; see PutModulePTX.
func (w *Writer) PutModulePTX(digest string, ptx []byte) error {
	return PutModulePTX(w.setDir, digest, ptx)
}

// PutModule stores image in setDir's modules folder; see Writer.PutModule.
func PutModule(setDir string, image []byte) (string, error) {
	sum := sha256.Sum256(image)
	digest := hex.EncodeToString(sum[:])
	return digest, putModuleFile(setDir, digest+ModuleExt, image)
}

// PutModulePTX stores, beside the module image whose SHA-256 is digest, the PTX it was
// compiled from (Module.ptx says where it was found). Like the image, it appears whole or not
// at all, and once.
func PutModulePTX(setDir, digest string, ptx []byte) error {
	return putModuleFile(setDir, digest+PTXExt, ptx)
}

// putModuleFile writes data as name in setDir's modules folder unless it is there already:
// a temporary file, then a rename.
func putModuleFile(setDir, name string, data []byte) error {
	dir := filepath.Join(setDir, ModulesDir)
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-"+name[:min(len(name), 16)]+"-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write module file %s: %w", name, err)
	}
	if err := os.Chmod(tmp.Name(), 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// mkdirAll makes CreateSet's folder (a test writes another command's file in it just then).
var mkdirAll = os.MkdirAll

// setFile is recording.json, which marks a directory as a recording.
type setFile struct {
	Format  string    `json:"format"`
	Version string    `json:"version"`
	Command []string  `json:"command"`
	Started time.Time `json:"started"`
}

// CreateSet makes an empty recording directory: the folder and its
// recording.json naming the command recorded. A directory that exists and
// is not empty is an error, so no recording is ever mixed into another; of
// two CreateSets of one directory at once, one fails (recording.json is made
// only once), and a failure leaves no recording.json behind. The folder is
// looked at again once recording.json is made, since another command (an
// export) may have written into it after the first look: the folder is then
// refused, and left with what the other wrote.
func CreateSet(dir string, command []string) error {
	notEmpty := fmt.Errorf("%s already exists and is not empty: choose another -o or remove it", dir)
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return notEmpty
	}
	if err := mkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(setFile{
		Format:  "gpurr-recording",
		Version: fmt.Sprintf("%d.%d", MajorVersion, MinorVersion),
		Command: command,
		Started: time.Now().UTC(),
	}, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(dir, SetFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return notEmpty
	}
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	err = errors.Join(err, f.Close())
	if err == nil {
		// As at the first look, a folder that cannot be listed passes.
		if entries, lerr := os.ReadDir(dir); lerr == nil && len(entries) > 1 {
			err = notEmpty
		}
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// SetCommand is the command a recording directory recorded (its recording.json): what gpurr
// record ran, to run again.
func SetCommand(dir string) ([]string, error) {
	path := filepath.Join(dir, SetFile)
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	var s setFile
	if err := json.NewDecoder(io.LimitReader(f, 1<<20)).Decode(&s); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if len(s.Command) == 0 {
		return nil, fmt.Errorf("%s names no command", path)
	}
	return s.Command, nil
}
