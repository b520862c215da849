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
from metatrace.entry_cache.stable_refs import code_digest

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


def _generated_metas() -> str:
    from metatrace.install import installed_manifest

    manifest = installed_manifest() or {}
    return manifest.get("generated_sha256", "none")


def jitted_program(fn) -> dict[str, str]:
    """The jitted function by name and code, or the jitted module by class."""
    import torch

    if isinstance(fn, torch.nn.Module):
        cls = type(fn)
        return {"module_class": f"{cls.__module__}.{cls.__qualname__}"}
    target = getattr(fn, "__func__", fn)
    if type(target) is types.FunctionType:
        return {"function": f"{target.__module__}.{target.__qualname__}", "code": code_digest(target.__code__)}
    raise ProcessLocal(f"the jitted callable {fn!r} is neither a function nor a module")


def _plain(text: str, what: str) -> str:
    if _ADDRESS.search(text):
        raise ProcessLocal(f"the {what} {text[:120]} names an object by its address")
    return text


def _no_transforms(cd) -> list:
    transforms = list(getattr(cd, "transforms", None) or ())
    if transforms:  # (a transform's settings live on its object: no key says they are the same)
        names = ", ".join(type(t).__qualname__ for t in transforms)
        raise ProcessLocal(f"the transforms {names} are known by their objects in this process")
    return []


def program_key(fn, cd) -> tuple[str, dict]:
    """(hex key, the description it hashes) of the callable ``fn`` jitted with compile data ``cd``."""
    description = {
        "libraries": library_versions(),
        "metatrace": metatrace_digest(),
        "metas": _generated_metas(),
        "program": jitted_program(fn),
        # (thunder names each jit's own executor for opaque calls by an address; what it registers
        # is per process, and an entry calling it stays in the process: stable_refs)
        "executors": [_AD_HOC.sub("__ad_hoc_executor", ex.name) for ex in cd.executors_list],
        "options": _plain(repr(sorted((k, repr(v)) for k, v in cd.compile_options.items())), "compile options"),
        "transforms": _no_transforms(cd),
        "cache": str(cd.cache_option),
        "autograd": not cd.disable_torch_autograd_support,
        "sharp_edges": str(cd.sharp_edges),
        "ddp": bool(getattr(fn, "use_ddp", False)),
        "fsdp": bool(getattr(fn, "use_fsdp", False)),
    }
    text = json.dumps(description, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32], description
