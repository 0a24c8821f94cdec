package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Override is a value given on the command line. It wins over the file and the
// environment, and an error about it names the flag. Build one with RoleFlag,
// NATSURLFlag or HTTPListenFlag, and only for a flag the user actually gave (an empty
// value is applied: --http "" turns HTTP off).
type Override struct {
	flag, key, value string
	// what names the source in messages when it is not a flag (a natscli context).
	what string
}

// RoleFlag is --role: nats.engine.role.
func RoleFlag(role string) Override { return Override{flag: "--role", key: keyRole, value: role} }

// NATSURLFlag is --nats: nats.url ("" starts the embedded server).
func NATSURLFlag(url string) Override { return Override{flag: "--nats", key: keyNATSURL, value: url} }

// NATSURLFrom is nats.url taken from elsewhere than a flag, what naming it in messages
// (`natscli context "prod"`), so a bad URL points at where it was written.
func NATSURLFrom(what, url string) Override {
	return Override{key: keyNATSURL, value: url, what: what}
}

// RolloutFlag is --rollout: nats.engine.rollout_id (config check's stand-in for
// ABI_ROLLOUT_ID).
func RolloutFlag(id string) Override {
	return Override{flag: "--rollout", key: keyRolloutID, value: id}
}

// HTTPListenFlag is --http: http.listen ("" turns HTTP off).
func HTTPListenFlag(addr string) Override {
	return Override{flag: "--http", key: keyHTTPListen, value: addr}
}

// Load reads the configuration the way the binary does: the file at path when path is
// set (a missing file is an error), else FileName in the working directory when it
// exists, else the defaults; then the environment (read through env, e.g. os.Getenv; nil
// reads nothing) wins over the file, and overrides win over both. The result is
// validated as a whole, shared-backend check included.
//
// Every error Load returns is a configuration error (the CLI exits 2): an *Error
// listing every problem with the content, or an error reading the file (errors.Is
// fs.ErrNotExist when an explicit path does not exist).
func Load(path string, env func(string) string, overrides ...Override) (*Config, error) {
	data, path, err := read(path)
	if err != nil {
		return nil, err
	}
	return parse(data, path, env, overrides, nil)
}

// Parse is Load for a YAML document already in memory (an embedding program's own
// file, a test). Empty data gives the defaults.
func Parse(data []byte, env func(string) string, overrides ...Override) (*Config, error) {
	return parse(data, "", env, overrides, nil)
}

// parse decodes data, applies the environment and the overrides, and validates the
// result; more, when set, adds the issues of checks beyond Validate's.
func parse(data []byte, path string, env func(string) string, overrides []Override, more func(*Config) []Issue) (*Config, error) {
	c := Default()
	c.path = path
	issues := c.decode(data)
	c.applyEnv(env)
	c.apply(overrides)
	issues = c.check(issues)
	if more != nil {
		issues = append(issues, more(c)...)
	}
	if err := c.result(issues); err != nil {
		return nil, err
	}
	c.NATS.URL = withNATSSchemes(c.NATS.URL)
	return c, nil
}

// Apply sets overrides on a loaded configuration and validates the result. On error the
// configuration is left as it was.
func (c *Config) Apply(overrides ...Override) error {
	next := *c
	next.apply(overrides)
	if err := next.Validate(); err != nil {
		return err
	}
	next.NATS.URL = withNATSSchemes(next.NATS.URL)
	*c = next
	return nil
}

func (c *Config) apply(overrides []Override) {
	for _, o := range overrides {
		what := o.what
		if what == "" {
			what = "flag " + o.flag
		}
		if c.set(o.key, o.value) {
			c.setOrigin(o.key, source{what: what})
		}
	}
}

// applyEnv applies the non-empty environment variables; an empty one keeps the file's
// value, as in the reference engine.
func (c *Config) applyEnv(env func(string) string) {
	if env == nil {
		return
	}
	for _, v := range []struct{ name, key string }{
		{EnvRole, keyRole},
		{EnvRolloutID, keyRolloutID},
		{EnvNATSURL, keyNATSURL},
		{EnvStandby, keyStandby},
		{EnvHTTPListen, keyHTTPListen},
		{EnvEmbeddedListen, keyEmbeddedListen},
		{EnvJWTSecretFile, keyJWTSecretFile},
	} {
		if val := env(v.name); val != "" && c.set(v.key, val) {
			c.setOrigin(v.key, source{what: "environment variable " + v.name})
		}
	}
}

// set assigns one of the keys the environment and flags may set.
func (c *Config) set(key, value string) bool {
	switch key {
	case keyRole:
		c.NATS.Engine.Role = Role(value)
	case keyRolloutID:
		c.NATS.Engine.RolloutID = value
	case keyNATSURL:
		c.NATS.URL = value
	case keyStandby:
		c.NATS.Engine.Standby = Standby(value)
	case keyHTTPListen:
		c.HTTP.Listen = value
	case keyEmbeddedListen:
		c.NATS.Embedded.Listen = value
	case keyJWTSecretFile:
		c.NATS.JWTSecretFile = value
	default:
		return false
	}
	return true
}

// decode fills c from YAML with go.yaml.in/yaml/v3. The document is first read as a
// node tree and walked (inspect), which names each problem by its key path and line (the
// yaml package reports an unknown key as "field x not found in type config.Engine",
// without the key's path), records the line of every value for later validation
// messages, and takes out of the tree every key the walk refused (unknown, set twice),
// so the decoder, the authority on what each value means, only sees keys of the
// configuration. That keeps the check linear: the decoder compares every pair of keys
// of a mapping, which takes seconds for a document of 40 000 unknown keys, and a
// configuration's mappings have a handful each.
func (c *Config) decode(data []byte) []Issue {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil // only comments
	} else if err != nil {
		return []Issue{{Rule: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	var extra []Issue
	if err := dec.Decode(new(yaml.Node)); !errors.Is(err, io.EOF) {
		extra = append(extra, Issue{Rule: "must hold one YAML document, but it holds more"})
	}

	w := walker{lines: make(map[string]int), budget: maxWalk, active: make(map[*yaml.Node]bool)}
	w.inspect(&doc, reflect.TypeFor[Config](), "")
	origins := make(map[string]source, len(w.lines))
	for key, line := range w.lines {
		origins[key] = source{what: "line " + strconv.Itoa(line), line: line}
	}
	c.origins = origins
	issues := w.issues
	if w.unlisted > 0 {
		issues = append(issues, Issue{Rule: fmt.Sprintf("%d more problems not listed here (the first %d are)", w.unlisted, maxListed)})
	}

	if w.budget < 0 {
		// Part of the document was not walked, so not pruned either: the decoder could
		// take as long as the walk was bounded to avoid. The problem is reported above.
		return append(issues, extra...)
	}
	w.prune()
	err := doc.Decode(c)
	var typeErr *yaml.TypeError
	if err != nil && !errors.As(err, &typeErr) {
		return []Issue{{Rule: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	if typeErr != nil && len(issues) == 0 {
		// The walk found nothing the decoder did: report the decoder's own words rather
		// than lose the error.
		for _, msg := range typeErr.Errors {
			issues = append(issues, Issue{Rule: msg})
		}
	}
	return append(issues, extra...)
}

// maxWalk bounds the nodes inspect visits, so merge keys over aliases cannot make the
// walk exponential. A configuration has a few dozen nodes.
const maxWalk = 10000

// maxListed bounds the problems the walk lists one by one; the rest are counted, so a
// document of thousands of unknown keys gives a message one can read.
const maxListed = 20

type walker struct {
	lines    map[string]int
	issues   []Issue
	unlisted int
	budget   int
	// active holds the mappings being inspected, so a mapping merged into itself
	// (<<: *self) ends the walk there instead of going round.
	active map[*yaml.Node]bool
	// mappings are the mappings of the document the walk reached, and dropped the key
	// nodes it refused, which prune takes out of them.
	mappings []*yaml.Node
	dropped  map[*yaml.Node]bool
}

func (w *walker) drop(key *yaml.Node) {
	if w.dropped == nil {
		w.dropped = make(map[*yaml.Node]bool)
	}
	w.dropped[key] = true
}

// prune takes the refused keys, with their values, out of the mappings they are in.
func (w *walker) prune() {
	if len(w.dropped) == 0 {
		return
	}
	for _, m := range w.mappings {
		kept := m.Content[:0]
		for i := 0; i+1 < len(m.Content); i += 2 {
			if !w.dropped[m.Content[i]] {
				kept = append(kept, m.Content[i], m.Content[i+1])
			}
		}
		m.Content = kept
	}
}

func (w *walker) add(key, value, rule string, line int) {
	if len(w.issues) >= maxListed {
		w.unlisted++
		return
	}
	w.issues = append(w.issues, Issue{Key: key, Value: value, Rule: rule, Origin: "line " + strconv.Itoa(line), Line: line})
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// inspect checks node n against the Go type t found at key path.
func (w *walker) inspect(n *yaml.Node, t reflect.Type, path string) {
	if w.budget--; w.budget < 0 {
		if w.budget == -1 {
			w.add(path, "", "the document is too deeply aliased to check", n.Line)
		}
		return
	}
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) > 0 {
			w.inspect(n.Content[0], t, path)
		}
		return
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem() // an optional block (nats.discovery): checked like any other
	}
	if t.Kind() != reflect.Struct {
		w.leaf(n, t, path)
		return
	}
	if isNull(n) {
		return // "engine:" with nothing keeps the defaults
	}
	if w.active[n] {
		return
	}
	w.active[n] = true
	defer delete(w.active, n)
	fields, names := fieldsOf(t)
	if n.Kind != yaml.MappingNode {
		w.add(path, "", fmt.Sprintf("must be a mapping of %s, found %s", names, describe(n)), n.Line)
		return
	}
	w.mappings = append(w.mappings, n)
	seen := make(map[string]int)
	var merges []*yaml.Node
	mergeLine := 0
	unknown := 0 // the line of the mapping's first unknown key
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.AliasNode && k.Alias != nil {
			k = k.Alias
		}
		if k.Kind == yaml.ScalarNode && k.Value == "<<" && (k.Tag == "" || k.Tag == "!" || k.ShortTag() == "!!merge") {
			if len(merges) > 0 {
				w.add(join(path, "<<"), "", "is set twice (first at line "+strconv.Itoa(mergeLine)+"); merge a list instead: <<: [*a, *b]", k.Line)
				w.drop(n.Content[i])
				continue
			}
			mergeLine = k.Line
			merges = append(merges, v)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			w.add(path, "", "keys must be plain names, found "+describe(k), k.Line)
			w.drop(n.Content[i])
			continue
		}
		key := join(path, k.Value)
		if first, dup := seen[k.Value]; dup {
			w.add(key, "", "is set twice (first at line "+strconv.Itoa(first)+")", k.Line)
			w.drop(n.Content[i])
			continue
		}
		seen[k.Value] = k.Line
		ft, ok := fields[k.Value]
		if !ok {
			where := path
			if where == "" {
				where = "the top level"
			}
			// The keys the mapping takes are listed once: a document of many unknown
			// keys still gives a message one can read.
			msg := fmt.Sprintf("unknown key; %s takes %s", where, names)
			if unknown > 0 {
				msg = fmt.Sprintf("unknown key; %s takes the keys listed at line %d", where, unknown)
			} else {
				unknown = k.Line
			}
			w.add(key, "", msg, k.Line)
			w.drop(n.Content[i])
			continue
		}
		w.inspect(v, ft, key)
	}
	// Keys of the mapping itself win over merged ones, as in the decoder.
	for _, m := range merges {
		if m.Kind == yaml.AliasNode && m.Alias != nil {
			m = m.Alias
		}
		if m.Kind == yaml.SequenceNode {
			for _, item := range m.Content {
				w.inspectMerged(item, t, path, seen)
			}
			continue
		}
		w.inspectMerged(m, t, path, seen)
	}
}

// inspectMerged inspects a mapping merged in with "<<", skipping keys already set.
func (w *walker) inspectMerged(m *yaml.Node, t reflect.Type, path string, seen map[string]int) {
	if m.Kind == yaml.AliasNode && m.Alias != nil {
		m = m.Alias
	}
	if m.Kind != yaml.MappingNode {
		w.add(path, "", "a merge (<<) needs a mapping or a list of mappings, found "+describe(m), m.Line)
		return
	}
	if w.active[m] {
		return
	}
	w.active[m] = true
	defer delete(w.active, m)
	w.mappings = append(w.mappings, m)
	rest := &yaml.Node{Kind: yaml.MappingNode, Line: m.Line}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := m.Content[i]; k.Kind == yaml.ScalarNode {
			if _, done := seen[k.Value]; done {
				continue
			}
		}
		rest.Content = append(rest.Content, m.Content[i], m.Content[i+1])
	}
	w.inspect(rest, t, path)
}

// leaf checks a scalar value by decoding it alone into its Go type.
func (w *walker) leaf(n *yaml.Node, t reflect.Type, path string) {
	if isNull(n) {
		return // keeps the default
	}
	if n.Kind != yaml.ScalarNode {
		w.add(path, "", "must be "+kindRule(t)+", found "+describe(n), n.Line)
		return
	}
	if err := n.Decode(reflect.New(t).Interface()); err != nil || !wholeIfInt(n, t) {
		w.add(path, strconv.Quote(n.Value), "must be "+kindRule(t), n.Line)
		return
	}
	w.lines[path] = n.Line
}

// wholeIfInt catches what the decoder lets through: it truncates a float such as 1.5
// into an int field without a word.
func wholeIfInt(n *yaml.Node, t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
	default:
		return true
	}
	if n.ShortTag() != "!!float" {
		return true
	}
	var f float64
	if err := n.Decode(&f); err != nil {
		return false
	}
	return f == math.Trunc(f) && !math.IsInf(f, 0)
}

func kindRule(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Float32, reflect.Float64:
		return "a number (seconds)"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	default:
		return "a " + t.Kind().String()
	}
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	default:
		return quote(n.Value)
	}
}

// fieldsOf maps the YAML names of struct t's fields to their types, and lists the names
// in declaration order for messages.
func fieldsOf(t reflect.Type) (map[string]reflect.Type, string) {
	out := make(map[string]reflect.Type)
	var names []string
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		out[name] = f.Type
		names = append(names, name)
	}
	return out, strings.Join(names, ", ")
}
