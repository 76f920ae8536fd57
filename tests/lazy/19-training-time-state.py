# Lesson 19's lazy student (loaded by tests/test_course.py): each answer cell as a shortcut-taker writes it,
# and words the check's ExerciseError (or the judge's rule) must show.
_BN_USE = ("\n    mine = batchnorm_forward(X_bn, np.ones(3), np.zeros(3), np.zeros(3), np.ones(3), 0.1, 1e-5, True)\n")
_DECAY_USE = ("\n    for kind in ('sgd', 'adam', 'adamw'):\n"
              "        print(kind, decay_per_step(kind, W_DEMO, RMS_DEMO, LR_DEMO, WD_DEMO), measured[kind])\n")
_CHOOSE_USE = ("\n    chosen_wd, chosen_model = choose_by_validation(fit_mlp, error_rate, WDS, X_train, y_train,\n"
               "                                               X_val, y_val)\n")

LAZY = {
    # asgteach's own BatchNorm1d, run on the numbers: what the check compares with, not batch norm written out
    1: ("with exercise(1):\n"
        "    def batchnorm_forward(x, gamma, beta, running_mean, running_var, momentum, eps, training):\n"
        "        with at.Graph(name='mine') as g:\n"
        "            xi = at.input('x', x.shape)\n"
        "            y = at.nn.BatchNorm1d(x.shape[1], eps=eps, momentum=momentum, name='bn')(xi)\n"
        "        nxt = [at.Tensor(g, g.find(n).supplied.next) for n in ('bn.running_mean', 'bn.running_var')]\n"
        "        feeds = {xi: x, 'bn.weight': gamma, 'bn.bias': beta, 'bn.running_mean': running_mean,\n"
        "                 'bn.running_var': running_var}\n"
        "        out = at.run([y, *nxt], feeds, training=training)\n"
        "        return tuple(out) if training else (out[0], running_mean, running_var)\n" + _BN_USE,
        "write batch norm with numpy"),
    # "weight decay is weight decay": lr * wd * w whatever the optimizer, Adam's division forgotten
    2: ("with exercise(2):\n"
        "    def decay_per_step(optimizer, w, grad_rms, lr, wd):\n"
        "        return lr * wd * np.asarray(w)\n" + _DECAY_USE,
        "joins the gradient"),
    # the candidate that fits the training set best: the smallest weight decay, always
    3: ("with exercise(3):\n"
        "    def choose_by_validation(fit, error, candidates, X_train, y_train, X_val, y_val):\n"
        "        models = [fit(c, X_train, y_train) for c in candidates]\n"
        "        errors = [error(m, X_train, y_train) for m in models]\n"
        "        k = int(np.argmin(errors))\n"
        "        return candidates[k], models[k]\n" + _CHOOSE_USE,
        "TRAINING error"),
}

# attempts on the judge itself: each a submission of its own (tests/test_course.py's MORE)
MORE = [
    {   # a library stand-in; section 4's measurement in place of a prediction; the test set to choose with
        1: ("with exercise(1):\n"
            "    def batchnorm_forward(x, gamma, beta, running_mean, running_var, momentum, eps, training):\n"
            "        import torch\n"
            "        bn = torch.nn.BatchNorm1d(x.shape[1], eps=eps, momentum=momentum)\n"
            "        raise RuntimeError('a stand-in')\n" + _BN_USE,
            "may not"),
        2: ("with exercise(2):\n"
            "    def decay_per_step(optimizer, w, grad_rms, lr, wd):\n"
            "        return measure_decay(optimizer, np.asarray(w, float), np.asarray(grad_rms, float), lr, wd)\n"
            + _DECAY_USE,
            "may not"),
        3: ("with exercise(3):\n"
            "    def choose_by_validation(fit, error, candidates, X_train, y_train, X_val, y_val):\n"
            "        models = [fit(c, X_train, y_train) for c in candidates]\n"
            "        errors = [error(m, X_test, y_test) for m in models]   # the test set decides\n"
            "        k = int(np.argmin(errors))\n"
            "        return candidates[k], models[k]\n" + _CHOOSE_USE,
            "may not"),
    },
    {   # the check's own reference reused; the decay MEASURED in numpy (no asgteach, so no rule names it): within
        # 5 % of the check's measurements, but not exact where a formula is; choosing on train + val together
        1: ("with exercise(1):\n"
            "    def batchnorm_forward(x, gamma, beta, running_mean, running_var, momentum, eps, training):\n"
            "        return lesson19._library_bn(x, gamma, beta, running_mean, running_var, momentum, eps, training)\n"
            + _BN_USE,
            "may not"),
        2: ("with exercise(2):\n"
            "    def decay_per_step(optimizer, w, grad_rms, lr, wd):\n"
            "        w, rms = np.asarray(w, float), np.asarray(grad_rms, float)\n"
            "        r = np.random.default_rng(0)\n"
            "        shape = (64,) + w.shape\n"
            "        state = {0.0: [np.zeros(shape), np.zeros(shape)], wd: [np.zeros(shape), np.zeros(shape)]}\n"
            "        total = np.zeros(shape)\n"
            "        for t in range(1, 1501):\n"
            "            g = r.standard_normal(shape) * rms\n"
            "            new = {}\n"
            "            for decay, (m, v) in state.items():\n"
            "                if optimizer == 'sgd':\n"
            "                    new[decay] = w - lr * (g + decay * w)\n"
            "                    continue\n"
            "                gg = g + decay * w if optimizer == 'adam' else g\n"
            "                m, v = 0.9 * m + 0.1 * gg, 0.999 * v + 0.001 * gg * gg\n"
            "                state[decay] = [m, v]\n"
            "                step = (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)\n"
            "                shrunk = w * (1 - lr * decay) if optimizer == 'adamw' else w\n"
            "                new[decay] = shrunk - lr * step\n"
            "            if t > 500:\n"
            "                total += new[0.0] - new[wd]\n"
            "        return (total / 1000).mean(axis=0)\n" + _DECAY_USE,
            "exact to round-off"),
        3: ("with exercise(3):\n"
            "    def choose_by_validation(fit, error, candidates, X_train, y_train, X_val, y_val):\n"
            "        X_all, y_all = np.concatenate([X_train, X_val]), np.concatenate([y_train, y_val])\n"
            "        models = [fit(c, X_train, y_train) for c in candidates]\n"
            "        errors = [error(m, X_all, y_all) for m in models]     # every labelled point\n"
            "        k = int(np.argmin(errors))\n"
            "        return candidates[k], models[k]\n" + _CHOOSE_USE,
            "neither the training set nor the validation set"),
    },
    {   # evaluation with the batch's statistics; the check switched off from the answer cell; a fit that has seen
        # the validation set
        1: ("with exercise(1):\n"
            "    def batchnorm_forward(x, gamma, beta, running_mean, running_var, momentum, eps, training):\n"
            "        axes = (0, *range(2, x.ndim))\n"
            "        shape = [1] * x.ndim\n"
            "        shape[1] = x.shape[1]\n"
            "        mean, var = x.mean(axis=axes), x.var(axis=axes)     # the batch's, in both modes\n"
            "        n = x.size // x.shape[1]\n"
            "        y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)\n"
            "        if training:\n"
            "            running_mean = (1 - momentum) * running_mean + momentum * mean\n"
            "            running_var = (1 - momentum) * running_var + momentum * var * n / (n - 1)\n"
            "        return y * gamma.reshape(shape) + beta.reshape(shape), running_mean, running_var\n" + _BN_USE,
            "In evaluation, normalise with running_mean and running_var"),
        2: ("lesson19.decay_per_step_check = print\n"
            "with exercise(2):\n"
            "    def decay_per_step(optimizer, w, grad_rms, lr, wd):\n"
            "        return np.zeros(np.shape(w))\n" + _DECAY_USE,
            "may not"),
        3: ("with exercise(3):\n"
            "    def choose_by_validation(fit, error, candidates, X_train, y_train, X_val, y_val):\n"
            "        X_all, y_all = np.concatenate([X_train, X_val]), np.concatenate([y_train, y_val])\n"
            "        models = [fit(c, X_all, y_all) for c in candidates]   # more data for every candidate\n"
            "        errors = [error(m, X_val, y_val) for m in models]\n"
            "        k = int(np.argmin(errors))\n"
            "        return candidates[k], models[k]\n\n"
            "    chosen_wd, chosen_model = 3.0, None\n",
            "not the training set it was given"),
    },
]

# honest answers in other styles than the reference: each list entry a submission that must score full marks
HONEST = [
    {
        1: ("with exercise(1):\n"
            "    def batchnorm_forward(x, gamma, beta, running_mean, running_var, momentum, eps, training):\n"
            "        C = x.shape[1]\n"
            "        xc = np.moveaxis(x, 1, 0).reshape(C, -1)           # one row per channel\n"
            "        n = xc.shape[1]\n"
            "        if training:\n"
            "            mu = xc.mean(axis=1)\n"
            "            var = ((xc - mu[:, None]) ** 2).mean(axis=1)\n"
            "            rm = running_mean * (1 - momentum) + mu * momentum\n"
            "            rv = running_var * (1 - momentum) + var * (n / (n - 1)) * momentum\n"
            "        else:\n"
            "            mu, var = running_mean, running_var\n"
            "            rm, rv = np.array(running_mean, copy=True), np.array(running_var, copy=True)\n"
            "        yc = (xc - mu[:, None]) / np.sqrt(var[:, None] + eps) * gamma[:, None] + beta[:, None]\n"
            "        y = np.moveaxis(yc.reshape((C, x.shape[0]) + x.shape[2:]), 0, 1)\n"
            "        return y, rm, rv\n" + _BN_USE),
        2: ("with exercise(2):\n"
            "    def decay_per_step(optimizer, w, grad_rms, lr, wd):\n"
            "        w = np.array(w, dtype=float)\n"
            "        shrink = lr * wd * w\n"
            "        divisor = {'sgd': 1.0, 'adamw': 1.0}.get(optimizer)\n"
            "        if divisor is None:    # Adam with L2: v_hat settles at grad_rms**2 + (wd * w)**2\n"
            "            divisor = np.sqrt(np.square(grad_rms) + np.square(wd * w)) + 1e-8\n"
            "        return shrink / divisor\n" + _DECAY_USE),
        3: ("with exercise(3):\n"
            "    def choose_by_validation(fit, error, candidates, X_train, y_train, X_val, y_val):\n"
            "        scored = []\n"
            "        for c in candidates:\n"
            "            m = fit(c, X_train, y_train)\n"
            "            scored.append((error(m, X_val, y_val), len(scored), c, m))\n"
            "        _, _, best, model = min(scored, key=lambda s: (s[0], s[1]))\n"
            "        return best, model\n" + _CHOOSE_USE),
    },
    {
        1: ("with exercise(1):\n"
            "    def batchnorm_forward(x, gamma, beta, running_mean, running_var, momentum, eps, training):\n"
            "        x = np.asarray(x, dtype=float)\n"
            "        red = tuple(i for i in range(x.ndim) if i != 1)\n"
            "        b = tuple(x.shape[1] if i == 1 else 1 for i in range(x.ndim))\n"
            "        if not training:\n"
            "            y = (x - running_mean.reshape(b)) / np.sqrt(running_var.reshape(b) + eps)\n"
            "            return y * gamma.reshape(b) + beta.reshape(b), running_mean, running_var\n"
            "        mu = x.mean(axis=red, keepdims=True)\n"
            "        centred = x - mu\n"
            "        var = (centred ** 2).mean(axis=red, keepdims=True)\n"
            "        count = int(np.prod([x.shape[i] for i in red]))\n"
            "        y = centred / np.sqrt(var + eps) * gamma.reshape(b) + beta.reshape(b)\n"
            "        new_mean = running_mean + momentum * (mu.reshape(-1) - running_mean)\n"
            "        new_var = running_var + momentum * (var.reshape(-1) * count / (count - 1) - running_var)\n"
            "        return y, new_mean, new_var\n" + _BN_USE),
        2: ("with exercise(2):\n"
            "    def decay_per_step(optimizer, w, grad_rms, lr, wd):\n"
            "        w = np.asarray(w, dtype=np.float64)\n"
            "        if optimizer in ('sgd', 'adamw'):\n"
            "            return lr * wd * w\n"
            "        elif optimizer == 'adam':\n"
            "            eps = 1e-8\n"
            "            v_hat = np.asarray(grad_rms, dtype=np.float64) ** 2\n"
            "            return lr * (wd * w) / (np.sqrt(v_hat) + eps)\n"
            "        raise ValueError(optimizer)\n" + _DECAY_USE),
        3: ("with exercise(3):\n"
            "    def choose_by_validation(fit, error, candidates, X_train, y_train, X_val, y_val):\n"
            "        models = [fit(c, X_train, y_train) for c in candidates]\n"
            "        errors = [error(m, X_val, y_val) for m in models]\n"
            "        k = int(np.argmin(errors))\n"
            "        return candidates[k], models[k]\n" + _CHOOSE_USE),
    },
]
