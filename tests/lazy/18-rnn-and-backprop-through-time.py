"""Lesson 18's lazy student: full BPTT in place of the truncated one, and the rho**j estimate in place of measuring."""

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
    },
]
