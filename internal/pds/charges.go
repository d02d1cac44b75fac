package pds

import "context"

// GiveBack implements outline.Charges with the repository's ledger: the
// open charges of operation opID (left by a process killed before it knew
// whether its batch landed) but those under landed are given back.
func (r *Repo) GiveBack(_ context.Context, opID string, landed []string) (int, error) {
	if r.Budget == nil {
		return 0, nil
	}
	return r.Budget.GiveBack(opID, landed)
}

// Charged implements outline.Charges with the repository's ledger.
func (r *Repo) Charged(_ context.Context, key string) (int, bool) {
	if r.Budget == nil {
		return 0, false
	}
	return r.Budget.Charged(key)
}
