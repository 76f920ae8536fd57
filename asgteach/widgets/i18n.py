"""The widget's own words (buttons, section titles) in every language the view offers.

The explanations of ops and roles live in ``asgteach/explain/<lang>.toml``; this table only
holds the user-interface strings around them. A language missing here falls back to English.
"""

from __future__ import annotations

__all__ = ["UI", "LANGS", "t"]

#: Languages the toolbar offers.
LANGS = ("en", "ru")

UI: dict[str, dict[str, str]] = {
    "en": {
        "fit": "Fit", "forward": "forward", "backward": "backward", "both": "both", "view": "View",
        "step": "Step backward ▸", "step_back": "◂", "reset": "Reset", "expand_all": "Expand all",
        "collapse_all": "Collapse layers", "wgsl": "WGSL kernel", "lang": "Language",
        "click_hint": "Click a node to see what it does, its formula and its backward rule.",
        "no_explanation": "No explanation yet for this op in this language.",
        "technical": "Technical details", "id": "id", "op": "op", "name": "name", "shape": "shape",
        "dtype": "dtype", "phase": "phase", "inputs": "inputs", "consumers": "used by", "attrs": "attributes",
        "source": "created at", "meta": "metadata", "value": "Value", "values": "Numbers",
        "gradient": "Gradient ∂L/∂(this node)",
        "no_values": "No values attached: at.show(y, feeds={...}) or values={...} fills them in.",
        "local": "Local derivative with this node's numbers", "entry": "at entry",
        "receives": "receives", "local_slope": "local slope ∂y/∂x = (∂L/∂x) / g",
        "group": "Layer", "nodes_in_group": "nodes inside", "click_expand": "Click the group to open it.",
        "click_collapse": "Click the box's label area again to close it.",
        "part_of_rule": "Part of the backward rule of", "sums_for": "Adds up gradient contributions for",
        "grad_result": "This node holds the gradient ∂L/∂", "seed_for": "The seed ∂L/∂L = 1 of the sweep from",
        "step_title": "Step", "of": "of", "step_arrived": "Gradient complete for", "step_from": "contribution from",
        "step_fanout": "is used by {n} nodes (fan-out), so its gradient is the SUM of {n} contributions:",
        "step_single": "has one consumer, so its gradient is that consumer's contribution.",
        "step_rule": "Its backward rule then appends these nodes (what it sends to its inputs):",
        "step_leaf": "It is a leaf: its gradient is a result of at.grad, nothing is sent further.",
        "step_done": "The backward sweep is complete.", "no_pass": "No backward pass recorded: call at.grad first.",
        "wgsl_none": "The wgpu backend is not available here.", "min": "min", "mean": "mean", "max": "max",
        "nonfinite": "non-finite entries", "stats_of": "stats",
    },
    "ru": {
        "fit": "Вписать", "forward": "прямой", "backward": "обратный", "both": "оба", "view": "Граф",
        "step": "Шаг назад ▸", "step_back": "◂", "reset": "Сброс", "expand_all": "Раскрыть всё",
        "collapse_all": "Свернуть слои", "wgsl": "Ядро WGSL", "lang": "Язык",
        "click_hint": "Щёлкните узел: что он делает, его формула и правило обратного прохода.",
        "no_explanation": "Для этой операции на этом языке пока нет объяснения.",
        "technical": "Технические детали", "id": "id", "op": "операция", "name": "имя", "shape": "форма",
        "dtype": "тип", "phase": "фаза", "inputs": "входы", "consumers": "используется в", "attrs": "атрибуты",
        "source": "создан в", "meta": "метаданные", "value": "Значение", "values": "Числа",
        "gradient": "Градиент ∂L/∂(этот узел)",
        "no_values": "Значений нет: at.show(y, feeds={...}) или values={...} их добавят.",
        "local": "Локальная производная на числах этого узла", "entry": "в элементе",
        "receives": "получает", "local_slope": "локальный наклон ∂y/∂x = (∂L/∂x) / g",
        "group": "Слой", "nodes_in_group": "узлов внутри", "click_expand": "Щёлкните группу, чтобы раскрыть её.",
        "click_collapse": "Щёлкните рамку ещё раз, чтобы свернуть.",
        "part_of_rule": "Часть правила обратного прохода узла", "sums_for": "Складывает вклады градиента для",
        "grad_result": "Этот узел хранит градиент ∂L/∂", "seed_for": "Затравка ∂L/∂L = 1 прохода от",
        "step_title": "Шаг", "of": "из", "step_arrived": "Градиент готов для", "step_from": "вклад от",
        "step_fanout": "используется в {n} узлах (ветвление), поэтому его градиент — СУММА {n} вкладов:",
        "step_single": "используется в одном узле, поэтому его градиент — вклад этого узла.",
        "step_rule": "Затем его правило обратного прохода добавляет эти узлы (то, что уходит к входам):",
        "step_leaf": "Это лист: его градиент — результат at.grad, дальше ничего не передаётся.",
        "step_done": "Обратный проход завершён.", "no_pass": "Обратный проход не записан: сначала вызовите at.grad.",
        "wgsl_none": "Бэкенд wgpu здесь недоступен.", "min": "мин", "mean": "среднее", "max": "макс",
        "nonfinite": "неконечных элементов", "stats_of": "статистика",
    },
}


def t(key: str, lang: str = "en") -> str:
    """The UI string ``key`` in ``lang`` (English when missing)."""
    code = (lang or "en").lower()[:2]
    return UI.get(code, UI["en"]).get(key) or UI["en"][key]
