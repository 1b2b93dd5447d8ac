// Package uuidtext writes UUIDs in their canonical text form without allocating: the
// middleware's event ids and idempotence ids are built on every failure.
package uuidtext

import "encoding/hex"

// Len is the length of a UUID's canonical text.
const Len = 36

// Append appends the canonical 36-character text of u to b, as uuid.UUID's String writes it.
func Append(b []byte, u [16]byte) []byte {
	var text [Len]byte
	hex.Encode(text[0:8], u[0:4])
	text[8] = '-'
	hex.Encode(text[9:13], u[4:6])
	text[13] = '-'
	hex.Encode(text[14:18], u[6:8])
	text[18] = '-'
	hex.Encode(text[19:23], u[8:10])
	text[23] = '-'
	hex.Encode(text[24:], u[10:])
	return append(b, text[:]...)
}
