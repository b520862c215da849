"""The key under which a jitted callable's entries are stored: what names the program, not the process.

Two processes share entries when they run the same program under the same libraries: the key
covers Python's, torch's, thunder's and transformers' versions, metatrace's own source and
generated metas, the executors and compile options, and the jitted function (module, qualified
name and a digest of its code) or the jitted module's class. What the trace read from the user's
state is not in the key: each stored entry's prologue checks it, as in the process that compiled
it, and each entry lists the source files of the code its compile ran (``stored_entry``).

A compile option or executor that prints as an object known only by its address (``<... at 0x..>``)
has no key: such a callable's entries stay in the process (``ProcessLocal``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import platform
import re
import sys
import types
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import metatrace
from metatrace.errors import ProcessLocal
import metatrace.entry_cache.settings as settings
from metatrace.entry_cache.code_digests import code_digest, made_at_run_time

_VERSIONED = ("torch", "lightning-thunder", "transformers", "litgpt", "libcst")
_AD_HOC = re.compile(r"^__ad_hoc_executor_\d+$")
_ADDRESS = re.compile(r" at 0x[0-9a-f]+|<[^<>]* object>")


@functools.cache
def library_versions() -> dict[str, str]:
    found = {"python": f"{platform.python_implementation()} {sys.version.split()[0]}"}
    for dist in _VERSIONED:
        try:
            found[dist] = version(dist)
        except PackageNotFoundError:
            found[dist] = "absent"
    return found


@functools.cache
def metatrace_digest() -> str:
    """metatrace's own code: a change to it (a fix, a new rule) makes every stored entry stale."""
    h = hashlib.sha256()
    root = Path(metatrace.__file__).parent
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:24]


def jitted_program(fn) -> dict[str, str]:
    """The jitted function by name and code, or the jitted module by class."""
    import torch

    if isinstance(fn, torch.nn.Module):
        cls = type(fn)
        return {"module_class": f"{cls.__module__}.{cls.__qualname__}"}
    if type(fn) is types.MethodType and type(fn.__func__) is types.FunctionType:
        # (the class of the object it is bound to: another class resolves its other methods elsewhere)
        owner = type(fn.__self__)
        target = fn.__func__
        return {"function": f"{target.__module__}.{target.__qualname__}", "code": code_digest(target.__code__),
                "bound_to": f"{owner.__module__}.{owner.__qualname__}"}
    if type(fn) is types.FunctionType:
        return {"function": f"{fn.__module__}.{fn.__qualname__}", "code": code_digest(fn.__code__)}
    raise ProcessLocal(f"the jitted callable {fn!r} is neither a function nor a module")


def _plain(text: str, what: str) -> str:
    if _ADDRESS.search(text):
        raise ProcessLocal(f"the {what} {text[:120]} names an object by its address")
    return text


def _transforms(cd) -> list:
    """Each transform by class and settings (ddp's bucket size, fsdp's sharding strategy, the
    process group by backend, size and this rank): what it does to the trace is its class's code
    (in the key through its library's version or the files the compile ran) and these."""
    return [_transform(t) for t in getattr(cd, "transforms", None) or ()]


def _transform(t) -> dict:
    cls = type(t)
    named = {"class": f"{cls.__module__}.{cls.__qualname__}"}
    if made_at_run_time(cls.__qualname__):
        raise ProcessLocal(f"the transform {cls.__qualname__} is a class made at run time")
    for name, value in sorted(vars(t).items()):
        named[name] = _setting(value, f"{cls.__qualname__}.{name}")
    return named


def _setting(value, where: str, depth: int = 0):
    import enum

    import torch

    if value is None or type(value) in (bool, int, float, str, torch.device, torch.dtype):
        return repr(value)
    if isinstance(value, enum.Enum):
        return f"{type(value).__qualname__}.{value.name}"
    if type(value) is types.FunctionType and not made_at_run_time(value.__qualname__):
        return ("function", value.__module__, value.__qualname__, code_digest(value.__code__))
    if isinstance(value, torch.Tensor):  # (a parameter the transform holds: its metadata; the prologue checks it)
        return ("tensor", tuple(value.shape), str(value.dtype), str(value.device), value.requires_grad)
    if type(value).__name__ in ("ProcessGroup", "ProcessGroupGloo", "ProcessGroupNCCL"):
        import torch.distributed as tdist

        return ("process_group", str(tdist.get_backend(value)), value.size(), value.rank())
    if depth < 3 and isinstance(value, (set, frozenset)):
        return sorted(repr(_setting(v, where, depth + 1)) for v in value)
    if depth < 3 and isinstance(value, (list, tuple)):
        return [_setting(v, where, depth + 1) for v in value]
    if depth < 3 and isinstance(value, dict) and all(type(k) is str for k in value):
        return {k: _setting(v, f"{where}[{k!r}]", depth + 1) for k, v in sorted(value.items())}
    if depth < 3 and hasattr(value, "items") and hasattr(value, "keys"):  # (a weak tensor-keyed dict: its values)
        return sorted((_setting(v, where, depth + 1) for v in value.values()), key=repr)
    raise ProcessLocal(f"the transform setting {where} ({type(value).__qualname__}) has no stable key")


def program_key(fn, cd) -> tuple[str, dict]:
    """(hex key, the description it hashes) of the callable ``fn`` jitted with compile data ``cd``."""
    description = {
        "libraries": library_versions(),
        "metatrace": metatrace_digest(),
        "metas": settings.metas_digest(),
        "program": jitted_program(fn),
        # (thunder names each jit's own executor for opaque calls by an address; what it registers
        # is per process, and an entry calling it stays in the process: stable_refs)
        "executors": [_AD_HOC.sub("__ad_hoc_executor", ex.name) for ex in cd.executors_list],
        "options": _plain(repr(sorted((k, repr(v)) for k, v in cd.compile_options.items())), "compile options"),
        "transforms": _transforms(cd),
        "cache": str(cd.cache_option),
        "autograd": not cd.disable_torch_autograd_support,
        "sharp_edges": str(cd.sharp_edges),
        "ddp": bool(getattr(fn, "use_ddp", False)),
        "fsdp": bool(getattr(fn, "use_fsdp", False)),
    }
    text = json.dumps(description, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32], description
