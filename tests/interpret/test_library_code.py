"""metatrace.interpret.reads.library_code: installed packages and the standard library are code, the
user's modules (a script, ``__main__``, a module without a file) are state."""

from __future__ import annotations

import importlib.util
import math
import sys
import types

import torch

from metatrace.interpret.reads.library_code import is_library_function, is_library_module, is_library_module_name


def test_installed_packages_are_code():
    assert is_library_module(torch.nn.functional)


def test_the_standard_library_is_code():
    assert is_library_module(math)


def test_builtin_modules_are_code():
    assert is_library_module(sys)


def test_main_is_the_users():
    assert not is_library_module(sys.modules["__main__"])


def test_a_module_without_a_file_is_the_users():
    assert not is_library_module(types.ModuleType("made_at_runtime"))


def test_a_module_loaded_from_a_users_directory_is_the_users(tmp_path):
    path = tmp_path / "my_helpers_for_library_code.py"
    path.write_text("def scale(x):\n    return x * 2\n")
    spec = importlib.util.spec_from_file_location("my_helpers_for_library_code", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert not is_library_module(module)


def test_a_name_with_no_imported_module_is_the_users():
    assert not is_library_module_name("no_such_module_was_imported")


def test_a_function_is_judged_by_the_module_that_defined_it():
    assert is_library_function(torch.nn.functional.softmax)  # (a Python function of torch)


def test_a_function_defined_here_is_the_users():
    def local(x):
        return x

    assert not is_library_function(local)
