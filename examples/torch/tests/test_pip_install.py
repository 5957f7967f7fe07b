# SPDX-License-Identifier: Apache-2.0
"""`pip install ./examples/torch` as a user would: into a fresh virtual environment that sees
the system's torch (--system-site-packages; no build isolation, so the extension is built
against that torch), then the package used from outside the source tree: imported from the
environment, and `python -m dtr_torch.bench` training a small model under a budget, every row
bit-identical. Skips (77) where the interpreter cannot make a virtual environment with pip, or
has no setuptools."""

import json
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
package = os.path.dirname(here)  # examples/torch


def skip(why):
    print("SKIP:", why)
    sys.exit(77)


def main():
    try:
        import ensurepip  # noqa: F401
        import setuptools  # noqa: F401
        import venv  # noqa: F401
    except ImportError as e:
        skip(f"{sys.executable} cannot build a virtual environment with pip and setuptools ({e})")
    with tempfile.TemporaryDirectory() as tmp:
        env_dir = os.path.join(tmp, "venv")
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", env_dir], check=True)
        py = os.path.join(env_dir, "bin", "python")
        # Nothing of the build tree or the checkout on the path: what runs is what pip installed.
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        env["MAX_JOBS"] = str(os.cpu_count() or 2)
        out = subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index",
                              package], cwd=tmp, env=env, capture_output=True, text=True, timeout=1500)
        print(out.stdout[-2000:])
        assert out.returncode == 0, out.stderr[-4000:]

        where = subprocess.run([py, "-c", "import dtr_torch, dtr_torch._bridge as b; "
                                "print(dtr_torch.__file__); print(b._ext.__file__)"],
                               cwd=tmp, env=env, capture_output=True, text=True, check=True).stdout.split()
        assert all(p.startswith(env_dir) for p in where), f"not imported from the environment: {where}"
        print("imported from", where)

        rows_file = os.path.join(tmp, "rows.json")
        bench = subprocess.run([py, "-m", "dtr_torch.bench", "--model", "resnet-narrow", "--batch", "8", "--steps",
                                "2", "--ratios", "1,0.6", "--json", rows_file],
                               cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
        print(bench.stdout)
        assert bench.returncode == 0, bench.stderr[-4000:]
        rows = json.load(open(rows_file))
        assert [r["status"] for r in rows] == ["ok", "ok"], rows
        assert all(r["bit_identical"] for r in rows), rows
        assert rows[1]["evictions"] > 0, rows[1]
    print("pip install: built, imported from the environment, bench bit-identical")


if __name__ == "__main__":
    main()
