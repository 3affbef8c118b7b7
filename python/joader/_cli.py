"""The `joader` command of a pip-installed package: runs the daemon/CLI executable shipped inside
the package (joader/bin/joader), e.g. `joader serve`, `joader status`, `joader top`."""
import os
import sys


def binary():
    """Path of the `joader` executable that belongs to this package: the one pip installed beside
    it, or, in a source build (build/python/joader), the build's own build/joader."""
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.path.join(here, "bin", "joader"), os.path.join(here, "..", "..", "joader")):
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.normpath(path)
    raise FileNotFoundError(f"no joader executable beside the package in {here}; reinstall it with `pip install .`")


def main():
    path = binary()
    os.execv(path, [path, *sys.argv[1:]])


if __name__ == "__main__":
    main()
