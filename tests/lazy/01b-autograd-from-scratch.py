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
        2: ("with exercise(2):\n    from asgteach.lessons import lesson01b\n"
            "    lesson01b.dot_check = lambda *a: None\n    def dot(ws, xs):\n        return None\n", "may not"),
    },
    {
        1: ("with exercise(1):\n    import graphlib\n    def topo_order(root):\n"
            "        return list(graphlib.TopologicalSorter({root: root.inputs}).static_order())\n", "graphlib"),
        3: ("with exercise(3):\n    def value_pow(self, n):\n        import asgteach\n"
            "        return Value(self.data ** n)\n    Value.__pow__ = value_pow\n", "asgteach"),
    },
    {   # dot's _backward handed to asgteach (at.grad of the sum): in a graded course the profile hook stands down
        # (the answer runs in the sandbox), and the exercise's rule (no asgteach) is what refuses it
        2: ("with exercise(2):\n    def dot(ws, xs):\n"
            "        out = Value(sum(w.data * x.data for w, x in zip(ws, xs)), (*ws, *xs), 'dot')\n\n"
            "        def _backward():\n            with at.Graph():\n"
            "                w_t = at.input('w', (len(ws),))\n                x_t = at.input('x', (len(xs),))\n"
            "                dw, dx = at.grad(at.sum(w_t * x_t), [w_t, x_t])\n"
            "            gw, gx = at.run([dw, dx], {w_t: [w.data for w in ws], x_t: [x.data for x in xs]})\n"
            "            for w, x, a, b in zip(ws, xs, gw, gx):\n"
            "                w.grad += float(a) * out.grad\n                x.grad += float(b) * out.grad\n"
            "        out._backward = _backward\n        return out\n",
            "uses asgteach"),
    },
]

# honest answers in other styles than the reference: each list entry a submission that must score full marks
_DEEP = ("\n    deep = Value(0.5)\n    for _ in range(10_000):\n        deep = deep * 1.0\n"
         "    deep_order = topo_order(deep)\n")
_POW_TAIL = ("\n    Value.__pow__ = value_pow\n\n    def value_div(self, other):\n        return self * other ** -1\n\n"
             "    Value.__truediv__ = value_div\n")
HONEST = [
    {   # Kahn's algorithm on the consumers; dot with indices; the slope computed inside _backward
        1: ("with exercise(1):\n    def topo_order(root):\n        nodes, stack, seen = [], [root], {id(root)}\n"
            "        while stack:\n            v = stack.pop()\n            nodes.append(v)\n"
            "            for c in v.inputs:\n                if id(c) not in seen:\n"
            "                    seen.add(id(c))\n                    stack.append(c)\n"
            "        consumers = {id(v): [] for v in nodes}\n        pending = {id(v): len(v.inputs) for v in nodes}\n"
            "        for v in nodes:\n            for c in v.inputs:\n                consumers[id(c)].append(v)\n"
            "        ready = [v for v in nodes if pending[id(v)] == 0]\n        order = []\n        while ready:\n"
            "            v = ready.pop()\n            order.append(v)\n            for u in consumers[id(v)]:\n"
            "                pending[id(u)] -= 1\n                if pending[id(u)] == 0:\n"
            "                    ready.append(u)\n        return order\n" + _DEEP),
        2: ("with exercise(2):\n    def dot(ws, xs):\n        total = 0.0\n        for i in range(len(ws)):\n"
            "            total += ws[i].data * xs[i].data\n        out = Value(total, tuple(ws) + tuple(xs), 'dot')\n\n"
            "        def _backward():\n            for i in range(len(ws)):\n"
            "                ws[i].grad = ws[i].grad + xs[i].data * out.grad\n"
            "                xs[i].grad = xs[i].grad + ws[i].data * out.grad\n"
            "        out._backward = _backward\n        return out\n"),
        3: ("with exercise(3):\n    def value_pow(self, n):\n        out = Value(self.data ** n, (self,), '**')\n\n"
            "        def _backward():\n            local = n * self.data ** (n - 1)\n"
            "            self.grad = self.grad + local * out.grad\n        out._backward = _backward\n"
            "        return out\n" + _POW_TAIL),
    },
    {   # a depth-first walk with an iterator per node on the stack; dot over zipped pairs; default arguments
        1: ("with exercise(1):\n    def topo_order(root):\n        order, done, on_path = [], set(), {id(root)}\n"
            "        stack = [(root, iter(root.inputs))]\n        while stack:\n            v, children = stack[-1]\n"
            "            for c in children:\n                if id(c) not in done and id(c) not in on_path:\n"
            "                    on_path.add(id(c))\n                    stack.append((c, iter(c.inputs)))\n"
            "                    break\n            else:\n                stack.pop()\n"
            "                done.add(id(v))\n"
            "                order.append(v)\n        return order\n" + _DEEP),
        2: ("with exercise(2):\n    def dot(ws, xs):\n        pairs = list(zip(ws, xs))\n"
            "        out = Value(sum(w.data * x.data for w, x in pairs), (*ws, *xs), 'dot')\n\n"
            "        def backward_rule():\n            g = out.grad\n            for w, x in pairs:\n"
            "                wd, xd = w.data, x.data\n                w.grad += xd * g\n"
            "                x.grad += wd * g\n"
            "        out._backward = backward_rule\n        return out\n"),
        3: ("with exercise(3):\n    def value_pow(self, n):\n"
            "        out = Value(self.data ** n, (self,), f'pow {n}')\n\n"
            "        def _backward(base=self, result=out, power=n):\n"
            "            base.grad += result.grad * power * base.data ** (power - 1)\n"
            "        out._backward = _backward\n        return out\n" + _POW_TAIL),
    },
]
