package query

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"syscall"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// The database is SQLite's private temporary one (the empty file name), not ":memory:": its
// pages stay in a page cache of cacheKiB, and those beyond it go to a file that SQLite creates
// in its temporary folder (tempFolder), 0600, and unlinks at once, so that nothing is left
// there however the command ends (an error, Ctrl-C, SIGTERM, even SIGKILL): the file has no
// name, and the system frees it with the process's last reference. A recording of a million
// launches made an in-memory database of hundreds of MB; a small one never leaves the cache.
// The file is written without syncs (nothing outlives the command), its journal kept in
// memory, as ":memory:" keeps it: a fill that fails rolls back (it holds the pages a
// transaction changes that were there before it, not the new ones a fill adds).

// cacheKiB bounds SQLite's page cache (a negative cache_size is in KiB); a test's is small.
var cacheKiB = 32 << 10

// maxPages, when not 0, caps the database's pages: a test's full disk.
var maxPages int

// openTemp opens a new private temporary database.
func openTemp() (*sql.DB, error) {
	db, err := sql.Open("sqlite", "")
	if err != nil {
		return nil, err
	}
	// Each connection to "" is a database of its own: keep one.
	db.SetMaxOpenConns(1)
	db.SetConnMaxLifetime(0)
	pragmas := []string{"journal_mode=MEMORY", "synchronous=OFF", fmt.Sprintf("cache_size=-%d", cacheKiB)}
	if maxPages > 0 {
		pragmas = append(pragmas, fmt.Sprintf("max_page_count=%d", maxPages))
	}
	for _, p := range pragmas {
		if _, err := db.Exec("PRAGMA " + p); err != nil {
			db.Close()
			return nil, err
		}
	}
	return db, nil
}

// tempFolder is the folder SQLite puts its temporary files in: the first of $SQLITE_TMPDIR,
// $TMPDIR, /var/tmp, /usr/tmp and /tmp that is a folder it may write in, else the current one.
func tempFolder() string {
	for _, d := range []string{os.Getenv("SQLITE_TMPDIR"), os.Getenv("TMPDIR"), "/var/tmp", "/usr/tmp", "/tmp"} {
		if d == "" {
			continue
		}
		if st, err := os.Stat(d); err == nil && st.IsDir() && syscall.Access(d, 0o3) == nil { // W_OK|X_OK
			return d
		}
	}
	return "."
}

// diskFull says, for a full disk, where the database's file was and how to put it elsewhere;
// other errors pass as they are.
func diskFull(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_FULL {
		return fmt.Errorf("the disk is full: no room for the database's temporary file in %s (set TMPDIR to a folder with more room)", tempFolder())
	}
	return err
}
