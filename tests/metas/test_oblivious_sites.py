"""Size-oblivious sites (``metatrace.metas.oblivious_sites``, ``oblivious_answers.THUNDER_SITES`` and
``REWRITTEN_META_SITES``): each is entered under enable() by a program whose decision on a size
read from tensor data needs it, with eager's result; each thunder site resolves at enable() to
the code it was written for, and every reference thunder imports it by is wrapped; a site thunder
no longer has fails enable() loudly."""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

import pytest
import thunder
import torch

import metatrace
from metatrace.errors import MetatraceError
from metatrace.metas import oblivious_answers, oblivious_sites
from metatrace.state import compile_context
from metatrace.state.compile_context import _Declared


class Entered(_Declared):
    """``compile_context.SIZE_OBLIVIOUS`` that keeps the name of every site entered."""

    def __init__(self):
        super().__init__("size_oblivious_entered", None)
        self.names: set[str] = set()

    def set_to(self, value):
        self.names.add(value)
        return super().set_to(value)


def _masked(x, m):
    return x[m]


# program -> the sites its compile must enter (every program reads a size from tensor data)
PROGRAMS = {
    "broadcast": (lambda x, m: _masked(x, m) * torch.ones(1) + _masked(x, m),
                  {"thunder.clang.utils.compute_broadcast_shape", "thunder.clang.utils.maybe_broadcast_impl",
                   "thunder.clang.utils.expand_impl", "broadcast_in_dim_meta", "take_meta"}),
    "softmax": (lambda x, m: torch.softmax(_masked(x, m), 0), {"thunder.torch._softmax", "thunder.torch._reduction"}),
    "argmax": (lambda x, m: _masked(x, m).argmax(0), {"_argmin_argmax_meta"}),
    "cumsum backward": (lambda x, m: _masked(x, m).cumsum(0), {"thunder.core.transforms.cumsum_backward"}),
    "nonzero column": (lambda x, m: torch.nonzero(m)[:, 0], {"thunder.clang._basic_indexing"}),
    "broadcast backward": (lambda x, m: _masked(x, m)[:, None] * torch.ones(1, 2),
                           {"thunder.core.transforms._broadcast_in_dim_prim_grad"}),
}


@pytest.fixture(scope="module")
def entered_by_program():
    """program -> (sites entered while compiling and running it, its result equals eager's; False
    where it raised, as a decision on a size read from tensor data does outside its site)."""
    out = {}
    with metatrace.enable():
        for name, (fn, _) in PROGRAMS.items():
            x = torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
            m = x > 0
            grad = "backward" in name
            entered, eager_x, x = Entered(), x.clone().requires_grad_(grad), x.clone().requires_grad_(grad)
            original, compile_context.SIZE_OBLIVIOUS = compile_context.SIZE_OBLIVIOUS, entered
            try:
                got, expected = thunder.jit(fn, cache="symbolic values")(x, m), fn(eager_x, m)
                same = torch.equal(got, expected) if got.dtype == torch.int64 else torch.allclose(got, expected)
                if grad:
                    got.sum().backward()
                    expected.sum().backward()
                    same = same and torch.allclose(x.grad, eager_x.grad)
            except MetatraceError:
                same = False
            finally:
                compile_context.SIZE_OBLIVIOUS = original
            out[name] = (entered.names, same)
    return out


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_program_computes_eagers_result(entered_by_program, name):
    assert entered_by_program[name][1]


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_program_enters_its_sites(entered_by_program, name):
    assert PROGRAMS[name][1] <= entered_by_program[name][0]


def test_every_site_is_entered_by_a_program():
    listed = set().union(*(sites for _, sites in PROGRAMS.values()))
    assert listed == set(oblivious_answers.THUNDER_SITES) | set(oblivious_answers.REWRITTEN_META_SITES)


@pytest.mark.parametrize("site", oblivious_answers.THUNDER_SITES)
def test_a_site_resolves_to_the_code_it_was_written_for(site):
    assert oblivious_sites.site_code(site).co_name == site.rpartition(".")[2]


@functools.cache
def _thunder_imports() -> tuple[tuple[str, str, str, str], ...]:
    """(importer, module, name, bound name) of every ``from module import name`` in thunder's
    sources, parsed once for every site (a parse of thunder's ~300 files takes seconds)."""
    root = Path(thunder.__file__).parent
    found = []
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        importer = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module is not None:
                found += [(importer, node.module, alias.name, alias.asname or alias.name) for alias in node.names]
    return tuple(found)


def _importers(site: str) -> set[tuple[str, str]]:
    """(module, name) of every thunder module that imports ``site``'s function by name."""
    module_name, _, name = site.rpartition(".")
    return {(importer, bound) for importer, module, imported, bound in _thunder_imports()
            if module == module_name and imported == name}


@pytest.mark.parametrize("site", oblivious_answers.THUNDER_SITES)
def test_every_module_importing_a_site_by_name_calls_it_inside_the_site(enabled, site):
    loaded = {(m, n) for m, n in _importers(site) if m in sys.modules}
    wrapped = {(m, n) for m, n in loaded if isinstance(getattr(sys.modules[m], n), type(lambda: 0))
               and getattr(sys.modules[m], n).__code__ is oblivious_sites.EnteringSite(site)(len).__code__}
    assert wrapped == loaded


def test_every_reference_to_a_site_is_wrapped_while_enabled(enabled):
    """By a row of oblivious_sites or by a stage's one wrapper of the reference, each entering the site."""
    codes = {oblivious_sites.site_code(site): site for site in oblivious_answers.THUNDER_SITES}
    entered = oblivious_sites.EnteringSite("")(len).__code__
    found = oblivious_sites.references(codes)
    assert found
    assert all(oblivious_sites.current(t, kind, key).__code__ is entered for t, kind, key, *_ in found)


def test_each_site_has_a_reference():
    codes = {oblivious_sites.site_code(site): site for site in oblivious_answers.THUNDER_SITES}
    with metatrace.enable():
        sites = {site for *_, site, _ in oblivious_sites.references(codes)}
    assert sites == set(oblivious_answers.THUNDER_SITES)


def test_a_reference_a_stage_wraps_enters_its_site_once(enabled):
    """clang.expand: metatrace.proxies.size_oblivious' one wrapper enters expand_impl's site; no row of
    oblivious_sites wraps it again."""
    import thunder.clang as clang

    assert oblivious_sites.enters_its_site(clang.expand)
    assert not oblivious_sites.enters_its_site(clang.expand.__wrapped__)
    assert not any(isinstance(p.new, oblivious_sites.EnteringSite) and p.target is clang and p.key == "expand"
                   for p in metatrace.install.applied_patches())


@pytest.mark.parametrize("moved", ["thunder.clang.utils.no_such_function", "thunder.clang.expand"])
def test_a_site_thunder_no_longer_has_fails_enable(monkeypatch, moved):
    monkeypatch.setattr(oblivious_answers, "THUNDER_SITES", {**oblivious_answers.THUNDER_SITES, moved: {}})
    with pytest.raises(MetatraceError, match=moved.replace(".", r"\.")):
        metatrace.enable()
    assert not metatrace.is_enabled()
