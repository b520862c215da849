"""Turns the generated module into callable rewritten metas, one per ported prim.

Each section of the generated file runs in a copy of its thunder module's namespace (so the
rewritten code sees the same globals as the original), with ``_mt`` bound to the runtime and
references to rewritten modules (``utils.canonicalize_dim``) redirected to the rewritten
functions. Metas made by a factory are rebuilt from the rewritten factory's nested code object
and the original meta's closure cells, so every prim made by a factory keeps its own parameters.
"""

from __future__ import annotations

import importlib
import inspect
import types
from dataclasses import dataclass
from pathlib import Path

import metatrace.metas.runtime as runtime
from metatrace.codegen.generate import GRAD_RULE_MODULE, SECTION_MARKER, prim_symbols


class RewrittenModule(types.ModuleType):
    """A view of a thunder module whose rewritten functions replace the originals."""

    def __init__(self, original: types.ModuleType, rewritten: dict[str, types.FunctionType]):
        super().__init__(original.__name__)
        self.__dict__.update(rewritten)
        self._original = original

    def __getattr__(self, name: str):
        return getattr(self._original, name)


def split_sections(text: str) -> list[tuple[str, int, str]]:
    """(module, first line number, code) of each section of the generated file."""
    sections: list[tuple[str, int, list[str]]] = []
    for lineno, line in enumerate(text.splitlines(keepends=True), start=1):
        if line.startswith(SECTION_MARKER):
            sections.append((line[len(SECTION_MARKER):].strip(), lineno + 1, []))
        elif sections:
            sections[-1][2].append(line)
    return [(module, first, "".join(lines)) for module, first, lines in sections]


def _find_code(code: types.CodeType, qualname: str) -> types.CodeType | None:
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if const.co_qualname == qualname:
                return const
            if (found := _find_code(const, qualname)) is not None:
                return found
    return None


@dataclass
class LoadedMetas:
    metas: dict[str, types.FunctionType]  # PrimIDs name -> rewritten raw meta
    failures: dict[str, str]  # PrimIDs name -> why its rewritten meta could not be built
    grad_rules: dict[str, types.FunctionType]  # autograd rule name -> rewritten rule


def load(text: str, manifest: dict, path: Path) -> LoadedMetas:
    namespaces: dict[str, dict] = {}
    for module, first_line, code in split_sections(text):
        original = importlib.import_module(module)
        ns = dict(vars(original))
        ns["_mt"] = runtime
        # Padding keeps tracebacks pointing at the right line of the generated file.
        exec(compile("\n" * (first_line - 1) + code, str(path), "exec"), ns)
        namespaces[module] = ns

    rewritten = {
        module: {k: v for k, v in ns.items() if isinstance(v, types.FunctionType) and v.__code__.co_filename == str(path)}
        for module, ns in namespaces.items()
    }
    views = {module: RewrittenModule(importlib.import_module(module), fns) for module, fns in rewritten.items()}
    for ns in namespaces.values():
        for name, value in list(ns.items()):
            if isinstance(value, types.ModuleType) and value.__name__ in views:
                ns[name] = views[value.__name__]
            elif isinstance(value, types.FunctionType) and value.__module__ in rewritten and value.__code__.co_filename != str(path):
                replacement = rewritten[value.__module__].get(value.__qualname__)
                if replacement is not None:
                    ns[name] = replacement

    metas: dict[str, types.FunctionType] = {}
    failures: dict[str, str] = {}
    symbols = {pid.name: sym for pid, sym in prim_symbols().items()}
    for pid_name, entry in manifest["prims"].items():
        if entry["status"] != "ported":
            continue
        raw = inspect.unwrap(symbols[pid_name].meta)
        try:
            metas[pid_name] = _rebuild(raw, namespaces)
        except LookupError as e:
            failures[pid_name] = str(e)
    grad_rules = {name: rewritten[GRAD_RULE_MODULE][name] for name in manifest.get("grad_rules", [])
                  if name in rewritten.get(GRAD_RULE_MODULE, {})}
    return LoadedMetas(metas, failures, grad_rules)


def _rebuild(raw: types.FunctionType, namespaces: dict[str, dict]) -> types.FunctionType:
    ns = namespaces.get(raw.__module__)
    if ns is None:
        raise LookupError(f"no generated section for {raw.__module__}")
    top_name, *nested = raw.__qualname__.split(".")
    top = ns.get(top_name)
    if not isinstance(top, types.FunctionType):
        raise LookupError(f"{raw.__module__}.{top_name} is not in the generated module")
    if not nested:
        return top
    code = _find_code(top.__code__, raw.__qualname__)
    if code is None:
        raise LookupError(f"{raw.__qualname__} not found in the rewritten {top_name}")
    cells = dict(zip(raw.__code__.co_freevars, raw.__closure__ or ()))
    missing = [n for n in code.co_freevars if n not in cells]
    if missing:
        raise LookupError(f"rewritten {raw.__qualname__} needs closure variables {missing} the original lacks")
    fn = types.FunctionType(code, ns, raw.__name__, raw.__defaults__, tuple(cells[n] for n in code.co_freevars))
    fn.__kwdefaults__ = raw.__kwdefaults__
    return fn
