package actors

import "github.com/abi-engine/engine/internal/group"

// Group is package group's one goroutine group, under the name the members use with
// StartStep.
type Group = group.Group

// NewGroup makes an open group.
func NewGroup() *Group { return group.New() }
