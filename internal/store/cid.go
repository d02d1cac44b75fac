package store

import (
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
	c, err := cid.NewPrefixV1(cid.DagCBOR, multihash.SHA2_256).Sum(raw)
	if err != nil {
		return "", err
	}
	return c.String(), nil
}

// CID is the CID of v's record block ("" for the zero Value).
func (v Value) CID() string {
	if v.IsZero() {
		return ""
	}
	c, err := cid.NewPrefixV1(cid.DagCBOR, multihash.SHA2_256).Sum(v.CBOR())
	if err != nil {
		return ""
	}
	return c.String()
}
