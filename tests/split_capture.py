"""The joint traces thunder's forward/backward split receives, captured for the passes' tests."""

from __future__ import annotations

import contextlib
import sys

import thunder.transforms.autodiff as autodiff


@contextlib.contextmanager
def captured_joint_traces():
    """A list that gets every joint trace the split is given while the block runs (metatrace's
    wrapper of the split, which every thunder module importing it binds by name)."""
    joints = []
    wrapper = autodiff.split_into_forward_and_backward
    bindings = [m for name, m in list(sys.modules.items())
                if m is not None and name.startswith("thunder") and m.__dict__.get("split_into_forward_and_backward") is wrapper]
    for m in bindings:
        m.split_into_forward_and_backward = lambda trace: (joints.append(trace), wrapper(trace))[1]
    try:
        yield joints
    finally:
        for m in bindings:
            m.split_into_forward_and_backward = wrapper
