package elfsym

import "slices"

const nilNode = -1

// An rbTree is a copy of the tree perf keeps a DSO's symbols in.
//
// perf's tree is a red-black tree keyed by start address, and perf finds
// an address by walking down from the root, returning the first symbol
// on the way that holds it. Where symbols overlap, which one that is
// depends on the shape of the tree, so the copy is built with the same
// algorithm (the kernel's lib/rbtree.c, which perf uses) and the same
// sequence of insertions and erasures. Only lookups in overlapping ranges
// go to it; see builder.flatten.
//
// Nodes are symbols by id. What a walk down the tree reads is kept apart
// from the rest, to spare cache misses.
type rbTree struct {
	n    []rbNode
	up   []rbUp
	root int32
}

type rbNode struct {
	start       uint64
	left, right int32
}

type rbUp struct {
	parent int32
	red    bool
}

func newRBTree(n int) *rbTree {
	return &rbTree{n: make([]rbNode, 0, n), up: make([]rbUp, 0, n), root: nilNode}
}

// insert adds node i, with key start, to the right of any equal keys.
func (t *rbTree) insert(i int32, start uint64) {
	if int(i) >= len(t.n) {
		t.n = slices.Grow(t.n, int(i)+1-len(t.n))[:i+1]
		t.up = slices.Grow(t.up, int(i)+1-len(t.up))[:i+1]
	}
	parent, left := int32(nilNode), false
	for p := t.root; p != nilNode; {
		parent = p
		if start < t.n[p].start {
			p, left = t.n[p].left, true
		} else {
			p, left = t.n[p].right, false
		}
	}
	t.n[i] = rbNode{start: start, left: nilNode, right: nilNode}
	t.up[i] = rbUp{parent: parent, red: true}
	switch {
	case parent == nilNode:
		t.root = i
	case left:
		t.n[parent].left = i
	default:
		t.n[parent].right = i
	}
	t.insertColor(i)
}

func (t *rbTree) isRed(i int32) bool { return i != nilNode && t.up[i].red }

// replaceChild makes newc take old's place under parent.
func (t *rbTree) replaceChild(old, newc, parent int32) {
	switch {
	case parent == nilNode:
		t.root = newc
	case t.n[parent].left == old:
		t.n[parent].left = newc
	default:
		t.n[parent].right = newc
	}
}

// rotateSetParents gives newc old's parent and color, and makes old a
// red or black child of newc (__rb_rotate_set_parents).
func (t *rbTree) rotateSetParents(old, newc int32, red bool) {
	parent := t.up[old].parent
	t.up[newc].parent, t.up[newc].red = parent, t.up[old].red
	t.up[old].parent, t.up[old].red = newc, red
	t.replaceChild(old, newc, parent)
}

func (t *rbTree) setParentColor(i, parent int32, red bool) {
	t.up[i].parent, t.up[i].red = parent, red
}

// insertColor is __rb_insert.
func (t *rbTree) insertColor(node int32) {
	parent := t.up[node].parent
	for {
		if parent == nilNode {
			t.setParentColor(node, nilNode, false)
			return
		}
		if !t.up[parent].red {
			return
		}
		gparent := t.up[parent].parent
		if tmp := t.n[gparent].right; parent != tmp {
			if t.isRed(tmp) {
				t.setParentColor(tmp, gparent, false)
				t.setParentColor(parent, gparent, false)
				node = gparent
				parent = t.up[node].parent
				t.setParentColor(node, parent, true)
				continue
			}
			tmp = t.n[parent].right
			if node == tmp {
				tmp = t.n[node].left
				t.n[parent].right = tmp
				t.n[node].left = parent
				if tmp != nilNode {
					t.setParentColor(tmp, parent, false)
				}
				t.setParentColor(parent, node, true)
				parent = node
				tmp = t.n[node].right
			}
			t.n[gparent].left = tmp
			t.n[parent].right = gparent
			if tmp != nilNode {
				t.setParentColor(tmp, gparent, false)
			}
			t.rotateSetParents(gparent, parent, true)
			return
		} else {
			tmp = t.n[gparent].left
			if t.isRed(tmp) {
				t.setParentColor(tmp, gparent, false)
				t.setParentColor(parent, gparent, false)
				node = gparent
				parent = t.up[node].parent
				t.setParentColor(node, parent, true)
				continue
			}
			tmp = t.n[parent].left
			if node == tmp {
				tmp = t.n[node].right
				t.n[parent].left = tmp
				t.n[node].right = parent
				if tmp != nilNode {
					t.setParentColor(tmp, parent, false)
				}
				t.setParentColor(parent, node, true)
				parent = node
				tmp = t.n[node].left
			}
			t.n[gparent].right = tmp
			t.n[parent].left = gparent
			if tmp != nilNode {
				t.setParentColor(tmp, gparent, false)
			}
			t.rotateSetParents(gparent, parent, true)
			return
		}
	}
}

// erase removes node (rb_erase).
func (t *rbTree) erase(node int32) {
	child, tmp := t.n[node].right, t.n[node].left
	var rebalance int32 = nilNode
	switch {
	case tmp == nilNode:
		parent := t.up[node].parent
		t.replaceChild(node, child, parent)
		if child != nilNode {
			t.setParentColor(child, parent, t.up[node].red)
		} else if !t.up[node].red {
			rebalance = parent
		}
	case child == nilNode:
		parent := t.up[node].parent
		t.setParentColor(tmp, parent, t.up[node].red)
		t.replaceChild(node, tmp, parent)
	default:
		successor, parent := child, child
		var child2 int32
		if tmp = t.n[child].left; tmp == nilNode {
			child2 = t.n[successor].right
		} else {
			for tmp != nilNode {
				parent, successor = successor, tmp
				tmp = t.n[tmp].left
			}
			child2 = t.n[successor].right
			t.n[parent].left = child2
			t.n[successor].right = child
			t.up[child].parent = successor
		}
		tmp = t.n[node].left
		t.n[successor].left = tmp
		t.up[tmp].parent = successor
		t.replaceChild(node, successor, t.up[node].parent)
		if child2 != nilNode {
			t.setParentColor(child2, parent, false)
		} else if !t.up[successor].red {
			rebalance = parent
		}
		t.setParentColor(successor, t.up[node].parent, t.up[node].red)
	}
	if rebalance != nilNode {
		t.eraseColor(rebalance)
	}
}

// eraseColor is ____rb_erase_color.
func (t *rbTree) eraseColor(parent int32) {
	var node int32 = nilNode
	for {
		sibling := t.n[parent].right
		if node != sibling {
			if t.isRed(sibling) {
				tmp1 := t.n[sibling].left
				t.n[parent].right = tmp1
				t.n[sibling].left = parent
				t.setParentColor(tmp1, parent, false)
				t.rotateSetParents(parent, sibling, true)
				sibling = tmp1
			}
			tmp1 := t.n[sibling].right
			if !t.isRed(tmp1) {
				tmp2 := t.n[sibling].left
				if !t.isRed(tmp2) {
					t.setParentColor(sibling, parent, true)
					if t.up[parent].red {
						t.up[parent].red = false
					} else {
						node, parent = parent, t.up[parent].parent
						if parent != nilNode {
							continue
						}
					}
					return
				}
				tmp1 = t.n[tmp2].right
				t.n[sibling].left = tmp1
				t.n[tmp2].right = sibling
				t.n[parent].right = tmp2
				if tmp1 != nilNode {
					t.setParentColor(tmp1, sibling, false)
				}
				tmp1, sibling = sibling, tmp2
			}
			tmp2 := t.n[sibling].left
			t.n[parent].right = tmp2
			t.n[sibling].left = parent
			t.setParentColor(tmp1, sibling, false)
			if tmp2 != nilNode {
				t.up[tmp2].parent = parent
			}
			t.rotateSetParents(parent, sibling, false)
			return
		}
		sibling = t.n[parent].left
		if t.isRed(sibling) {
			tmp1 := t.n[sibling].right
			t.n[parent].left = tmp1
			t.n[sibling].right = parent
			t.setParentColor(tmp1, parent, false)
			t.rotateSetParents(parent, sibling, true)
			sibling = tmp1
		}
		tmp1 := t.n[sibling].left
		if !t.isRed(tmp1) {
			tmp2 := t.n[sibling].right
			if !t.isRed(tmp2) {
				t.setParentColor(sibling, parent, true)
				if t.up[parent].red {
					t.up[parent].red = false
				} else {
					node, parent = parent, t.up[parent].parent
					if parent != nilNode {
						continue
					}
				}
				return
			}
			tmp1 = t.n[tmp2].left
			t.n[sibling].right = tmp1
			t.n[tmp2].left = sibling
			t.n[parent].left = tmp2
			if tmp1 != nilNode {
				t.setParentColor(tmp1, sibling, false)
			}
			tmp1, sibling = sibling, tmp2
		}
		tmp2 := t.n[sibling].right
		t.n[parent].left = tmp2
		t.n[sibling].right = parent
		t.setParentColor(tmp1, sibling, false)
		if tmp2 != nilNode {
			t.up[tmp2].parent = parent
		}
		t.rotateSetParents(parent, sibling, false)
		return
	}
}

// find walks down the tree as perf's symbols__find does; ends holds the
// end of each node.
func (t *rbTree) find(ends []uint64, addr uint64) int32 {
	n := t.root
	for n != nilNode {
		start, end := t.n[n].start, ends[n]
		switch {
		case addr < start:
			n = t.n[n].left
		case addr > end || addr == end && addr != start:
			n = t.n[n].right
		default:
			return n
		}
	}
	return nilNode
}
