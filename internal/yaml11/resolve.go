package yaml11

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
)

// These are PyYAML's implicit resolvers (resolver.py), in the order PyYAML
// tries them. Plain scalars only: quoted and block scalars are strings.
var (
	boolPattern = regexp.MustCompile(`^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$`)
	// A float needs a dot; an exponent needs a sign: 1e16 and 1.0e5 are strings.
	floatPattern = regexp.MustCompile(`^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?` +
		`|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?` +
		`|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*` +
		`|[-+]?\.(?:inf|Inf|INF)` +
		`|\.(?:nan|NaN|NAN))$`)
	intPattern = regexp.MustCompile(`^(?:[-+]?0b[0-1_]+` +
		`|[-+]?0[0-7_]+` +
		`|[-+]?(?:0|[1-9][0-9_]*)` +
		`|[-+]?0x[0-9a-fA-F_]+` +
		`|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$`)
	nullPattern      = regexp.MustCompile(`^(?:~|null|Null|NULL|)$`)
	timestampPattern = regexp.MustCompile(`^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]` +
		`|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?` +
		`(?:[Tt]|[ \t]+)[0-9][0-9]?` +
		`:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?` +
		`(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$`)
)

// errMergeValue and errValueTag are PyYAML's ConstructorErrors for the two
// special plain scalars it resolves but cannot construct.
var (
	errMergeValue = errors.New("<< is YAML's merge key and cannot be a value; quote it to mean the text")
	errValueTag   = errors.New("= is YAML 1.1's value key and cannot be a value; quote it to mean the text")
)

// resolvePlain gives a plain scalar its YAML 1.1 type and value, exactly as
// PyYAML's Resolver and SafeConstructor would.
func resolvePlain(n *Node, text string) error {
	n.Text, n.Plain = text, true
	first := byte(0)
	if text != "" {
		first = text[0]
	}
	// PyYAML picks the resolvers by the first character, then tries them in
	// registration order: bool, float, int, merge, null, timestamp, value.
	if strings.IndexByte("yYnNtTfFoO", first) >= 0 && boolPattern.MatchString(text) {
		return construct(n, Bool, text)
	}
	if strings.IndexByte("-+0123456789.", first) >= 0 && floatPattern.MatchString(text) {
		return construct(n, Float, text)
	}
	if strings.IndexByte("-+0123456789", first) >= 0 && intPattern.MatchString(text) {
		return construct(n, Int, text)
	}
	if text == "<<" {
		return errMergeValue
	}
	if (text == "" || strings.IndexByte("~nN", first) >= 0) && nullPattern.MatchString(text) {
		n.Kind = Null
		return nil
	}
	if first >= '0' && first <= '9' && timestampPattern.MatchString(text) {
		n.Kind = Timestamp
		return nil
	}
	if text == "=" {
		return errValueTag
	}
	n.Kind = String
	return nil
}

// construct sets n to the value of text read as kind, the way PyYAML's
// SafeConstructor does for implicit and explicit (!!int, !!float, !!bool) tags.
func construct(n *Node, kind Kind, text string) error {
	n.Kind = kind
	switch kind {
	case Bool:
		switch strings.ToLower(text) {
		case "yes", "true", "on":
			n.Bool = true
		case "no", "false", "off":
			n.Bool = false
		default:
			return fmt.Errorf("%q is not a YAML 1.1 boolean (yes/no, true/false, on/off)", text)
		}
	case Int:
		v, err := constructInt(text)
		if err != nil {
			return err
		}
		n.Int = v
	case Float:
		v, err := constructFloat(text)
		if err != nil {
			return err
		}
		n.Float = v
	}
	return nil
}

// constructInt follows PyYAML's construct_yaml_int: underscores dropped, then
// 0b binary, 0x hex, a leading 0 octal, colons base 60, else decimal.
func constructInt(text string) (*big.Int, error) {
	value := strings.ReplaceAll(text, "_", "")
	bad := func() (*big.Int, error) {
		return nil, fmt.Errorf("%q is not a valid YAML 1.1 integer", text)
	}
	if value == "" {
		return bad()
	}
	sign := 1
	if value[0] == '-' {
		sign = -1
	}
	if value[0] == '+' || value[0] == '-' {
		value = value[1:]
	}
	out := new(big.Int)
	var ok bool
	switch {
	case value == "0":
		return out, nil
	case strings.HasPrefix(value, "0b"):
		_, ok = out.SetString(value[2:], 2)
	case strings.HasPrefix(value, "0x"):
		_, ok = out.SetString(value[2:], 16)
	case strings.HasPrefix(value, "0"):
		_, ok = out.SetString(value, 8)
	case strings.Contains(value, ":"):
		ok = true
		base := big.NewInt(1)
		parts := strings.Split(value, ":")
		for i := len(parts) - 1; i >= 0; i-- {
			d, dok := new(big.Int).SetString(parts[i], 10)
			if !dok {
				return bad()
			}
			out.Add(out, d.Mul(d, base))
			base.Mul(base, big.NewInt(60))
		}
	default:
		_, ok = out.SetString(value, 10)
	}
	if !ok {
		return bad()
	}
	if sign < 0 {
		out.Neg(out)
	}
	return out, nil
}

// constructFloat follows PyYAML's construct_yaml_float, including the order
// of the float operations for base-60 values, so results match bit for bit.
func constructFloat(text string) (float64, error) {
	value := strings.ToLower(strings.ReplaceAll(text, "_", ""))
	if value == "" {
		return 0, fmt.Errorf("%q is not a valid YAML 1.1 float", text)
	}
	sign := 1.0
	if value[0] == '-' {
		sign = -1
	}
	if value[0] == '+' || value[0] == '-' {
		value = value[1:]
	}
	switch {
	case value == ".inf":
		return sign * math.Inf(1), nil
	case value == ".nan":
		return math.NaN(), nil
	case strings.Contains(value, ":"):
		parts := strings.Split(value, ":")
		base, sum := 1.0, 0.0
		for i := len(parts) - 1; i >= 0; i-- {
			d, err := parsePythonFloat(parts[i])
			if err != nil {
				return 0, fmt.Errorf("%q is not a valid YAML 1.1 float", text)
			}
			sum += d * base
			base *= 60
		}
		return sign * sum, nil
	}
	v, err := parsePythonFloat(value)
	if err != nil {
		return 0, fmt.Errorf("%q is not a valid YAML 1.1 float", text)
	}
	return sign * v, nil
}

// parsePythonFloat reads the decimal forms Python's float() accepts after
// PyYAML's cleanup ("1.", ".5", "1.e+5"); Go's parser is correctly rounded,
// as CPython's is.
func parsePythonFloat(s string) (float64, error) {
	if s == "" || strings.ContainsAny(s, "xXpP_") || strings.EqualFold(s, "inf") ||
		strings.EqualFold(s, "infinity") || strings.EqualFold(s, "nan") {
		return 0, strconv.ErrSyntax
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, err
	}
	// Out of range: Python gives inf for overflow and 0 for underflow, which is
	// what ParseFloat returns beside ErrRange.
	return v, nil
}
