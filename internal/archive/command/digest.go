package command

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
)

// digestReader hashes what is read through it.
type digestReader struct {
	r io.Reader
	h hash.Hash
}

func newDigest(r io.Reader) *digestReader { return &digestReader{r: r, h: sha256.New()} }

func (d *digestReader) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	d.h.Write(p[:n]) //nolint:errcheck // a hash never fails
	return n, err
}

// String is the digest of what was read, as a store records it.
func (d *digestReader) String() string { return "sha256:" + hex.EncodeToString(d.h.Sum(nil)) }
