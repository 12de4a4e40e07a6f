"""The package as installed: the ``tailcut`` script is the CLI, the native module matches
its stubs, and every public name has a docstring."""

from __future__ import annotations

import ast
import inspect
import subprocess
from pathlib import Path

import tailcut
from tailcut import _tailcut


def test_the_script_is_the_cli(tailcut_cmd: str) -> None:
    v = subprocess.run([tailcut_cmd, "--version"], capture_output=True, text=True)
    assert v.returncode == 0 and v.stdout.strip() == f"tailcut {tailcut.__version__}"
    bad = subprocess.run([tailcut_cmd, "demo", "--requests", "0"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--requests" in bad.stderr, bad.stderr


def test_the_native_module_matches_its_stubs() -> None:
    stub = Path(tailcut.__file__).with_name("_tailcut.pyi")
    tree = ast.parse(stub.read_text())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            assert callable(getattr(_tailcut, node.name)), node.name
        elif isinstance(node, ast.ClassDef):
            cls = getattr(_tailcut, node.name)
            methods = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
            native = {m for m in dir(cls) if not m.startswith("_")}
            assert methods == native, (node.name, methods, native)
    public = {n for n in dir(_tailcut) if not n.startswith("_")}
    stubbed = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert public == stubbed


def test_every_public_name_is_documented() -> None:
    for name in tailcut.__all__:
        obj = getattr(tailcut, name)
        assert inspect.getdoc(obj), name
        if inspect.isclass(obj):
            for m, f in vars(obj).items():
                if not m.startswith("_") and callable(f):
                    assert inspect.getdoc(f), f"{name}.{m}"
