"""Matching the nodes of two graphs by structure (see pipeline.graph.diff for the order of the rules).

Every tie between structurally equal nodes is broken by structure first (their consumers, then
the values of the constants they read) and by names people chose; TensorFlow's creation-order
names (``concat``/``concat_1``) never decide anything. What stays tied after that is identical
in structure and values, so any pairing of it says the same.
"""

from collections import deque


class Matcher:
    def __init__(self, a, b):
        self.a, self.b = a, b
        self.match = {}  # A index -> B index
        self.matched_b = set()
        self.queue = deque()
        self._reliable = None

    @property
    def reliable_a(self):
        return self._names()[0]

    @property
    def reliable_b(self):
        return self._names()[1]

    def _names(self):
        if self._reliable is None:  # computed when a tie needs it
            self._reliable = (_reliable(self.a), _reliable(self.b))
        return self._reliable

    def tied(self):
        """Buckets with unmatched nodes on both sides."""
        return [(xs, ys) for xs, ys in self.buckets if any(i not in self.match for i in xs)
                and any(j not in self.matched_b for j in ys)]

    # -------------------------------------------------------------------------------- driver

    def run(self):
        a, b = self.a, self.b
        skip_a, skip_b = set(a.passthrough), set(b.passthrough)
        buckets = {}
        for i, h in enumerate(a.hashes):
            if not a.const[i] and i not in skip_a:
                buckets.setdefault(h, ([], []))[0].append(i)
        for j, h in enumerate(b.hashes):
            if not b.const[j] and j not in skip_b and h in buckets:
                buckets[h][1].append(j)
        self.buckets = [v for v in buckets.values() if v[1]]
        for xs, ys in self.buckets:  # 1. a hash found once on each side
            if len(xs) == 1 and len(ys) == 1:
                self.pair(xs[0], ys[0])
        self.propagate()
        self.buckets = self.tied()
        self.by_name(self.buckets)  # 2. names people chose, in what is still tied
        self.propagate()
        self.by_values()  # 3. the constants' values, in what is still tied
        self.propagate()
        for xs, ys in self.buckets:  # 4. tied in structure and values: any pairing says the same
            rest_b = [j for j in ys if j not in self.matched_b]
            for i in xs:
                if i not in self.match and rest_b:
                    self.pair(i, rest_b.pop(0))
                    self.propagate()
        self.changed()  # 5. nodes that differ: same place, different op or attributes
        self.constants()  # 6. constants, through the nodes that read them
        return self.match

    def pair(self, i, j):
        self.match[i] = j
        self.matched_b.add(j)
        self.queue.append((i, j))

    def free(self, i, j):
        return i not in self.match and j not in self.matched_b

    # -------------------------------------------------------------------------------- rules

    def propagate(self):
        """From each matched pair to its inputs (slot by slot) and consumers (by hash and slot)
        where exactly one candidate is left on each side."""
        a, b, queue = self.a, self.b, self.queue
        while queue:
            i, j = queue.popleft()
            for (p, _), (q, _) in zip(a.inputs[i], b.inputs[j]):
                if self.free(p, q) and a.hashes[p] == b.hashes[q] and not a.const[p]:
                    self.pair(p, q)
            if len(a.consumers[i]) == 1 and len(b.consumers[j]) == 1:
                (c, s), (d, t) = a.consumers[i][0], b.consumers[j][0]
                if s == t and self.free(c, d) and a.hashes[c] == b.hashes[d]:
                    self.pair(c, d)
                continue
            groups = {}
            for c, s in a.consumers[i]:
                if c not in self.match:
                    groups.setdefault((a.hashes[c], s), ([], []))[0].append(c)
            if not groups:
                continue
            for d, t in b.consumers[j]:
                key = (b.hashes[d], t)
                if key in groups and d not in self.matched_b:
                    groups[key][1].append(d)
            for xs, ys in groups.values():
                if len(xs) == 1 and len(ys) == 1:
                    self.pair(xs[0], ys[0])

    def by_name(self, buckets):
        names_a, names_b = self.a.names, self.b.names
        for xs, ys in buckets:
            if len(xs) == 1 and len(ys) == 1:
                continue
            chosen_b = {names_b[j]: j for j in ys if j in self.reliable_b and j not in self.matched_b}
            for i in xs:
                j = chosen_b.get(names_a[i]) if i in self.reliable_a and i not in self.match else None
                if j is not None:
                    self.pair(i, j)

    def by_values(self):
        """Bottom-up hashes that include the constants' values, for the nodes still tied."""
        memo_a, memo_b = {}, {}
        for xs, ys in self.buckets:
            xs = [i for i in xs if i not in self.match]
            ys = [j for j in ys if j not in self.matched_b]
            if not xs or not ys:
                continue
            groups = {}
            for i in xs:
                groups.setdefault(_value_hash(self.a, i, memo_a), ([], []))[0].append(i)
            for j in ys:
                key = _value_hash(self.b, j, memo_b)
                if key in groups:
                    groups[key][1].append(j)
            for gx, gy in groups.values():
                if len(gx) == 1 and len(gy) == 1 and self.free(gx[0], gy[0]):
                    self.pair(gx[0], gy[0])
                    self.propagate()

    def changed(self):
        """A node that differs from its counterpart (other attributes, another op, an input that
        changed) sits where its counterpart sits: same op with matched inputs, or the same input
        slot of matched consumers. Repeated until nothing more pairs."""
        a, b = self.a, self.b
        skip_a, skip_b = set(a.passthrough), set(b.passthrough)
        consumers_b = b.consumers
        progress = True
        while progress:
            progress = False
            for i in range(len(a.names)):
                if i in self.match or a.const[i] or i in skip_a:
                    continue
                counts = {}
                for p, _ in a.inputs[i]:
                    for d, _ in consumers_b[self.match[p]] if p in self.match else ():
                        if d not in self.matched_b and b.ops[d] == a.ops[i] and not b.const[d]:
                            counts[d] = counts.get(d, 0) + 1
                if counts:
                    best = max(counts.values())
                    top = [d for d in counts if counts[d] == best]
                    j = self._prefer(i, top)
                    if j is not None:
                        self.pair(i, j)
                        self.propagate()
                        progress = True
            if not progress:  # names people chose, same op: the output whose input changed
                index_b = {self.b.names[j]: j for j in self.reliable_b if j not in self.matched_b}
                for i in sorted(self.reliable_a):
                    j = index_b.get(a.names[i])
                    if j is not None and self.free(i, j) and a.ops[i] == b.ops[j] and not a.const[i] \
                            and i not in skip_a and j not in skip_b:
                        self.pair(i, j)
                        self.propagate()
                        progress = True
            for i, j in list(self.match.items()):  # the same input slot of matched consumers
                for (p, _), (q, _) in zip(a.inputs[i], b.inputs[j]):
                    if self.free(p, q) and not a.const[p] and not b.const[q] and p not in skip_a and q not in skip_b \
                            and len(a.inputs[p]) == len(b.inputs[q]):
                        self.pair(p, q)
                        self.propagate()
                        progress = True

    def _prefer(self, i, candidates):
        if len(candidates) == 1:
            return candidates[0]
        name = self.a.names[i]
        if i in self.reliable_a:
            for d in candidates:
                if self.b.names[d] == name and d in self.reliable_b:
                    return d
        return None  # a tie only names could break, and these names say nothing

    def constants(self):
        """Constants match through the nodes that read them (same input slot of matched nodes),
        then by chosen name."""
        a, b = self.a, self.b
        for i, j in list(self.match.items()):
            for (p, _), (q, _) in zip(a.inputs[i], b.inputs[j]):
                if a.const[p] and b.const[q] and self.free(p, q):
                    self.match[p] = q
                    self.matched_b.add(q)
        index_b = b.index()
        for i, name in enumerate(a.names):
            j = index_b.get(name)
            if a.const[i] and i not in self.match and j is not None and b.const[j] and j not in self.matched_b \
                    and i in self.reliable_a and j in self.reliable_b:
                self.match[i] = j
                self.matched_b.add(j)


def _reliable(g):
    from pipeline.graph.diff.structure import reliable_names

    return reliable_names(g.names)


def _value_hash(g, i, memo):
    """Bottom-up hash with constants hashed by their bytes."""
    if i in memo:
        return memo[i]
    stack = [i]
    while stack:
        k = stack[-1]
        if k in memo:
            stack.pop()
            continue
        if g.const[k]:
            memo[k] = hash((g.sigs[k], g.fingerprint(k)))
            stack.pop()
            continue
        pending = [p for p, _ in g.inputs[k] if p not in memo and p not in stack]
        if pending:
            stack.extend(pending)
            continue
        memo[k] = hash((g.hashes[k], tuple((memo.get(p, 0), port) for p, port in g.inputs[k])))
        stack.pop()
    return memo[i]
