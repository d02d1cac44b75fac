package store

import (
	"encoding/base32"
	"unsafe"

	"github.com/bluesky-social/indigo/atproto/atdata"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

// RecordCID is the CID a record value gets in a repository (DAG-CBOR,
// SHA-256): what a create or update of the value leaves at its path.
func RecordCID(v map[string]any) (string, error) {
	raw, err := atdata.MarshalCBOR(v)
	if err != nil {
		return "", err
	}
	return blockCID(raw), nil
}

// CID is the CID of v's record block ("" for the zero Value).
func (v Value) CID() string {
	if v.IsZero() {
		return ""
	}
	return blockCID(v.CBOR())
}

// blockCID is the CID of a DAG-CBOR block (SHA-256; "" if it cannot be
// made, which SHA-256 never causes).
func blockCID(raw []byte) string {
	c, err := cid.NewPrefixV1(cid.DagCBOR, multihash.SHA2_256).Sum(raw)
	if err != nil {
		return ""
	}
	return c.String()
}

// base32Lower is multibase's base32 ("b"): RFC 4648 lower case, no padding.
var base32Lower = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// cidString is c.String() in one allocation (c.String() makes three: the
// bytes, the base32 text, and the text with its multibase prefix; 45 MB of
// garbage opening 249k records). CIDv0 is left to c.String().
func cidString(c cid.Cid) string {
	k := c.KeyString()
	if c.Version() == 0 || len(k) == 0 {
		return c.String()
	}
	out := make([]byte, 1+base32Lower.EncodedLen(len(k)))
	out[0] = 'b'
	base32Lower.Encode(out[1:], bytesOf(k))
	return unsafe.String(&out[0], len(out))
}
