"""`pip install .` gives `import attention` anywhere, the app, and the console command `attention-explorer`.

The wheel is built from this checkout and installed into a folder of its own (`pip install --target`),
then used from a directory outside the repository, so nothing here can pass by importing the checkout.
"""

import os
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

import pytest

from serving import APP, free_port, running_app
from tests.test_readme import claimed_prints, python_blocks

pytestmark = pytest.mark.slow
ROOT = APP.parent


@pytest.fixture(scope="module")
def wheel_and_site(tmp_path_factory):
    """(the wheel, the folder it was installed into)."""
    out = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    # No build isolation: torch already pulled setuptools into this venv, so nothing is downloaded.
    subprocess.run([*pip, "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "-w", str(out)], check=True)
    wheel = next(out.glob("attention_explorer-*.whl"))
    site = tmp_path_factory.mktemp("site")
    subprocess.run([*pip, "install", "--no-deps", "--no-index", "--target", str(site), str(wheel)], check=True)
    return wheel, site


def outside(site: Path) -> dict:
    """An environment that imports the installed copy only: PYTHONPATH is the install folder."""
    return dict(os.environ, PYTHONPATH=str(site), HF_HUB_OFFLINE="1")


def test_the_wheel_holds_the_package_the_app_and_the_command(wheel_and_site):
    wheel, _ = wheel_and_site
    names = set(zipfile.ZipFile(wheel).namelist())
    package = {p.relative_to(ROOT).as_posix() for p in (ROOT / "attention").rglob("*.py")}
    package.add("attention/seq2seq_weights.npz")  # package data: the bottleneck page cannot run without it
    app = {f"attention_explorer/{p.relative_to(ROOT).as_posix()}" for p in
           [ROOT / "app.py", *(ROOT / "serving").glob("*.py"), *(ROOT / "pages").glob("*.py"),
            *(ROOT / "pages").glob("components/*")]}
    assert package and package <= names, package - names
    assert app <= names, app - names
    assert not any(n.startswith(("tests/", "benchmarks/", "scripts/")) for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "attention-explorer = attention_explorer.serving:main" in text


def test_readme_example_runs_from_outside_the_repository(wheel_and_site, tmp_path):
    _, site = wheel_and_site
    code = python_blocks()[0]  # the toy example: numpy only
    claimed = claimed_prints(code)
    probe = "import attention, sys; print(attention.__file__); print('torch' in sys.modules)\n"
    run = subprocess.run([sys.executable, "-c", probe + code], cwd=tmp_path, env=outside(site), capture_output=True,
                         text=True, check=True)
    where, torch_loaded, *printed = run.stdout.splitlines()
    assert Path(where).is_relative_to(site)  # the installed copy, not the checkout
    assert torch_loaded == "False"  # `import attention` stays free of torch
    assert printed == claimed


def test_the_console_command_serves_the_installed_app(wheel_and_site, tmp_path):
    _, site = wheel_and_site
    command = site / "bin" / "attention-explorer"

    def start(port: int) -> list[str]:
        return [sys.executable, str(command), "--port", str(port)]

    os.chdir(tmp_path)  # outside the repository: nothing can be found in the current directory
    try:
        with running_app(free_port(), env={"PYTHONPATH": str(site)}, app_command=start) as url:
            assert urllib.request.urlopen(f"{url}/_stcore/health", timeout=5).read() == b"ok"
            argv = Path(f"/proc/{url.pid}/cmdline").read_bytes().split(b"\0")  # the command became the server
            assert str(site / "attention_explorer" / "app.py").encode() in argv, argv
    finally:
        os.chdir(ROOT)
