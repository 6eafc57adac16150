"""The small expression and template language of app files (see apps/FORMAT.md).

Expressions are parsed with Python's `ast` and only a whitelisted subset of node types is
allowed, so an app file can never run arbitrary code.
"""
import ast
import functools
import re

NAMESPACES = ("page", "item", "global", "system", "secure", "phone")
_NS_REF = re.compile(r"\b(page|item|global|system|secure|phone):([A-Za-z_][A-Za-z0-9_]*)")
_TEMPLATE_PART = re.compile(r"\{([^{}]+)\}")

_ALLOWED_NODES = (
    ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.Compare,
    ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.In, ast.NotIn, ast.Is, ast.IsNot,
    ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Mod, ast.FloorDiv, ast.Constant,
    ast.Name, ast.Load, ast.Subscript, ast.Slice, ast.Call, ast.List, ast.Tuple, ast.IfExp,
)


def _contains(haystack, needle):
    return str(needle or "").lower() in str(haystack or "").lower()


def _to_int(value, default=0):
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return default


def _record_matches(record, pairs):
    """has(list, 'key', value, 'key2', value2...): every key equals its value (compared as text)."""
    if not isinstance(record, dict):
        return False
    return all(str(record.get(pairs[i])) == str(pairs[i + 1]) for i in range(0, len(pairs) - 1, 2))


FUNCTIONS = {
    "len": lambda v: len(v) if v is not None else 0,
    "lower": lambda v: str(v or "").lower(),
    "upper": lambda v: str(v or "").upper(),
    "str": lambda v: "" if v is None else str(v),
    "int": _to_int,
    "contains": _contains,
    "has": lambda records, *pairs: any(_record_matches(r, pairs) for r in records or []),
    "count": lambda records, *pairs: sum(1 for r in records or [] if _record_matches(r, pairs)),
}


class ExpressionError(ValueError):
    pass


@functools.lru_cache(maxsize=4096)
def compile_expression(source: str):
    """Rewrite `ns:name` references to `__ns_name` identifiers and compile safely."""
    rewritten = _NS_REF.sub(lambda m: f"__{m.group(1)}__{m.group(2)}", source.strip())
    try:
        tree = ast.parse(rewritten, mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"bad expression {source!r}: {exc.msg}") from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise ExpressionError(f"not allowed in expression {source!r}: {type(node).__name__}")
        if isinstance(node, ast.Call):
            if not (isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS):
                raise ExpressionError(f"unknown function in {source!r}")
            node.func.id = "__fn__" + node.func.id  # so a state variable may be called `count` or `len`
    return compile(tree, "<app expression>", "eval")


class Scope(dict):
    """Name lookup for one evaluation; `resolve(ns, name)` answers namespaced names."""

    def __init__(self, resolve):
        super().__init__({"__fn__" + name: fn for name, fn in FUNCTIONS.items()})
        self._resolve = resolve

    def __missing__(self, key):
        if key.startswith("__") and "__" in key[2:]:
            namespace, name = key[2:].split("__", 1)
            return self._resolve(namespace, name)
        return self._resolve("", key)


def evaluate(source, resolve):
    """Evaluate an expression; a non-string (True, 3) is returned as is."""
    if not isinstance(source, str):
        return source
    code = compile_expression(source)
    try:
        return eval(code, {"__builtins__": {}}, Scope(resolve))
    except Exception as exc:  # a type error in app data must not crash the phone
        raise ExpressionError(f"cannot evaluate {source!r}: {exc}") from None


def truthy(source, resolve) -> bool:
    if source is None:
        return True
    value = evaluate(source, resolve)
    if isinstance(value, str):
        return value not in ("", "0", "false", "False")
    return bool(value)


def render_template(template, resolve):
    """Fill `{expr}` parts; a template that is one whole `{expr}` keeps the value's type."""
    if not isinstance(template, str) or "{" not in template:
        return template
    whole = _TEMPLATE_PART.fullmatch(template)
    if whole:
        return evaluate(whole.group(1), resolve)

    def fill(match):
        value = evaluate(match.group(1), resolve)
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    return _TEMPLATE_PART.sub(fill, template)


def as_text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
