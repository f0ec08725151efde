"""The package's types: the installed package (its Python layer and the stubs of the
native module) and every Python snippet of docs/python.md pass ``mypy --strict``, and a
call the stubs forbid fails it."""

import re
import subprocess
import sys
from pathlib import Path

import rocketmq_blocking as rmq

DOCS = Path(__file__).resolve().parents[2] / "docs" / "python.md"


def mypy(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    # From an empty directory: the installed package is the one checked.
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", f"--cache-dir={tmp_path / 'cache'}", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_installed_package_ships_stubs_and_passes_mypy_strict(tmp_path):
    package = Path(rmq.__file__).parent
    assert (package / "_native.pyi").is_file() and (package / "py.typed").is_file(), sorted(
        p.name for p in package.iterdir()
    )
    r = mypy(tmp_path, "-p", "rocketmq_blocking")
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_python_snippets_of_the_docs_pass_mypy_strict(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.S)
    assert blocks, "docs/python.md has no Python snippet"
    files = []
    for i, code in enumerate(blocks):
        f = tmp_path / f"snippet_{i}.py"
        f.write_text(code)
        files.append(str(f))
    r = mypy(tmp_path, *files)
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_strict_rejects_calls_the_stubs_forbid(tmp_path):
    f = tmp_path / "wrong.py"
    f.write_text(
        "import rocketmq_blocking as rmq\n"
        "with rmq.Producer('g', namesrv='127.0.0.1:9876') as p:\n"
        "    r: rmq.SendResult = p.send(b'not a message')\n"
        "    n: int = p.fetch_queues('t')\n"
        "s: str = rmq._native.version()\n"
        "t: int = rmq._native.version()\n"
    )
    r = mypy(tmp_path, str(f))
    assert r.returncode != 0
    errors = [line for line in r.stdout.splitlines() if ": error:" in line]
    assert [line.split(":")[1] for line in errors] == ["3", "4", "6"], r.stdout
