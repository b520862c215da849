"""Installing and removing the rewritten metas on thunder's symbols."""

from __future__ import annotations

import inspect
import sys
import threading
from dataclasses import dataclass, field

from metatrace import thunderfx
from metatrace.codegen import cache
from metatrace.proxies import clang_math, numel, printing, renames, number_methods, shape_reads
from metatrace.proxies import float_numbers
from metatrace.grad import deferred_guards, rules
from metatrace.guards import prologue_op
from metatrace.interpret import jit, module_state, python_values
from metatrace.passes import size_producers
from metatrace.metas import python_executor
from metatrace.codegen.generate import prim_symbols
from metatrace.guards.explain import configure_from_environment
from metatrace.codegen.loader import load
from metatrace.metas.recording import executor_meta, fallback_meta, recording_meta
from metatrace.codegen.version import warn_if_untested


@dataclass(frozen=True)
class Patch:
    """One place where metatrace changes thunder while enabled (everything is undone by ``disable``).

    ``target``: the dotted path of a thunder module, class or mapping (a glob: ``thunder*`` is every
    thunder module binding the name); ``names``: its attributes, or ``("[]",)`` for items of a
    mapping or set; ``by``: the metatrace modules that install it; ``why``: what thunder does there
    and what metatrace does instead. tests/test_architecture.py checks the table against a diff of
    thunder's modules, classes, mappings, executors and symbols before, during and after enable().
    """

    target: str
    names: tuple[str, ...]
    by: str
    why: str


SYMBOL_METAS = "thunder Symbol instances"  # every prim, executors' copies and own prims, ltorch symbols
_NUMBER = "thunder.core.proxies.NumberProxy"

# What metatrace replaces in thunder, in pipeline order: interpret -> metas -> guards -> prologue
# -> grad transform -> executor passes.
PATCHES: tuple[Patch, ...] = (
    # interpreting the user's function
    Patch("thunder.core.jit_ext", ("jit_ctx", "interpret"), "jit_hooks",
          "a guard collector and the recorder are live while thunder interprets the function"),
    Patch("thunder.core.jit_ext", ("propagate_constraints",), "jit_hooks",
          "the prologue gets metatrace's guard program and structure checks besides thunder's constraints"),
    Patch("thunder.core.jit_ext", ("_apply_trace_proxy_rename",), "renames",
          "renaming proxies also renames the size symbols inside tensor shapes"),
    Patch("thunder.core.jit_ext.JitCtx", ("proxify",), "module_state",
          "module state (parameters, config numbers) is proxied with symbolic integer shapes"),
    Patch("thunder.core.proxies", ("tensorproxy",), "module_state", "as proxify"),
    Patch("thunder.core.jit_ext._general_jit_lookaside_map", ("[]",), "safety_net, dropin",
          "bool lookaside reports the relation a user-code branch decided (thunder only marks static); "
          "metatrace's proxy methods and callable integers run opaquely; max/min/sum/sorted/all/math.prod are "
          "interpreted, str/repr/format/hash/type see a number's value and Python type (python_values)"),
    Patch("thunder.core.interpreter._default_lookaside_map", ("[]",), "dropin", "len() of a sequence with symbolic structure"),
    Patch("thunder.core.jit_ext.general_jit_callbacks", ("[]",), "python_values",
          "the wrap callback also checks, by contents, values the trace reads from globals, closures and modules "
          "(dtypes, enums, containers mutated in place, callable attributes); thunder checks none of them"),
    Patch("thunder.core.interpreter._default_provenance_tracking_lookaside_map", ("[]",), "dropin",
          "tuple/list indexing by a symbolic number is guarded by equality"),
    # symbolic numbers: concretizations become guards, arithmetic keeps producers
    Patch(_NUMBER, ("__bool__", "__int__", "__float__"), "safety_net", "report the value baked in (thunder reads .value silently)"),
    Patch("thunder.core.proxies.IntegerProxy", ("__index__",), "safety_net", "as __bool__"),
    Patch(_NUMBER, ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"), "safety_net",
          "comparisons inside thunder's clang/torch layers return guarded symbolic booleans"),
    Patch(_NUMBER, ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__floordiv__",
                    "__rfloordiv__", "__mod__", "__rmod__"), "safety_net", "arithmetic inside a meta is recorded (runtime)"),
    Patch(_NUMBER, ("__divmod__", "__rdivmod__", "__floor__", "__ceil__", "__trunc__", "__round__", "__pow__",
                    "__rpow__", "__neg__", "__pos__", "__abs__", "__invert__", "__lshift__", "__rlshift__",
                    "__rshift__", "__rrshift__"), "dropin",
          "Python semantics on symbolic numbers in user code (a bool in arithmetic is an int; shifts)"),
    Patch("thunder.core.proxies.TensorProxy", ("__getattr__",), "dropin", "t.numel stays callable on symbolic sizes"),
    Patch("thunder.core.proxies.TensorProxy", ("shape",), "shape_reads",
          "inside a composite symbol a shape read records no prims.shape; the sizes are bound once, when a symbol first takes one"),
    Patch("thunder.core.symbol.Symbol", ("__call__",), "shape_reads",
          "binds a composite's pending sizes (prims.shape) before the first symbol that takes one as an argument"),
    Patch("thunder.core.proxies.IntegerProxy", ("__repr__",), "readable", "sizes print as name=value"),
    Patch("thunder.core.proxies.FloatProxy", ("__repr__",), "readable", "as IntegerProxy"),
    Patch("thunder.core.symbol.BoundSymbol", ("__post_init__",), "safety_net",
          "every number-producing bound symbol reaches the guard collector (projection to the inputs)"),
    Patch("thunder.core.symbol", ("prims",), "dropin", "shallow_copy of a number stays replayable by the prologue"),
    # prims and their metas
    Patch(SYMBOL_METAS, ("meta",), "install, dropin",
          "prim metas: the rewritten meta records its shape arithmetic (fallback: thunder's meta, inputs guarded); "
          "executors' own metas record theirs; ltorch tensor/randint/numel/multi_dot metas accept symbols, "
          "arange's dtype follows a float number; is_contiguous of an input is the argument's, checked (python_values)"),
    Patch("thunder.clang", ("floor_divide", "where", "tensor_from_sequence", "_basic_indexing"), "dropin",
          "Python // semantics, where() and torch.tensor() on symbolic numbers; slices clamp as in eager"),
    Patch("thunder.clang.langctx._method_name_to_fn_map", ("[]",), "dropin", "NumberProxy // resolves to the new floor_divide"),
    Patch("thunder.torch.langctx._method_name_to_fn_map", ("[]",), "numel", "t.numel() binds the sizes it multiplies"),
    Patch("thunder.clang", ("math",), "clang_math", "math.ceil/floor/... inside clang record on symbols"),
    # executors: the prologue's guard operators and Python-number implementations
    Patch("executor python.opmap", ("[]",), "pyexec, guard_op",
          "the prologue operators metatrace_guards/metatrace_structure and number prims the prologue replays"),
    Patch("executor python.implmap", ("[]",), "pyexec", "python implementations of the recorded number prims"),
    Patch("thunder.core.transforms.nondifferentiable_vjp_symbols", ("[]",), "pyexec", "py_floordiv and Python-semantics ops carry no gradient"),
    # grad transform
    Patch("thunder.core.transforms._grad_fn_map", ("[]",), "grad_rules",
          "autograd rules that convert sizes with int() keep them symbolic (rewritten by the codegen; "
          "augmented_forward_impls and backward_impls too, when a rule there needs it)"),
    Patch("thunder.transforms.autodiff", ("grad_transform_on_trace",), "grad_guards",
          "decisions of autograd rules become a second guard program (the prologue is built before them)"),
    # later stages: every trace keeps producers for its size symbols
    Patch("thunder*", ("dce", "transform_for_execution", "_transform_for_operator_executor_execution",
                       "split_into_forward_and_backward"), "later_stages",
          "executor passes and the forward/backward split keep (and re-bind) size producers"),
    Patch("thunder.core.trace_interpreter.TraceSubstitutionProcessor", ("__call__",), "later_stages", "as dce"),
    # torch.compile
    Patch("thunder.dynamo.compiler.ThunderCompiler", ("__init__",), "thunderfx",
          "ThunderFX without a cache option jits Dynamo's subgraphs under symbolic values"),
)


@dataclass
class _Installed:
    swapped: list = field(default_factory=list)  # (symbol, original meta)
    pyexec_undo: list = field(default_factory=list)
    grad_rules_undo: list = field(default_factory=list)
    manifest: dict = field(default_factory=dict)
    load_failures: dict = field(default_factory=dict)


_lock = threading.Lock()
_installed: _Installed | None = None
# Loaded metas by generated-file hash: enabling again in the same process skips the reload.
_loaded: dict[str, object] = {}


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


def _executor_symbols_with_own_metas(swapped: set[int]) -> list:
    """Opaque symbols whose metas are not prims' (torchex's ``max_pool2d_with_indices``, executors'
    symbols registered ``like=`` a torch-level function): their shape arithmetic is recorded too.
    They live in executors' op maps and as module globals of thunder's executors and transforms."""
    from thunder.core.symbol import Symbol
    from thunder.extend import get_all_executors

    candidates = [sym for ex in get_all_executors() for sym in getattr(ex, "opmap", {}).values()]
    for name, module in list(sys.modules.items()):
        if name.startswith("thunder.") and module is not None:
            candidates.extend(v for v in vars(module).values() if isinstance(v, Symbol))
    found, seen = [], set()
    for sym in candidates:
        if sym.is_prim and sym.meta is not None and id(sym) not in swapped and id(sym) not in seen:
            seen.add(id(sym))
            found.append(sym)
    return found


class _Enabled:
    """Returned by ``enable()``; as a context manager it disables on exit if it enabled."""

    def __init__(self, did_enable: bool):
        self._did_enable = did_enable

    def __enter__(self) -> _Enabled:
        return self

    def __exit__(self, *exc) -> None:
        if self._did_enable:
            disable()


def enable(*, force_fallback: tuple[str, ...] = ()) -> _Enabled:
    """Installs the rewritten metas. ``force_fallback``: PrimIDs names to run as fallbacks even
    though they are ported (for tests and for bisecting a suspected rewrite)."""
    global _installed
    with _lock:
        if _installed is not None:
            return _Enabled(False)
        warn_if_untested()
        configure_from_environment()
        result = cache.ensure()
        key = result.manifest["generated_sha256"]
        if key not in _loaded:
            _loaded[key] = load(result.text, result.manifest, result.directory / cache.METAS_FILE)
        loaded = _loaded[key]
        installed = _Installed(manifest=result.manifest, load_failures=loaded.failures)
        symbols = {pid.name: sym for pid, sym in prim_symbols().items()}
        sharing = _symbols_sharing_meta()
        unknown = set(force_fallback) - set(symbols)
        if unknown:
            raise ValueError(f"force_fallback names unknown prims: {sorted(unknown)}")
        try:
            for pid_name, sym in sorted(symbols.items()):
                original = sym.meta
                rewritten = loaded.metas.get(pid_name)
                if rewritten is not None and pid_name not in force_fallback:
                    new_meta = recording_meta(rewritten, inspect.unwrap(original), pid_name)
                else:  # a fallback in the manifest, a meta that failed to load, or forced
                    new_meta = fallback_meta(inspect.unwrap(original), pid_name)
                for shared in sharing[id(original)]:
                    installed.swapped.append((shared, shared.meta))
                    object.__setattr__(shared, "meta", new_meta)
            ported = {id(sym) for sym, _ in installed.swapped}
            for sym in _executor_symbols_with_own_metas(ported):
                installed.swapped.append((sym, sym.meta))
                object.__setattr__(sym, "meta", executor_meta(sym.meta))
            installed.pyexec_undo = python_executor.register()
            installed.grad_rules_undo = rules.install(loaded.grad_rules)
            renames.install()
            prologue_op.register()
            number_methods.install()
            jit.install()
            deferred_guards.install()
            module_state.install()
            python_values.install()
            clang_math.install()
            size_producers.install()
            numel.install()
            printing.install()
            shape_reads.install()
            thunderfx.install()
            float_numbers._install_floats()  # TODO(patch rows)
        except BaseException:
            _restore(installed)
            raise
        _installed = installed
        return _Enabled(True)


def _restore(installed: _Installed) -> None:
    python_executor.unregister(installed.pyexec_undo)
    rules.uninstall(installed.grad_rules_undo)
    renames.uninstall()
    prologue_op.unregister()
    number_methods.uninstall()
    jit.uninstall()
    deferred_guards.uninstall()
    module_state.uninstall()
    python_values.uninstall()
    clang_math.uninstall()
    size_producers.uninstall()
    numel.uninstall()
    printing.uninstall()
    shape_reads.uninstall()
    thunderfx.uninstall()
    float_numbers._uninstall_floats()  # TODO(patch rows)
    # Last: the metas were swapped first, and later steps wrap some of them again.
    for sym, original in reversed(installed.swapped):
        object.__setattr__(sym, "meta", original)


def disable() -> None:
    global _installed
    with _lock:
        if _installed is None:
            return
        _restore(_installed)
        _installed = None


def is_enabled() -> bool:
    return _installed is not None


def installed_manifest() -> dict | None:
    return None if _installed is None else _installed.manifest
