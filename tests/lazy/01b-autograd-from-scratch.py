# Lesson 1b's lazy student (loaded by tests/test_course.py): each answer cell as a shortcut-taker writes it,
# and words the check's ExerciseError must show.
LAZY = {
    # section 2's recursive sort, renamed: the exercise's rule (no recursion) names it before it runs
    1: ("with exercise(1):\n"
        "    topo_order = topo_order_recursive\n",
        "uses topo_order_recursive"),
    # dot as a sum of the lesson's * and + Values: the right number, but no single node whose _backward adds
    2: ("with exercise(2):\n"
        "    def dot(ws, xs):\n"
        "        return sum((w * x for w, x in zip(ws, xs)), Value(0.0))\n",
        "dot must be ONE Value"),
    # the power rule handed to asgteach inside the closure: exact, and not the exercise
    3: ("with exercise(3):\n"
        "    def value_pow(self, n):\n"
        '        out = Value(self.data ** n, (self,), "**")\n\n'
        "        def _backward():\n"
        "            with at.Graph():\n"
        '                x = at.input("x", ())\n'
        "                dx = at.grad(x ** n, x)\n"
        "            self.grad += float(at.run(dx, {x: self.data})) * out.grad\n"
        "        out._backward = _backward\n"
        "        return out\n\n"
        "    Value.__pow__ = value_pow\n",
        "uses asgteach"),
}

# attempts on the judge itself: each a submission of its own (tests/test_course.py's MORE)
MORE = [
    {   # a deeper recursion limit and the recursive version; the library's topological sort
        1: ("import sys\nsys.setrecursionlimit(100000)\nwith exercise(1):\n    topo_order = topo_order_recursive\n",
            "may not"),
        2: ("with exercise(2):\n    from asgteach.lessons import checks_scratch\n"
            "    checks_scratch.dot_check = lambda *a: None\n    def dot(ws, xs):\n        return None\n", "may not"),
    },
    {
        1: ("with exercise(1):\n    import graphlib\n    def topo_order(root):\n"
            "        return list(graphlib.TopologicalSorter({root: root.inputs}).static_order())\n", "graphlib"),
        3: ("with exercise(3):\n    def value_pow(self, n):\n        import asgteach\n"
            "        return Value(self.data ** n)\n    Value.__pow__ = value_pow\n", "asgteach"),
    },
]
