"""`pip install .` into a virtual environment, offline, as a Python user installs a package."""
import os
import subprocess
import sys
import textwrap

from conftest import BUILD, make_images
from daemon_process import DaemonProcess

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_pip_install_into_a_venv_works_offline_and_the_package_runs_outside_the_source_tree(workdir):
    venv = os.path.join(workdir, "venv")
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True)
    python = os.path.join(venv, "bin", "python")
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_CACHE_DIR="1",
               JOADER_BUILD_DIR=os.path.abspath(BUILD))  # the build this suite tests: nothing recompiles
    env.pop("PYTHONPATH", None)
    r = subprocess.run([python, "-m", "pip", "install", "--no-build-isolation", "--no-index", REPO],
                       capture_output=True, text=True, env=env, cwd=workdir, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]

    # The installed `joader` command is the daemon/CLI; the package imports from the venv, not the tree.
    joader_cmd = os.path.join(venv, "bin", "joader")
    images = os.path.join(workdir, "images")
    make_images(images, classes=2, per_class=4)
    daemon = DaemonProcess(joader_cmd, workdir)  # the venv's `joader serve`
    try:
        script = textwrap.dedent(f"""
            import os, joader, joader.torch
            assert joader.__file__.startswith({venv!r}), joader.__file__
            client = joader.Client({daemon.socket!r})
            name = client.add_dataset(source="imagefolder:{images}", resize=16, crop=16)["name"]
            with joader.torch.DataLoader(name, batch_size=8, client=client, epochs=1) as dl:
                x, y = next(iter(dl))
            print(tuple(x.shape), sorted(y.tolist()))
        """)
        r = subprocess.run([python, "-c", script], capture_output=True, text=True, env=env, cwd=workdir,
                           timeout=120)
        assert r.returncode == 0, r.stderr[-3000:]
        assert r.stdout.split("\n")[0] == "(8, 3, 16, 16) [0, 0, 0, 0, 1, 1, 1, 1]"
    finally:
        assert daemon.stop() == 0, daemon.output()[-3000:]
