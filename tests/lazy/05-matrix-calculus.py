"""Lesson 05's students for the graded course (tests/test_course.py): lazy shortcuts, attempts on the
judge, and honest answers in other styles than the reference's."""

# exercise -> (the answer cell as a lazy student writes it, words the check's message must show)
LAZY = {
    3: (('with exercise(3):\n'
         '    wrong_gradients = [c.name for c in report.inputs if not c.ok]\n'
         '    culprit_ids = [c.node_id for c in report.culprits]\n'),
        'wrong_gradients is not right'),
}

# attempts on the judge itself: each a submission of its own
MORE = [
    {
        1: (('with exercise(1):\n'
             '    def matmul_vjp(G, X, W):\n'
             "        return eval('G @ W.T'), eval('X.T @ G')\n"),
            'uses eval'),
        2: (('import asgteach\n'
             'asgteach.grading.checks.check_function = lambda *a, **k: None\n'
             'with exercise(2):\n'
             '    def batched_matmul_vjp(G, X, W):\n'
             '        return None\n'),
            'may not'),
    },
]

# honest answers in other styles than the reference: each a submission that must score full marks
HONEST = [
    {
        1: ('with exercise(1):\n'
             '    def matmul_vjp(G, X, W):\n'
             '        return np.dot(G, W.T), np.dot(X.T, G)\n'),
        2: ('with exercise(2):\n'
             '    def batched_matmul_vjp(G, X, W):\n'
             "        return np.einsum('bnm,km->bnk', G, W), np.einsum('bnk,bnm->km', X, G)\n"),
        3: ('with exercise(3):\n'
             '    with bugs.mystery(5):\n'
             '        rep = at.gradcheck(loss_d, [xd, wd, bd, td, sd], feeds_d)\n'
             '    wrong_gradients = sorted(c.name for c in rep.inputs if not c.ok)\n'
             '    culprit_ids = sorted(c.node_id for c in rep.culprits)\n'),
    },
    {
        1: ('with exercise(1):\n'
             '    def matmul_vjp(G, X, W):\n'
             '        dX = G @ W.transpose()\n'
             '        return dX, X.transpose() @ G\n'),
        2: ('with exercise(2):\n'
             '    def batched_matmul_vjp(G, X, W):\n'
             '        B, n, k = X.shape\n'
             '        dW = X.reshape(B * n, k).T @ G.reshape(B * n, -1)\n'
             '        return G @ W.T, dW\n'),
        3: ('with exercise(3):\n'
             '    inputs_d = [xd, wd, bd, td, sd]\n'
             '    with bugs.mystery(5):\n'
             '        rep = at.gradcheck(loss_d, inputs_d, feeds_d)\n'
             '    wrong_gradients = []\n'
             '    for c in rep.inputs:\n'
             '        if not c.ok:\n'
             '            wrong_gradients.append(c.name)\n'
             '    culprit_ids = list({c.node_id for c in rep.culprits})\n'),
    },
]
