package archive

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"

	"filippo.io/age"
)

// Keys are read from Secrets: the public keys an archive is encrypted to
// under RecipientsKey, the private key that reads it under IdentityKey, one
// key per line (as age's own files hold them; lines starting with # are
// comments).
const (
	RecipientsKey = "recipients"
	IdentityKey   = "identity"
)

// ParseRecipients reads the public keys of an archive (age X25519
// recipients, age1...). where names their place (a Secret and key) in the
// errors.
func ParseRecipients(data []byte, where string) ([]age.Recipient, error) {
	var out []age.Recipient
	err := eachKeyLine(data, func(n int, line string) error {
		r, err := age.ParseX25519Recipient(line)
		if err != nil {
			return fmt.Errorf("line %d of %s is not an age X25519 public key (age1...): %v", n, where, err)
		}
		out = append(out, r)
		return nil
	})
	if err == nil && len(out) == 0 {
		err = fmt.Errorf("%s holds no public key: put one age X25519 recipient (age1..., from age-keygen) per line", where)
	}
	return out, err
}

// ParseIdentities reads the private keys that read an archive (age X25519
// identities, AGE-SECRET-KEY-1...). Its errors name the line, never what is
// on it: it is a secret.
func ParseIdentities(data []byte, where string) ([]age.Identity, error) {
	var out []age.Identity
	err := eachKeyLine(data, func(n int, line string) error {
		id, err := age.ParseX25519Identity(line)
		if err != nil {
			return fmt.Errorf("line %d of %s is not an age X25519 private key (AGE-SECRET-KEY-1...)", n, where)
		}
		out = append(out, id)
		return nil
	})
	if err == nil && len(out) == 0 {
		err = fmt.Errorf("%s holds no private key: put the age X25519 identity (AGE-SECRET-KEY-1..., from age-keygen) there", where)
	}
	return out, err
}

func eachKeyLine(data []byte, each func(n int, line string) error) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := each(n, line); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading %s: %w", "the keys", err)
	}
	return nil
}
