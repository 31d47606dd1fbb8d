package sim

import (
	"container/list"
	"sync"
)

// prefixCache is a least-recently-used set of KV pages keyed by the chained
// prefix hash of each page (see prefixHasher). One cache stands for the
// whole deployment, as if a KV-aware router sent each session to the worker
// holding its prefix.
type prefixCache struct {
	mu       sync.Mutex
	capacity int // pages
	lru      *list.List
	pages    map[uint64]*list.Element
}

func newPrefixCache(capacityPages int) *prefixCache {
	return &prefixCache{capacity: max(capacityPages, 1), lru: list.New(), pages: map[uint64]*list.Element{}}
}

// lookupInsert returns how many leading pages of a prompt were cached and
// then caches all of them (the prefill about to run will have computed them).
func (c *prefixCache) lookupInsert(pages []uint64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	hits := 0
	for _, h := range pages {
		if _, ok := c.pages[h]; !ok {
			break
		}
		hits++
	}
	for _, h := range pages {
		if el, ok := c.pages[h]; ok {
			c.lru.MoveToFront(el)
			continue
		}
		c.pages[h] = c.lru.PushFront(h)
		for c.lru.Len() > c.capacity {
			old := c.lru.Back()
			c.lru.Remove(old)
			delete(c.pages, old.Value.(uint64))
		}
	}
	return hits
}

// flush drops every cached page.
func (c *prefixCache) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Init()
	clear(c.pages)
}

// usage is the occupied fraction, reported as sglang:token_usage.
func (c *prefixCache) usage() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return float64(c.lru.Len()) / float64(c.capacity)
}
