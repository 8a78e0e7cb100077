package main

import (
	"errors"
	"os"
)

// createPrivate creates or truncates path for the owner alone (0600): what the commands write
// (an exported eval set, per-record scores) holds prompts, answers and documents. A file that
// existed with wider permissions is narrowed before anything is written to it.
func createPrivate(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o077 != 0 {
		err = f.Chmod(0o600)
	}
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return f, nil
}
