"""The kernels a template defines and the arguments they declare, read from the source, to
catch a launch step that does not fit its kernel (an entry it lacks, another number of
arguments, a number for a buffer) and inputs of the wrong width before anything is built.

numpy's defaults are float64 and int64; a kernel that takes ``float*`` or ``int*`` reads such
a buffer as twice as many elements of garbage, and every configuration then fails
verification with a message about the output ("not finite"), not about the input. The source
is read as text, without the preprocessor: a kernel defined more than once (under ``#if``)
counts as declaring each of its types, and a type this module does not know (a macro, a
struct) is not checked.

Example:
    >>> declared("__kernel void f(__global const float* restrict x, int n) {}")
    {'f': (('x', 'float', True), ('n', 'int', False))}
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Set
from typing import Any

import numpy as np

from .errors import ExpressionError, ProblemError, SpecError, clipped, warn
from .spec import C_COMMENTS, KernelSpec, problem_label

#: OpenCL C element types (also the base of their vector types, float4 and the like) and the
#: numpy type of the same width and kind. char and uchar are left out: a ``uchar*`` argument
#: is the usual way to take any buffer as bytes.
_TYPES = {"half": np.float16, "float": np.float32, "double": np.float64,
          "short": np.int16, "ushort": np.uint16, "int": np.int32, "uint": np.uint32,
          "long": np.int64, "ulong": np.uint64}
#: The numpy type a number is passed as to an argument taken by value, by its declared type.
_BY_VALUE = {**_TYPES, "char": np.int8, "uchar": np.uint8, "int8_t": np.int8, "uint8_t": np.uint8,
             "int16_t": np.int16, "uint16_t": np.uint16, "int32_t": np.int32, "uint32_t": np.uint32,
             "int64_t": np.int64, "uint64_t": np.uint64}
_QUALIFIERS = {"__global", "global", "__constant", "constant", "__local", "local", "__private",
               "private", "const", "restrict", "__restrict", "volatile", "__read_only", "read_only",
               "__write_only", "write_only", "unsigned"}
_KERNEL = re.compile(r"\b(?:__kernel|kernel)\b[^;{}]*?\bvoid\s+(\w+)\s*\(([^()]*)\)")

Argument = tuple[str, str, bool]  # (name, element type as declared, pointer)


def declared(source: str) -> dict[str, tuple[Argument, ...]]:
    """Each kernel's arguments, by kernel name (the last definition where there are several;
    :func:`check_inputs` reads them all)."""
    return {name: args for name, args in _definitions(source)}


def _kernels(source: str) -> list[tuple[str, list[str]]]:
    """Each kernel definition's name and the texts of its parameters, in order."""
    return [(m[1], [t for t in m[2].split(",") if t.strip() and t.strip() != "void"])
            for m in _KERNEL.finditer(C_COMMENTS.sub(" ", source))]


def _definitions(source: str) -> list[tuple[str, tuple[Argument, ...]]]:
    return [(name, tuple(a for a in map(_argument, parts) if a is not None)) for name, parts in _kernels(source)]


def _arities(source: str) -> dict[str, set[int | None]]:
    """Each kernel's argument counts (one per definition; None where a parameter could not be
    read, such as a type of several words or one a macro makes)."""
    out: dict[str, set[int | None]] = {}
    for name, parts in _kernels(source):
        out.setdefault(name, set()).add(len(parts) if all(_argument(t) is not None for t in parts) else None)
    return out


def check_launch(spec: KernelSpec) -> None:
    """SpecError where a launch step names a kernel the template does not define (the name
    nowhere in it), or gives it another number of arguments than every definition of it takes:
    each would fail every configuration it runs in, the second with a traceback."""
    source = C_COMMENTS.sub(" ", spec.source)
    arities = _arities(spec.source)
    for step in spec.launch:
        if not re.search(rf"\b{re.escape(step.entry)}\b", source):
            raise SpecError(f"{spec.path}: launch: entry {step.entry!r} is not a kernel of {spec.template.name} "
                            f"(it defines {', '.join(sorted(arities)) or 'none'})")
        counts = arities.get(step.entry, {None})
        if None not in counts and len(step.args) not in counts:
            takes = " or ".join(str(n) for n in sorted(c for c in counts if c is not None))
            raise SpecError(f"{spec.path}: launch: kernel {step.entry} in {spec.template.name} takes {takes} "
                            f"arguments, but args lists {len(step.args)} ({', '.join(step.args)}); list one "
                            "name per kernel argument, in order")
        _check_no_local_pointer(spec, step.entry, step.args)
    _check_argument_names(spec)


def _check_argument_names(spec: KernelSpec) -> None:
    """SpecError where a kernel argument has the name of a number autotune passes to the
    compiler (``-Dn=65536``): the argument's name becomes that number, and no configuration
    builds (trial 63: four build failures before the explanation)."""
    numbers = {p.name: "parameter" for p in spec.parameters
               if p.flag is None and all(isinstance(v, (int, float)) for v in p.values)}
    numbers |= {k.name: "problem key" for k in spec.problem if k.is_size}
    # a name the template #undefs is the argument's; a kernel under #if 0 is never compiled
    # (trial 65: both were refused, and both built)
    undone = set(re.findall(r"^[ \t]*#[ \t]*undef[ \t]+(\w+)", spec.source, re.M))
    for kernel, args in _definitions(_without_if0(spec.source)):
        for name, _, _ in args:
            if name in numbers and name not in undone:
                raise SpecError(f"{spec.path}: kernel {kernel} in {spec.template.name} has an argument named {name}, "
                                f"the {numbers[name]} autotune passes to the compiler as -D{name}=<its value>, so "
                                f"the argument's name becomes a number and no configuration builds; rename the "
                                f"argument (the kernel reads {name} as the macro anyway)")


def _without_if0(source: str) -> str:
    """``source`` less its ``#if 0`` blocks (nested conditionals inside them counted)."""
    kept, depth = [], 0
    for line in source.splitlines():
        directive = re.match(r"[ \t]*#[ \t]*(\w+)(.*)", line)
        word = directive[1] if directive else ""
        if depth:
            if word in ("if", "ifdef", "ifndef"):
                depth += 1
            elif word == "endif":
                depth -= 1
            elif depth == 1 and word in ("else", "elif"):
                depth = 0  # the #else of an #if 0 is compiled
            continue
        if word == "if" and directive and directive[2].strip() == "0":
            depth = 1
            continue
        kept.append(line)
    return "\n".join(kept)


def check_local_pointers(spec: KernelSpec) -> None:
    """:func:`_check_no_local_pointer` for each launch step."""
    for step in spec.launch:
        _check_no_local_pointer(spec, step.entry, step.args)


def _check_no_local_pointer(spec: KernelSpec, entry: str, args: tuple[str, ...]) -> None:
    """SpecError where the kernel takes a ``__local`` pointer: every argument is bound to a
    buffer in global memory or a number, and a buffer for a local pointer failed every
    configuration with pyopencl's INVALID_ARG_VALUE and a traceback (trial 27)."""
    for kernel, parts in _kernels(spec.source):
        if kernel != entry or len(parts) != len(args):
            continue
        for name, text in zip(args, parts, strict=True):
            if "*" in text and re.search(r"\b(__local|local)\b", text):
                declared_as = re.findall(r"\w+", text)[-1]
                raise SpecError(
                    f"{spec.path}: launch: kernel {entry} takes {declared_as} as a local-memory pointer "
                    f"({' '.join(text.split())}), bound to {name}; autotune passes buffers in global memory and "
                    f"numbers only: declare the array inside the kernel instead (__local float {declared_as}[WG];"
                    " its size from the parameters' macros), and give its bytes as local_memory: to check them "
                    "against the device")


def check_outputs(spec: KernelSpec) -> None:
    """SpecError where ``outputs`` names an argument that every kernel taking it declares
    ``const`` (or ``__constant``): no step can write it, and as an output it would be filled with
    the poison that unwritten elements are found by, which the kernels then read as input."""
    kernels = _kernels(spec.source)
    for name in spec.outputs:
        takes = [(step.entry, parts[step.args.index(name)]) for step in spec.launch if name in step.args
                 for kernel, parts in kernels if kernel == step.entry and len(parts) == len(step.args)]
        if takes and all(_read_only(text) for _, text in takes):
            entry, text = takes[0]
            declared_as = re.findall(r"\w+", text)[-1]
            fix = ("list only what the kernels write in outputs (an input is given by inputs() alone)"
                   if declared_as == name else f"args binds {name} to {declared_as}: check that args lists the "
                   "kernel's arguments in the order of its signature")
            raise SpecError(f"{spec.path}: outputs: {name} is read-only in kernel {entry} "
                            f"({' '.join(text.split())}), so no launch step writes it; {fix}")


def _read_only(text: str) -> bool:
    """Whether a parameter's text declares a pointer to const data (``const float* x``, not
    ``float* const x``)."""
    head = text.split("*", 1)[0]
    return "*" in text and bool(re.search(r"\b(const|__constant|constant)\b", head))


def _argument(text: str) -> Argument | None:
    words = re.findall(r"\w+|\*", text)
    if not words or words[-1] == "*":
        return None
    kinds = [w for w in words[:-1] if w != "*" and w not in _QUALIFIERS]
    unsigned = "unsigned" in words[:-1]
    if len(kinds) > 1 or not (kinds or unsigned):  # a type of several words, or none
        return None
    kind = kinds[0] if kinds else "int"  # a bare `unsigned` is an unsigned int
    return words[-1], "u" + kind if unsigned else kind, "*" in words


def check_inputs(spec: KernelSpec, inputs: Mapping[str, Any], numbers: Set[str] = frozenset()) -> None:
    """SpecError where inputs() gives a kernel argument neither a numpy array nor a number (None,
    text, a bool), or where one of the spec's launch steps takes an input as a buffer and inputs()
    gives no numpy array (a list), or takes it as ``float*`` (``int*``, ...) and inputs() gives
    elements of the same kind and another width (float64, int64), or gives a buffer where the
    kernel takes a number or one of ``numbers`` (the integer problem keys) where it takes a
    buffer."""
    definitions = _definitions(spec.source)
    scratch = {n for n, _ in spec.scratch}
    for entry, names in ((step.entry, step.args) for step in spec.launch):
        for position, name in enumerate(names):
            value = inputs.get(name)
            matching = [args[position] for kernel, args in definitions if kernel == entry and len(args) == len(names)]
            if name in inputs:
                _check_value(spec, entry, name, value, matching)
            if isinstance(value, np.ndarray) or name in scratch or (name in numbers and name not in inputs):
                _check_kind(spec, entry, position, name, name not in numbers or name in inputs, matching)
            if not isinstance(value, np.ndarray):
                # a number for a vector (a macro type may well be a scalar's: left to the compiler)
                vectors = [(a, k) for a, k, pointer in matching if not pointer and _is_vector(k)]
                if name in inputs and matching and len(vectors) == len(matching):  # trial 40: INVALID_ARG_SIZE
                    raise SpecError(_by_value(spec, entry, position, *vectors[0], f"inputs() gives {name} a number"))
                continue
            takes = sorted(t for t in map(_element, matching) if t is not None)
            if takes and not any(_fits(t, value.dtype) for t in takes):
                kind, want = takes[0], np.dtype(_TYPES[takes[0]])
                raise SpecError(
                    f"{spec.path}: kernel {entry} in {spec.template.name} takes {name} as {kind}*, but inputs() "
                    f"gives {value.dtype} elements ({value.dtype.itemsize} bytes each, the kernel reads "
                    f"{want.itemsize}); return {name}.astype(np.{want.name}) from inputs(), or change the "
                    "kernel's type")
            if takes and all(_reinterpreted(t, value.dtype) for t in takes):
                want = np.dtype(_TYPES[takes[0]])
                warn(f"{spec.path}: kernel {entry} in {spec.template.name} takes {name} as {takes[0]}*, but "
                     f"inputs() gives {value.dtype} elements, whose bits it reads as {takes[0]}: return "
                     f"{name}.astype(np.{want.name}) from inputs() for their values, or {name}.view(np.{want.name}) "
                     "where the bits are meant")


def _check_value(spec: KernelSpec, entry: str, name: str, value: Any, matching: list[Argument]) -> None:
    """SpecError for what inputs() gives a kernel argument that is neither a numpy array nor a
    number, or anything but an array where the kernel takes a buffer (trial 52: None made the
    measuring worker fail with a traceback, a string was passed as its bytes, True as a 1-byte
    argument: INVALID_ARG_SIZE on every configuration)."""
    if isinstance(value, np.ndarray) and value.dtype != object:
        return
    number = isinstance(value, (int, float, np.number)) and not isinstance(value, (bool, np.bool_))
    shown = f"an array of Python objects ({value.dtype})" if isinstance(value, np.ndarray) else \
        f"a {type(value).__name__}" if number or isinstance(value, (list, tuple)) else clipped(repr(value), 80)
    if any(pointer for _, _, pointer in matching):
        kind = next((t for t in map(_element, matching) if t is not None), "float")
        raise SpecError(f"{spec.path}: kernel {entry} in {spec.template.name} takes {name} as a buffer, but inputs() "
                        f"gives {shown}; return a numpy array, e.g. "
                        f"np.asarray({name}, np.{np.dtype(_TYPES[kind]).name})")
    if number:
        return
    raise SpecError(f"{spec.reference}: inputs() gives the kernel argument {name} as {shown}; give a numpy "
                    f"array for a buffer, or a number of the kernel's type for a value, e.g. np.float32(2.0)"
                    + ("; OpenCL kernels take no bool: use np.int32(1)" if isinstance(value, (bool, np.bool_))
                       else ""))


def as_kernel_scalars(spec: KernelSpec, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """``inputs`` with each number a kernel takes as a scalar of a known type as that type:
    ``4.0`` or ``np.float64(4.0)`` for ``float c`` is ``np.float32(4.0)`` (pyopencl passes a
    Python float as 8 bytes, and the kernel takes 4: INVALID_ARG_SIZE on every configuration).
    SpecError for a Python number where the type is not one this module reads (a macro, a
    vector), or a number that the type cannot hold.

    Example:
        >>> from autotune import spec as specs
        >>> sp = specs.load("mul1")
        >>> type(as_kernel_scalars(sp, {"c": 4.0})["c"]).__name__  # mul1 takes no c: unchanged
        'float'
    """
    out = dict(inputs)
    definitions = _definitions(spec.source)
    for entry, names in ((step.entry, step.args) for step in spec.launch):
        for position, name in enumerate(names):
            value = out.get(name)
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
                continue
            matching = [args[position] for kernel, args in definitions if kernel == entry and len(args) == len(names)]
            kinds = {kind for _, kind, pointer in matching if not pointer}
            if len(kinds) == 1 and (kind := next(iter(kinds))) in _BY_VALUE:  # trial 45: char, uchar
                out[name] = _scalar(spec, entry, name, kind, value)
            elif kinds and isinstance(value, (int, float)):  # none: a buffer, or args miscounted (said later)
                raise SpecError(
                    f"{spec.path}: kernel {entry} in {spec.template.name} takes {name} as a type autotune does not "
                    f"read ({' or '.join(sorted(kinds))}: a macro or typedef?), and inputs() gives a Python "
                    f"{type(value).__name__}; return a numpy value of the kernel's type, e.g. np.float32({name})")
    return out


def by_value_types(source: str, entry: str, count: int) -> tuple[tuple[Any, ...], ...]:
    """The numpy types kernel ``entry``'s ``count`` arguments may take by value as numbers, one
    tuple per argument: one type per definition of the kernel that declares another (under
    ``#if``, a variant may take ``long n`` where another takes ``int n``; which one a build has,
    only the build knows), none for a buffer or a type not read here. What an integer problem
    key passed there is bound as (trial 42: always int32, so `long n` failed).

        >>> by_value_types("__kernel void k(__global float* x, long n, uint m) {}", "k", 3)
        ((), (<class 'numpy.int64'>,), (<class 'numpy.uint32'>,))
    """
    found: list[list[Any]] = [[] for _ in range(count)]
    for name, parts in _kernels(source):
        if name != entry or len(parts) != count:
            continue
        for position, arg in enumerate(map(_argument, parts)):
            kind = None if arg is None or arg[2] else _BY_VALUE.get(arg[1])
            if kind is not None and kind not in found[position]:
                found[position].append(kind)
    return tuple(tuple(kinds) for kinds in found)


def check_numbers(spec: KernelSpec, problem: Mapping[str, Any]) -> None:
    """ProblemError where an integer problem key a launch step passes by value fits none of the
    types its argument is declared as (an ``int n`` at N = 2**31): before any input is drawn
    (trial 70: load_kernel drew 8 GB of inputs, picked a kernel, and only its call refused)."""
    for step in spec.launch:
        for name, types in zip(step.args, by_value_types(spec.source, step.entry, len(step.args)), strict=True):
            value = problem.get(name)
            if not isinstance(value, int) or isinstance(value, bool):
                continue
            if not any(cast(value, np.dtype(t)) is not None for t in types or (np.int32,)):
                kind = np.dtype((types or (np.int32,))[0]).name
                raise ProblemError(f"{name}={value} does not fit the {kind} {step.entry} takes it as; declare it "
                                   "long in the kernel, or give a smaller size")


def _scalar(spec: KernelSpec, entry: str, name: str, kind: str, value: Any) -> Any:
    out = cast(value, np.dtype(_BY_VALUE[kind]))
    if out is None:
        raise SpecError(f"{spec.path}: kernel {entry} in {spec.template.name} takes {name} as {kind}, which cannot "
                        f"hold {value!r} from inputs(); return a value of that type, or change the kernel's")
    return out


def cast(value: Any, dtype: np.dtype[Any]) -> Any:
    """``value`` (a number) as a numpy scalar of ``dtype``; None where that type cannot hold it:
    outside an integer type's range or not a whole number, or finite and beyond a float type's
    (1e40 as float32 would be inf).

    Example:
        >>> cast(3.0, np.dtype(np.int32)), cast(2 ** 40, np.dtype(np.int32)), cast(1e40, np.dtype(np.float32))
        (np.int32(3), None, None)
        >>> cast(10 ** 400, np.dtype(np.float32)) is None
        True
    """
    if dtype.kind in "iu":
        limits = np.iinfo(dtype.type)
        whole = float(value).is_integer() if not isinstance(value, (int, np.integer)) else True
        return dtype.type(value) if whole and limits.min <= int(value) <= limits.max else None
    try:
        with np.errstate(over="ignore"):
            out = dtype.type(value)
        return None if np.isinf(out) and math.isfinite(value) else out
    except OverflowError:  # a Python int past any float's range (trial 53: a traceback)
        return None


def _check_kind(spec: KernelSpec, entry: str, position: int, name: str, buffer: bool,
                matching: list[Argument]) -> None:
    """SpecError where every definition of ``entry`` takes argument ``position`` as a pointer
    and ``name`` is a number, or as a number and ``name`` is a buffer (clSetKernelArg's
    INVALID_ARG_SIZE on every configuration)."""
    pointers = {pointer for _, _, pointer in matching}
    if len(pointers) != 1 or pointers == {buffer}:
        return
    declared_as, kind = matching[0][0], matching[0][1]
    if buffer and kind not in _SCALARS:  # trial 38: "list the arguments in the kernel's order" misled
        raise SpecError(_by_value(spec, entry, position, declared_as, kind, f"{name} from inputs() is passed as a "
                                                                             "buffer"))
    what = "an array of inputs() or a scratch buffer" if buffer else "a number (an integer problem key)"
    wanted = "a buffer" if not buffer else "a number"
    raise SpecError(f"{spec.path}: launch: kernel {entry} in {spec.template.name} takes argument {position + 1} "
                    f"({declared_as}) as {wanted}, but args gives it {name}, {what}; list the arguments in the "
                    "kernel's order")


#: The scalar types a kernel argument taken by value may have, as autotune passes numbers.
_SCALARS = {*_TYPES, "char", "uchar", "bool", "size_t", "int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t",
            "uint32_t", "int64_t", "uint64_t"}


def _is_vector(kind: str) -> bool:
    """Whether a type's name is an OpenCL vector's (``float4``, ``int2``)."""
    return re.search(r"\d$", kind) is not None


def _by_value(spec: KernelSpec, entry: str, position: int, declared_as: str, kind: str, given: str) -> str:
    """Why a kernel argument taken by value as a vector (or a type autotune does not know: a
    macro or a typedef) cannot be given, and how to give it instead."""
    what = "a vector" if _is_vector(kind) else "a type autotune does not know (a macro or a typedef?)"
    return (f"{spec.path}: launch: kernel {entry} in {spec.template.name} takes argument {position + 1} "
            f"({declared_as}) by value as a {kind}, {what}, which autotune cannot pass ({given}); declare it "
            f"`__constant {kind}* {declared_as}` and read {declared_as}[0], with inputs() giving it as an array "
            "of one element")


def _element(arg: Argument) -> str | None:
    """The base element type a pointer argument declares, when it is one this module checks."""
    _, kind, pointer = arg
    base = re.sub(r"\d+$", "", kind)
    return base if pointer and base in _TYPES else None


def _fits(kind: str, dtype: np.dtype[Any]) -> bool:
    """Whether a buffer of ``dtype`` is plausible for ``kind*``: the same width (float64 for
    ``uint*`` was not refused as another kind, trial 50), raw bytes (``np.frombuffer(raw,
    np.uint8)`` for a ``float*``, trial 51), or not a number type numpy names."""
    if dtype.kind == "b":  # numpy's bools are bytes: no OpenCL type but char reads them (trial 45)
        return False
    return (dtype.itemsize == np.dtype(_TYPES[kind]).itemsize or dtype.kind not in "fiu"
            or (dtype.itemsize == 1 and dtype.kind in "iu"))


def _reinterpreted(kind: str, dtype: np.dtype[Any]) -> bool:
    """Whether ``kind*`` reads a buffer of ``dtype`` as another kind of number of its width,
    float as integer or integer as float: meant where the kernel works on the bits (as a view
    says; raw bytes say so too)."""
    want = np.dtype(_TYPES[kind])
    return dtype.kind in "fiu" and dtype.itemsize == want.itemsize and (want.kind == "f") != (dtype.kind == "f")


def check_declared(spec: KernelSpec, problem: Mapping[str, Any], given: Mapping[str, Any]) -> None:
    """SpecError where the spec's ``arguments:`` names an argument ``inputs()`` (``given``) gives
    as no integer, or refuses the value it gives, at which alone the kernel is verified (trial
    118: each found at the first call only, or never). A run checks it too."""
    for arg, allowed in spec.arguments:
        value = given.get(arg)
        if value is None or np.ndim(value) or np.asarray(value).dtype.kind not in "iu":
            what = "gives no such argument" if value is None else \
                f"gives {arg} as {'an array' if np.ndim(value) else type(value).__name__}"
            raise SpecError(f"{spec.path}: arguments.{arg}: inputs() {what}, not an integer; arguments: declares "
                            "the values of integer arguments only")
        try:
            ok = spec.allows(arg, int(value), problem)
        except ExpressionError as exc:
            raise SpecError(f"{spec.path}: arguments.{arg}: {exc}") from None
        if not ok:
            raise SpecError(f"{spec.path}: arguments.{arg}: inputs() gives {arg}={int(value)} at "
                            f"{problem_label(problem)}, which {allowed.source!r} refuses: the kernel would be verified "
                            "at a value no call may pass")
