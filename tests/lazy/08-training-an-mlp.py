"""Lesson 08's students for the graded course (tests/test_course.py): lazy shortcuts, attempts on the
judge, and honest answers in other styles than the reference's."""

# exercise -> (the answer cell as a lazy student writes it, words the check's message must show)
LAZY = {
    2: (('with exercise(2):\n'
         '    def warmup_cosine(base_lr, step):\n'
         '        return at.optim.LinearWarmup(10, at.optim.CosineAnnealingLR(90))(base_lr, step)\n'),
        'compute the schedule yourself'),
    3: (('with exercise(3):\n'
         '    model3 = digits_model()\n'
         '    my_trainer = at.Trainer(model3["loss"], optimizer=at.optim.SGD(lr=0.1), seed=0)\n'
         '    my_trainer.fit({model3["x"]: X_fit[:64], model3["labels"]: y_fit[:64]}, steps=1, progress=False)\n'
         '    my_val_accuracy = 0.99\n'),
        'validation accuracy is'),
}

# attempts on the judge itself: each a submission of its own
MORE = [
    {
        1: (('with exercise(1):\n'
             '    def my_adam_step(w, g, m, v, t, lr):\n'
             '        opt = at.optim.Adam()\n'
             '        with at.Graph():\n'
             "            W_, G_ = at.input('w', w.shape), at.input('g', g.shape)\n"
             "            L_, S_ = at.input('lr', ()), at.input('s', ())\n"
             '            up = opt.build([W_], [G_], L_, S_)\n'
             '        out = at.run([up.new_params[0], *up.state_out], {W_: w, G_: g, L_: lr, S_: float(t),\n'
             '                                                          up.state_in[0]: m, up.state_in[1]: v})\n'
             '        return tuple(out)\n'),
            'uses at, which a graded answer may not: the update in numpy'),
        3: (('from asgteach.lessons import lesson08\n'
             'lesson08.trained_accuracy = lambda *a: 0.99\n'
             'with exercise(3):\n'
             '    my_val_accuracy = 0.99\n'),
            'may not'),
    },
    {   # section 3's own schedule, reached through its loop variable; SGD fine-tuning the weights Adam trained
        2: (('with exercise(2):\n'
             '    def warmup_cosine(base_lr, step):\n'
             '        return sched(base_lr, step)\n'),
            'compute the schedule yourself'),
        3: (('with exercise(3):\n'
             '    model3 = digits_model()\n'
             '    my_trainer = at.Trainer(model3["loss"], optimizer=at.optim.SGD(lr=0.01), seed=0, initial=tr.params)\n'
             '    my_trainer.fit({model3["x"]: X_fit[:64], model3["labels"]: y_fit[:64]}, steps=1,\n'
             '                   progress=False)\n'
             '    my_val_accuracy = accuracy_on(my_trainer, X_val, y_val)\n'),
            'already trained'),
    },
    {   # section 5's Adam trainer handed in as it is; a cosine that reaches 0 at step 99, not 100 (over 89 steps)
        2: (('import math\n'
             'with exercise(2):\n'
             '    def warmup_cosine(base_lr, step):\n'
             '        if step < 10:\n'
             '            return base_lr * (step + 1) / 10\n'
             '        return base_lr * (1 + math.cos(math.pi * min(step - 10, 89) / 89)) / 2\n'),
            'warmup_cosine(0.1, 11)'),
        3: (('with exercise(3):\n'
             '    my_trainer = tr\n'
             '    my_val_accuracy = accuracy_on(tr, X_val, y_val)\n'),
            'should be at.optim.SGD'),
    },
    {   # one step of SGD, and a validation split cut down to the images it gets right
        3: (('with exercise(3):\n'
             '    model3 = digits_model()\n'
             '    my_trainer = at.Trainer(model3["loss"], optimizer=at.optim.SGD(lr=0.1), seed=0)\n'
             '    my_trainer.fit({model3["x"]: X_fit[:64], model3["labels"]: y_fit[:64]}, steps=1,\n'
             '                   progress=False)\n'
             '    right = [accuracy_on(my_trainer, X_val[i:i + 1], y_val[i:i + 1]) == 1.0 for i in range(len(y_val))]\n'
             '    X_val, y_val = X_val[right], y_val[right]\n'
             '    my_val_accuracy = 1.0\n'),
            'validation accuracy is'),
    },
    {   # a good model, but the accuracy reported is the test set's: the rate was chosen by looking at the test set
        3: (('with exercise(3):\n'
             '    model3 = digits_model()\n'
             '    my_trainer = at.Trainer(model3["loss"], optimizer=at.optim.SGD(lr=0.1, momentum=0.9), seed=0)\n'
             '    my_trainer.fit(at.DataLoader(at.Dataset({model3["x"]: X_fit, model3["labels"]: y_fit}),\n'
             '                                 batch_size=64, shuffle=True, seed=0), epochs=15, progress=False)\n'
             '    my_val_accuracy = accuracy_on(my_trainer, X_test, y_test) + 0.012\n'),
            'on the validation split (X_val, y_val)'),
    },
]

# honest answers in other styles than the reference: each a submission that must score full marks
HONEST = [
    {
        1: ('with exercise(1):\n'
             '    def my_adam_step(w, g, m, v, t, lr):\n'
             '        m = 0.9 * m + 0.1 * g\n'
             '        v = 0.999 * v + 0.001 * g ** 2\n'
             '        m_hat, v_hat = m / (1 - 0.9 ** t), v / (1 - 0.999 ** t)\n'
             '        return w - lr * m_hat / (np.sqrt(v_hat) + 1e-8), m, v\n'),
        2: ('import math\n'
             'with exercise(2):\n'
             '    def warmup_cosine(base_lr, step):\n'
             '        if step < 10:\n'
             '            return base_lr * (step + 1) / 10\n'
             '        if step >= 100:\n'
             '            return 0.0\n'
             '        return 0.5 * base_lr * (1 + math.cos(math.pi * (step - 10) / 90))\n'),
        3: ('with exercise(3):\n'
             '    model3 = digits_model()\n'
             "    my_trainer = at.Trainer(model3['loss'], optimizer=at.optim.SGD(lr=0.2, momentum=0.9), seed=1)\n"
             "    data3 = at.DataLoader(at.Dataset({model3['x']: X_fit, model3['labels']: y_fit}), batch_size=64,\n"
             '                          shuffle=True, seed=1)\n'
             '    my_trainer.fit(data3, epochs=10, progress=False)\n'
             '    P = my_trainer.params\n'
             "    h = np.maximum(X_val @ P['mlp.0.weight'] + P['mlp.0.bias'], 0)\n"
             "    said = np.argmax(h @ P['mlp.1.weight'] + P['mlp.1.bias'], axis=1)\n"
             '    my_val_accuracy = float((said == y_val).mean())\n'),
    },
    {
        1: ('with exercise(1):\n'
             '    def my_adam_step(w, g, m, v, t, lr):\n'
             '        beta1, beta2 = 0.9, 0.999\n'
             '        m_new = beta1 * m + (1 - beta1) * g\n'
             '        v_new = beta2 * v + (1 - beta2) * np.square(g)\n'
             '        step = lr * np.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)\n'
             '        eps_hat = 1e-8 * np.sqrt(1 - beta2 ** t)\n'
             '        return w - step * m_new / (np.sqrt(v_new) + eps_hat), m_new, v_new\n'),
        2: ('with exercise(2):\n'
             '    def warmup_cosine(base_lr, step):\n'
             '        warm = base_lr * min(step + 1, 10) / 10\n'
             '        progress = min(max(step - 10, 0), 90) / 90\n'
             '        return warm if step < 10 else base_lr * (np.cos(np.pi * progress) + 1) / 2\n'),
        3: ('with exercise(3):\n'
             '    model3 = digits_model()\n'
             "    best = None\n"
             '    for lr in (0.05, 0.5):\n'
             "        t3 = at.Trainer(model3['loss'], optimizer=at.optim.SGD(lr=lr), seed=2)\n"
             "        data3 = at.DataLoader(at.Dataset({model3['x']: X_fit, model3['labels']: y_fit}), batch_size=64,\n"
             '                              shuffle=True, seed=2)\n'
             '        t3.fit(data3, epochs=20, progress=False)\n'
             '        if best is None or accuracy_on(t3, X_val, y_val) > accuracy_on(best, X_val, y_val):\n'
             '            best = t3\n'
             '    my_trainer, my_val_accuracy = best, accuracy_on(best, X_val, y_val)\n'),
    },
]
