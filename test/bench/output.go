package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// reportPath is the file -out names: an absolute path as given, a
// relative one from the checkout's root, as make runs the command. It
// makes the file's directory and checks that the file can be written
// there, so that a run of hours does not end unable to save its report.
func reportPath(root, path string) (string, error) {
	if !filepath.IsAbs(path) {
		path = filepath.Join(root, path)
	}
	if err := checkWritable(path); err != nil {
		return "", err
	}
	return path, nil
}

// checkWritable fails unless path's directory exists or can be made, a
// file can be created in it, and path, if it exists, is a file that can be
// opened for writing. It leaves path as it found it.
func checkWritable(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("making the directory of %s: %w", path, err)
	}
	probe, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return fmt.Errorf("%s cannot be written: %w", dir, err)
	}
	_ = probe.Close()
	if err := os.Remove(probe.Name()); err != nil {
		return fmt.Errorf("removing the file that checked %s: %w", dir, err)
	}
	info, err := os.Stat(path)
	switch {
	case os.IsNotExist(err):
		return nil
	case err != nil:
		return err
	case info.IsDir():
		return fmt.Errorf("%s is a directory, not a file", path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("%s cannot be written: %w", path, err)
	}
	return f.Close()
}
