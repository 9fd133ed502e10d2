"""The floors of keras_tf: a module imports only from its own floor or below, and no module cycles.

Every import counts, those inside functions too: a deferred import that
dodges a cycle is still a cycle. `FLOORS` is the one table of floors;
docs/architecture.md shows the same table, and a test keeps them equal.
"""

import ast
import pathlib
import re

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "keras_tf"
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"

# Floor of each part of keras_tf, lowest first; a part imports its floor or below.
FLOORS = {
    "special_tokens": 0,
    "frozen_config": 0,
    "buckets": 0,
    "atomic_files": 0,
    "preset_checks": 0,
    "option_error": 0,
    "tensorflow_import": 0,
    "version": 0,
    "plots": 0,
    "layers": 1,
    "models": 2,
    "decoding": 2,
    "text": 3,
    "serving": 4,
    "datasets": 4,
    "translation": 5,
    "training": 6,
    "bulk": 6,
    "cli": 7,
}
# The package face `keras_tf/__init__.py` stands above every floor.
TOP = max(FLOORS.values()) + 1

# Upward imports kept for one release, each an alias that warns with
# DeprecationWarning (docs/migration.md). Remove them with the aliases.
ALLOWED_UPWARD = {
    ("keras_tf.models", "keras_tf.translation"),  # models.Seq2SeqTranslator
    ("keras_tf.models.seq2seq_transformer", "keras_tf.translation.presets"),  # from_preset
    ("keras_tf.text.preprocessor", "keras_tf.translation.presets"),  # from_preset
    ("keras_tf.text.tokenizers", "keras_tf.translation.presets"),  # from_preset
}


def module_name(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def floor(module):
    parts = module.split(".")
    return TOP if len(parts) == 1 else FLOORS[parts[1]]


def imports(module):
    """The keras_tf modules `module` imports, anywhere in its file (importlib calls too)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            # `from keras_tf.x import y`: y is a module when keras_tf/x/y.py exists.
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                     for alias in node.names]
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)):
            names = [node.args[0].value]
        else:
            continue
        found.update(name for name in names if name.split(".")[0] == "keras_tf")
    return found - {module}


GRAPH = {module: imports(module) for module in MODULES}


def test_the_graph_covers_the_package():
    assert "keras_tf.translation.translator" in GRAPH
    assert all(target in MODULES for targets in GRAPH.values() for target in targets)
    unknown = {module.split(".")[1] for module in MODULES if "." in module} - set(FLOORS)
    assert not unknown, f"modules of no floor: {sorted(unknown)}; add them to FLOORS"


def test_no_import_points_up_a_floor():
    upward = sorted(
        (module, target)
        for module, targets in GRAPH.items()
        for target in targets
        if floor(target) > floor(module) and (module, target) not in ALLOWED_UPWARD
    )
    assert not upward, "imports of a higher floor:\n" + "\n".join(f"{a} -> {b}" for a, b in upward)


def test_the_allow_list_holds_only_live_aliases():
    for module, target in ALLOWED_UPWARD:
        assert target in GRAPH[module], f"{module} -> {target} is gone: drop it from the list"


def _cycle(graph):
    """One cycle of `graph` as a list of nodes, or None."""
    state = {}

    def visit(node, path):
        state[node] = "open"
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                return path[path.index(target):] + [target]
            if target not in state:
                found = visit(target, path + [target])
                if found:
                    return found
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [node])
            if found:
                return found
    return None


def test_no_module_cycle():
    graph = {m: {t for t in ts if (m, t) not in ALLOWED_UPWARD} for m, ts in GRAPH.items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_no_package_knot():
    """Collapsed to parts of the package (models, text, ...), the imports still form no circle."""

    def part(module):
        return module.split(".")[1] if "." in module else "keras_tf"

    graph = {}
    for module, targets in GRAPH.items():
        for target in targets:
            if (module, target) not in ALLOWED_UPWARD and part(module) != part(target):
                graph.setdefault(part(module), set()).add(part(target))
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_the_cycle_check_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_docs_show_the_same_floors():
    """docs/architecture.md's floor table: `| floor | parts |` rows, one per floor."""
    rows = re.findall(r"^\| (\d) \| (.+?) \|", ARCHITECTURE.read_text(encoding="utf-8"), re.M)
    assert rows, f"no floor table in {ARCHITECTURE}"
    documented = {
        name.strip("` /"): int(number)
        for number, names in rows
        for name in names.split(",")
    }
    assert documented == FLOORS
