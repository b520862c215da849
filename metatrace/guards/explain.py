"""Explaining cache entries: which guards each entry checks, and why a call missed them all.

``metatrace.explain(jitted_fn)`` lists, for each cache entry of a ``thunder.jit`` function, the
guards its prologue checks in readable form (``flag > 5``, ``i <= a.shape[2]``, ``d == 1``),
metatrace's guards and thunder's own value checks alike. metatrace's guards are shown as the
prologue checks them: simplified (``metatrace.guards.simplify``) to an equivalent set over the inputs,
one range per number (``2 <= T <= 127``), equalities once (``B == k.shape[0]``), no tautologies.

Each check is a :class:`metatrace.guards.check_texts.CheckText`: its text, and what it reads, how
it compares it and why, carried from the guard records and the prologue's reads; which checks
read the jitted module's own state (summed up in one line per kind) and which of thunder's checks
repeat a pin of metatrace's are decided on those, never by reading the text back.

With ``METATRACE_LOG=recompiles`` (or the ``metatrace.recompiles`` logger at INFO) every cache
miss logs, like PyTorch's ``TORCH_LOGS=recompiles``, which guard of which entry failed.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any

import thunder

from metatrace.guards import provenance
from metatrace.guards.check_texts import NO_VALUE, CheckText
from metatrace.guards.matchers import ExpectedArgument
from metatrace.state.registry import EXPECTED, PROGRAMS, compile_stats, function_record
from metatrace.guards.value_checks import ExpectedValue
from metatrace.metas.relations import Relation

recompile_logger = logging.getLogger("metatrace.recompiles")


@dataclass(frozen=True)
class EntryGuards:
    """One cache entry's guards. ``guards``: every check, as text (each a
    :class:`metatrace.guards.check_texts.CheckText`: what it checks, structured). ``str()`` reads
    like torch's guard log: the guards on the call's inputs in full (relational ones and pins
    with their reasons), then one line per kind of the jitted module's static state (its values,
    its parameters' and buffers' metadata), whose number grows with the layer count;
    ``verbose=True`` (``explain(fn, verbose=True)``) lists those too."""

    index: int
    guards: list[CheckText]
    verbose: bool = False
    # the newest entry's (block, first block, None or why interpreted): interpret.modules.repeated_blocks
    blocks: list = field(default_factory=list)

    @property
    def stamped(self) -> list[str]:  # the blocks stamped from their list's first block
        return [b for b, _, why in self.blocks if why is None]

    @property
    def interpreted(self) -> dict[str, str]:  # the blocks with a first block interpreted anyway, and why
        return {b: why for b, _, why in self.blocks if why is not None}

    @property
    def on_inputs(self) -> list[str]:
        """The guards on the function's arguments, globals and closures (not on ``self``)."""
        return [g for g in self.guards if _state_kind(g) is None]

    @property
    def on_state(self) -> dict[str, list[str]]:
        """The checks of the jitted module's own state, by kind (values, tensors)."""
        kinds: dict[str, list[str]] = {}
        for g in self.guards:
            kind = _state_kind(g)
            if kind is not None:
                kinds.setdefault(kind, []).append(g)
        return kinds

    def __str__(self) -> str:
        if self.verbose:
            lines = list(self.guards)
        else:
            lines = self.on_inputs + [_summary(kind, texts) for kind, texts in self.on_state.items()]
        body = "\n".join(f"  {g}" for g in lines) or "  (no guards)"
        return f"cache entry {self.index}:\n{body}{self._blocks_text()}"

    def _blocks_text(self) -> str:
        """The blocks stamped (families, outermost first), how many interpreted (verbose: why)."""
        if not self.blocks:
            return ""
        families = sorted(dict.fromkeys(_family(b) for b in self.stamped), key=lambda f: (f.count("."), f))
        shown = ", ".join(families[:3]) + (f", +{len(families) - 3} more" if len(families) > 3 else "")
        line = f"\n  blocks: {len(self.stamped)} stamped" + (f" ({shown})" if shown else "")
        if not self.verbose and self.interpreted:
            return f"{line}; {len(self.interpreted)} interpreted (explain(fn, verbose=True) says why)"
        return line + "".join(f"\n  interpreted {b}: {why}" for b, why in self.interpreted.items() if self.verbose)


TENSORS, VALUES = "module tensors", "module values"


def _state_kind(check: CheckText) -> str | None:
    """Which kind of the module's own state the check reads (a tensor's metadata, a value), or
    None: it reads the call's arguments, globals or closures."""
    if not check.own_state:
        return None
    return TENSORS if check.tensor is not None else VALUES


def _family(subject: str) -> str:
    """``self.transformer.h.0.attn.weight`` -> ``self.transformer.h.*.attn.weight``: one pattern per
    repeated layer."""
    return re.sub(r"\.\d+(?=\.|$)", ".*", subject)


def _summary(kind: str, checks: list[CheckText]) -> str:
    subjects = dict.fromkeys(_family(c.tensor or c.subject or c) for c in checks)
    shown = list(subjects)[:3]
    more = f", +{len(subjects) - len(shown)} more" if len(subjects) > len(shown) else ""
    what = "rank, dtype, device, sizes" if kind == TENSORS else "by value"
    return (f"{len(checks)} checks of {kind} ({what}: {', '.join(shown)}{more}); "
            f"explain(fn, verbose=True) lists them")


# Prologue unpacks of module state: (symbol name, how the source reads: attribute or path).
_MODULE_UNPACKS = {"unpack_attr", "unpack_submodule", "unpack_parameter", "unpack_buffer"}


@dataclass
class _PrologueReads:
    """What a prologue reads from the jitted function or module (thunder names the values
    ``i63``, ``f89``, ``t_lm_head_weight``): ``records``: proxy name -> its provenance record,
    named as explain() names every value (``metatrace.guards.provenance.text``:
    ``self.config.n_head``, ``self.lm_head.weight``); ``sizes``: a size's name -> its tensor's
    name and dimension."""

    records: dict[str, Any]
    sizes: dict[str, tuple[str, int]]
    fn: Any = None

    def name(self, proxy_name: str) -> str:
        """How explain names the value (``self.lm_head.weight``, ``a.shape[0]``); an argument by
        its proxy's name."""
        if proxy_name in self.records:
            return provenance.text(self.records[proxy_name], self.fn)
        if proxy_name in self.sizes:
            tensor, d = self.sizes[proxy_name]
            return f"{self.name(tensor)}.shape[{d}]"
        return proxy_name

    def own_state(self, proxy_name: str) -> bool:
        """The value is the module's (or function's) own state (``self...``), not an argument."""
        if proxy_name in self.sizes:
            return self.own_state(self.sizes[proxy_name][0])
        record = self.records.get(proxy_name)
        return record is not None and provenance.reads_own_state(record)


def _prologue_reads(prologue_trace, fn=None) -> _PrologueReads:
    """One walk over the prologue: its unpacks of the function or module become provenance
    records, its ``shape`` reads the sizes of the tensors."""
    records: dict[str, Any] = {}
    sizes: dict[str, tuple[str, int]] = {}
    for bsym in prologue_trace.bound_symbols:
        name = bsym.sym.name
        outs = bsym.flat_proxy_outs
        if name == "shape" and bsym.args:  # (i0, i1, i2) = shape(a): a's sizes
            tensor = getattr(bsym.args[0], "name", None)
            if tensor is not None:
                for d, size in enumerate(bsym.output if isinstance(bsym.output, (tuple, list)) else ()):
                    if hasattr(size, "name"):
                        sizes[size.name] = (tensor, d)
            continue
        if len(outs) != 1:
            continue
        owner = records.get(getattr(bsym.args[0], "name", None)) if bsym.args else None
        if name == "unpack_function_obj":
            records[outs[0].name] = provenance.root_record(provenance.Root.FUNCTION)
        elif name == "unpack_thunder_module":
            # the jitted module itself (its function object is ``self``), or a global module the
            # function calls (``GLOBAL_CONV``, whose parameters are ``GLOBAL_CONV.weight``)
            records[outs[0].name] = owner if owner is not None else provenance.root_record(provenance.Root.FUNCTION)
        elif owner is None or len(bsym.args) < 2:
            continue
        elif name in _MODULE_UNPACKS and isinstance(bsym.args[1], str):
            records[outs[0].name] = provenance.attribute_record(owner, bsym.args[1])
        elif name == "unpack_getitem" and isinstance(bsym.args[1], (str, int)):
            records[outs[0].name] = provenance.item_record(owner, bsym.args[1])  # self.sizes[0], G[1]
    return _PrologueReads(records, sizes, fn)


def _module_sources(prologue_trace, fn=None) -> dict[str, str]:
    """Proxy name -> where the prologue reads it from the module: ``self.config.n_head``,
    ``self.transformer.h.0.norm_1.eps``, ``self.lm_head.weight``."""
    reads = _prologue_reads(prologue_trace, fn)
    return {n: reads.name(n) for n in (*reads.records, *reads.sizes)}


# thunder's checks of one value: check_len's subject is ``len(x)``
_VALUE_CHECKS = ("check_number_type_and_value", "check_string_value", "check_literal_like", "check_len")


def entry_checks(prologue_trace, fn=None) -> list[CheckText]:
    stored = getattr(prologue_trace, "explain_checks", None)  # (an entry loaded from disk: metatrace.entry_cache)
    if stored is not None:
        return list(stored)
    checks: list[CheckText] = []
    reads = _prologue_reads(prologue_trace, fn)
    for bsym in prologue_trace.bound_symbols:
        name = bsym.sym.name
        if name == "metatrace_guards":
            program = PROGRAMS.get(bsym.args[0])
            texts = program.texts if program is not None else [f"guard program {bsym.args[0]} (not loaded)"]
            checks.extend(t if isinstance(t, CheckText) else CheckText(t) for t in texts)
        elif name == "metatrace_structure" and hasattr(EXPECTED.get(bsym.args[0]), "text"):
            checks.append(_expected_check(EXPECTED[bsym.args[0]], bsym.args[1:], fn))  # metatrace.guards.value_checks
        elif name in _VALUE_CHECKS:
            subject, value = bsym.args[0], bsym.args[1]
            subject_name = getattr(subject, "name", repr(subject))
            if subject_name.startswith("cache_info"):
                continue
            shown = f"len({reads.name(subject_name)})" if name == "check_len" else reads.name(subject_name)
            checks.append(CheckText(f"{shown} == {value!r}", shown, Relation.EQ, value, own_state=reads.own_state(subject_name)))
        elif name in ("check_tensor_metadata", "check_tensor_shape_and_metadata"):
            checks.extend(_tensor_checks(bsym, reads))
    # thunder's own check of a value metatrace pinned checks what metatrace's does, without its
    # reason (``a.shape[0] == 2`` beside ``a.shape[0] == 2 (input of fallback prim PAD ...)``)
    explained = {c.compares() for c in checks if c.reason}
    return [c for c in checks if c.reason or c.compares() is None or c.compares() not in explained]


def _tensor_checks(bsym, reads: _PrologueReads) -> list[CheckText]:
    """thunder's check of a tensor's metadata: its rank, dtype, device and requires_grad, then
    each size the entry fixed."""
    t, shape, device, dtype, requires_grad = bsym.args[:5]
    t_name, own = reads.name(t.name), reads.own_state(t.name)
    metadata = CheckText(f"{t_name}: rank {len(shape)}, {dtype}, {device}, requires_grad={requires_grad}", t_name,
                         tensor=t_name, own_state=own)
    return [metadata, *(CheckText(f"{t_name}.shape[{d}] == {s}", f"{t_name}.shape[{d}]", Relation.EQ, s, tensor=t_name,
                                  own_state=own) for d, s in enumerate(shape) if isinstance(s, int))]


def _expected_check(expected, proxies: tuple, fn) -> CheckText:
    """metatrace's check of a value (``self.k == 3 (read by the trace)``) or an argument's
    structure: its subject is the value the prologue passes it, named by its provenance. Other
    checks (the module's hooks and tensors, keyword order) read several values: no subject."""
    history = getattr(proxies[0], "history", None) if proxies else None
    if not isinstance(expected, (ExpectedValue, ExpectedArgument)) or history is None:
        return CheckText(expected.text)
    own = provenance.reads_own_state(history)
    subject = provenance.text(history, fn) if own else provenance.state_name(history, fn)
    text = expected.text  # a CheckText where the check was made with its reason (value_checks.add_value_check)
    return CheckText(text, subject, getattr(text, "relation", None), getattr(text, "value", NO_VALUE),
                     getattr(text, "reason", ""), own_state=own)


def _jitted_function(jitted_fn):
    """The user's function (or module) behind ``thunder.jit``: its cells name closure reads."""
    cd = thunder.compile_data(jitted_fn)
    return getattr(cd, "fn", None)


def explain(jitted_fn, verbose: bool = False) -> list[EntryGuards]:
    """The guards of every cache entry of ``jitted_fn``, oldest entry first (each once: thunder
    and metatrace may both check one value). Printed, an entry shows the guards on the inputs and
    one summary line per kind of module state; ``verbose=True`` prints every check."""
    cs = thunder.compile_stats(jitted_fn)
    if cs is None:
        raise ValueError("not a thunder.jit function")
    record = function_record(cs)
    newest = len(cs.interpreter_cache) - 1
    return [
        EntryGuards(i, list(dict.fromkeys(entry_checks(entry.prologue_traces[-1], _jitted_function(jitted_fn)))),
                    verbose, list(record.stamped_blocks) if record is not None and i == newest else [])
        for i, entry in enumerate(cs.interpreter_cache)
    ]


# ---------------------------------------------------------------------------------------------
# Recompile logging
# ---------------------------------------------------------------------------------------------


def record_rejection(program_id: str, text: str) -> None:
    """Called by a failing guard program or structure check (``guard failed: T < 8``, ``argument
    structure changed: ...``): remembers it for the miss report of this call."""
    cs = compile_stats()
    if cs is not None:
        record = function_record(cs)
        if record.rejections[0] != cs.calls:
            record.rejections = (cs.calls, {})
        record.rejections[1][program_id] = text


# metatrace's prologue operators (metatrace.guards.prologue_op): each failure is recorded with its id
_CHECKS = ("metatrace_guards", "metatrace_structure")


def log_miss() -> None:
    """On a cache miss (a new trace starts): one line per existing entry saying why it was rejected."""
    if not recompile_logger.isEnabledFor(logging.INFO):
        return
    cs = compile_stats()
    if cs is None or not cs.interpreter_cache:
        return
    calls, failed = function_record(cs).rejections
    failed = failed if calls == cs.calls else {}
    lines, call = [], _missed_call()
    for i, entry in enumerate(cs.interpreter_cache):
        check_ids = [b.args[0] for b in entry.prologue_traces[-1].bound_symbols if b.sym.name in _CHECKS]
        reason = next((failed[p] for p in check_ids if p in failed), None) or _thunder_rejection(entry, call)
        lines.append(f"  entry {i}: {reason}")
    recompile_logger.info("Recompiling (call %d, %d cache entries):\n%s", cs.calls, len(cs.interpreter_cache), "\n".join(lines))


def _missed_call() -> tuple | None:
    """The arguments of the call that missed every entry: thunder's cache lookup
    (``get_computation_and_inputs``) holds them in its frame, below the trace that starts."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == "get_computation_and_inputs" and "args" in frame.f_locals:
            return frame.f_locals["args"], frame.f_locals.get("kwargs", {})
        frame = frame.f_back
    return None


def _thunder_rejection(entry, call) -> str:
    """Which of thunder's own prologue checks (a static value, the number of arguments, a rank,
    dtype or device) rejected the call: the entry's prologue runs again on its arguments (only
    when the log is on) and its error, shortened, says."""
    generic = "rejected by thunder's own prologue checks (a static value, rank, dtype or device)"
    if call is None:
        return generic
    try:
        entry.prologue_fn(*call[0], **call[1])
    except Exception as e:  # noqa: BLE001 - the error is the explanation
        text = " ".join(str(e).split()) or type(e).__name__
        text = text if len(text) <= 240 else f"{text[:150]} ... {text[-80:]}"
        check = _failed_line(entry, e)
        return f"rejected by thunder's prologue check {check}: {text}" if check else f"rejected by thunder's prologue: {text}"
    return generic


def _failed_line(entry, error: Exception) -> str:
    """The prologue's line that raised (``check_number_type_and_value(b15, False)``), its values
    named where they are read from (``past_key_values.layers[0].is_initialized``)."""
    import traceback

    from thunder.core.compile_data import get_compile_data

    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename.startswith("thunder.prologue")]
    if not frames or not frames[-1].line:
        return ""
    cd, trace = get_compile_data(), entry.prologue_traces[-1]
    names = {**_argument_paths(trace, _parameters(getattr(cd, "fn", None))), **_module_sources(trace, getattr(cd, "fn", None))}
    return re.sub(r"\b[A-Za-z_]\w*\b", lambda m: names.get(m.group(0), m.group(0)), frames[-1].line)


def _parameters(fn) -> list[str]:
    import inspect

    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


def _argument_paths(prologue_trace, parameters: list[str]) -> dict[str, str]:
    """Proxy name -> the path the prologue reads it by from the call's arguments
    (``past_key_values.layers[0].is_initialized``, ``cfg.flag``)."""
    paths: dict[str, str] = {}
    for bsym in prologue_trace.bound_symbols:
        outs = bsym.flat_proxy_outs
        if bsym.sym.name == "unpack_trivial" and len(outs) == 1 and outs[0].name in ("args", "kwargs"):
            paths[outs[0].name] = outs[0].name
        elif bsym.sym.name in ("unpack_attr", "unpack_getitem") and len(outs) == 1 and len(bsym.args) >= 2:
            base = paths.get(getattr(bsym.args[0], "name", None))
            key = bsym.args[1]
            if base is None or not isinstance(key, (str, int)):
                continue
            if base == "kwargs" and bsym.sym.name == "unpack_getitem":
                paths[outs[0].name] = str(key)
            elif base == "args" and bsym.sym.name == "unpack_getitem" and isinstance(key, int) and key < len(parameters):
                paths[outs[0].name] = parameters[key]
            else:
                paths[outs[0].name] = f"{base}.{key}" if bsym.sym.name == "unpack_attr" else f"{base}[{key!r}]"
    return paths


def configure_from_environment() -> None:
    """METATRACE_LOG=recompiles sends the recompile log to stderr; METATRACE_LOG=cache the entry
    cache's (entries loaded, stored, skipped as stale, kept in the process and why); both may be
    given, comma-separated."""
    asked = os.environ.get("METATRACE_LOG", "").split(",")
    for name, logger in (("recompiles", recompile_logger), ("cache", logging.getLogger("metatrace.entry_cache"))):
        if name not in asked:
            continue
        if not logger.handlers:
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("[metatrace] %(message)s"))
            logger.addHandler(handler)
        logger.setLevel(logging.INFO)
