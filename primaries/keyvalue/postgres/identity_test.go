package postgres

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestIdentity: two stores on one table (two engines on one database) read one id,
// another table reads another, and Where names the database and the table.
func TestIdentity(t *testing.T) {
	p := pool(t)
	a := newStore(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	again, err := New(ctx, p, Config{Table: a.table})
	if err != nil {
		t.Fatal(err)
	}
	other := newStore(t, p)
	ida, err := a.Identity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	idAgain, err := again.Identity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	idOther, err := other.Identity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case len(ida.ID) != 32 || ida.ID != idAgain.ID:
		t.Fatalf("one table read ids %q and %q", ida.ID, idAgain.ID)
	case ida.ID == idOther.ID:
		t.Fatalf("two tables share the id %q", ida.ID)
	case !strings.Contains(ida.Where, "table "+a.table) || !strings.Contains(ida.Where, "database "):
		t.Fatalf("Where = %q, want the database and table %s", ida.Where, a.table)
	}
}
