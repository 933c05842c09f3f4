package journal

// Shorthands for one change, for the tests: the filesystem records its
// changes with Append.

// Put records the whole new content of one file and returns the record's
// LSN.
func (j *Journal) Put(fileID, path string, content []byte) (uint64, error) {
	lsns, err := j.Append(Change{FileID: fileID, Path: path, Content: content})
	if err != nil {
		return 0, err
	}
	return lsns[0], nil
}

// Delete records that a file was removed and returns the record's LSN
// (see Append for what a delete becomes).
func (j *Journal) Delete(fileID, path string) (uint64, error) {
	lsns, err := j.Append(Change{FileID: fileID, Path: path, Deleted: true})
	if err != nil {
		return 0, err
	}
	return lsns[0], nil
}
