package gsm8k

import "math"

// pyRandom reproduces CPython's random.Random (MT19937 seeded through
// init_by_array) closely enough to replay lm-eval's few-shot draws bit for
// bit: lm-eval calls random.Random(1234).sample(train_docs, 5) once per test
// document, in document order, from a single generator.
type pyRandom struct {
	mt  [624]uint32
	idx int
}

// newPyRandom matches random.Random(seed) for a non-negative integer seed:
// CPython splits abs(seed) into little-endian 32-bit words and feeds them to
// init_by_array.
func newPyRandom(seed uint64) *pyRandom {
	key := []uint32{uint32(seed)}
	if hi := uint32(seed >> 32); hi != 0 {
		key = append(key, hi)
	}
	r := &pyRandom{}
	r.initByArray(key)
	return r
}

func (r *pyRandom) initGenrand(s uint32) {
	r.mt[0] = s
	for i := 1; i < 624; i++ {
		r.mt[i] = 1812433253*(r.mt[i-1]^(r.mt[i-1]>>30)) + uint32(i)
	}
	r.idx = 624
}

func (r *pyRandom) initByArray(key []uint32) {
	r.initGenrand(19650218)
	i, j := 1, 0
	k := max(624, len(key))
	for ; k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1664525)) + key[j] + uint32(j)
		i++
		j++
		if i >= 624 {
			r.mt[0] = r.mt[623]
			i = 1
		}
		if j >= len(key) {
			j = 0
		}
	}
	for k = 623; k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1566083941)) - uint32(i)
		i++
		if i >= 624 {
			r.mt[0] = r.mt[623]
			i = 1
		}
	}
	r.mt[0] = 0x80000000
}

func (r *pyRandom) uint32() uint32 {
	const upper, lower, matrixA = 0x80000000, 0x7fffffff, 0x9908b0df
	if r.idx >= 624 {
		for kk := 0; kk < 624; kk++ {
			y := (r.mt[kk] & upper) | (r.mt[(kk+1)%624] & lower)
			v := r.mt[(kk+397)%624] ^ (y >> 1)
			if y&1 != 0 {
				v ^= matrixA
			}
			r.mt[kk] = v
		}
		r.idx = 0
	}
	y := r.mt[r.idx]
	r.idx++
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	y ^= y >> 18
	return y
}

// getrandbits is CPython's getrandbits for 0 < k <= 32.
func (r *pyRandom) getrandbits(k int) uint32 {
	return r.uint32() >> (32 - k)
}

// randbelow is CPython's _randbelow_with_getrandbits (rejection sampling on
// n.bit_length() bits); n must be in [1, 2^32).
func (r *pyRandom) randbelow(n int) int {
	k := 0
	for v := n; v > 0; v >>= 1 {
		k++
	}
	x := int(r.getrandbits(k))
	for x >= n {
		x = int(r.getrandbits(k))
	}
	return x
}

// sample returns the population indices random.Random.sample(range(n), k)
// would pick, in the same order, using the same pool-or-set strategy.
func (r *pyRandom) sample(n, k int) []int {
	out := make([]int, k)
	setsize := 21
	if k > 5 {
		setsize += int(math.Pow(4, math.Ceil(math.Log(float64(k*3))/math.Log(4))))
	}
	if n <= setsize {
		pool := make([]int, n)
		for i := range pool {
			pool[i] = i
		}
		for i := 0; i < k; i++ {
			j := r.randbelow(n - i)
			out[i] = pool[j]
			pool[j] = pool[n-i-1]
		}
		return out
	}
	selected := make(map[int]bool, k)
	for i := 0; i < k; i++ {
		j := r.randbelow(n)
		for selected[j] {
			j = r.randbelow(n)
		}
		selected[j] = true
		out[i] = j
	}
	return out
}
