package report

import (
	"math"
	"sort"
)

// Frontier splits points into the Pareto frontier of throughput (Y, higher
// is better) against X, and the dominated rest. X is better higher
// (interactivity) unless xLowerBetter (E2EL). A point is dominated when
// another is at least as good on both axes and better on one. The frontier
// comes back sorted by X ascending, the way the curve is drawn; points with
// a non-positive or non-finite coordinate are in neither list.
func Frontier(pts []XY, xLowerBetter bool) (front, dominated []XY) {
	var ok []XY
	for _, p := range pts {
		if valid(p) {
			ok = append(ok, p)
		}
	}
	better := func(a, b float64) bool { // a is strictly better than b on X
		if xLowerBetter {
			return a < b
		}
		return a > b
	}
	// Best X first, ties by higher Y: each point is on the frontier iff its
	// Y beats every point before it (or equals the last frontier point).
	sort.SliceStable(ok, func(i, j int) bool {
		if ok[i].X != ok[j].X {
			return better(ok[i].X, ok[j].X)
		}
		return ok[i].Y > ok[j].Y
	})
	bestY := math.Inf(-1)
	for _, p := range ok {
		switch {
		case p.Y > bestY:
			front = append(front, p)
			bestY = p.Y
		case len(front) > 0 && p.X == front[len(front)-1].X && p.Y == front[len(front)-1].Y:
			front = append(front, p) // a duplicate of a frontier point is not dominated
		default:
			dominated = append(dominated, p)
		}
	}
	sort.SliceStable(front, func(i, j int) bool { return front[i].X < front[j].X })
	return front, dominated
}

func valid(p XY) bool {
	return p.X > 0 && p.Y > 0 && !math.IsInf(p.X, 0) && !math.IsInf(p.Y, 0)
}
