"""Lesson 18's lazy student: full BPTT in place of the truncated one, the rho**j estimate in place of measuring, and
an unroll that never cuts (exercise 3)."""

LAZY = {
    1: ("with exercise(1):\n"
        "    def truncated_grads(params, tokens, targets, k):\n"
        "        # one graph over the whole sequence: k is ignored, the gradient flows across every window\n"
        "        B = tokens.shape[0]\n"
        "        loss, _, grads = run_window(params, tokens, targets, np.zeros((B, params['W_hh'].shape[0])))\n"
        "        return loss, grads\n\n"
        "    tbptt_loss, tbptt_grads = truncated_grads(P, tokens, targets, 15)\n",
        "FULL backprop through time"),
    2: ("with exercise(2):\n"
        "    def gradient_horizon(W_hh, hs, g_last, threshold):\n"
        "        # the spectral radius alone: |g| shrinks like rho**n\n"
        "        rho = np.max(np.abs(np.linalg.eigvals(W_hh)))\n"
        "        T = len(hs)\n"
        "        norms = np.linalg.norm(g_last) * rho ** np.arange(T - 1, -1, -1.0)\n"
        "        j = int(np.ceil(np.log(threshold) / np.log(rho))) if rho < 1 else None\n"
        "        return norms, j\n\n"
        "    _, horizon_09 = gradient_horizon(P_09['W_hh'], hs_values, g_graph[-1], 1e-3)\n",
        "the norm of dL/dh_t"),
    3: ("with exercise(3):\n"
        "    def truncate_every(k):\n"
        "        # the plain unroll: k is ignored, nothing is cut\n"
        "        def unroll(step, xs, state):\n"
        "            states = []\n"
        "            for x in xs:\n"
        "                state = step(x, state)\n"
        "                states.append(state)\n"
        "            return states\n"
        "        return unroll\n",
        "FULL backprop through time"),
}

# attempts on the judge itself: each a submission of its own (tests/test_course.py's MORE)
MORE = [
    {   # the reference, imported by a name the hands-off rule does not list... through the module table
        1: ("with exercise(1):\n    import sys\n"
            "    truncated_grads = sys.modules['asgteach.lessons.lesson18'].truncated_bptt_check\n"
            "    tbptt_loss, tbptt_grads = 0.0, {}\n", "may not"),
        # a closure over the reference loaded from the keys' file
        2: ("with exercise(2):\n    def make():\n        ns = {}\n"
            "        exec(open(at.lessons.__path__[0] + '/answer_keys.py').read(), ns)\n"
            "        return ns['gradient_horizon']\n    gradient_horizon = make()\n"
            "    _, horizon_09 = gradient_horizon(P_09['W_hh'], hs_values, g_graph[-1], 1e-3)\n", "may not"),
    },
    {   # getattr by a computed string, to dodge the names
        2: ("with exercise(2):\n    m = getattr(at, 'less' + 'ons')\n"
            "    gradient_horizon = m.answer_keys.gradient_horizon\n"
            "    _, horizon_09 = gradient_horizon(P_09['W_hh'], hs_values, g_graph[-1], 1e-3)\n", "may not"),
        1: ("with exercise(1):\n    def truncated_grads(params, tokens, targets, k):\n"
            "        import torch\n        raise RuntimeError('stand-in')\n\n"
            "    tbptt_loss, tbptt_grads = 0.0, {}\n", "exercise 1"),
        # the notebook's one line, copied: it cuts h, but an LSTM's state is the pair (h, c)
        3: ("with exercise(3):\n    def truncate_every(k):\n        def unroll(step, xs, state):\n"
            "            states = []\n            for t, x in enumerate(xs):\n"
            "                if t > 0 and t % k == 0:\n"
            "                    state = (at.stop_gradient(state[0]), state[1]) if isinstance(state, (tuple, list)) "
            "else at.stop_gradient(state)\n"
            "                state = step(x, state)\n                states.append(state)\n"
            "            return states\n        return unroll\n", "only h is cut"),
    },
    {   # exercise 3: the cut one step early (before steps k - 1, 2k - 1, ...)
        3: ("with exercise(3):\n    def truncate_every(k):\n        def unroll(step, xs, state):\n"
            "            out = []\n            for t, x in enumerate(xs):\n"
            "                if t > 0 and (t + 1) % k == 0:\n"
            "                    state = tuple(map(at.stop_gradient, state)) if isinstance(state, (tuple, list)) "
            "else state.detach()\n"
            "                state = step(x, state)\n                out.append(state)\n"
            "            return out\n        return unroll\n", "off by one"),
    },
    {   # exercise 3: a forward pass that is not the plain unroll's (the state reset to zeros at each window)
        3: ("with exercise(3):\n    def truncate_every(k):\n        def unroll(step, xs, state):\n"
            "            out = []\n            for t, x in enumerate(xs):\n"
            "                if t > 0 and t % k == 0:\n"
            "                    state = tuple(s * 0.0 for s in state) if isinstance(state, (tuple, list)) "
            "else state * 0.0\n"
            "                state = step(x, state)\n                out.append(state)\n"
            "            return out\n        return unroll\n", "changes no value"),
    },
    {   # exercise 3: another autodiff library, and the check's own reference through the module table
        3: ("with exercise(3):\n    import jax\n    def truncate_every(k):\n"
            "        return lambda step, xs, state: [step(x, jax.lax.stop_gradient(state)) for x in xs]\n",
            "asgteach's own ops"),
    },
    {
        3: ("with exercise(3):\n    def truncate_every(k):\n"
            "        return at.lessons.lesson18._wall_graph\n", "may not"),
    },
]

# honest answers in other styles than the reference: each list entry a submission that must score full marks
HONEST = [
    {
        1: ("with exercise(1):\n    def truncated_grads(params, tokens, targets, k):\n"
            "        T = tokens.shape[1]\n        h = np.zeros((tokens.shape[0], params['W_hh'].shape[0]))\n"
            "        total, sums = 0.0, None\n        start = 0\n        while start < T:\n"
            "            stop = min(start + k, T)\n"
            "            loss, h, g = run_window(params, tokens[:, start:stop], targets[:, start:stop], h)\n"
            "            total += loss\n"
            "            sums = dict(g) if sums is None else {n: sums[n] + g[n] for n in sums}\n"
            "            start = stop\n        return total, sums\n\n"
            "    tbptt_loss, tbptt_grads = truncated_grads(P, tokens, targets, 15)\n"),
        2: ("with exercise(2):\n    def gradient_horizon(W_hh, hs, g_last, threshold):\n"
            "        g = np.asarray(g_last, dtype=float)\n        back = [np.linalg.norm(g)]\n"
            "        for h in hs[:0:-1]:\n            g = (g * (1 - h ** 2)) @ W_hh.T\n"
            "            back.append(np.linalg.norm(g))\n        norms = np.array(back[::-1])\n"
            "        small = np.nonzero(np.array(back[1:]) < threshold * back[0])[0]\n"
            "        return norms, (int(small[0]) + 1 if small.size else None)\n\n"
            "    _, horizon_09 = gradient_horizon(P_09['W_hh'], hs_values, g_graph[-1], 1e-3)\n"),
        3: ("with exercise(3):\n    def truncate_every(k):\n        def unroll(step, xs, state):\n"
            "            states, since_cut = [], 0\n            for x in xs:\n"
            "                if since_cut == k:\n"
            "                    state = tuple(s.detach() for s in state) if isinstance(state, tuple) "
            "else state.detach()\n"
            "                    since_cut = 0\n"
            "                state = step(x, state)\n                since_cut += 1\n"
            "                states.append(state)\n            return states\n        return unroll\n"),
    },
    {
        1: ("with exercise(1):\n    def truncated_grads(params, tokens, targets, k):\n"
            "        B, T = tokens.shape\n        state = np.zeros((B, params['W_hh'].shape[0]))\n"
            "        losses, grad_list = [], []\n        for lo in np.arange(0, T, k):\n"
            "            hi = lo + k\n"
            "            loss, state, g = run_window(params, tokens[:, lo:hi], targets[:, lo:hi], state)\n"
            "            losses.append(loss)\n            grad_list.append(g)\n"
            "        return sum(losses), {n: sum(g[n] for g in grad_list) for n in params}\n\n"
            "    tbptt_loss, tbptt_grads = truncated_grads(P, tokens, targets, 15)\n"),
        2: ("with exercise(2):\n    def gradient_horizon(W_hh, hs, g_last, threshold):\n        T = len(hs)\n"
            "        norms = [0.0] * T\n        g = g_last\n        norms[-1] = float(np.sqrt(np.sum(g * g)))\n"
            "        t = T - 1\n        while t > 0:\n            g = np.dot(g * (1.0 - hs[t] * hs[t]), W_hh.T)\n"
            "            norms[t - 1] = float(np.sqrt(np.sum(g * g)))\n            t -= 1\n"
            "        limit = threshold * norms[-1]\n"
            "        j = next((j for j in range(1, T) if norms[T - 1 - j] < limit), None)\n"
            "        return np.array(norms), j\n\n"
            "    _, horizon_09 = gradient_horizon(P_09['W_hh'], hs_values, g_graph[-1], 1e-3)\n"),
        3: ("with exercise(3):\n    def wall(state):\n"
            "        if isinstance(state, at.Tensor):\n            return at.stop_gradient(state)\n"
            "        return [wall(part) for part in state]\n\n"
            "    def truncate_every(k):\n"
            "        def unroll(step, xs, state):\n            T = len(xs)\n            states = [None] * T\n"
            "            for t in range(T):\n"
            "                state = step(xs[t], wall(state) if t % k == 0 else state)   # t = 0: h0 is an input\n"
            "                states[t] = state\n            return states\n        return unroll\n"),
    },
]
