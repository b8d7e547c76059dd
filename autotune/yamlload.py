"""Reading spec and profile YAML safely: UTF-8 only, and no alias bombs.

PyYAML shares an aliased node instead of copying it, so a 1 KB document of nested aliases
loads quickly but stands for billions of values, which validation, hashing and saving then
walk one by one. :func:`safe_load` counts the document as if every alias were written out
and refuses it past :data:`MAX_NODES`.

Errors: each function takes the caller's error class (``SpecError``, ``ProfileError``) and
raises it with a one-line message naming the file; ordinary YAML syntax errors propagate as
:class:`yaml.YAMLError` so the caller keeps its own message for them.

Example:
    >>> from autotune.errors import SpecError
    >>> safe_load("a: &x [1, 2]\\nb: *x", "demo.yaml", SpecError)
    {'a': [1, 2], 'b': [1, 2]}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import AutotuneError

#: Values a document may stand for with its aliases expanded; the shipped specs and profiles
#: hold a few hundred to a few thousand.
MAX_NODES = 100_000
#: Collections nested in one another; autotune's documents nest fewer than ten. Deeper, Python's
#: parser recursed past its limit, and the C parser's document reached code that recurses
#: (pickling, JSON) with a RecursionError (a fresh clone's libyaml took 1,000 levels).
MAX_DEPTH = 100


class _TooLarge(Exception):
    """Internal signal: the expanded document passes MAX_NODES, or an alias contains itself."""


class _TooDeep(_TooLarge):
    """Internal signal: collections nest deeper than MAX_DEPTH."""


_DEEP = "refused: collections are nested too deeply; flatten the document"


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def expanded_size(root: yaml.Node, limit: int = MAX_NODES) -> int:
    """Nodes in ``root`` with every alias written out; raises _TooLarge past ``limit``.

    Iterative with one size per distinct node, so it costs the size of the document as written.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # the path from the root: meeting one again is a cycle
    stack: list[tuple[yaml.Node, bool, int]] = [(root, False, 0)]
    while stack:
        node, children_done, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _TooDeep
        key = id(node)
        if children_done:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in _children(node))
            # what its aliases add: a document as large as its text is no bomb (trial 48: a
            # profile of 2,600 entries and one "R&D" in it was refused)
            if sizes[key] - len(sizes) > limit:
                raise _TooLarge(f"its aliases expand to more than {limit} values")
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise _TooLarge("an alias refers to a node that contains it")
        open_nodes.add(key)
        stack.append((node, True, depth))
        stack.extend((c, False, depth + 1) for c in _children(node))
    return sizes[id(root)]


#: libyaml's parser where PyYAML was built with it: ~10x faster than the pure-Python one, which
#: made a repeated load_kernel cost 50-100 ms, mostly reading the spec and the profile (trial 47).
_SAFE: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _BoundedLoader(_SAFE):
    """SafeLoader that refuses a document whose expanded size passes MAX_NODES, and a mapping
    that gives a key twice (PyYAML keeps the last silently: a second ``FWG:`` line under
    ``parameters`` replaced the first, and the error came later, about something else)."""

    #: Whether to walk the document (:func:`expanded_size`): where its text holds an anchor
    #: (``&name``; without one there is no alias to expand) or may nest deeply. Otherwise the
    #: walk, a tenth of a second for a profile of 300 entries, is skipped.
    walk = True

    def get_single_node(self) -> yaml.Node | None:
        node = super().get_single_node()
        if node is not None and self.walk:
            expanded_size(node)
        return node

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first: dict[str, yaml.Node] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            if key_node.value in first:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key_node.value!r} given twice (first on line "
                    f"{first[key_node.value].start_mark.line + 1})", key_node.start_mark)
            first[key_node.value] = key_node
        return super().construct_mapping(node, deep)


class AmbiguousBoolean(yaml.constructor.ConstructorError):
    """A plain ``yes``, ``no``, ``on`` or ``off`` where the reader asked for plain booleans."""


class _PlainBooleansLoader(_BoundedLoader):
    """Refuses ``yes``, ``no``, ``on`` and ``off`` unquoted: booleans in YAML 1.1, which PyYAML
    reads, and strings in YAML 1.2. A spec's ``CHECK: [yes, no]`` reached the compiler as
    ``-DCHECK=1`` and ``-DCHECK=0`` while its template tested ``CHECK_YES`` (trial 24)."""

    def construct_yaml_bool(self, node: yaml.ScalarNode) -> bool:
        word = str(self.construct_scalar(node))
        if word.lower() not in ("true", "false"):
            raise AmbiguousBoolean(
                None, None, f"{word!r} is a boolean in YAML 1.1 and a string in YAML 1.2, so it is refused: quote "
                f"it ('{word}') for the string, or write true or false for a boolean (the compiler sees 1 or 0)",
                node.start_mark)
        return word.lower() == "true"


_PlainBooleansLoader.add_constructor("tag:yaml.org,2002:bool", _PlainBooleansLoader.construct_yaml_bool)


def safe_load(text: str, where: str, error: type[AutotuneError], plain_booleans: bool = False) -> Any:
    """``yaml.safe_load(text)``, raising ``error("<where>: ...")`` for a document too large,
    too deep or with a value Python cannot hold; YAML syntax errors propagate unchanged.
    ``plain_booleans``: refuse ``yes``/``no``/``on``/``off`` unquoted (:class:`AmbiguousBoolean`)."""
    loader = (_PlainBooleansLoader if plain_booleans else _BoundedLoader)(text)
    loader.walk = "&" in text or _looks_deep(text)
    try:
        return loader.get_single_data()
    except (_TooDeep, RecursionError):  # ours, or PyYAML's composer, which recurses
        raise error(f"{where}: {_DEEP}") from None
    except _TooLarge as exc:
        raise error(f"{where}: refused: {exc}; write the values out or use fewer nested aliases") from None
    except yaml.YAMLError as exc:  # libyaml's limit on the same: said alike
        if "maximum nesting depth" not in str(exc):
            raise
        raise error(f"{where}: {_DEEP}") from None
    except ValueError as exc:  # a constructor's: a date like 2024-13-45, an integer of 5000 digits
        lines = str(exc).strip().splitlines() or ["invalid value"]
        raise error(f"{where}: a value cannot be read ({lines[0]}); fix it there") from None
    finally:
        loader.dispose()


def unquoted(text: str) -> Any:
    """What YAML reads ``text`` as, written without quotes: a number for ``"32"``, text itself
    for ``1e-3`` (YAML 1.1 wants a point and a signed exponent) or where it reads as no value.
    ValueError for an integer past Python's 4,300 digits.

    Example:
        >>> unquoted("32"), unquoted("0x4"), unquoted("1e-3")
        (32, 4, '1e-3')
    """
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def syntax_error(exc: yaml.YAMLError, path: Path) -> tuple[str, str]:
    """``("<path>:<line>", problem)`` of a YAML syntax error in the file ``path``; a tab in the
    indentation is named as one (trial 95: "found character that cannot start any token")."""
    mark = getattr(exc, "problem_mark", None)
    where = f"{path}:{mark.line + 1}" if mark else str(path)
    problem = getattr(exc, "problem", None) or (str(exc).splitlines() or ["invalid YAML"])[0]
    if mark is not None and "cannot start any token" in problem:
        try:
            line = path.read_bytes().splitlines()[mark.line]
        except (OSError, IndexError):
            line = b""
        if line[mark.column:mark.column + 1] == b"\t":
            problem = "a tab character: YAML indents with spaces only; replace the tabs with spaces"
    return where, problem


def _looks_deep(text: str) -> bool:
    """Whether a line of ``text`` may open more than :data:`MAX_DEPTH` collections: then the
    walk of the document (:func:`expanded_size`) measures its depth, which a profile of
    hundreds of entries would otherwise not pay for."""
    return any(len(line) - len(line.lstrip(" -")) > 2 * MAX_DEPTH or line.count("[") + line.count("{") > MAX_DEPTH
               for line in text.splitlines())


def read_yaml(path: Path, error: type[AutotuneError], plain_booleans: bool = False) -> Any:
    """The YAML document in the file ``path``, as :func:`safe_load` reads it; a file that is not
    UTF-8 text, or cannot be read (a folder, no permission), raises ``error`` naming it."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        what = "it is a folder" if path.is_dir() else exc.strerror or type(exc).__name__
        raise error(f"cannot read {path} ({what}); move it away or make it a readable file") from None
    return load_bytes(data, path, error, plain_booleans)


def load_bytes(data: bytes, path: Path, error: type[AutotuneError], plain_booleans: bool = False) -> Any:
    """:func:`read_yaml` of the bytes ``data`` read from ``path`` (for a caller that keeps them)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(
            f"{path}: not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start}); save it as UTF-8"
        ) from None
    return safe_load(text, str(path), error, plain_booleans)
