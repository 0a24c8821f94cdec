package objectstorage

import "strings"

// Relative is the name of the object name ("<prefix>/<key>", or "<key>" at the top)
// relative to prefix, as ListObjectsRecursive reports it, and whether the object lies
// under prefix at all. Under "a", "a/k" is "k" and "a/b/k" is "b/k"; "ab/k" is not
// under "a".
func Relative(prefix, name string) (string, bool) {
	if prefix == "" {
		return name, true
	}
	rest, ok := strings.CutPrefix(name, prefix+"/")
	return rest, ok && rest != ""
}
