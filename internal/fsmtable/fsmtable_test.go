package fsmtable_test

import (
	"strings"
	"testing"

	"github.com/abi-engine/engine/internal/fsmtable"
	"github.com/abi-engine/engine/internal/fsmtable/fsmtabletest"
)

type state string

type input string

// door is a machine whose doc comment shows its table, as the engine's machines do:
//
//	closed Open                 → open
//	       Lock a key at hand   → locked
//
//	open   Close                → closed
//
//	locked Unlock the right key → closed
type door struct{}

var doorRows = []fsmtable.Row[state, input]{
	{"closed", "Open", "", "open"},
	{"closed", "Lock", "a key at hand", "locked"},
	{"open", "Close", "", "closed"},
	{"locked", "Unlock", "the right key", "closed"},
}

func TestLegalAllowsOnlyTheRows(t *testing.T) {
	tb := fsmtable.New(doorRows, 6, 20)
	for _, c := range []struct {
		from state
		in   input
		to   state
		want bool
	}{
		{"closed", "Open", "open", true},
		{"closed", "Lock", "locked", true},
		{"locked", "Unlock", "closed", true},
		{"locked", "Open", "open", false},  // no row from locked on Open
		{"open", "Close", "locked", false}, // Close leads to closed only
		{"open", "Lock", "locked", false},  // Lock is closed's input
		{"ajar", "Close", "closed", false}, // no such state
	} {
		if got := tb.Legal(c.from, c.in, c.to); got != c.want {
			t.Errorf("Legal(%s, %s, %s) = %v, want %v", c.from, c.in, c.to, got, c.want)
		}
	}
	if !tb.Has("locked") || tb.Has("ajar") {
		t.Errorf("Has(locked) = %v, Has(ajar) = %v; want true, false", tb.Has("locked"), tb.Has("ajar"))
	}
}

// TestTextGroupsRowsByFrom: the from state is named on its group's first row only,
// groups are apart by a blank line, and the columns are as wide as asked.
func TestTextGroupsRowsByFrom(t *testing.T) {
	want := "" +
		"closed Open                 → open\n" +
		"       Lock a key at hand   → locked\n" +
		"\n" +
		"open   Close                → closed\n" +
		"\n" +
		"locked Unlock the right key → closed\n"
	if got := fsmtable.New(doorRows, 6, 20).Text(); got != want {
		t.Fatalf("Text:\n%s\nwant:\n%s", got, want)
	}
}

// TestTheRowsAreTheTablesOwn: a caller that changes its slice after New, or the
// slice Rows returns, changes nothing of the table.
func TestTheRowsAreTheTablesOwn(t *testing.T) {
	rows := append([]fsmtable.Row[state, input](nil), doorRows...)
	tb := fsmtable.New(rows, 6, 20)
	before := tb.Text()
	rows[0].To = "locked"
	tb.Rows()[1].To = "open"
	if tb.Text() != before || !tb.Legal("closed", "Open", "open") || !tb.Legal("closed", "Lock", "locked") {
		t.Fatal("the table changed with its caller's slice")
	}
}

func TestCheckDocFindsTheTable(t *testing.T) {
	fsmtabletest.CheckDoc(t, "fsmtable_test.go", "door", fsmtable.New(doorRows, 6, 20))
}

// TestDocFailsOnAnotherTable: a doc comment that lacks the rendered table is an error
// that names the type.
func TestDocFailsOnAnotherTable(t *testing.T) {
	rows := append([]fsmtable.Row[state, input](nil), doorRows...)
	rows[2].When = "gently"
	err := fsmtabletest.Doc("fsmtable_test.go", "door", fsmtable.New(rows, 6, 20))
	if err == nil || !strings.Contains(err.Error(), "door's doc comment lacks the transition table") ||
		!strings.Contains(err.Error(), "Close gently") {
		t.Fatalf("Doc = %v, want door's table missing, with the row it should show", err)
	}
}
