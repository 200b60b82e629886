package docker

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// A Dockerfile read as the builder reads its FROM lines, for an
// environment's cache key: which base images a build starts from.

// baseImage is an image a Dockerfile's FROM names, its build arguments
// expanded.
type baseImage struct {
	Line int // where its FROM starts, from 1
	Ref  string
}

// errNotStatic means a FROM's image depends on something only the build
// knows: a build argument without a default, an undeclared variable, a
// form of expansion this reader does not follow.
var errNotStatic = errors.New("the image cannot be known before the build")

// baseImages reads a Dockerfile's FROM instructions and returns the images
// they name, in order and once each: FROM [--flag=…]… image [AS name],
// keywords in any case, lines continued with the escape character (\, or
// the one an "# escape=" directive sets), comments skipped. scratch and
// FROMs naming an earlier stage are left out. Build arguments declared
// before the first FROM are expanded with their defaults ($NAME, ${NAME},
// ${NAME:-word}, ${NAME:+word} and the forms without the colon). A FROM
// whose image cannot be known statically gives an error that names its
// line (errNotStatic); the other FROMs are still returned.
func baseImages(dockerfile []byte) ([]baseImage, error) {
	text := strings.TrimPrefix(string(dockerfile), "\ufeff")
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	r := fromReader{escape: escapeOf(lines), args: map[string]argValue{}, stages: map[string]bool{}, seen: map[string]bool{}}
	for _, in := range joinLines(lines, r.escape) {
		r.instruction(in.line, in.text)
	}
	return r.out, errors.Join(r.errs...)
}

// directive is a parser directive line: # key=value.
var directive = regexp.MustCompile(`^#\s*([a-zA-Z][a-zA-Z0-9]*)\s*=\s*(.+?)\s*$`)

// escapeOf is the Dockerfile's escape character: \ unless an "# escape="
// directive sets ` (or \). Parser directives are the comments
// "# key=value" at the very top; any other line, an empty one included,
// ends them.
func escapeOf(lines []string) rune {
	escape := '\\'
	for _, line := range lines {
		m := directive.FindStringSubmatch(line)
		if m == nil {
			break
		}
		if strings.EqualFold(m[1], "escape") && (m[2] == "`" || m[2] == "\\") {
			escape = rune(m[2][0])
		}
	}
	return escape
}

// instructionText is one instruction of a Dockerfile, its continued lines
// joined, and the line it starts on (from 1).
type instructionText struct {
	line int
	text string
}

// joinLines splits a Dockerfile into instructions: a line ending in the
// escape character continues on the next; comment lines and, inside a
// continued instruction, empty ones are skipped without ending it.
func joinLines(lines []string, escape rune) []instructionText {
	var out []instructionText
	var instr strings.Builder
	start := 0
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || trimmed[0] == '#' {
			continue
		}
		if instr.Len() == 0 {
			start = i + 1
		}
		body := strings.TrimRight(line, " \t\r")
		if cont, ok := strings.CutSuffix(body, string(escape)); ok {
			instr.WriteString(cont)
			continue
		}
		instr.WriteString(body)
		out = append(out, instructionText{start, instr.String()})
		instr.Reset()
	}
	if instr.Len() > 0 {
		out = append(out, instructionText{start, instr.String()})
	}
	return out
}

// fromReader follows a Dockerfile's instructions in order: the global
// build arguments (before the first FROM), the stages named so far, and
// the base images found.
type fromReader struct {
	escape  rune
	args    map[string]argValue
	stages  map[string]bool
	seen    map[string]bool
	sawFrom bool
	out     []baseImage
	errs    []error
}

// argValue is a global build argument: its default, expanded, or why it
// has none that can be known.
type argValue struct {
	value string
	err   error
}

// instruction reads one instruction, starting on line start: an ARG
// before the first FROM, or a FROM.
func (r *fromReader) instruction(start int, text string) {
	words := splitWords(text, r.escape)
	if len(words) == 0 {
		return
	}
	switch strings.ToLower(words[0]) {
	case "arg":
		if !r.sawFrom { // a stage's own argument: FROMs cannot use it
			r.arg(words[1:])
		}
	case "from":
		r.sawFrom = true
		r.from(start, words[1:])
	}
}

// arg declares global build arguments, each with its default expanded.
func (r *fromReader) arg(words []string) {
	for _, w := range words {
		name, value, hasValue := strings.Cut(w, "=")
		if !hasValue {
			r.args[name] = argValue{err: fmt.Errorf("ARG %s has no default: %w", name, errNotStatic)}
			continue
		}
		v, err := expandWord(value, r.escape, r.args)
		r.args[name] = argValue{value: v, err: err}
	}
}

// from reads FROM [--flag=…]… image [AS name]: its image is a base unless
// it is scratch or an earlier stage, or was found already.
func (r *fromReader) from(start int, rest []string) {
	for len(rest) > 0 && strings.HasPrefix(rest[0], "--") {
		rest = rest[1:]
	}
	if len(rest) == 0 {
		r.errs = append(r.errs, fmt.Errorf("line %d: FROM names no image: %w", start, errNotStatic))
		return
	}
	if len(rest) >= 3 && strings.EqualFold(rest[1], "as") {
		defer func() { r.stages[strings.ToLower(rest[2])] = true }()
	}
	ref, err := expandWord(rest[0], r.escape, r.args)
	switch {
	case err != nil:
		r.errs = append(r.errs, fmt.Errorf("line %d: FROM %s: %w", start, rest[0], err))
	case ref == "":
		r.errs = append(r.errs, fmt.Errorf("line %d: FROM %s is empty: %w", start, rest[0], errNotStatic))
	case strings.EqualFold(ref, "scratch"), r.stages[strings.ToLower(ref)]:
	case !r.seen[ref]:
		r.seen[ref] = true
		r.out = append(r.out, baseImage{Line: start, Ref: ref})
	}
}

// splitWords splits an instruction into words at blanks outside quotes,
// keeping quotes and escapes for expandWord.
func splitWords(s string, escape rune) []string {
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote == 0 && (r == ' ' || r == '\t'):
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
			continue
		case r == escape && quote != '\'' && i+1 < len(rs):
			w.WriteRune(r)
			i++
			r = rs[i]
		case quote == 0 && (r == '"' || r == '\''):
			quote = r
		case r == quote:
			quote = 0
		}
		w.WriteRune(r)
		inWord = true
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// expandWord does what the builder does to a FROM's image or an ARG's
// default: quotes removed, escapes resolved, variables replaced by build
// arguments' defaults. A variable with no known value, or an expansion
// beyond ${NAME[:]-word} and ${NAME[:]+word}, is an error (errNotStatic).
func expandWord(word string, escape rune, args map[string]argValue) (string, error) {
	var out strings.Builder
	rs := []rune(word)
	var quote rune
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == escape && quote != '\'' && i+1 < len(rs):
			i++
			out.WriteRune(rs[i])
		case quote == 0 && (r == '"' || r == '\''):
			quote = r
		case r == quote:
			quote = 0
		case r == '$' && quote != '\'' && i+1 < len(rs) && rs[i+1] == '{':
			v, end, err := expandBraces(rs, i, escape, args)
			if err != nil {
				return "", err
			}
			out.WriteString(v)
			i = end
		case r == '$' && quote != '\'' && i+1 < len(rs) && isNameRune(rs[i+1]):
			end := i + 1
			for end < len(rs) && isNameRune(rs[end]) {
				end++
			}
			v, err := lookupArg(args, string(rs[i+1:end]))
			if err != nil {
				return "", err
			}
			out.WriteString(v)
			i = end - 1
		default:
			out.WriteRune(r)
		}
	}
	return out.String(), nil
}

// expandBraces expands the ${…} that starts at rs[i] and returns its
// value and the index of its closing brace: ${NAME}, ${NAME:-word},
// ${NAME-word}, ${NAME:+word} and ${NAME+word}, words expanded in turn.
func expandBraces(rs []rune, i int, escape rune, args map[string]argValue) (string, int, error) {
	end, depth := i+2, 1
	for ; end < len(rs); end++ {
		if rs[end] == '$' && end+1 < len(rs) && rs[end+1] == '{' {
			depth++
		} else if rs[end] == '}' {
			if depth--; depth == 0 {
				break
			}
		}
	}
	if end == len(rs) {
		return "", end, fmt.Errorf("a ${ without its }: %w", errNotStatic)
	}
	expr := string(rs[i+2 : end])
	n := 0
	for n < len(expr) && isNameRune(rune(expr[n])) {
		n++
	}
	name, op := expr[:n], expr[n:]
	if name == "" {
		return "", end, fmt.Errorf("${%s}: %w", expr, errNotStatic)
	}
	v, err := lookupArg(args, name)
	if err != nil {
		return "", end, err
	}
	// Every known argument is set; ":-" and ":+" also ask whether it is
	// empty.
	colon := strings.HasPrefix(op, ":")
	word := strings.TrimPrefix(op, ":")
	switch {
	case op == "":
		return v, end, nil
	case strings.HasPrefix(word, "-"):
		if colon && v == "" {
			v, err = expandWord(word[1:], escape, args)
		}
		return v, end, err
	case strings.HasPrefix(word, "+"):
		if !colon || v != "" {
			v, err := expandWord(word[1:], escape, args)
			return v, end, err
		}
		return "", end, nil
	}
	return "", end, fmt.Errorf("${%s}: this form of expansion is not followed: %w", expr, errNotStatic)
}

// lookupArg is a global build argument's default, or why it has none
// that can be known.
func lookupArg(args map[string]argValue, name string) (string, error) {
	a, ok := args[name]
	if !ok {
		return "", fmt.Errorf("%s is not a build argument declared before the first FROM: %w", name, errNotStatic)
	}
	if a.err != nil {
		return "", a.err
	}
	return a.value, nil
}

// isNameRune reports whether r may be part of a variable's name.
func isNameRune(r rune) bool {
	return r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}
