// Package fsmtable is a state machine's transition table as data: the rows the machine
// may move by, the check of a move against them, and the rows rendered as the table
// the machine's doc comment shows, so that the prose a reader trusts and the moves the
// code allows are one. The lease's Machine and the root's HandoverMachine each keep
// their table in one; package fsmtabletest lets a test check the doc comment against
// it. It imports nothing but the standard library, so any package may use it.
package fsmtable

import (
	"fmt"
	"strings"
)

// Row is one move a machine may make: in From, input In, when the condition When
// holds, moves it to To. When is prose for the reader ("" for always): two rows that
// differ only in When allow the same move.
type Row[S, I comparable] struct {
	From S
	In   I
	When string
	To   S
}

// Table is a machine's rows, indexed for Legal. It never changes once made, so any
// goroutine may read it.
type Table[S, I comparable] struct {
	rows      []Row[S, I]
	legal     map[move[S, I]]struct{}
	mentioned map[S]struct{}
	// the widths Text pads the from and the input columns to
	fromWidth, inWidth int
}

type move[S, I comparable] struct {
	from, to S
	in       I
}

// New makes the table of rows, in their order: a machine lists them grouped by From.
// Text pads the from column to fromWidth and the input column (the input and its
// condition) to inWidth, which the machine chooses once for its doc comment.
func New[S, I comparable](rows []Row[S, I], fromWidth, inWidth int) *Table[S, I] {
	t := &Table[S, I]{
		rows:      append([]Row[S, I](nil), rows...),
		legal:     make(map[move[S, I]]struct{}, len(rows)),
		mentioned: make(map[S]struct{}),
		fromWidth: fromWidth, inWidth: inWidth,
	}
	for _, r := range rows {
		t.legal[move[S, I]{r.From, r.To, r.In}] = struct{}{}
		t.mentioned[r.From], t.mentioned[r.To] = struct{}{}, struct{}{}
	}
	return t
}

// Legal reports whether a row moves the machine from from to to on in, under any
// condition.
func (t *Table[S, I]) Legal(from S, in I, to S) bool {
	_, ok := t.legal[move[S, I]{from, to, in}]
	return ok
}

// Rows are the table's rows, in their order (a copy).
func (t *Table[S, I]) Rows() []Row[S, I] { return append([]Row[S, I](nil), t.rows...) }

// Has reports whether s is a row's from or to: a state the table leaves out is one
// the machine can neither reach nor leave by it.
func (t *Table[S, I]) Has(s S) bool {
	_, ok := t.mentioned[s]
	return ok
}

// Text renders the rows as the machine's doc comment shows them: a line a row (the
// from state on the first row of its group only, the input and its condition, an
// arrow, the state it moves to), and a blank line between groups. The same rows and
// widths always render the same text.
func (t *Table[S, I]) Text() string {
	var b strings.Builder
	for i, r := range t.rows {
		from := fmt.Sprint(r.From)
		if i > 0 && t.rows[i-1].From == r.From {
			from = ""
		} else if i > 0 {
			b.WriteString("\n")
		}
		in := fmt.Sprint(r.In)
		if r.When != "" {
			in += " " + r.When
		}
		fmt.Fprintf(&b, "%-*s %-*s → %v\n", t.fromWidth, from, t.inWidth, in, r.To)
	}
	return b.String()
}
