"""No HTML is built from data outside `engine/html.py`.

The views are inert because one module escapes every value it is given. A
view that joins markup by hand is only inert for as long as its author
remembered to escape each value, and the next field added to it is the one
forgotten: a crafted bundle's stored report once reached the page that way.
So the rule is enforced on the source, not only on the output of the views
the other tests know about: any f-string, `%`, `.format`, `.join` or `+`
whose literal part holds an HTML tag, and any `Html(...)`/`Markup(...)` that
trusts a computed value, is a failure naming its file and line.

The tag list names real HTML elements rather than any `<word`, because
`<imported-text>` (the knowledge framing markers), `<f4` (a NumPy dtype) and
`<Campaign 3 'x'>` (a repr) are not markup.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
SCANNED = ("engine", "widgets", "experiments")
RENDERER = Path("engine/html.py")

_ELEMENTS = ("a|abbr|b|blockquote|body|br|button|caption|code|col|details|div|dl|dd|dt|em|embed|form|h[1-6]|head|hr|"
             "html|i|iframe|img|input|label|li|link|meta|object|ol|option|p|pre|s|script|section|select|small|"
             "span|strong|style|sub|summary|sup|svg|table|tbody|td|textarea|tfoot|th|thead|tr|u|ul")
_TAG_RE = re.compile(rf"</?(?:{_ELEMENTS})(?=[\s>/])", re.IGNORECASE)
_HOLE = "\x00"
_TRUSTING = {"Html", "Markup"}


def _markup(literal) -> bool:
    return isinstance(literal, str) and bool(_TAG_RE.search(literal))


def _literal_markup(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and _markup(node.value)


def _template(node: ast.JoinedStr) -> str:
    """The f-string's literal text with a hole where each value goes, so
    `f"<{name}>"` (a tag named by data) is caught as well as `f"<p>{x}"`."""
    return "".join(part.value if isinstance(part, ast.Constant) else _HOLE for part in node.values)


def _called_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _offence(node: ast.AST) -> str | None:
    if isinstance(node, ast.JoinedStr):
        template = _template(node)
        if _markup(template) or re.search(rf"</?{_HOLE}", template):
            return "an f-string builds HTML"
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and _literal_markup(node.left):
        return "a %-format builds HTML"
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and (
            _literal_markup(node.left) or _literal_markup(node.right)):
        return "a + joins HTML to a value"
    elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and _literal_markup(node.value):
        return "a += joins HTML to a value"
    elif isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("format", "join") and _literal_markup(func.value):
            return f"a str.{func.attr} builds HTML"
        if _called_name(node) in _TRUSTING and (node.keywords or any(
                not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)) for arg in node.args)):
            return f"{_called_name(node)}(...) trusts a computed value"
    return None


def offences(source: str, filename: str = "<source>") -> list[str]:
    """`file:line: what` for each place HTML is built by hand; `__repr__`
    bodies are skipped, their `<Name ...>` strings being no markup."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "__repr__":
            return
        what = _offence(node)
        if what and f"{filename}:{node.lineno}: {what}" not in found:
            found.append(f"{filename}:{node.lineno}: {what}")
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(source, filename))
    return found


def _sources() -> list[Path]:
    return sorted(p.relative_to(ROOT) for folder in SCANNED for p in (ROOT / folder).rglob("*.py"))


def test_no_html_is_built_outside_the_rendering_module():
    found = [o for path in _sources() if path != RENDERER
             for o in offences((ROOT / path).read_text(encoding="utf-8"), str(path))]
    assert not found, "HTML built by hand (use engine.html: fragment, tag, table...):\n" + "\n".join(found)


def test_the_scan_reads_the_views():
    scanned = _sources()
    for view in ("engine/display.py", "engine/context/report.py", "widgets/story_view.py", "widgets/inspector.py"):
        assert Path(view) in scanned


@pytest.mark.parametrize("source", [
    'def view(x):\n    return f"<p>{x}</p>"\n',
    'def view(x):\n    return f"<td style=\'color:#888\'>{escape(x)}</td>"\n',
    'def view(name):\n    return f"<{name}>"\n',
    'def view(x):\n    return "<li>%s</li>" % x\n',
    'def view(x):\n    return "<b>{}</b>".format(x)\n',
    'def view(xs):\n    return "<br>".join(xs)\n',
    'def view(x):\n    return "<tr>" + x + "</tr>"\n',
    'def view(x):\n    out = ""\n    out += "<pre>"\n    return out\n',
    'def view(x):\n    return Html(x)\n',
    'def view(x):\n    return html.Html(x + "")\n',
    'def view(x):\n    return f"Delete save point <b>{x}</b>?"\n',
    'class A:\n    def _repr_html_(self):\n        return f"<div>{self.x}</div>"\n',
])
def test_the_scan_flags_html_built_by_hand(source):
    assert offences(source), source


@pytest.mark.parametrize("source", [
    'def view(x):\n    return fragment("<p>{}</p>", x)\n',
    'def view(x):\n    return html.tag("p", x, style="color:#888")\n',
    'def view():\n    return Html("")\n',
    'class A:\n    def __repr__(self):\n        return f"<Campaign {self.id}>"\n',
    'def pack(v):\n    return np.asarray(v, dtype="<f4")\n',
    'def frame(text):\n    return f"<imported-text>{text}</imported-text>"\n',
    'def doc():\n    """A reply holding <script> shows as text."""\n',
    'def sizes(a, b):\n    return f"{a} < {b}"\n',
    'def sizes(a):\n    return f"{a} < b or a > b"\n',
])
def test_the_scan_passes_html_built_through_the_module(source):
    assert offences(source) == []
