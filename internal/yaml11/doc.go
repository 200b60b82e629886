// Package yaml11 reads YAML the way PyYAML's safe_load does (YAML 1.1
// scalars, merge keys, anchors) and keeps the line and column of every value,
// so that troupe's manifests hash exactly as the original Python system hashed
// them and every problem can be reported where it is.
//
// The structure of a document comes from github.com/goccy/go-yaml's parser;
// the meaning of each plain scalar comes from PyYAML's implicit resolvers
// (yes/no/on/off are booleans, 010 is octal, 1_000 is 1000, 1e16 without a dot
// is a string). Hostile input is bounded before and after parsing: a document
// that would expand through aliases beyond MaxNodes, nest deeper than
// MaxDepth, or hold a block mapping with more than MaxMappingEntries keys is
// refused with a located error instead of hanging.
//
// Decoder turns a Node tree into typed values: unknown keys, wrong types and
// rule violations are collected (not returned one at a time), each a
// *located.Error with its file:line:col and key path, so a user sees every
// problem of a file at once.
package yaml11
