package httpapi

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"

	"github.com/memhost/memhost/sdk"
)

// sealedCursorPrefix marks a listing cursor that hides the record id it
// holds. '~' is in no record id, so a cursor and an id never collide.
const sealedCursorPrefix = "~"

// cursorSeal hides the record id a bound token's listing stopped at when
// that record is one the token may not read: the id would name another
// identity's record and, moved past a guessed id, tell whether it exists.
// Every host keyed alike (the host key) opens another's cursors.
type cursorSeal struct{ aead cipher.AEAD }

// newCursorSeal derives the seal's key from key (the host key); without
// one, from a random key, so cursors hold only within this process.
func newCursorSeal(key []byte) cursorSeal {
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("memhost listing cursor v1"))
	block, err := aes.NewCipher(mac.Sum(nil))
	if err != nil {
		panic(err) // a 32-byte key always makes a cipher
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return cursorSeal{aead: aead}
}

// seal answers an opaque cursor for id, different at every call and of
// one length whatever the id's (padded to the longest id with zero
// bytes, which no id holds), so neither says anything of the record.
func (c cursorSeal) seal(realm, id string) string {
	padded := make([]byte, sdk.MaxIDBytes)
	copy(padded, id)
	return c.sealBytes(padded, []byte(realm))
}

// sealBytes answers plain sealed under a fresh nonce, bound to ad, as a
// cursor.
func (c cursorSeal) sealBytes(plain, ad []byte) string {
	nonce := make([]byte, c.aead.NonceSize())
	_, _ = rand.Read(nonce)
	return sealedCursorPrefix + base64.RawURLEncoding.EncodeToString(c.aead.Seal(nonce, nonce, plain, ad))
}

// openBytes answers what sealBytes sealed in body, a cursor without its
// prefix, if it was sealed bound to ad.
func (c cursorSeal) openBytes(body string, ad []byte) ([]byte, error) {
	data, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || len(data) < c.aead.NonceSize() {
		return nil, errCursor
	}
	plain, err := c.aead.Open(nil, data[:c.aead.NonceSize()], data[c.aead.NonceSize():], ad)
	if err != nil {
		return nil, errCursor
	}
	return plain, nil
}

var errCursor = errors.New("is not a cursor this host gave for the realm (pass the next of an earlier answer unchanged)")

// open answers the id a sealed cursor holds.
func (c cursorSeal) open(realm, cursor string) (string, error) {
	padded, err := c.openBytes(strings.TrimPrefix(cursor, sealedCursorPrefix), []byte(realm))
	id := string(bytes.TrimRight(padded, "\x00"))
	if err != nil || sdk.ValidateID(id) != nil {
		return "", errCursor
	}
	return id, nil
}

// tracePlaceAD binds a trace listing's cursor to its realm, apart from a
// record listing's: neither is taken for the other.
func tracePlaceAD(realm string) []byte { return []byte("turn trace listing\x00" + realm) }

// sealPlace answers an opaque cursor for a trace listing's place, for
// every caller: the place is a count of the host's traces of every realm,
// which would tell one realm's application how busy the others are.
func (c cursorSeal) sealPlace(realm string, place int64) string {
	return c.sealBytes(binary.BigEndian.AppendUint64(nil, uint64(place)), tracePlaceAD(realm))
}

// openPlace answers the place a trace listing's cursor holds.
func (c cursorSeal) openPlace(realm, cursor string) (int64, error) {
	if !strings.HasPrefix(cursor, sealedCursorPrefix) {
		return 0, errCursor
	}
	plain, err := c.openBytes(cursor[len(sealedCursorPrefix):], tracePlaceAD(realm))
	if err != nil || len(plain) != 8 {
		return 0, errCursor
	}
	place := int64(binary.BigEndian.Uint64(plain))
	if place <= 0 {
		return 0, errCursor
	}
	return place, nil
}
