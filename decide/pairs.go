package decide

import "fmt"

// Pairs counts paired results of a condition against the baseline, each
// (task, attempt) both scored, by the difference condition − baseline in
// passes: +1 when only the condition passed (Up), −1 when only the
// baseline did (Down), 0 when both or neither did (Same). Those three
// counts are all that the paired statistics here need: the mean
// difference is (Up − Down) / N and the mean squared difference is
// (Up + Down) / N.
type Pairs struct {
	Up   int `json:"up"`
	Down int `json:"down"`
	Same int `json:"same"`
}

// N is the number of pairs.
func (p Pairs) N() int { return p.Up + p.Down + p.Same }

// Sum is the sum of the differences, Up − Down.
func (p Pairs) Sum() int { return p.Up - p.Down }

// Add counts one pair: whether the condition and the baseline passed.
func (p *Pairs) Add(condition, baseline bool) {
	switch {
	case condition && !baseline:
		p.Up++
	case baseline && !condition:
		p.Down++
	default:
		p.Same++
	}
}

// Plus is the counts of both.
func (p Pairs) Plus(q Pairs) Pairs {
	return Pairs{Up: p.Up + q.Up, Down: p.Down + q.Down, Same: p.Same + q.Same}
}

func (p Pairs) valid() error {
	if p.Up < 0 || p.Down < 0 || p.Same < 0 {
		return fmt.Errorf("negative count in %+v", p)
	}
	return nil
}
