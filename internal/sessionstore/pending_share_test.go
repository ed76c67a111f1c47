package sessionstore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memhost/memhost/coordinator"
)

// TestAFloodingRealmLeavesOthersPendingPlaces: from an outside review.
// While the disk is full the sessions held in memory were bounded for all
// realms together: one realm's flood of new sessions took every place,
// and every other realm's turns then failed 507 storage_full. A realm now
// holds at most three quarters of the places the other realms leave, and
// an identity alone three eighths, as the turn trace queue shares its.
func TestAFloodingRealmLeavesOthersPendingPlaces(t *testing.T) {
	s, db := openStore(t, t.TempDir(), Options{MaxPending: 16})
	fillDisk(t, s, db)
	big := strings.Repeat("x", 8000) // needs new pages: the file refuses it
	held := 0
	for i := range 20 {
		if err := s.Update(ctx, key("flood", fmt.Sprint("s", i)), inject(10, big)); err == nil {
			held++
		}
	}
	if held == 0 || held > 6 {
		t.Errorf("the flooding realm holds %d sessions in memory of 16 places, want some and at most three eighths", held)
	}
	for i := range 2 {
		if err := s.Update(ctx, key("quiet", fmt.Sprint("s", i)), inject(10, big)); err != nil {
			t.Fatalf("another realm's session %d during the flood: %v, want it held in memory", i, err)
		}
	}
	if st := get(t, s, key("quiet", "s1")); st.InjectedBytes != 10 {
		t.Errorf("the quiet realm's session holds %d bytes, want 10", st.InjectedBytes)
	}
}

// TestAFloodingIdentityLeavesItsRealmPendingPlaces: the same within a
// realm: one identity's flood of new sessions on a full disk leaves
// places for the realm's other identities, whose turns used to fail
// storage_full once the flood held the realm's whole share.
func TestAFloodingIdentityLeavesItsRealmPendingPlaces(t *testing.T) {
	s, db := openStore(t, t.TempDir(), Options{MaxPending: 16})
	fillDisk(t, s, db)
	big := strings.Repeat("x", 8000) // needs new pages: the file refuses it
	for i := range 20 {
		_ = s.Update(ctx, key("r", fmt.Sprint("s", i)), inject(10, big)) // alice's
	}
	for i := range 2 {
		bob := coordinator.SessionKey{Realm: "r", Identity: "bob", Session: fmt.Sprint("b", i)}
		if err := s.Update(ctx, bob, inject(10, big)); err != nil {
			t.Fatalf("bob's session %d during alice's flood: %v, want it held in memory", i, err)
		}
	}
}
