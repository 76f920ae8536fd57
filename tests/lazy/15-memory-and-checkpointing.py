"""Lesson 15's lazy student: the identity rewrite handed in as checkpointing, and the sqrt(N) rule of thumb."""

LAZY = {
    1: ("with exercise(1):\n    def recompute_segment(outputs, segment):\n"
        "        return copy_graph(outputs)   # a new graph, the same gradients... and nothing recomputed\n\n"
        "    mine6 = recompute_segment(outputs6, segment)\n", "recomputes nothing"),
    2: ("with exercise(2):\n    def segment_for_budget(n_layers, budget):\n"
        "        return round(n_layers ** 0.5)   # the sqrt(N) rule, whatever the budget\n\n"
        "    k_36 = segment_for_budget(36, 300 * 1024)\n", "Measure the peak of each k"),
}
