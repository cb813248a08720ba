"""Notebook ↔ package: one source of truth for code that readers study and later chapters reuse.

A notebook cell that shows library code begins with one marker line per object::

    # Same code as lecturelib.recurrence.rnn.ElmanRNN

and the rest of the cell must be exactly the source of those objects (in order, separated by
one blank line), less their argument checks: a bare statement that calls a ``check_*``
validator (``check_int(...)``, ``validate.check_int(...)``) is validation, and the copy leaves
it out (``strip_checks``); the library keeps refusing bad input. A long class may be shown
method by method: a cell marked with a method
(``# Same code as lecturelib.efficiency.paged.PagedKVCache.fork``) holds the method, dedented,
then the line that attaches it to its class (``PagedKVCache.fork = fork``), and the class's own
cell leaves that method out. ``tests/booktools/test_sync.py`` fails when a cell and the library
drift apart. From the repository root:

- ``python -m booktools.sync notebooks/*.ipynb`` lists the drifted cells;
- ``python -m booktools.sync --fix notebooks/*.ipynb`` rewrites the cells from the library;
- ``python -m booktools.sync --normalise notebooks/*.ipynb`` strips outputs and sets the
  metadata that every committed notebook carries;
- ``python -m booktools.sync --pin notebooks/*.ipynb`` points the Colab install cell at
  the book's branch (``repository.branch`` of ``_config.yml``): a notebook opened from that
  branch (the book's Colab buttons open it) installs the library of the same branch, so the
  two cannot drift, and no tag has to exist where the cell fetches it. The book build pins its
  own copies (the pages and their downloads) to the exact commit it built.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import sys
import textwrap
import types
from dataclasses import dataclass
from pathlib import Path

MARKER = re.compile(r"^# Same code as (lecturelib(?:\.\w+)+)\s*$")


@dataclass
class MarkedCell:
    notebook: Path
    index: int  # position among all cells
    names: list[str]
    body: str  # the cell without its marker lines


def resolve(name: str):
    """The object named by a dotted path such as ``lecturelib.recurrence.rnn.ElmanRNN``."""
    module_name, _, attr = name.rpartition(".")
    while module_name:
        try:
            obj = importlib.import_module(module_name)
            break
        except ModuleNotFoundError:
            module_name, _, head = module_name.rpartition(".")
            attr = f"{head}.{attr}"
    else:
        raise ValueError(f"{name!r} is not an importable lecturelib object")
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{name!r}: {module_name} has no attribute path {attr!r}")
        obj = getattr(obj, part)
    return obj


def library_source(names: list[str], apart: frozenset[str] = frozenset()) -> str:
    """The copy of the objects ``names``: their source less their check calls; a class
    less its methods named in ``apart`` (dotted names), which cells of their own show."""
    if not isinstance(apart, (set, frozenset)) or not all(
        isinstance(n, str) for n in apart
    ):
        raise TypeError(
            f"apart must be a set of dotted method names; got {type(apart).__name__} "
            f"{sorted(map(repr, apart)) if isinstance(apart, (set, frozenset)) else ''}".rstrip()
        )
    return "\n\n".join(_copy(n, apart) for n in names)


def method_of(name: str) -> tuple[type, str] | None:
    """``(class, method name)`` when ``name`` names a function defined in a class."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a dotted name (str); got {type(name).__name__}")
    owner, _, attr = name.rpartition(".")
    if not owner.count(".") >= 2:
        return None
    try:
        cls = resolve(owner)
    except ValueError:
        return None
    if not inspect.isclass(cls):
        return None
    if not inspect.isfunction(cls.__dict__.get(attr)):
        found = cls.__dict__.get(attr, getattr(cls, attr, None))
        where = "" if attr in cls.__dict__ else ", inherited"
        raise ValueError(
            f"{name}: only a plain method that {cls.__name__} itself defines can be "
            f"shown on its own; got a {type(found).__name__}{where}"
        )
    return cls, attr


def _copy(name: str, apart: frozenset[str] = frozenset()) -> str:
    obj = resolve(name)
    module = inspect.getmodule(obj)
    namespace = vars(module) if module else {}
    if found := method_of(name):
        return _method_copy(name, *found, namespace)
    source = inspect.getsource(obj).rstrip()
    if inspect.isclass(obj):
        own = {n.rpartition(".")[2] for n in apart if n.rpartition(".")[0] == name}
        source = _without_methods(source, own, name)
    return strip_checks(source, namespace, name)


def _method_copy(name: str, cls: type, attr: str, namespace: dict) -> str:
    """A method on its own: dedented, then attached to its class."""
    source = inspect.getsource(cls.__dict__[attr]).rstrip()
    try:
        node = ast.parse(textwrap.dedent(source)).body[0]
    except SyntaxError:  # a line left of the method's indent: a string at column 0
        raise ValueError(
            f"{name}: its source does not dedent to a function of its own (a line "
            f"starts left of its indent); show it in the class's cell"
        ) from None
    if node.decorator_list:
        raise ValueError(f"{name}: a decorated method cannot be shown on its own")
    if any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Name)
        and n.func.id == "super"
        and not n.args
        for n in ast.walk(node)
    ):
        raise ValueError(
            f"{name}: it calls super() without arguments, which works only inside its "
            f"class; show it in the class's cell"
        )
    body = textwrap.dedent(strip_checks(source, namespace, name))
    return f"{body}\n\n{cls.__name__}.{attr} = {attr}"


def _without_methods(source: str, methods: set[str], name: str) -> str:
    """The class ``source`` less the methods ``methods``, each with the blank line
    before it."""
    if not methods:
        return source
    lines = source.splitlines(keepends=True)
    body = ast.parse(source).body[0].body
    defs = {n.name: n for n in body if _is_def(n)}
    if missing := sorted(methods - set(defs)):
        raise ValueError(f"{name} defines no method {', '.join(missing)} of its own")
    drop = set()
    for method in methods:
        node = defs[method]
        first = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
        drop.update(range(first, node.end_lineno))
        if first > 0 and not lines[first - 1].strip():
            drop.add(first - 1)
    if all(
        i in drop or not lines[i].strip() for i in range(body[0].lineno - 1, len(lines))
    ):
        raise ValueError(
            f"{name}: showing {sorted(methods)} apart leaves the class empty"
        )
    return "".join(line for i, line in enumerate(lines) if i not in drop).rstrip()


def _is_check_call(stmt: ast.stmt, namespace: dict) -> bool:
    """``check_x(...)`` or ``module.check_x(...)`` as a statement of its own."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    func = stmt.value.func
    if isinstance(func, ast.Name):
        return func.id.startswith("check_")
    return (
        isinstance(func, ast.Attribute)
        and func.attr.startswith("check_")
        and isinstance(func.value, ast.Name)
        and isinstance(namespace.get(func.value.id), types.ModuleType)
    )


def _is_def(node: ast.AST) -> bool:
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))


class _Checks:
    """The lines of ``source`` that are validation (see :func:`strip_checks`)."""

    def __init__(self, source: str, namespace: dict, name: str):
        self.lines = source.splitlines(keepends=True)
        self.namespace, self.name = namespace, name
        # an indented method is parsed inside a block: its line numbers move down one
        self.shift = 1 if source[:1] in (" ", "\t") else 0
        self.drop: set[int] = set()  # 0-based line indices
        try:
            tree = ast.parse("if 1:\n" + source if self.shift else source)
        except SyntaxError as err:
            raise ValueError(
                f"{name}: source must be valid Python; {err.msg} at line {err.lineno}"
            ) from None
        self.visit(tree)

    def whole(self, stmt: ast.stmt) -> bool:
        """Whether ``stmt`` fills its lines (a trailing comment aside)."""
        first = self.lines[stmt.lineno - self.shift - 1].encode()
        last = self.lines[stmt.end_lineno - self.shift - 1].encode()
        after = last[stmt.end_col_offset :].strip()
        return not first[: stmt.col_offset].strip() and (
            not after or after.startswith(b"#")
        )

    def is_validation(self, stmt: ast.stmt) -> bool:
        if _is_def(stmt) and not stmt.name.startswith("check_"):
            return all(self.is_validation(s) for s in stmt.body)
        return _is_check_call(stmt, self.namespace) and self.whole(stmt)

    def visit(self, node: ast.AST) -> None:
        if _is_def(node) and node.name.startswith("check_"):
            return  # a copied validator shows what it checks
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                self.visit_block(block)
        for child in ast.iter_child_nodes(node):
            if not (_is_def(child) and self.is_validation(child)):
                self.visit(child)

    def visit_block(self, block: list[ast.stmt]) -> None:
        checks = [s for s in block if self.is_validation(s)]
        if checks and len(checks) == len(block):
            raise ValueError(
                f"{self.name}: leaving out its check calls would empty the block at "
                f"line {block[0].lineno - self.shift} of its source; the library code "
                f"must hold more than validation there"
            )
        for s in checks:
            first = min(
                [s.lineno] + [d.lineno for d in getattr(s, "decorator_list", [])]
            )
            span = range(first - self.shift - 1, s.end_lineno - self.shift)
            self.drop.update(span)
            if _is_def(s):  # a method that only validates goes with its blank line
                before, after = span.start - 1, span.stop
                blank = before if self.blank(before) else after
                if self.blank(blank):
                    self.drop.add(blank)

    def blank(self, i: int) -> bool:
        return 0 <= i < len(self.lines) and not self.lines[i].strip()


def check_strip_checks(source, namespace, name) -> None:
    """The arguments of :func:`strip_checks`: a str, a dict or None, a str."""
    for arg, value, kind in (("source", source, str), ("name", name, str)):
        if not isinstance(value, kind):
            raise TypeError(f"{arg} must be a str; got {type(value).__name__}")
    if namespace is not None and not isinstance(namespace, dict):
        raise TypeError(
            f"namespace must be a dict of names to modules, or None; got "
            f"{type(namespace).__name__}"
        )


def strip_checks(source: str, namespace: dict | None = None, name: str = "code") -> str:
    """``source`` less its validation, each statement removed with its whole lines and
    every other line kept as it is. Validation is a bare statement that calls
    ``check_*(...)`` (or ``module.check_*(...)`` where ``namespace`` maps ``module`` to a
    module), and a function (not a ``check_*`` one) whose whole body is validation, with
    its blank line (a dataclass's ``__post_init__`` that only checks). The bodies of
    ``check_*`` functions stay. A block left empty raises ValueError naming ``name``."""
    check_strip_checks(source, namespace, name)
    checks = _Checks(source, namespace or {}, name)
    return "".join(
        line for i, line in enumerate(checks.lines) if i not in checks.drop
    ).rstrip()


def _normalise(code: str) -> str:
    return "\n".join(line.rstrip() for line in code.strip().splitlines())


def marked_cells(notebook: str | Path) -> list[MarkedCell]:
    nb = json.loads(Path(notebook).read_text(encoding="utf-8"))
    found = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        lines = "".join(cell["source"]).splitlines()
        names = []
        while lines and (m := MARKER.match(lines[0])):
            names.append(m.group(1))
            lines.pop(0)
        if names:
            found.append(MarkedCell(Path(notebook), i, names, "\n".join(lines)))
    return found


def shown_apart(cells: list[MarkedCell]) -> frozenset[str]:
    """The methods that cells of their own show (their classes' cells leave them out)."""
    if not isinstance(cells, list) or not all(isinstance(c, MarkedCell) for c in cells):
        raise TypeError(
            f"cells must be a list of MarkedCell (from marked_cells); got "
            f"{type(cells).__name__}"
        )
    return frozenset(n for cell in cells for n in cell.names if method_of(n))


def drift(notebook: str | Path) -> list[str]:
    """Descriptions of the marked cells of ``notebook`` that differ from the library."""
    problems = []
    cells = marked_cells(notebook)
    apart = shown_apart(cells)
    for cell in cells:
        if _normalise(cell.body) != _normalise(library_source(cell.names, apart)):
            problems.append(
                f"{cell.notebook.name} cell {cell.index} differs from "
                f"{', '.join(cell.names)}"
            )
    return problems


def fix(notebook: str | Path) -> int:
    """Rewrite every marked cell from the library; returns how many cells changed."""
    path = Path(notebook)
    nb = json.loads(path.read_text(encoding="utf-8"))
    changed = 0
    cells = marked_cells(path)
    apart = shown_apart(cells)
    for cell in cells:
        markers = [f"# Same code as {n}" for n in cell.names]
        text = "\n".join(markers) + "\n" + library_source(cell.names, apart)
        if "".join(nb["cells"][cell.index]["source"]) != text:
            nb["cells"][cell.index]["source"] = text.splitlines(keepends=True)
            changed += 1
    if changed:
        path.write_text(
            json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    return changed


# Every notebook opens with the Python 3 kernel, and on Colab with a GPU runtime (the gpu profile).
METADATA = {
    "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
    "language_info": {"name": "python"},
    "accelerator": "GPU",
    "colab": {"provenance": []},
}


def normalise(notebook: str | Path) -> bool:
    """Strip outputs and execution counts and set the book's notebook metadata; returns whether
    the file changed. Notebooks are committed in this form (the book shows the build's outputs)."""
    path = Path(notebook)
    text = path.read_text(encoding="utf-8")
    nb = json.loads(text)
    nb["metadata"] = METADATA
    nb.setdefault("nbformat", 4)
    nb["nbformat_minor"] = max(nb.get("nbformat_minor", 5), 5)
    for i, cell in enumerate(nb["cells"]):
        cell.setdefault("id", f"c{i:03d}")
        cell["metadata"] = {
            k: v for k, v in cell.get("metadata", {}).items() if k in ("tags", "mystnb")
        }  # mystnb: figure captions
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    new = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


# The Colab cell's install lines (short enough for the book's column even with a commit):
#     REPO = "git+URL"
#     REF = "main"
#     %pip install --quiet "lecturelib @ {REPO}@{REF}"
# (IPython puts the variables into the magic's line); without the REF line it is unpinned.
COLAB_INSTALL = re.compile(
    r'^(?P<indent>[ \t]*)REPO = "git\+(?P<url>[^"@\s]+)"[ \t]*\n'
    r'(?:(?P=indent)REF = "(?P<ref>[^"\s]+)"[ \t]*\n)?'
    r'(?P=indent)%pip install --quiet "lecturelib @ \{REPO\}(?:@\{REF\})?"[ \t]*$',
    re.M,
)
COLAB_LINE = '%pip install --quiet "lecturelib @ {REPO}@{REF}"'


def colab_lines(url: str, ref: str, indent: str = "    ") -> str:
    """The Colab cell's install lines for ``url`` pinned to ``ref``."""
    return f'{indent}REPO = "git+{url}"\n{indent}REF = "{ref}"\n{indent}{COLAB_LINE}'


def package_version(root: str | Path) -> str:
    """``version`` of the ``[project]`` table of ``root/pyproject.toml``."""
    path = Path(root) / "pyproject.toml"
    if not path.is_file():
        raise ValueError(
            f"root must be the repository root holding pyproject.toml; got {root}"
        )
    text = path.read_text(encoding="utf-8")
    try:
        import tomllib
    except ImportError:  # Python 3.10: the one line we need, read by hand
        match = re.search(
            r'^version\s*=\s*"([^"]+)"', text.split("[project]", 1)[-1], re.M
        )
        version = match.group(1) if match else None
    else:
        version = tomllib.loads(text).get("project", {}).get("version")
    if not version:
        raise ValueError(f"{path} has no [project] version")
    return version


def _repository(root: str | Path, key: str) -> str:
    """``repository.<key>`` of ``root/_config.yml``."""
    import yaml

    path = Path(root) / "_config.yml"
    if not path.is_file():
        raise ValueError(
            f"root must be the repository root holding _config.yml; got {root}"
        )
    value = (
        yaml.safe_load(path.read_text(encoding="utf-8")).get("repository") or {}
    ).get(key)
    if not value or not isinstance(value, str):
        raise ValueError(f"{path} has no repository.{key}")
    return value


def repository_url(root: str | Path) -> str:
    """``repository.url`` of ``root/_config.yml``: where the Colab cell installs lecturelib from."""
    return _repository(root, "url")


def repository_branch(root: str | Path) -> str:
    """``repository.branch`` of ``root/_config.yml``: the branch whose notebooks the book's
    Colab buttons open, and so the ref their Colab cells install the library from."""
    return _repository(root, "branch")


def colab_install(notebook: str | Path | dict) -> tuple[str, str | None]:
    """``(url, ref)`` of the notebook's Colab install line; ``ref`` is None when unpinned."""
    nb = (
        notebook
        if isinstance(notebook, dict)
        else json.loads(Path(notebook).read_text(encoding="utf-8"))
    )
    for cell in nb["cells"]:
        if cell["cell_type"] == "code" and (
            m := COLAB_INSTALL.search("".join(cell["source"]))
        ):
            return m.group("url"), m.group("ref")
    raise ValueError(
        f"{_name(notebook)}: no Colab cell with the lines "
        f'REPO = "git+<url>", REF = "<ref>" and {COLAB_LINE}'
    )


def pin(notebook: str | Path, url: str, ref: str) -> bool:
    """Point the Colab install line of ``notebook`` at ``url`` pinned to ``ref`` (a branch or
    a commit); returns whether the file changed."""
    for name, value in (("url", url), ("ref", ref)):
        if not isinstance(value, str) or not value or re.search(r'[\s"@]', value):
            raise ValueError(
                f"{name} must be a non-empty string without spaces, quotes or @; "
                f"got {value!r}"
            )
    path = Path(notebook)
    text = path.read_text(encoding="utf-8")
    nb = json.loads(text)
    colab_install(path)  # refuses a notebook without the cell, naming it
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and COLAB_INSTALL.search(source):
            source = COLAB_INSTALL.sub(
                lambda m: colab_lines(url, ref, m.group("indent")), source
            )
            cell["source"] = source.splitlines(keepends=True)
    new = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def repository_root(path: str | Path) -> Path:
    """The nearest folder at or above ``path`` that holds ``pyproject.toml``."""
    start = Path(path).resolve()
    for folder in (start, *start.parents):
        if (folder / "pyproject.toml").is_file():
            return folder
    raise ValueError(f"{path} is not inside a repository with a pyproject.toml")


def _name(notebook) -> str:
    return "notebook" if isinstance(notebook, dict) else str(notebook)


USAGE = """usage: python -m booktools.sync [--fix | --normalise | --pin] NOTEBOOK ...

  (no option)   report marker cells that differ from the library (exit 1 if any)
  --fix         rewrite marker cells from the library
  --normalise   strip outputs and execution counts, normalise metadata
  --pin         pin the Colab install cell to the book's branch (_config.yml)"""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    if args[0].startswith("-") and args[0] not in ("--fix", "--normalise", "--pin"):
        print(f"unknown option {args[0]}\n{USAGE}", file=sys.stderr)
        return 2
    if args and args[0] == "--fix":
        for nb_path in args[1:]:
            print(f"{nb_path}: {fix(nb_path)} cell(s) rewritten")
    elif args and args[0] == "--normalise":
        for nb_path in args[1:]:
            print(f"{nb_path}: {'normalised' if normalise(nb_path) else 'unchanged'}")
    elif args and args[0] == "--pin":
        for nb_path in args[1:]:
            root = repository_root(nb_path)
            url, ref = repository_url(root), repository_branch(root)
            print(
                f"{nb_path}: {'pinned to' if pin(nb_path, url, ref) else 'already at'} {ref}"
            )
    else:
        issues = [p for nb_path in args for p in drift(nb_path)]
        print("\n".join(issues) or "no drift")
        return 1 if issues else 0
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
