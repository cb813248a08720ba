"""Numbers in the prose come from the execution: find results typed by hand where glue has them.

A chapter glues every measured number (``lecturelib.glue("acc", acc)``) and its prose shows it
with a role, ``{glue:text}`acc:.1f```. After the build has executed a notebook, each glued number
is rendered at every format with which the notebook's ``{glue:text}`` roles show it (``.1f``,
``,.0f``, none, ...); none of these renderings may appear as a typed number in the notebook's
markdown. A year is reported when it equals a glued value at such a format.

Not prose, and not searched: glue roles and other roles (citations, cross-references), inline
code, code blocks, math, link targets, comments, list and exercise numbers (``1. ``,
``**2. Title.**``) and references such as "chapter 4", "chapters 4, 5 and 8" or "exercise 2.2".
Whole numbers of one or two digits (0 to 99) are not searched either: in prose they are
ordinals, small counts and quoted constants ("size 1", "position 5", "sentences of 30 to 60
words"), which no check can tell apart from a rounded result; a measured value such as a time
ratio lands on one of them by chance, and the build would fail at random. For the same
reason a number that the notebook's code writes as a literal (a threshold ``> 0.99``, a
temperature ``0.7``) is a quoted constant where the prose types it, not a typed result.
Wall-clock times (glued names with a ``seconds``, ``s`` or ``ms`` part, ``train_seconds``,
``ms_s4d``, ``tokens_per_s``) are not searched: they change from run to run, so prose cannot
have copied one, and a constant such as "base 100" would meet a time of 100 s by chance.
"""

from __future__ import annotations

import math
import re
from ast import literal_eval
from dataclasses import dataclass

from lecturelib.validate import is_real

ROLE = re.compile(r"\{(?P<role>[\w:-]+)\}`(?P<content>[^`]*)`")
GLUE_TEXT = re.compile(r"^glue(?::text)?$")
TIMING = re.compile(r"(?:^|_)(?:seconds|s|ms)(?:_|$)")
NOT_PROSE = [
    re.compile(
        r"^(```|~~~).*?^\1", re.S | re.M
    ),  # fenced blocks: code, {math}, directives
    re.compile(r"\$\$.*?\$\$", re.S),  # display math
    re.compile(r"\\begin\{(\w+\*?)\}.*?\\end\{\1\}", re.S),  # amsmath environments
    re.compile(r"(?<!\\)\$[^$\n]+?(?<!\\)\$"),  # inline math
    ROLE,  # {glue:text}`...`, {cite}`...`, {numref}`...`, {eq}`...`, ...
    re.compile(r"``.+?``|`[^`\n]+`"),  # inline code
    re.compile(r"\]\([^)]*\)"),  # link targets
    re.compile(r"<!--.*?-->", re.S),  # comments
    re.compile(r"https?://\S+"),  # bare addresses
    re.compile(r"^\s*(?:[-*+]\s+)?\d+[.)]\s", re.M),  # numbered list items
    re.compile(r"\*\*(?:Exercise\s+)?\d+(?:\.\d+)?[.\s(]"),  # exercise statements
    re.compile(
        r"\b(?:chapter|section|exercise|part|figure|table|equation|step)s?\s+"
        r"\d+(?:\.\d+)*(?:(?:\s*,\s*|\s+(?:and|or|to)\s+|\s*[–-]\s*)\d+(?:\.\d+)*)*",
        re.I,
    ),  # references: chapter 4, chapters 4, 5 and 8, exercise 2.2
]
SMALL_WHOLE = re.compile(r"^[+-]?\d{1,2}$")
GROUP = "[ \u00a0\u2009\u202f]"  # thousands written with a space: 32 768
NUMERIC = re.compile(
    r"^(?:np\.)?\w*\((?P<inner>[^()]*)\)$"
)  # np.float64(0.5), tensor(3)


@dataclass(frozen=True)
class TypedNumber:
    cell: int  # index of the markdown cell
    text: str  # the number as typed
    name: str  # the glue that holds it
    spec: str  # the format at which the glued value renders as ``text``

    def describe(self) -> str:
        role = f"{{glue:text}}`{self.name}{':' + self.spec if self.spec else ''}`"
        return (
            f"markdown cell {self.cell} types {self.text}, the value glued as "
            f"{self.name!r}: write {role}"
        )


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def _number(text: str):
    """A glued ``text/plain`` as a number, or None (strings, booleans, arrays, ...)."""
    text = text.strip()
    if m := NUMERIC.match(text):
        text = m.group("inner")
    try:
        value = literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if not is_real(value):
        return None
    return value if math.isfinite(value) else None


def glued_numbers(nb: dict) -> dict[str, int | float]:
    """The numeric values that the executed notebook ``nb`` glued, by name."""
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise TypeError(
            f"nb must be a parsed notebook (a dict with a 'cells' list); "
            f"got {type(nb).__name__}"
        )
    found = {}
    for cell in nb["cells"]:
        for out in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            scrap = out.get("metadata", {}).get("scrapbook")
            if out.get("output_type") != "display_data" or not scrap:
                continue
            plain = out.get("data", {}).get(scrap.get("mime_prefix", "") + "text/plain")
            value = _number("".join(plain) if isinstance(plain, list) else plain or "")
            if value is not None:
                found[scrap["name"]] = value
    return found


def glue_formats(nb: dict) -> dict[str, set[str]]:
    """For each name shown by a ``{glue:text}`` role in the markdown of ``nb``, the format specs
    of its roles ('' for none)."""
    specs: dict[str, set[str]] = {}
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        for m in ROLE.finditer(_source(cell)):
            if GLUE_TEXT.match(m.group("role")):
                name, _, spec = m.group("content").split("::")[-1].partition(":")
                specs.setdefault(name, set()).add(spec)
    return specs


def render(value: int | float, spec: str) -> str | None:
    """``value`` as a ``{glue:text}`` role with format ``spec`` shows it (None if it cannot)."""
    try:
        if spec == "":
            return str(value)
        kind = spec[-1]
        if kind in "bcdoxX":
            value = int(value)
        elif kind in "eEfFgGn%":
            value = float(value)
        return format(value, spec)
    except (ValueError, TypeError, OverflowError):
        return None


def prose(markdown: str) -> str:
    """``markdown`` with what is not prose blanked out (math, roles, code, links, comments)."""
    for pattern in NOT_PROSE:
        markdown = pattern.sub(lambda m: " " * len(m.group(0)), markdown)
    return markdown


def _typed(text: str, rendering: str) -> bool:
    """``rendering`` stands in ``text`` as a whole number, not as part of a longer one."""
    before = rf"(?<![\w.,+\-−])(?<!\d{GROUP})"
    after = rf"(?![\w]|[.,]\d|{GROUP}\d{{3}}(?!\d))"
    return re.search(before + re.escape(rendering) + after, text) is not None


LITERAL = re.compile(r"(?<![\w.])\d[\d_]*(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w.])")


def code_literals(nb: dict) -> set[str]:
    """The numbers written as literals in the code cells of ``nb`` (``0.99``, ``1_000`` as
    ``1000``, ``100.0`` as ``100.0`` and ``100``), as they would be typed in prose."""
    found = set()
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            for literal in LITERAL.findall(_source(cell)):
                literal = literal.replace("_", "")
                found.add(literal)
                if re.fullmatch(r"\d+\.0+", literal):
                    found.add(literal.split(".")[0])
    return found


def typed_glued_numbers(nb: dict) -> list[TypedNumber]:
    """Every glued number of the executed notebook ``nb`` that its markdown types by hand, at a
    format with which the notebook's ``{glue:text}`` roles show it, unless the code writes it
    as a literal (a quoted constant)."""
    values, specs = glued_numbers(nb), glue_formats(nb)
    constants = code_literals(nb)
    found: list[TypedNumber] = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        text = prose(_source(cell))
        for name, value in sorted(values.items()):
            if TIMING.search(name):
                continue
            for spec in sorted(specs.get(name, ())):
                rendering = render(value, spec)
                if rendering is None or SMALL_WHOLE.match(rendering):
                    continue
                if rendering.lstrip("+") in constants:
                    continue
                for candidate in dict.fromkeys((rendering, rendering.lstrip("+"))):
                    if _typed(text, candidate):
                        found.append(TypedNumber(i, candidate, name, spec))
                        break
                else:
                    continue
                break  # one report per glued value and cell
    return found
