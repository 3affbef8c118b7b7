"""Builds Joader's native parts for `pip install .` (metadata is in pyproject.toml).

The native module `joader._native` and the `joader` executable (daemon and CLI) come from the
project's CMake build, configured with -DPython_EXECUTABLE set to the interpreter running pip, so
the module fits that interpreter. Where the build happens:
  - $JOADER_BUILD_DIR, if set (configured here if it is not yet);
  - else build/ when `make build` already made it for this same interpreter (nothing is rebuilt);
  - else build-pip/<python tag>/ (the module and the executable: about a minute on 2 cores; `pip install -v .`
    shows CMake's progress).
$JOADER_JOBS sets the parallel build jobs (default: the CPU count).
"""
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def _made_for_this_interpreter(cached):
    """Whether a build dir configured for `cached` fits the interpreter running pip (a venv's python
    links to its base interpreter: either path counts)."""
    here = {os.path.realpath(sys.executable), os.path.realpath(getattr(sys, "_base_executable", sys.executable))}
    return os.path.realpath(cached) in here


def _cached_python(build_dir):
    """The Python_EXECUTABLE a configured CMake build dir was made for, or None."""
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith("Python_EXECUTABLE:"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return None


def _build_dir():
    if os.environ.get("JOADER_BUILD_DIR"):
        return os.path.abspath(os.environ["JOADER_BUILD_DIR"])
    default = os.path.join(ROOT, "build")
    cached = _cached_python(default)
    if cached and _made_for_this_interpreter(cached):
        return default
    return os.path.join(ROOT, "build-pip", sys.implementation.cache_tag)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = _build_dir()
        cached = _cached_python(build_dir)
        if cached is None:
            os.makedirs(build_dir, exist_ok=True)
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                                   "-DJOADER_BENCH=OFF", "-DPython_EXECUTABLE=" + sys.executable])
        elif not _made_for_this_interpreter(cached):
            sys.exit(f"joader: {build_dir} was configured for {cached}, not for {sys.executable}; "
                     "unset JOADER_BUILD_DIR or point it at another folder")
        jobs = os.environ.get("JOADER_JOBS", str(os.cpu_count() or 2))
        subprocess.check_call(["cmake", "--build", build_dir, "-j", jobs, "--target", "joader_native", "joader"])
        built = os.path.join(build_dir, "python", "joader")
        native = [f for f in os.listdir(built) if f.startswith("_native") and f.endswith(".so")]
        if len(native) != 1:
            sys.exit(f"joader: expected one _native*.so in {built}, found {native}")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(built, native[0]), target)
        bin_dir = os.path.join(os.path.dirname(target), "bin")
        os.makedirs(bin_dir, exist_ok=True)
        shutil.copy2(os.path.join(build_dir, "joader"), os.path.join(bin_dir, "joader"))


setup(ext_modules=[Extension("joader._native", sources=[])], cmdclass={"build_ext": CMakeBuild})
