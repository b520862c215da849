"""Installing and removing metatrace's changes to thunder: the Patch rows of every module, in pipeline order.

Each module says what it changes in thunder with a ``patches()`` function returning
:class:`metatrace.patching.Patch` rows (target, attribute or key, replacement, why); ``enable``
collects them stage by stage, applies them with :func:`metatrace.patching.apply`, and ``disable``
undoes them in reverse. :func:`applied_patches` lists the rows applied: tests/package/test_architecture.py
checks them against a diff of thunder's modules, classes, mappings, executors and symbols before,
during and after enable().
"""

from __future__ import annotations

import inspect

from metatrace import entry_cache, patching, thunderfx
from metatrace.codegen import cache
from metatrace.proxies import (
    clang_math, float_numbers, number_concretizations, numel, printing, python_number_semantics, renames, shape_reads,
    size_oblivious, unbacked_shapes,
)
from metatrace.grad import missing_rules, requires_grad, rules
from metatrace.guards import module_paths, prologue_op
from metatrace.interpret import jit_hooks
from metatrace.interpret.calls import dispatch, sequence_lookasides
from metatrace.interpret.calls.c_code import (
    container_builtins, container_writes, eager_views, values_as_text,
)
from metatrace.interpret.calls.numbers import eager_sizes, number_builtins
from metatrace.interpret.calls.python import generators
from metatrace.interpret.costs import fast_paths, gc_pacing_phases, interpreter_costs
from metatrace.interpret.modules import module_methods, module_state, wrapper_copies
from metatrace.interpret.opcodes import dict_literals
from metatrace.interpret.reads import (
    aliases, attribute_presence, attribute_reads, custom_getattribute, library_state, state_reads,
    tensor_metadata,
)
from metatrace.mutations import (
    cells as cell_stores, record as mutation_records, replay as mutation_replay, returned_objects, tracing_context,
)
from metatrace.passes import (
    distributed, fusion_regions, grad_transform, rematerialized_writes, size_producers, string_constants,
    symbol_costs, view_writes,
)
from metatrace.metas import oblivious_sites, python_executor
from metatrace.metas.torch_ops import (
    auto_registered, custom_ops, data_dependent, data_dependent_ops, histc, inplace_casts, inplace_methods,
    instance_norm, losses, multi_head_attention, torch_decompositions, torch_executor_fixes, torch_metas,
    type_promotion,
)
from metatrace.codegen.generate import prim_symbols
from metatrace.entry_cache import settings as entry_cache_settings
from metatrace.guards.explain import configure_from_environment
from metatrace.codegen.loader import load
from metatrace.metas.recording import executor_meta, fallback_meta, recording_meta
from metatrace.codegen.version import warn_if_untested
from metatrace.patching import SYMBOL_METAS, Patch, attribute, thunder_symbols
from metatrace.state.process_tables import INSTALL, Installation

__all__ = ["enable", "disable", "is_enabled", "applied_patches", "SYMBOL_METAS"]


def _symbols_sharing_meta() -> dict[int, list]:
    """id(meta) -> every symbol using it: the prim and the executors' copies (e.g. torchex's
    ``torch_slice_prim_impl`` registered with ``meta=prims.slice_prim.meta``)."""
    from thunder.extend import get_all_executors

    by_meta: dict[int, list] = {}
    for sym in prim_symbols().values():
        by_meta.setdefault(id(sym.meta), []).append(sym)
    for ex in get_all_executors():
        for sym in getattr(ex, "opmap", {}).values():
            if id(sym.meta) in by_meta and sym not in by_meta[id(sym.meta)]:
                by_meta[id(sym.meta)].append(sym)
    return by_meta


def _prim_meta_patches(loaded, force_fallback: tuple[str, ...]) -> list[Patch]:
    """A row per symbol whose meta is a prim's (the prim and executors' copies): the rewritten meta
    records its shape arithmetic (fallback: thunder's meta, inputs guarded)."""
    symbols = {pid.name: sym for pid, sym in prim_symbols().items()}
    unknown = set(force_fallback) - set(symbols)
    if unknown:
        raise ValueError(f"force_fallback names unknown prims: {sorted(unknown)}")
    sharing = _symbols_sharing_meta()
    rows = []
    for pid_name, sym in sorted(symbols.items()):
        original = sym.meta
        rewritten = loaded.metas.get(pid_name)
        if rewritten is not None and pid_name not in force_fallback:
            new_meta, why = recording_meta(rewritten, inspect.unwrap(original), pid_name), "the rewritten prim meta"
        else:  # a fallback in the manifest, a meta that failed to load, or forced
            new_meta, why = fallback_meta(inspect.unwrap(original), pid_name), "thunder's prim meta, inputs guarded"
        rows += [attribute(shared, "meta", new_meta, why, label=SYMBOL_METAS) for shared in sharing[id(original)]]
    return rows


def _executor_meta_patches(ported: set[int]) -> list[Patch]:
    """A row per executor prim with a meta of its own (``ported``: ids of the symbols already given one)."""
    return [
        attribute(sym, "meta", executor_meta(sym.meta), "an executor's own meta records its shape arithmetic",
                  label=SYMBOL_METAS)
        for sym in _executor_symbols_with_own_metas(ported)
    ]


def _executor_symbols_with_own_metas(swapped: set[int]) -> list:
    """Opaque symbols whose metas are not prims' (torchex's ``max_pool2d_with_indices``, executors'
    symbols registered ``like=`` a torch-level function): their shape arithmetic is recorded too.
    They live in executors' op maps and as module globals of thunder's executors and transforms
    (:func:`metatrace.patching.thunder_symbols`, each once)."""
    return [sym for sym in thunder_symbols() if sym.is_prim and sym.meta is not None and id(sym) not in swapped]


def _stages(loaded, force_fallback: tuple[str, ...], applied: list[Patch], with_fast_paths: bool = True) -> tuple:
    """Where the rows come from, in the order they are applied; each stage is called after the
    rows before it were applied (``applied``), so it reads thunder as they left it. The metas come
    first: the executor-meta scan must not see the operators that python_executor and prologue_op
    register (prims of the python executor), and later rows wrap some metas again. Then the
    pipeline: interpreting the function, symbolic numbers, torch-level metas and the python
    executor, the prologue's guard operators, the grad transform, the executor passes, the
    collector's pacing over those phases, torch.compile; last, the size-oblivious sites."""
    return (
        lambda: _prim_meta_patches(loaded, force_fallback),
        lambda: _executor_meta_patches({id(row.target) for row in applied}),
        auto_registered.patches,  # (first: later rows wrap these metas)
        # interpreting the user's function
        jit_hooks.patches,
        lambda: interpreter_costs.patches(with_fast_paths),
        fast_paths.patches if with_fast_paths else list,
        renames.patches,
        module_state.patches, wrapper_copies.patches,
        eager_views.patches,
        # stores into pre-existing objects: recorded, undone after tracing, replayed by the epilogue
        mutation_records.patches, cell_stores.patches, mutation_replay.patches, returned_objects.patches,
        tracing_context.patches,  # (jit_ctx and interpret: guards collected, the undo, a raising call run eagerly)
        lambda: number_builtins.patches(with_fast_paths), generators.patches,
        custom_getattribute.patches,
        library_state.patches,
        container_builtins.patches,
        dict_literals.patches,
        values_as_text.patches, eager_sizes.patches, sequence_lookasides.patches,
        state_reads.patches, aliases.patches,
        attribute_presence.patches,
        tensor_metadata.patches,
        attribute_reads.patches,
        dispatch.patches,
        container_writes.patches,
        # symbolic numbers: concretizations become guards, arithmetic keeps producers
        number_concretizations.patches,
        python_number_semantics.patches,
        numel.patches,
        shape_reads.patches,
        printing.patches,
        size_oblivious.patches,
        unbacked_shapes.patches,
        clang_math.patches,
        # torch-level metas; the python executor's number operators and the prologue's guard operators
        string_constants.patches,
        torch_metas.patches,
        torch_decompositions.patches, losses.patches, instance_norm.patches, multi_head_attention.patches,
        data_dependent_ops.patches,
        torch_executor_fixes.patches, type_promotion.patches,
        data_dependent.patches,
        custom_ops.patches,
        histc.patches,
        inplace_casts.patches, inplace_methods.patches,
        python_executor.patches,
        float_numbers.patches,
        prologue_op.patches,
        module_paths.patches,
        # grad transform
        lambda: rules.patches(loaded.grad_rules), missing_rules.patches,
        requires_grad.patches,
        # later stages: every trace keeps producers for its size symbols
        size_producers.patches,
        symbol_costs.patches if with_fast_paths else list,
        grad_transform.patches, view_writes.patches,
        fusion_regions.patches, rematerialized_writes.patches,
        distributed.patches,
        # the collector paced for the compile's phases (wrapping what the rows above installed there)
        gc_pacing_phases.patches,
        thunderfx.patches,  # torch.compile
        entry_cache.patches,  # compiled entries stored on disk and loaded by a fresh process
        # jm.generate: a jitted module's methods that call forward run the compiled one
        module_methods.patches,
        # thunder's size-oblivious sites enter themselves: every reference to them that no row above
        # made enter its site (proxies/' one wrappers of some do) is wrapped, last, so that
        # each wraps what the rows above installed there
        oblivious_sites.patches,
    )


class _Enabled:
    """Returned by ``enable()``; as a context manager it disables on exit if it enabled."""

    def __init__(self, did_enable: bool):
        self._did_enable = did_enable

    def __enter__(self) -> _Enabled:
        return self

    def __exit__(self, *exc) -> None:
        if self._did_enable:
            disable()


def enable(*, force_fallback: tuple[str, ...] = (), fast_paths: bool = True,
           entry_cache: bool | None = None) -> _Enabled:
    """Installs the rewritten metas. ``force_fallback``: PrimIDs names to run as fallbacks even
    though they are ported (for tests and for bisecting a suspected rewrite). ``fast_paths=False``
    leaves thunder's interpreter its own slow paths (:mod:`metatrace.interpret.costs.fast_paths`), for
    the test that finds the same traces, prologues and guards with and without them.
    ``entry_cache``: store compiled entries on disk and load them in a fresh process
    (:mod:`metatrace.entry_cache`); None: ``METATRACE_ENTRY_CACHE`` decides (default on)."""
    with INSTALL.lock:
        if INSTALL.installed is not None:
            return _Enabled(False)
        warn_if_untested()
        configure_from_environment()
        result = cache.ensure()
        key = result.manifest["generated_sha256"]
        entry_cache_settings.configure(entry_cache, key)
        if key not in INSTALL.loaded:
            INSTALL.loaded[key] = load(result.text, result.manifest, result.directory / cache.METAS_FILE)
        loaded = INSTALL.loaded[key]
        installed = Installation(load_failures=loaded.failures)
        try:
            for stage in _stages(loaded, tuple(force_fallback), installed.rows, fast_paths):
                rows = stage()
                installed.rows.extend(rows)
                patching.apply(rows, installed.undo)
        except BaseException:
            patching.undo(installed.undo)
            raise
        INSTALL.installed = installed
        return _Enabled(True)


def disable() -> None:
    with INSTALL.lock:
        if INSTALL.installed is None:
            return
        patching.undo(INSTALL.installed.undo)
        entry_cache_settings.reset()
        INSTALL.installed = None


def is_enabled() -> bool:
    return INSTALL.installed is not None


def applied_patches() -> tuple[Patch, ...]:
    """The rows enable() applied (empty while disabled): every change metatrace makes to thunder."""
    return () if INSTALL.installed is None else tuple(INSTALL.installed.rows)
