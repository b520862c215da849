"""metatrace's process-lifetime tables that belong to no compile: what thunder's interpreter can
reuse across compiles (metatrace.interpret.costs), which model's methods a thread is running
(metatrace.interpret.modules.module_methods), the collector's pacing (metatrace.gc_pacing), what
``enable()`` installed (metatrace.install) and the pytest plugin's session (metatrace.pytest_plugin).
Each says what it holds and when entries go.
"""

from __future__ import annotations

import threading
import types
import weakref
from dataclasses import dataclass, field

# code object -> its decoded instructions (a tuple of immutable ``dis.Instruction``); an entry goes
# with its code object (interpreter_costs.get_instructions)
DECODED_INSTRUCTIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

# code location -> the Python frame made for tracebacks raised there; cleared whole when it holds
# PYTHON_FRAMES_KEPT (a location's frame is then made again, as thunder would) (fast_paths)
PYTHON_FRAMES: dict[tuple, types.FrameType] = {}
PYTHON_FRAMES_KEPT = 4096


class SwitchIntervalHandoff:
    """How many threads are in ``get_or_make_python_frame`` with the switch interval shortened,
    and the interval to restore when the last leaves (interpreter_costs)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.callers = 0
        self.saved: float | None = None


HANDOFF = SwitchIntervalHandoff()

# dotted module path -> its names, for the process (bounded by the paths of the parameters and
# submodules prologues read) (metatrace.guards.module_paths)
DOTTED_PATH_NAMES: dict[str, tuple[str, ...]] = {}

# module name -> whether it is library code (installed package or standard library), for the
# process (bounded by the modules imported) (metatrace.interpret.reads.library_code)
LIBRARY_MODULES: dict[str, bool] = {}

# a Symbol's meta -> its signature and positional count (metatrace.passes.symbol_costs), for the
# process: metas live as long as their symbols, which thunder keeps for the process
META_SIGNATURES: dict = {}

# per thread: the jitted model whose ``generate`` (a method that calls forward) is running, while
# it runs (module_methods: nested calls are not redirected again)
RUNNING_MODEL_METHODS = threading.local()


class CollectorPacing:
    """Python's collector paced by metatrace (metatrace.gc_pacing), for the process: how many
    phases are open, and the thresholds the first of them found (``saved``: set when the first
    phase enters, put back when the last leaves)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.phases = 0
        self.saved: tuple[int, ...] | None = None


GC_PACING = CollectorPacing()


@dataclass
class Installation:
    """What one ``enable()`` installed, from it to the ``disable()`` that undoes it."""

    rows: list = field(default_factory=list)  # the Patch rows applied, in order
    undo: list = field(default_factory=list)  # patching.apply's undo list
    load_failures: dict = field(default_factory=dict)


class InstallState:
    """metatrace.install's state, for the process: ``installed`` (None while disabled), and
    ``loaded``, the loaded metas by generated-file hash (kept after ``disable()``: enabling again
    in the same process skips the reload)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.installed: Installation | None = None
        self.loaded: dict[str, object] = {}


INSTALL = InstallState()


class ForcedSymbolicSession:
    """The pytest plugin's ``--metatrace-force-symbolic`` session (metatrace.pytest_plugin), from
    ``pytest_configure`` to ``pytest_unconfigure``: ``thunder.jit`` as it was before the plugin
    replaced it (None outside such a session), and ``enable()``'s handle."""

    def __init__(self):
        self.original_jit = None
        self.enabled = None


PYTEST_FORCED_SYMBOLIC = ForcedSymbolicSession()
