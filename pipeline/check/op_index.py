"""A graph's nodes grouped by op, for the checks that ask one question per op: a 200,000-node graph has
a few dozen ops, so each route asks its table once per op and looks at the nodes of the ops it flags,
instead of walking every node (issue 20, point 6).

    index = OpIndex(graph)
    index.grouped(lambda op: not supported(op), keep_node=lambda n: n.name not in skip)
    # OrderedDict op -> [names], exactly as grouping the kept nodes in file order would give
"""

from collections import OrderedDict


class OpIndex:
    def __init__(self, graph):
        self.graph = graph
        by_op = {}  # op -> its nodes in file order; ops in the order of their first node
        for node in graph.nodes.values():
            nodes = by_op.get(node.op)
            if nodes is None:
                by_op[node.op] = [node]
            else:
                nodes.append(node)
        self.by_op = by_op
        self._positions = None

    def count(self, keep_op, keep_node=None):
        """How many nodes have an op ``keep_op`` accepts (and pass ``keep_node``)."""
        total = 0
        for op, nodes in self.by_op.items():
            if keep_op(op):
                total += len(nodes) if keep_node is None else sum(1 for n in nodes if keep_node(n))
        return total

    def nodes(self, keep_op, keep_node=None):
        """The nodes an op filter and a node filter keep, in no particular order (for counts and sets)."""
        kept = []
        for op, nodes in self.by_op.items():
            if keep_op(op):
                kept.extend(nodes if keep_node is None else [n for n in nodes if keep_node(n)])
        return kept

    def grouped(self, keep_op, keep_node=None):
        """OrderedDict op -> [node names] of the kept nodes, ops in the order of their first kept node,
        names in file order: what grouping the kept nodes while walking the graph would give."""
        groups = []
        for op, nodes in self.by_op.items():
            if keep_op(op):
                names = [n.name for n in nodes] if keep_node is None else [n.name for n in nodes if keep_node(n)]
                if names:
                    groups.append((op, names))
        return OrderedDict(self.in_file_order(groups))

    def in_file_order(self, groups):
        """[(key, [names])] sorted by the file position of each group's first name (stable)."""
        if len(groups) < 2:
            return groups
        return sorted(groups, key=lambda group: self.position(group[1][0]))

    def position(self, name):
        """``name``'s index in the file (the positions are built on the first call)."""
        if self._positions is None:
            self._positions = {n: i for i, n in enumerate(self.graph.nodes)}
        return self._positions[name]
