package zkrecipes

import "sync/atomic"

// Stats counts the requests a Session sent and the watch events it received
// since it was created. Recipes' costs (listings per acquisition, watch
// events per release) are read from it.
type Stats struct {
	Creates     int64 // create requests
	Deletes     int64 // delete requests
	Listings    int64 // getChildren requests
	Reads       int64 // getData and exists requests
	WatchEvents int64 // node watch events delivered (not session events)

	// A holding's watch on its own node (so that its Lost closes when
	// someone else deletes the node) costs one getData per holding, and
	// its event when the holder deletes the node. They are counted here,
	// not in Reads and WatchEvents, so that those stay the cost of waiting.
	HoldWatches int64 // getData requests watching the session's own held nodes
	HoldEvents  int64 // watch events of those requests

	// Handoffs by grant (see WithGrants). A release that grants is one
	// multi, counted in Deletes; the events of the session's watches for
	// grants are counted here, not in WatchEvents.
	Grants      int64 // releases that granted the lock to the next contender
	Granted     int64 // acquisitions that held on a grant, without a listing
	GrantEvents int64 // events of the watches for grants
}

type counters struct {
	creates, deletes, listings, reads atomic.Int64
	holdWatches, holdEvents           atomic.Int64
	grants, granted                   atomic.Int64
}

// Stats returns the session's counters.
func (s *Session) Stats() Stats {
	grantEvents := s.grantEvents()
	return Stats{
		Creates:     s.stats.creates.Load(),
		Deletes:     s.stats.deletes.Load(),
		Listings:    s.stats.listings.Load(),
		Reads:       s.stats.reads.Load(),
		WatchEvents: s.c.Notifications() - s.stats.holdEvents.Load() - grantEvents,
		HoldWatches: s.stats.holdWatches.Load(),
		HoldEvents:  s.stats.holdEvents.Load(),
		Grants:      s.stats.grants.Load(),
		Granted:     s.stats.granted.Load(),
		GrantEvents: grantEvents,
	}
}
